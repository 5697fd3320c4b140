"""One rank to parse (:class:`RankSource`) and the pure function that parses it.

:func:`parse_source` is the exception boundary of a rank: whatever goes wrong while its files
are read comes out as a :class:`~perfkit.errors.ProfileError` naming the file, so a damaged
rank of a cluster is reported in ``Cluster.failed`` while the others load. It is also where
every format's tables pass the plausibility checks of :mod:`perfkit.io.canonical.validate`.
:func:`cluster_meta` merges the ranks' facts into the cluster's.

Both the local engine (:mod:`perfkit.io.engines.local`) and the Dask engine
(:mod:`perfkit.io.engines.dask`) import from here, so neither imports the other's module
in both directions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..._hugepages import with_small_pages
from ...errors import ProfileError, file_boundary
from ...format import plural
from ...profile import Profile, ProfileMeta
from ..ascend.rank import OUTPUT_DIR
from ..canonical.repeated_rows import drop_exact_repeats
from ..canonical.step_rows import one_row_per_step
from ..canonical.validate import clean_tables, files_of_tables
from ..preview import tables_first
from ..readers import READERS, format_codes, reader_for

__all__ = ["RankSource", "parse_source", "tables_first_source", "cluster_meta",
           "input_bytes", "FORMATS", "format_words", "format_fact"]

FORMATS = (*format_codes(), "unreadable", "not_a_trace")
"""Values of :attr:`RankSource.fmt`; ``unreadable`` is a folder detection could not open,
``not_a_trace`` a JSON file beside traces that is not one (``load`` leaves it out);
``cann_raw`` one device of a CANN ``PROF_*`` folder (with ``error`` set when nothing was
exported: parsing it says how to export)."""


@dataclass(frozen=True)
class RankSource:
    """One rank to parse: format, where, and the rank if known before parsing.

    ``error`` is set (and ``fmt`` is ``"unreadable"``) for a rank folder that could not
    even be examined (permission denied, ...); parsing it raises that error, so it is
    listed in ``Cluster.failed`` rather than sinking the whole load.

    ``rank_from`` says where a rank known before parsing came from (``"file name"``,
    ``"file-name numbers 0..n-1"``, ``"position"`` ...), for the rank's note when the
    files themselves do not record it.
    """

    fmt: str
    path: str
    rank: int | None = None
    files: tuple[str, ...] = field(default=(), compare=False)
    error: str = field(default="", compare=False)
    rank_from: str = field(default="", compare=False)
    #: a note the rank's load adds (another export of this rank left out, and why)
    note: str = field(default="", compare=False)

    def file_paths(self) -> list[Path]:
        """Files this source reads (for cache keys and sizes); unreadable folders give []."""
        if self.files:
            return [Path(f) for f in self.files]
        if self.error:  # nothing will be read
            return []
        p = Path(self.path)
        try:
            if p.is_file():
                return [p]
            if self.fmt == "ascend_text":
                # only what the loader reads, not the raw FRAMEWORK/ and PROF_*/ data
                out = p / OUTPUT_DIR
                files = [f for f in out.iterdir() if f.is_file()] if out.is_dir() else []
                files += sorted(p.glob("profiler_info*.json")) + sorted(
                    p.glob("profiler_metadata.json"))
                return files
            if self.fmt == "unreadable":
                return []
            return [f for f in p.rglob("*") if f.is_file()]
        except OSError:
            return []


_WORDS = {r.fmt: r.words for r in READERS}
#: What a cluster's ``source_format`` says, in words (its ranks' formats are in ``_WORDS``).
_CLUSTER_WORDS = {"cluster": "ranks of several formats",
                  "cluster_analysis_output": "msprof-analyze's cluster_analysis_output"}


def format_words(fmt: str | None, device_type: str | None = None) -> str:
    """What a profile's ``meta.source_format`` is, in words for a page ("a PyTorch (Kineto)
    trace"); a format without words of its own is given as it is. ``device_type``
    (``meta.device_type``): MindSpore writes a CPU run in the Ascend text layout
    (``*_ascend_ms``), which is then said as MindSpore's export of a CPU run, not as an
    Ascend one."""
    key = str(fmt or "")
    if key == "ascend_text" and device_type == "cpu":
        return "a MindSpore text export of a CPU run"
    return _WORDS.get(key) or _CLUSTER_WORDS.get(key) or key or "an unknown format"


def format_fact(fmt: str | None, device_type: str | None = None) -> str:
    """The format in words and then its code ("a PyTorch (Kineto) trace (kineto)"), for a
    table of facts: the words for a reader, the code for a bug report."""
    words = format_words(fmt, device_type)
    return words if words == str(fmt or "") else f"{words} ({fmt})" if fmt else words


def _parse(source: RankSource) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """Read one rank with its format's registered reader (:mod:`perfkit.io.readers`)."""
    path = Path(source.path)
    if source.fmt in ("unreadable", "not_a_trace"):
        raise ProfileError(path, source.error or "cannot be read")
    reader = reader_for(source.fmt)
    if reader is None:
        raise ProfileError(path, f"unknown source format {source.fmt!r}")
    return reader.function("read")(source)


@with_small_pages
def parse_source(source: RankSource) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """Parse one rank: the pure function run in worker processes (or as a Dask task).

    Parameters
    ----------
    source : RankSource
        From :func:`perfkit.io.engines.local.detect`.

    Returns
    -------
    (ProfileMeta, dict of DataFrame)
        Times checked by :func:`perfkit.io.canonical.validate.clean_tables` (implausible values NA,
        with a note).

    Raises
    ------
    ProfileError
        Anything that goes wrong, naming the file (an ``OSError`` names the file it was
        about; any other unexpected error names the rank's path).
    """
    with file_boundary(source.path, _WORDS.get(source.fmt, "")):
        # a rank's tables handed over before its trace get the same checks (tables_first)
        with tables_first.relay(lambda m, t: _checked(source, m, t)):
            meta, tables = _parse(source)
        return _checked(source, meta, tables)


def tables_first_source(source: RankSource) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """One Ascend text-export rank's tables as its load hands them over, read directly
    (:func:`perfkit.io.ascend.text.read_tables_first`: the small files and the job's columns of
    ``kernel_details.csv``, no ``trace_view.json``), checked as :func:`parse_source` checks
    every rank (and as the tables handed over are, :func:`perfkit.io.preview.tables_first.relay`).

    Raises
    ------
    ProfileError
        Not an Ascend text export, or anything that goes wrong, naming the file.
    """
    with file_boundary(source.path, _WORDS.get(source.fmt, "")):
        if source.fmt != "ascend_text":
            raise ProfileError(source.path, f"{format_words(source.fmt)} has no tables to "
                               "read ahead of its trace (an Ascend text export has)")
        from ..ascend.text import read_tables_first  # the Ascend reader, when one is read

        meta, tables = read_tables_first(Path(source.path))
        return _checked(source, meta, tables)


def _checked(source: RankSource, meta: ProfileMeta, tables: dict[str, pd.DataFrame]
             ) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """A reader's ``(meta, tables)`` checked (:func:`perfkit.io.canonical.validate.clean_tables`)
    and given the rank the folder says where the files do not (:func:`parse_source`)."""
    with file_boundary(source.path, _WORDS.get(source.fmt, "")):
        files = meta.extra.pop("table_files", None) or {}
        meta.notes.extend(clean_tables(tables, files, meta.path))
        meta.notes.extend(one_row_per_step(tables, files, meta.path))
        meta.notes.extend(drop_exact_repeats(tables, files, meta.path))
        steps = tables.get("steps")
        if steps is not None and "step" in steps.columns:  # kept: a cluster compares them
            meta.extra["step_numbers"] = sorted(
                {int(v) for v in pd.to_numeric(steps["step"], errors="coerce").dropna()
                 if float(v).is_integer()})
        # kept: a note led by a file's name is about the tables that file fed (a tab says it)
        meta.extra["table_files"] = files_of_tables(files, meta.path)
        if meta.rank is not None and not _plausible_rank(meta.rank):
            meta.notes.append(f"rank: {meta.rank!r} recorded in the files is not a rank; "
                              "ignored")
            meta.rank = None
    if source.note and source.note not in meta.notes:
        meta.notes.append(source.note)
    if meta.rank is None and source.rank is not None:
        meta.rank = source.rank
        how = source.rank_from or "the folder name or position"
        # the loader's notes on the rank (none given, or none usable) and the rank assigned
        # instead, in one note: the Overview said "not recorded" twice
        why = [n.removeprefix("rank: ") for n in meta.notes if n.startswith("rank: ")]
        meta.notes[:] = [n for n in meta.notes if not n.startswith("rank: ")]
        meta.notes.append(f"rank: {'; '.join(why) or 'not recorded in the files'}; "
                          f"{source.rank} assigned from {how}")
    return meta, tables


def _plausible_rank(rank: object) -> bool:
    return isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < 10**9


def _frameworks_note(metas: list[ProfileMeta]) -> str:
    """The note of a folder whose ranks were recorded by different frameworks."""
    by_fw: dict[str, list[Any]] = {}
    for m in metas:
        by_fw.setdefault(m.framework or "unknown", []).append(m.rank)
    parts = "; ".join(f"{fw}: {plural(len(rs), 'rank')} "
                      f"{sorted(r for r in rs if r is not None)}"
                      for fw, rs in sorted(by_fw.items()))
    return (f"ranks recorded by different frameworks ({parts}): one training job runs one "
            "framework, so these are separate runs, whose steps and times do not line up; "
            "load each on its own (pk.load(path, ranks=[...]))")


#: A file name in a note (``ascend_cluster_analyse_pipeline-parallel_2_4_0.csv``).
_FILE_NAME = re.compile(r"[\w.-]+\.(?:csv|json|txt|db|gz)\b")


def _rank_file_pattern(note: str, rank: Any) -> str:
    """``note`` with the rank in each of its file names written ``{rank}``: the last
    ``_{rank}`` before ``.`` or ``_`` in the name (``..._2_4_0.csv`` of rank 0 ->
    ``..._2_4_{rank}.csv``, ``step_trace_raw_0_detail_time.csv`` ->
    ``step_trace_raw_{rank}_detail_time.csv``), so that the same note of each rank about
    its own file is one note (:func:`cluster_meta`). Unchanged without a rank."""
    if not isinstance(rank, int):
        return note
    own = re.compile(rf"_{rank}(?=[._])(?!.*_{rank}[._])")

    def generic(m: re.Match[str]) -> str:
        return own.sub("_{rank}", m.group(0), count=1)

    return _FILE_NAME.sub(generic, note)


def cluster_meta(root: Path, profiles: list[Profile], failed: Mapping[Any, str]
                 ) -> ProfileMeta:
    """The facts of a cluster: merged from its ranks' metas, with the failed ranks noted."""
    metas = [p.meta for p in profiles]
    origins = [m.origin_ns for m in metas if m.origin_ns is not None]
    fmts = sorted({m.source_format for m in metas})
    frameworks = sorted({m.framework for m in metas if m.framework})
    levels = sorted({m.profiler_level for m in metas if m.profiler_level})
    worlds = [m.world_size for m in metas if m.world_size]
    groups: dict[str, Any] = {}
    for m in metas:
        groups.update(m.groups)
    notes = [f"rank {r} not loaded: {msg}" for r, msg in failed.items()]
    # a note each rank makes of its own file (..._{rank}.csv) is said once for the ranks
    by_note: dict[str, list[tuple[Any, str]]] = {}
    for m in metas:
        for n in m.notes:
            by_note.setdefault(_rank_file_pattern(n, m.rank), []).append((m.rank, n))
    notes += [f"ranks {[r for r, _ in said]}: {pattern}" if len(said) > 1
              else f"rank {said[0][0]}: {said[0][1]}" for pattern, said in by_note.items()]
    if len(fmts) > 1:
        notes.append(f"ranks come from different formats: {fmts}")
    if len(frameworks) > 1:
        notes.append(_frameworks_note(metas))
    if len(metas) > 1:  # one rank's times are its own
        notes.append("the ranks' times are on one clock, counted from the earliest rank's "
                     "start")
    return ProfileMeta(
        source_format="cluster" if len(fmts) != 1 else fmts[0],
        framework=frameworks[0] if len(frameworks) == 1 else None,
        rank=None, world_size=max(worlds) if worlds else None,
        device_type=metas[0].device_type if metas else None,
        profiler_level=levels[0] if len(levels) == 1 else None,
        groups=groups, origin_ns=min(origins) if origins else None, path=str(root),
        notes=notes, extra={"ranks": [m.rank for m in metas], **_world_from(metas),
                            "table_files": _table_files(metas)},
    )


def _table_files(metas: list[ProfileMeta]) -> dict[str, list[str]]:
    """Every file each table was read from, over the ranks (in the ranks' order)."""
    out: dict[str, list[str]] = {}
    for m in metas:
        for table, files in ((m.extra or {}).get("table_files") or {}).items():
            known = out.setdefault(table, [])
            known += [f for f in files if f not in known]
    return out


def _world_from(metas: list[ProfileMeta]) -> dict[str, str]:
    """``{"world_size_from": "groups"}`` when every rank that gives a world size counted it
    from its own communication groups (at least the job's:
    :data:`perfkit.io.ascend.text.WORLD_FROM_GROUPS`)."""
    froms = {(m.extra or {}).get("world_size_from") for m in metas if m.world_size}
    return {"world_size_from": "groups"} if froms == {"groups"} else {}


def input_bytes(sources: Sequence[RankSource]) -> int:
    """Total size of the files the sources' full load reads (a file that cannot be
    examined counts for nothing)."""
    total = 0
    for s in sources:
        for f in s.file_paths():
            try:
                total += f.stat().st_size
            except OSError:
                continue
    return total
