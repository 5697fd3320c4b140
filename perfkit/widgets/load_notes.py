"""The notes of loading a profile that concern one tab, as sentences for that tab.

The loaders say what they dropped, repaired or could not read in ``meta.notes``, one note
per fact, each led by the table it is about (``"memory: npu_module_mem.csv left out: …"``)
or by the file it is about (``"memory_record.csv Timestamp(us): 30 of 30 values are written
in scientific notation …"``) and, in a cluster, by the ranks it is about (``"rank 0:
memory: …"``, ``"ranks [0, 1]: memory: …"``: :func:`perfkit.io.detect.sources.cluster_meta`). A
file's note is about the tables that file fed, which the loaders record in
``meta.extra["table_files"]`` (``{"memory": ["ASCEND_PROFILER_OUTPUT/memory_record.csv"]}``).
The Overview lists them all; :func:`notes_about` picks those about the tables a tab draws,
so that the tab itself says, for instance, that a memory file of another run was left out
of its chart, or that a memory file's times could not be read.

The notes name tables and columns as programs know them (``comm_matrix``, ``src_rank``):
on the dashboard they are said in words (:data:`TABLE_WORDS`, :func:`plain_words`,
:func:`plain_note`), while ``meta.notes`` keeps the names for programs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from ..format import listed

__all__ = ["notes_about", "plain_note", "plain_words", "column_words", "TABLE_WORDS"]

#: What the dashboard calls each table of a profile, where a note names it.
TABLE_WORDS = {"kernels": "device tasks", "steps": "steps", "ops": "host operators",
               "comm_ops": "collectives", "comm_bandwidth": "bandwidth",
               "comm_matrix": "links", "memory": "memory over time",
               "op_memory": "operator memory"}
#: What the dashboard calls the step columns the Ascend exports alone fill.
_STEP_WORDS = {"bubble": "pipeline bubble", "stage": "pipeline stage",
               "preparing": "preparing time"}
#: What the dashboard calls the columns whose words are not their names' (``_us`` is
#: said ``time`` and ``_`` a space otherwise: ``self_us`` -> ``self time``).
_COLUMN_WORDS = {"tasks_recorded": "mark of tasks recorded in full",
                 "size_bytes": "size", "allocated_bytes": "allocated memory",
                 "reserved_bytes": "reserved memory", "active_bytes": "active memory"}
#: ``table.column`` (``kernels.type``, ``steps.tasks_recorded``): a column of a table.
_COLUMN = r"\b(" + "|".join(TABLE_WORDS) + r")\.([a-z]+(?:_[a-z]+)*)\b"


def column_words(table: str, column: str) -> str:
    """What the dashboard calls the column ``column`` of the table ``table``.

    Parameters
    ----------
    table : str
        A table of :data:`TABLE_WORDS` (``"kernels"``).
    column : str
        One of its columns (``"type"``, ``"self_us"``).

    Returns
    -------
    str
        ``"the device tasks' type"``, ``"the host operators' self time"``.
    """
    words = _COLUMN_WORDS.get(column) or re.sub(r"_us$", " time", column).replace("_", " ")
    owner = TABLE_WORDS.get(table, table)
    return f"the {owner}{chr(39) if owner.endswith('s') else chr(39) + 's'} {words}"


#: Column and table names inside a note, and their words (in this order).
_TERMS: tuple[tuple[re.Pattern[str], Any], ...] = (
    # ``(steps.tasks_recorded)`` after the words it names: a pointer for programs
    (re.compile(r"\s*\(" + _COLUMN + r"\)"), ""),
    (re.compile(_COLUMN), lambda m: column_words(m[1], m[2])),
    (re.compile(r"(?:\bthe )?\b(size|allocated|reserved|active)_bytes\b"),
     lambda m: "the " + _COLUMN_WORDS[m[0].removeprefix("the ")]),
    (re.compile(r"\bsrc_rank ?/ ?dst_rank (?:left )?NA\b"),
     "the links' ranks in the job are unknown"),
    (re.compile(r"\(src_local ?/ ?dst_local kept\)"), "(their ranks within the group are kept)"),
    (re.compile(r"\bsrc_local ?/ ?dst_local\b"), "the links' ranks within their group"),
    (re.compile(r"\bsrc_rank ?/ ?dst_rank\b"), "the links' ranks in the job"),
    (re.compile(r"\(([a-z]+(?:/[a-z]+)+) are Ascend-only and left NA\)"),
     lambda m: "(the " + listed([_STEP_WORDS.get(w, w) for w in m[1].split("/")])
     + " are recorded on Ascend only and left blank)"),
    (re.compile(r"\s*\(kernels table\)"), ""),
    (re.compile(r"\s*\((?:comm_matrix|peak_dtype)\)"), ""),
    (re.compile(r"\b(" + "|".join(t for t in TABLE_WORDS if "_" in t) + r")\b"),
     lambda m: TABLE_WORDS[m[1]]),
    (re.compile(r"\bdur_us\b"), "duration"),
    (re.compile(r"\b([a-z]+(?:_[a-z]+)*)_us\b"), lambda m: m[1].replace("_", " ") + " time"),
)


def plain_words(text: str) -> str:
    """``text`` with the names of tables and columns it holds (``comm_matrix``,
    ``src_rank/dst_rank``, ``preparing_us``) said in words, for the dashboard.

    Parameters
    ----------
    text : str
        A note of a loader or of an analysis (``frame.attrs["notes"]``).

    Returns
    -------
    str
        ``"transit/wait/sync/idle split, bandwidth and links are not recorded by Kineto"``
        for ``"…, comm_bandwidth and comm_matrix are not recorded by Kineto"``.
    """
    for pattern, words in _TERMS:
        text = pattern.sub(words, text)
    return text


def plain_note(text: str) -> str:
    """A loader's note (one of ``meta.notes``) as a sentence for the dashboard: the tables
    that lead it in words (:data:`TABLE_WORDS`), after its ranks, as :func:`notes_about`
    says them, and the names inside it in words (:func:`plain_words`).

    Parameters
    ----------
    text : str
        ``"ranks [0, 1]: op_memory: not recorded by Kineto"``.

    Returns
    -------
    str
        ``"Ranks 0 and 1, operator memory: not recorded by Kineto."``; a note led by no
        table of :data:`TABLE_WORDS` keeps its start.
    """
    text = str(text).strip()
    m = _NOTE.match(text)
    if m is None or not all(t.split(".")[0] in TABLE_WORDS for t in m["tables"].split("/")):
        ranks = _RANKS_ONLY.match(text)
        if ranks is None or not (ranks["rank"] or ranks["ranks"]):
            return plain_words(text)
        who = _ranks_of(ranks)
        head = f"Rank {who[0]}" if len(who) == 1 else f"Ranks {listed(who)}"
        return f"{head}: {plain_words(text[ranks.end():])}"
    return _said(_ranks_of(m), [_subject_words(t) for t in m["tables"].split("/")],
                 plain_words(m["what"]))


def _subject_words(subject: str) -> str:
    """The words of a note's subject: a table (``kernels``) or a column (``kernels.type``)."""
    table, _, column = subject.partition(".")
    return column_words(table, column) if column else TABLE_WORDS[table]


def _ranks_of(m: re.Match[str]) -> list[int]:
    """The ranks a note (matched by :data:`_NOTE` or :data:`_FILE_NOTE`) is about."""
    return ([int(m["rank"])] if m["rank"] else
            [int(r) for r in m["ranks"].split(",")] if m["ranks"] else [])


def _said(ranks: list[int], named: list[str], body: str) -> str:
    """``"Rank 0, memory over time: body."``: a note's ranks and tables, then its body."""
    who = (f"Rank {ranks[0]}, " if len(ranks) == 1 else
           f"Ranks {listed(ranks)}, " if ranks else "")
    what = listed(dict.fromkeys(named))
    head = who + what if who else what[:1].upper() + what[1:]
    body = body.rstrip()
    return f"{head}: {body}" + ("" if body.endswith((".", "!", "?")) else ".")

#: ``[rank N: | ranks [a, b]: ]``: the ranks a cluster's note is about.
_RANKS = r"^(?:rank (?P<rank>\d+): |ranks \[(?P<ranks>[\d, ]+)\]: )?"
_RANKS_ONLY = re.compile(_RANKS)
#: ``…table[/table]: what`` (the tables, or a table's column ``kernels.type``, are the
#: note's subject).
_NOTE = re.compile(_RANKS + r"(?P<tables>(?:" + "|".join(TABLE_WORDS) + r")\.[a-z_]+|"
                   r"[a-z_]+(?:/[a-z_]+)*): (?P<what>.+)$", re.S)
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


def notes_about(profile: Any, tables: Mapping[str, str],
                leave_out: re.Pattern[str] | None = None) -> list[str]:
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
    leave_out : compiled pattern, optional
        Clauses the tab says in its own words, as the loaders write them: taken out of each
        note's body (after its ranks and tables) before it is said in words; a note left
        with nothing to say is dropped.

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
        if leave_out is not None:
            body = leave_out.sub("", body).strip()
            if not body.strip(" .;,"):
                continue
        out.append(_said(_ranks_of(m), named, plain_words(body)))
    return out
