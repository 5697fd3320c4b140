"""What a path holds: ``detect(path)``, ``find_runs(path)``, ``runs(path)``.

Recognised (see docs/loading.md):

- an Ascend text export of one rank: ``*_ascend_pt`` / ``*_ascend_ms`` or any folder holding
  ``ASCEND_PROFILER_OUTPUT/`` (or that output folder itself);
- the Ascend DB export: ``ascend_pytorch_profiler[_{rank}].db``,
  ``ascend_mindspore_profiler[_{rank}].db``, ``analysis.db`` or a rank folder holding them;
- legacy MindSpore / MindInsight output: a folder of ``*_{rank}`` files
  (``step_trace_raw_{rank}_detail_time.csv``, ``hccl_raw_{rank}.csv``,
  ``[ascend_]timeline_display_{rank}.json``, ...);
- raw CANN output: a ``PROF_*`` folder, one of its ``device_{id}`` folders, or a lone CANN
  timeline file (told from a Kineto trace by its content; :mod:`perfkit.io.cann.raw`);
- a lone ``kernel_details.csv`` (its folder is read as one rank's output folder);
- an msprof-analyze ``cluster_analysis_output/`` folder;
- PyTorch Kineto traces (``.json`` / ``.json.gz``) and a standalone ``trace_view.json``;
- a parent folder holding several of the above, one per rank -> a cluster.

Only names and the first bytes of files are read here (no file is parsed): the answer is
rank sources (:class:`~perfkit.io.detect.sources.RankSource`) grouped into runs
(:mod:`perfkit.io.detect.runs`). Loading them is :mod:`perfkit.io.engines.local`, which also exports
every name of this module under its old path.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from ...bundled_samples import resolve_sample, sample_hint
from ...errors import ProfileError
from .. import readers
from .._common import json_head, rank_from_name
from .._common.files import loops_back
from ..ascend import rank as ascend
from . import nested
from . import run_groups as _rg
from .runs import Run, make_runs, source_facts
from .sources import RankSource

__all__ = ["detect", "find_runs", "runs"]

_DB_RE = re.compile(r"^ascend_(pytorch|mindspore)_profiler(?:_(\d+))?\.db$")
_LEGACY_RE = re.compile(
    r"^(?:step_trace_raw_(\d+)_detail_time\.csv|hccl_raw_(\d+)\.csv|"
    r"(?:ascend_)?timeline_display_(\d+)\.json|"
    r"aicore_intermediate_(\d+)_(?:detail|type)\.csv|"
    r"minddata_pipeline_raw_(\d+)\.csv|flops_summary_(\d+)\.json|flops_(\d+)\.txt|"
    r"device_queue_profiling_(\d+)\.txt|dataset_iterator_profiling_(\d+)\.txt|"
    r"ascend_cluster_analyse_.*_(\d+)\.csv|framework_raw_(\d+)\.csv|"
    r"output_timeline_data_(\d+)\.txt)$")


_DIST_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^}]*?"rank"\s*:\s*(\d+)')


def _kineto_source(path: Path, head: bytes | None = None) -> RankSource:
    """A Kineto rank: its rank from ``distributedInfo`` near the top of the file, else from
    an explicit pattern of its name (``rank3``, ``worker3``; never other digits).

    ``head``: the file's first MiB when the caller has already read it.
    """
    if head is None:
        head, _ = json_head(path)
    m = _DIST_RANK.search(head)
    if m:
        return RankSource("kineto", str(path), int(m.group(1)), (str(path),),
                          rank_from="distributedInfo.rank")
    rank = rank_from_name(path.name)
    return RankSource("kineto", str(path), rank, (str(path),),
                      rank_from="the file name" if rank is not None else "")


def _trace_beside_traces(path: Path) -> RankSource:
    """A JSON file found beside traces: a Kineto rank, or ``not_a_trace``.

    Only a file read whole that is a JSON object without ``traceEvents`` is ruled out
    (a run's ``environment.json``, a config); anything else is left to the parser, which
    says what is wrong with it. The file's head is read once for both questions.
    """
    head, whole = json_head(path)
    claimed = _claimed(path, head)  # another format's JSON file is no Kineto trace
    if claimed:
        return claimed[0]
    if whole and head.lstrip()[:1] == b"{" and b'"traceEvents"' not in head:
        return RankSource("not_a_trace", str(path),
                          error="not a profiler trace (a JSON object without traceEvents)")
    return _kineto_source(path, head)


def _legacy_ranks(folder: Path) -> dict[int, list[Path]]:
    ranks: dict[int, list[Path]] = {}
    try:
        entries = list(folder.iterdir())
    except OSError:
        return ranks
    for f in entries:
        m = _LEGACY_RE.match(f.name)
        if m and f.is_file():
            r = next(int(g) for g in m.groups() if g is not None)
            ranks.setdefault(r, []).append(f)
    return ranks


def _is_cluster_output(path: Path) -> bool:
    return path.is_dir() and (path / "cluster_step_trace_time.csv").is_file() or (
        path.is_dir() and (path / "cluster_communication.json").is_file())


def _db_files(out: Path) -> list[Path]:
    try:
        return sorted(f for f in out.iterdir() if _DB_RE.match(f.name))
    except OSError:
        return []


#: Where the rank of a lone file that records none comes from: it is rank 0, as it would
#: be in a folder of its own (the analyses and the advisor then see one rank, not an
#: unknown one, whichever way the profile was opened).
_ONLY_ONE = "its position (the only profile read)"


#: Files perfkit reads, but not as a profile: by how the name ends, what reads them.
_READ_ELSEWHERE = (
    ((".ir", ".ir.gz"),
     "a MindSpore IR graph dump, not a profile: perfkit.load_ir(PATH) reads it, and perfkit "
     "report PROFILE --notebook 06 --ir PATH checks its select_recompute patterns"),
    ((".yaml", ".yml"),
     "a config, not a profile: give it beside the profile (perfkit info PROFILE --config "
     "PATH), or read it with perfkit.read_mindformers_config(PATH)"),
    ((".log",),
     "a log, not a profile: give a training log beside the profile (perfkit info PROFILE "
     "--config PATH), or read it with perfkit.read_training_log(PATH) or "
     "perfkit.read_memory_log(PATH)"),
    ((".zip",),
     "a zip archive: unzip it and give the folder (perfkit unpacks nothing itself), or "
     "open it with the dashboard's Upload .zip (at most 200 MiB)"),
    ((".tar", ".tar.gz", ".tgz"),
     "a tar archive: unpack it and give the folder (perfkit unpacks nothing itself)"),
)


def _read_elsewhere(name: str) -> str | None:
    """What reads a file that is not a profile (:data:`_READ_ELSEWHERE`), or None."""
    return next((said for ends, said in _READ_ELSEWHERE if name.endswith(ends)), None)


def _single(path: Path) -> list[RankSource] | None:
    """Sources when ``path`` itself is one profile (or one legacy folder), else None."""
    if path.is_file():
        name = path.name.lower()
        if path.parent.name == ascend.OUTPUT_DIR and not _DB_RE.match(path.name) \
                and name not in ("analysis.db", "trace_view.json"):
            # a file of a text export: the whole rank is meant
            return _single(path.parent)
        if name == "kernel_details.csv":  # a lone export file: its folder is read
            return _single(path.parent)
        if _DB_RE.match(path.name) or name == "analysis.db":
            from ..ascend import db as ascend_db

            rank_dir = ascend_db.rank_dir_of(path)
            rank = ascend_db.rank_of(path, rank_dir)
            if rank is None:  # the only profile read: rank 0, as in its folder
                return [RankSource("ascend_db", str(path), 0, (str(path),),
                                   rank_from=_ONLY_ONE)]
            return [RankSource("ascend_db", str(path), rank, (str(path),))]
        if name == "trace_view.json":
            # a rank the file's folder records wins over this (perfkit.io.detect.sources)
            return [RankSource("trace_view", str(path), 0, (str(path),), rank_from=_ONLY_ONE)]
        if name.endswith(".json") or name.endswith(".json.gz"):
            head, _ = json_head(path)
            claimed = _claimed(path, head)  # another format's JSON file is no Kineto trace
            if claimed is not None:
                return claimed
            one = _rg.suffix_ranks([_kineto_source(path)])
            if one[0].rank is None:  # numbered like the ranks of a folder: by position
                one = [dataclasses.replace(one[0], rank=0, rank_from=_ONLY_ONE)]
            return one
        m = _LEGACY_RE.match(path.name)
        if m:
            r = next(int(g) for g in m.groups() if g is not None)
            files = _legacy_ranks(path.parent).get(r, [path])
            return [RankSource("mindspore_legacy", str(path.parent), r,
                               tuple(map(str, files)))]
        claimed = _claimed(path, None)  # a format of a package of its own
        if claimed is not None:
            return claimed
        raise ProfileError(path, _read_elsewhere(name) or (
            "unknown kind of file; expected a profiler folder, a Kineto trace "
            "(.json/.json.gz), trace_view.json or an Ascend .db export"))
    if not path.is_dir():
        return None
    claimed = _claimed(path, None)
    if claimed is not None:
        return claimed
    rank_dir = ascend.rank_dir_of(path)
    out = rank_dir / ascend.OUTPUT_DIR
    if out.is_dir():
        if ascend.is_rank_dir(rank_dir):
            rank = ascend.read_rank_id(rank_dir)
            if rank is None:
                rank = rank_from_name(rank_dir.name, suffix=True)
            dbs = _db_files(out)
            if dbs:  # both exports in one folder: one recording, said so
                from .exports_twice import text_and_db_note, text_is_full

                text = RankSource("ascend_text", str(rank_dir), rank)
                note = text_and_db_note(text, dbs[0].name,
                                        f"both in {rank_dir.name}/{ascend.OUTPUT_DIR}")
                if not text_is_full(text):  # the database is the richer
                    return [RankSource("ascend_db", str(dbs[0]), rank, tuple(
                        str(f) for f in [*dbs, out / "analysis.db"] if Path(f).exists()),
                        note=note)]
                return [RankSource("ascend_text", str(rank_dir), rank, note=note)]
            return [RankSource("ascend_text", str(rank_dir), rank)]
        dbs = _db_files(out)
        if dbs:
            from ..ascend import db as ascend_db

            rank = ascend_db.rank_of(dbs[0], rank_dir)
            return [RankSource("ascend_db", str(dbs[0]), rank,
                               tuple(str(f) for f in [*dbs, out / "analysis.db"]
                                     if Path(f).exists()))]
    if out.is_dir() or rank_dir.name.endswith(("_ascend_pt", "_ascend_ms")):
        # a rank folder whose analysed files are missing: parsing it reports why
        rank = ascend.read_rank_id(rank_dir)
        if rank is None:
            rank = rank_from_name(rank_dir.name, suffix=True)
        return [RankSource("ascend_text", str(rank_dir), rank)]
    if ascend.is_bare_output(path):
        return [RankSource("ascend_text", str(path), rank_from_name(path.name))]
    return None


def _claimed(path: Path, head: bytes | None) -> list[RankSource] | None:
    """The rank sources of the first registered format that claims ``path`` (a folder, or a
    JSON file whose first bytes are ``head``), else None (:mod:`perfkit.io.readers`)."""
    for reader in readers.READERS:
        claim = reader.function("claim")
        if claim is not None:
            found = claim(path, head)
            if found is not None:
                return found
    return None


def detect(path: str | os.PathLike[str]) -> tuple[str, list[RankSource]]:
    """What ``path`` holds.

    Returns
    -------
    (kind, sources)
        ``kind`` is ``"profile"`` (one rank), ``"cluster"`` (many ranks) or
        ``"cluster_analysis_output"``; ``sources`` lists the ranks found, in rank order
        (run after run when the folder holds several runs: :func:`find_runs`), and the
        JSON files beside traces that are not traces (``fmt="not_a_trace"``, which
        :func:`~perfkit.io.engines.local.load` leaves out with a note; with several runs, those
        of a folder that holds a run's ranks: a folder of such files alone is no part of
        any run).

    Raises
    ------
    ProfileError
        The path does not exist, nothing known is inside, or two folders of one run claim
        one rank.
    """
    kind, runs = find_runs(path)
    if len(runs) == 1:
        return kind, list(runs[0].sources)
    seen: set[RankSource] = set()
    out = []
    for r in runs:
        for s in r.sources:
            if s not in seen:
                seen.add(s)
                out.append(s)
    return kind, out


def find_runs(path: str | os.PathLike[str], read_one: bool = False
              ) -> tuple[str, list[Run]]:
    """What ``path`` holds, as runs: ``(kind, runs)`` (see :func:`detect`, :func:`runs`).

    ``read_one``: peek into a lone trace too, for its start time (a folder's traces are
    always peeked at: that is how its runs are told apart). A parent folder of several
    profiles (of different formats, at different depths, or deeper than the two levels
    its ranks may sit at) gives one run per profile (:mod:`perfkit.io.detect.nested`).
    """
    kind, root, members = _find_members(path, read_one, _NESTED_LEVELS)
    return kind, make_runs(members, root)


_NESTED_LEVELS = 3  # how many folders of profiles within folders of profiles are read
_Members = nested.Members


def _find_members(path: str | os.PathLike[str], read_one: bool, levels: int
                  ) -> tuple[str, Path, _Members]:
    """(kind, root, runs as (sources, facts)) of :func:`find_runs`."""
    kind, root, sources, scanned = _detect(path)
    if kind != "cluster":
        return kind, root, [(sources, [source_facts(s, read=read_one) for s in sources])]
    if not scanned:
        return kind, root, _rg.runs_of(root, sources)
    members = _rg.runs_of(root, sources, layout=True) if sources else []
    deeper = nested.deeper_members(
        root, lambda f: _find_members(f, read_one, levels - 1), _is_profile_folder, levels)
    deeper += nested.cluster_outputs(root, sources)
    if not members and not deeper:
        raise ProfileError(root, "no profile found: expected *_ascend_pt / *_ascend_ms "
                           "folders (with ASCEND_PROFILER_OUTPUT/), Ascend .db exports, "
                           "Kineto .json/.json.gz traces, legacy MindSpore files or "
                           "cluster_analysis_output/")
    if not members and len(deeper) == 1:
        return deeper[0]
    out = members + [m for _, _, ms in deeper for m in ms]
    return kind, root, sorted(out, key=nested.start_key) if deeper or len(members) > 1 else out


def _is_profile_folder(folder: Path) -> bool:
    """Whether a parent folder's scan reads ``folder`` as a profile by itself."""
    try:
        return _single(folder) is not None or bool(_legacy_ranks(folder))
    except (OSError, ProfileError):
        return True  # the scan reports it (as an unreadable rank): not looked below


def runs(path: str | os.PathLike[str]) -> list[Run]:
    """The separate runs found at ``path``, earliest first (one for a single run).

    Each :class:`~perfkit.io.detect.runs.Run` has an ``id`` and a ``name`` that ``load(path,
    run=...)`` accepts, a ``label`` for people, its ``ranks``, ``framework``, ``platform``,
    ``world_size``, ``start`` / ``start_ns`` and ``paths``: what a run picker shows. Files
    are only peeked at (their first and last bytes), not parsed.
    """
    return find_runs(path, read_one=True)[1]


def _detect(path: str | os.PathLike[str]) -> tuple[str, Path, list[RankSource], bool]:
    """(kind, root, sources, scanned) of :func:`detect`, the sources not yet grouped or
    checked; ``scanned``: they come from a parent folder's scan (:func:`_scan_parent`),
    where ranks of one job must share one layout (:mod:`perfkit.io.detect.nested`)."""
    path = resolve_sample(path)  # "sample:NAME" -> the bundled sample's folder
    p = Path(path).expanduser()
    if not p.exists():
        # a bundled sample's name written without "sample:" (as given: relative to the
        # current folder, which the loader made the path absolute against) gets the spelling
        try:
            given = os.path.relpath(p)
        except ValueError:  # another drive (Windows): no relative spelling
            given = str(p)
        hint = sample_hint(given)
        raise ProfileError(p, "path does not exist; expected a profiler output folder or "
                              f"file{hint}")
    if p.is_dir() and _is_cluster_output(p):
        return "cluster_analysis_output", p, [RankSource("cluster_analysis_output", str(p))], \
            False
    if p.is_file() and p.name.startswith(("cluster_", "communication_group")) and \
            _is_cluster_output(p.parent):
        return "cluster_analysis_output", p, [RankSource("cluster_analysis_output",
                                                         str(p.parent))], False
    one = _single(p)
    if one is not None:
        if len(one) == 1:
            if one[0].rank is None:  # the only profile read (a lone export): rank 0, as in
                # its folder; every table and view then has a rank to group and draw by
                one = [dataclasses.replace(one[0], rank=0, rank_from=_ONLY_ONE)]
            return "profile", p, one, False
        return "cluster", p, _rg.check_unique(p, one), False  # a PROF_ folder of several devices
    # legacy MindSpore: one folder, files suffixed by rank
    legacy = _legacy_ranks(p)
    if not legacy and (p / "profiler").is_dir():
        p_leg = p / "profiler"
        legacy = _legacy_ranks(p_leg)
    else:
        p_leg = p
    if legacy:
        srcs = _legacy_sources(p_leg, legacy)
        # rank folders of other formats next to the legacy files are ranks too
        others = _scan_parent(p, files=False, skip={p_leg})
        if not others:
            return ("profile" if len(srcs) == 1 else "cluster"), p, srcs, False
        return "cluster", p, srcs + others, False
    sources = _scan_parent(p)
    if sources and all(s.fmt == "not_a_trace" for s in sources):
        raise ProfileError(p, "no profile found: " + "; ".join(
            f"{Path(s.path).name} is {s.error}" for s in sources))
    if not sources and (p / "cluster_analysis_output").is_dir():
        return "cluster_analysis_output", p, [RankSource(
            "cluster_analysis_output", str(p / "cluster_analysis_output"))], False
    return "cluster", p, sources, True  # none: find_runs looks deeper, else says so


def _legacy_sources(folder: Path, legacy: dict[int, list[Path]]) -> list[RankSource]:
    return [RankSource("mindspore_legacy", str(folder), r, tuple(map(str, files)))
            for r, files in sorted(legacy.items())]


def _unreadable(child: Path, reason: str) -> RankSource:
    """A folder that could not be examined: a rank that will fail, not a failed load."""
    return RankSource("unreadable", str(child), rank_from_name(child.name, suffix=True),
                      error=f"cannot be examined: {reason}")


def _scan_parent(p: Path, depth: int = 2, *, files: bool = True,
                 skip: set[Path] | frozenset[Path] = frozenset()) -> list[RankSource]:
    """Rank sources in the sub-folders (and, with ``files``, the trace files) of ``p``.

    A sub-folder that cannot be examined (permission denied, ...) becomes an
    ``unreadable`` source, so it is reported among the failed ranks while the others load.
    """
    found: list[RankSource] = []
    try:
        children = sorted(p.iterdir())
    except OSError as exc:
        raise ProfileError(p, f"cannot list folder: {exc.strerror or exc}") from None
    for child in children:
        if child.name.startswith(".") or child in skip:
            continue
        try:
            found.extend(_scan_child(child, depth, files))
        except OSError as exc:
            found.append(_unreadable(child, exc.strerror or str(exc) or type(exc).__name__))
        except ProfileError as exc:  # a sub-folder that cannot be listed
            found.append(_unreadable(child, exc.problem))
    return found


def _scan_child(child: Path, depth: int, files: bool) -> list[RankSource]:
    if child.is_dir():
        if loops_back(child):  # a link back up the tree: nothing new below it
            return []
        if child.name == "cluster_analysis_output":
            return []
        one = _single(child)
        if one is not None:
            return one
        legacy = _legacy_ranks(child)
        if legacy:  # MindSpore's JSON files there are not Kineto traces
            return _legacy_sources(child, legacy)
        return _scan_parent(child, depth - 1) if depth > 1 else []
    if not files or not child.is_file():
        return []
    name = child.name.lower()
    if name.endswith(".json.gz") or (name.endswith(".json") and name != "trace_view.json"
                                      and not name.startswith("profiler_")):
        return [_trace_beside_traces(child)]  # not_a_trace: load() leaves it out, noted
    if name == "trace_view.json":
        return [RankSource("trace_view", str(child), None, (str(child),))]
    return []
