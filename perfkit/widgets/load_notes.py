"""The notes of loading a profile that concern one tab, as sentences for that tab.

The loaders say what they dropped, repaired or could not read in ``meta.notes``, one note
per fact, each led by the table it is about (``"memory: npu_module_mem.csv left out: …"``)
or by the file it is about (``"memory_record.csv Timestamp(us): 30 of 30 values are written
in scientific notation …"``) and, in a cluster, by the ranks it is about (``"rank 0:
memory: …"``, ``"ranks [0, 1]: memory: …"``: :func:`perfkit.io.sources.cluster_meta`). A
file's note is about the tables that file fed, which the loaders record in
``meta.extra["table_files"]`` (``{"memory": ["ASCEND_PROFILER_OUTPUT/memory_record.csv"]}``).
The Overview lists them all; :func:`notes_about` picks those about the tables a tab draws,
so that the tab itself says, for instance, that a memory file of another run was left out
of its chart, or that a memory file's times could not be read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from ..format import listed

__all__ = ["notes_about"]

#: ``[rank N: | ranks [a, b]: ]``: the ranks a cluster's note is about.
_RANKS = r"^(?:rank (?P<rank>\d+): |ranks \[(?P<ranks>[\d, ]+)\]: )?"
#: ``…table[/table]: what`` (the tables are the note's subject).
_NOTE = re.compile(_RANKS + r"(?P<tables>[a-z_]+(?:/[a-z_]+)*): (?P<what>.+)$", re.S)
#: ``…file.ext[ detail]: what`` (the file is the note's subject: ``kernel_details.csv:``,
#: ``memory_record.csv Timestamp(us):``, ``kernel_details.csv line 9:``).
_FILE_NOTE = re.compile(_RANKS + r"(?P<file>[^\s:/\\]+\.[A-Za-z0-9]+)(?=[ :])[^:\n]*: .+$",
                        re.S)


def _files_fed(meta: Any) -> dict[str, list[str]]:
    """File name -> the tables it was read into (``meta.extra["table_files"]``)."""
    extra = getattr(meta, "extra", None) or {}
    fed: dict[str, list[str]] = {}
    for table, files in (extra.get("table_files") or {}).items():
        for f in [files] if isinstance(files, str) else files or []:
            tables = fed.setdefault(PurePath(str(f).replace("\\", "/")).name, [])
            if table not in tables:
                tables.append(table)
    return fed


def notes_about(profile: Any, tables: Mapping[str, str]) -> list[str]:
    """The profile's loading notes about ``tables``, each a sentence.

    Parameters
    ----------
    profile : Profile or Cluster
        Its ``meta.notes`` are read, and ``meta.extra["table_files"]`` for the notes led by
        a file's name.
    tables : mapping of str to str
        Each table of the tab (``"memory"``) and what the tab calls it in words
        (``"memory over time"``), which replaces the table's name in the sentence; a note
        led by a file's name is kept whole after the words of the tables that file fed.

    Returns
    -------
    list of str
        ``"Rank 0, memory over time: npu_module_mem.csv left out: … not mixed in."``,
        ``"Rank 1, memory over time: memory_record.csv Timestamp(us): 30 of 30 values …"``,
        in the order of ``meta.notes``; empty without a profile or such a note.
    """
    meta = getattr(profile, "meta", None)
    fed = _files_fed(meta)
    out = []
    for text in getattr(meta, "notes", None) or []:
        text = str(text).strip()
        m = _NOTE.match(text)
        if m is not None:
            subject, body = m["tables"].split("/"), m["what"]
        else:
            m = _FILE_NOTE.match(text)
            if m is None:
                continue
            subject, body = fed.get(m["file"], []), text[m.start("file"):]
        named = [tables[t] for t in subject if t in tables]
        if not named:
            continue
        ranks = ([int(m["rank"])] if m["rank"] else
                 [int(r) for r in m["ranks"].split(",")] if m["ranks"] else [])
        who = (f"Rank {ranks[0]}, " if len(ranks) == 1 else
               f"Ranks {listed(ranks)}, " if ranks else "")
        what = listed(dict.fromkeys(named))
        head = who + what if who else what[:1].upper() + what[1:]
        body = body.rstrip()
        out.append(f"{head}: {body}" + ("" if body.endswith((".", "!", "?")) else "."))
    return out
