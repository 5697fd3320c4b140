"""The notes of loading a profile that concern one tab, as sentences for that tab.

The loaders say what they dropped, repaired or could not read in ``meta.notes``, one note
per fact, each led by the table it is about (``"memory: npu_module_mem.csv left out: …"``)
and, in a cluster, by the ranks it is about (``"rank 0: memory: …"``,
``"ranks [0, 1]: memory: …"``: :func:`perfkit.io.sources.cluster_meta`). The Overview lists
them all; :func:`notes_about` picks those about the tables a tab draws, so that the tab
itself says, for instance, that a memory file of another run was left out of its chart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..format import listed

__all__ = ["notes_about"]

#: ``[rank N: | ranks [a, b]: ]table[/table]: what`` (the tables are the note's subject).
_NOTE = re.compile(r"^(?:rank (?P<rank>\d+): |ranks \[(?P<ranks>[\d, ]+)\]: )?"
                   r"(?P<tables>[a-z_]+(?:/[a-z_]+)*): (?P<what>.+)$", re.S)


def notes_about(profile: Any, tables: Mapping[str, str]) -> list[str]:
    """The profile's loading notes about ``tables``, each a sentence.

    Parameters
    ----------
    profile : Profile or Cluster
        Its ``meta.notes`` are read.
    tables : mapping of str to str
        Each table of the tab (``"memory"``) and what the tab calls it in words
        (``"memory over time"``), which replaces the table's name in the sentence.

    Returns
    -------
    list of str
        ``"Rank 0, memory over time: npu_module_mem.csv left out: … not mixed in."``,
        in the order of ``meta.notes``; empty without a profile or such a note.
    """
    meta = getattr(profile, "meta", None)
    out = []
    for text in getattr(meta, "notes", None) or []:
        m = _NOTE.match(str(text).strip())
        if m is None:
            continue
        named = [tables[t] for t in m["tables"].split("/") if t in tables]
        if not named:
            continue
        ranks = ([int(m["rank"])] if m["rank"] else
                 [int(r) for r in m["ranks"].split(",")] if m["ranks"] else [])
        who = (f"Rank {ranks[0]}, " if len(ranks) == 1 else
               f"Ranks {listed(ranks)}, " if ranks else "")
        what = listed(dict.fromkeys(named))
        head = who + what if who else what[:1].upper() + what[1:]
        body = m["what"].rstrip()
        out.append(f"{head}: {body}" + ("" if body.endswith((".", "!", "?")) else "."))
    return out
