"""The steps of a profile in a fraction of its load: what the dashboard shows first.

A profile of a gigabyte takes seconds to parse whole, but its step table comes from small
files, or from a few hundred events of its trace. :func:`preview` reads only that:

- an **Ascend text export** (``*_ascend_pt`` / ``*_ascend_ms``): ``step_trace_time.csv``,
  the same reader and the same table as :func:`perfkit.load` (computing, communication,
  overlap, free, bubble per step);
- an **msprof-analyze** ``cluster_analysis_output/``: the rank rows of
  ``cluster_step_trace_time.csv``, as :func:`perfkit.load` reads them;
- a **PyTorch Kineto trace** (``.json`` / ``.json.gz``): the step time :func:`perfkit.load`
  gives, each ``ProfilerStep#N`` from the first to the last device task it launched and
  the device's wait before the first (:func:`kineto_device_steps`: the tasks whose
  runtime launch, same ``correlation``, ran in the host span), read by decoding only
  ``ph``, ``cat``, ``ts``, ``dur`` and ``args.correlation`` of each event; the split
  (computing, communication, free) needs the tasks' names and stays NA. That is a pass
  over the whole file, a fifth to a third of the full load's time
  (``benchmarks/README.md``), so it is the default up to
  :data:`DEVICE_STEPS_MAX_BYTES` of traces (256 MiB). Above it (or with
  ``device_steps=False``) the step figure is the host ``ProfilerStep#N`` span
  (:func:`kineto_step_spans`, a byte scan: each occurrence of ``"ProfilerStep#`` decoded
  as the one JSON event around it, the rest never parsed), which is the host's pace, not
  the step time (up to 14 % apart in a step on the shared samples): :attr:`Preview.host_spans` is
  then True and the page must say which it shows. Where the trace also holds the copy of
  each ``ProfilerStep#N`` range Kineto draws on the device lane (``gpu_user_annotation``,
  written by recent PyTorch versions), that copy is the step figure above the limit
  instead (:attr:`Preview.device_lane`): the device's pace, read by the same byte scan. A trace
  without any device task in its steps (a CPU-only run) has its host spans as step times,
  as in the full load. A rank already in perfkit's cache gives the steps table of its
  cache entry, the split included. The copy of a range Kineto draws on the device lane
  (``gpu_user_annotation``) is not used: it can leave out kernels launched inside the range
  under a nested range with a copy of its own (on the shared B200 trace an outer range's
  copy lasts 84.04 ms, the kernels launched in it 84.49 ms, the last one an all-gather
  under ``nccl:_all_gather_base``); on the two shared traces with a ``ProfilerStep`` copy
  it matches the device step within 2 ns. So it is used only above the limit, where the
  alternative is the host span, and labelled as the device lane's range.
  A trace **without** ``ProfilerStep#N`` has its training iterations as steps, as in the
  full load: the windows are the loader's own (:func:`perfkit.io.kineto.iterations.
  optimizer_spans`: each ends where an iteration's last host ``Optimizer.step#<Class>.
  step`` ends, the iterations told apart by the backward pass before each, the first
  begins at the trace's first host event), given the host events those rules read (the
  optimizer's annotations, the backward functions, the DataLoader's fetches: the same
  pass as the device step, decoding each event's ``name`` and ``tid`` too) and the start
  of every host event, each iteration's step measured as a ProfilerStep's, with a
  ``step_mark`` column naming the annotation (so the step's basis says the steps were
  inferred). That is the pass over the whole file, up to :data:`DEVICE_STEPS_MAX_BYTES`;
  above it (or with ``device_steps=False``) the events those rules read are found by a
  byte scan (:mod:`perfkit.io.kineto.marks`: their names' bytes, the backward functions'
  read by regular expressions: about nine times the ProfilerStep scan's time, 40 % of the
  pass's, ``benchmarks/README.md``), and each iteration's host span is the step
  figure, labelled as such (:attr:`Preview.host_spans`), but the first iteration's: it
  begins at the trace's first host event, which the scan does not find, and comes with
  the full load.

Other formats (Ascend DB, legacy MindSpore, raw CANN, a standalone ``trace_view.json``)
have no quick step reading: their preview has no profile, only the size to read.

The preview's :attr:`Preview.profile` is a :class:`~perfkit.Profile` (or
:class:`~perfkit.Cluster`) whose only table is ``steps``: every analysis of the steps
(:func:`perfkit.analysis.step_breakdown`, :func:`perfkit.analysis.measured_step_s`) works
on it as on the full profile. Nothing is written anywhere (no cache entry either).

This module finds the ranks and decides what to read; a rank's steps are read by
:mod:`perfkit.io.preview.ranks` (by format) and :mod:`perfkit.io.preview.kineto` (a Kineto
trace's).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...bundled_samples import resolve_sample
from ...errors import RunNotFoundError, RunsFound
from ...format import counted
from ...profile import Cluster, Profile
from ..cache import store as cache
from ..detect.runs import pick_run
from ..detect.sources import cluster_meta, input_bytes
from ..engines.local import _key, find_runs
from ..kineto.scan import kineto_device_steps, kineto_step_spans
from .kineto import _HOST_BASES, _cached_steps, _host_spans_only
from .ranks import FINAL_STEPS, _cluster_output_steps, _rank_steps

__all__ = ["Preview", "preview", "kineto_step_spans", "kineto_device_steps", "describe",
           "DEVICE_STEPS_MAX_BYTES", "ITERATION_SCAN_MAX_BYTES", "FINAL_STEPS"]


#: Up to this many bytes of Kineto traces, :func:`preview` reads the device step by default
#: (:func:`kineto_device_steps`, a fifth to a third of the full load's time: see
#: benchmarks/README.md);
#: above it, the host ProfilerStep spans (a byte scan, a few hundred events decoded),
#: labelled as such.
DEVICE_STEPS_MAX_BYTES = 256 << 20
#: Up to this many bytes of Kineto traces, a trace without ``ProfilerStep`` above
#: :data:`DEVICE_STEPS_MAX_BYTES` has its iterations found by the byte scan of
#: :mod:`perfkit.io.kineto.marks` (about 3 s of CPU per GB where backward functions are
#: dense, ``benchmarks/README.md``). The preview runs before the parse (``perfkit.load(...,
#: wait=False)``, the dashboard's background opening), so above this the scan would hold
#: the whole load back for longer than its answer is worth: the steps come with the load.
ITERATION_SCAN_MAX_BYTES = 1 << 30


@dataclass
class Preview:
    """What :func:`preview` read.

    Attributes
    ----------
    path : str
        The path opened.
    kind : str
        ``"profile"``, ``"cluster"`` or ``"cluster_analysis_output"`` (:func:`perfkit.io.
        detect.detect`).
    profile : Profile, Cluster or None
        The ranks' ``steps`` tables (no other table); None when no rank has a quick step
        reading.
    input_bytes : int
        Size of the files the full load reads.
    cached : bool
        Every rank has a parsed copy in perfkit's cache (the full load will be fast).
    steps_from : str
        Where the steps were read (one phrase for people), empty without a profile.
    seconds : float
        How long the preview took.
    notes : list of str
        Ranks without a quick step reading, and why.
    steps_final : bool
        Every rank's steps were read, each one as the full load reads it (the same reader
        on the same file), so ``profile.steps`` is the full load's table (less the rows of
        a rank that then fails to load). False for an approximation (a Kineto trace's host
        ``ProfilerStep`` spans) or when some rank has no quick reading.
        ``perfkit.load(..., wait=False)`` serves ``steps`` early only when it is True.
    host_spans : bool
        The step times are Kineto host ``ProfilerStep`` spans (or, in a trace without
        them, the host spans of its training iterations), not the step time the full load
        reports (first to last device task of each step): the page must say so.
        False when every step time read is the full load's.
    device_lane : bool
        The step times (of some ranks at least) are the ``ProfilerStep#N`` ranges Kineto
        draws on the device lane (``gpu_user_annotation``): the device's pace, read above
        :data:`DEVICE_STEPS_MAX_BYTES` instead of the host span. Kineto extends such a
        range only over the kernels launched directly under it, so a nested range with a
        device-lane copy of its own can end it early: close to, not always equal to, the
        full load's step time (equal within 2 ns on the two shared traces that have it).
    """

    path: str
    kind: str
    profile: Profile | Cluster | None
    input_bytes: int
    cached: bool = False
    steps_from: str = ""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    steps_final: bool = False
    host_spans: bool = False
    device_lane: bool = False


def preview(path: str | os.PathLike[str], run: Any = None, *, read_steps: bool = True,
            device_steps: bool | None = None) -> Preview:
    """The step table of the profile at ``path``, without loading the rest.

    Parameters
    ----------
    path : str or path-like
        What :func:`perfkit.load` accepts (``"sample:NAME"`` too).
    run : int, str or Run, optional
        Which run of a folder of several runs, as for :func:`perfkit.load`.
    read_steps : bool
        False: only find the ranks and the size of their files (no file is read).
    device_steps : bool, optional
        For a Kineto trace, True reads each step's device tasks (:func:`kineto_device_steps`,
        a pass over the whole file) to give the step time the full load gives; False only
        the host ``ProfilerStep`` spans (a byte scan), labelled as such
        (:attr:`Preview.host_spans`). Default: True when the run's files add up to at most
        :data:`DEVICE_STEPS_MAX_BYTES`, whose pass stays within about a second.

    Returns
    -------
    Preview

    Raises
    ------
    RunsFound
        The folder holds several runs and ``run`` picks none (as :func:`perfkit.load`).
    ProfileError
        The path holds no profile, or a step file exists but cannot be read.
    """
    t0 = time.perf_counter()
    path = resolve_sample(path)
    root = Path(path).expanduser()
    kind, found = find_runs(path)
    if kind == "cluster_analysis_output":
        folder = Path(found[0].sources[0].path)
        size = _folder_bytes(folder)
        profile = _cluster_output_steps(folder) if read_steps else None
        return Preview(str(root), kind, profile, size, steps_from=(
            "cluster_step_trace_time.csv" if profile is not None else ""),
            seconds=time.perf_counter() - t0, steps_final=profile is not None)
    if len(found) > 1 and run is None:
        raise RunsFound(root, found)
    chosen = found[0] if run is None else pick_run(found, run, root, RunNotFoundError.among(found))
    sources = [s for s in chosen.sources if s.fmt not in ("not_a_trace", "unreadable")]
    size = input_bytes(sources)
    cached = bool(sources) and cache.usable_for(root) and all(
        cache.entry_path(_key(s)).is_dir() for s in sources)
    out = Preview(str(root), kind, None, size, cached=cached)
    if device_steps is None:
        device_steps = size <= DEVICE_STEPS_MAX_BYTES
    scan = size <= ITERATION_SCAN_MAX_BYTES
    if read_steps:
        profiles, froms = [], set()
        for s in sources:
            why: list[str] = []
            got = _cached_steps(s) if cached else None
            got = got or _rank_steps(s, device_steps, why, scan)
            if got is None and not why and s.fmt == "kineto" and not scan:
                why.append(_too_large_to_scan())  # no ProfilerStep, and not scanned
            if got is None:
                out.notes.append(f"{Path(s.path).name}: " + (why[0] if why else _NO_STEPS.get(
                    s.fmt, f"no quick step reading for its format ({s.fmt})")))
                continue
            profiles.append(got[0])
            froms.add(got[1])
        bases = {p.meta.extra.get("preview_steps") for p in profiles}
        if bases & _HOST_BASES and bases - _HOST_BASES - {None}:
            # one figure over the ranks: every Kineto rank's host span, none mixed in
            profiles, froms = _host_spans_only(sources, profiles, froms)
            bases = {p.meta.extra.get("preview_steps") for p in profiles}
        out.host_spans = bool(bases & _HOST_BASES)
        out.device_lane = "device_lane" in bases
        if profiles:
            out.profile = profiles[0] if kind == "profile" and len(sources) == 1 else \
                Cluster(profiles, cluster_meta(root, profiles, {}))
            out.steps_from = " and ".join(sorted(froms))
            out.steps_final = len(profiles) == len(sources) and all(
                p.meta.extra.get(FINAL_STEPS) for p in profiles)
    out.seconds = time.perf_counter() - t0
    return out


_NO_STEPS = {"kineto": "no ProfilerStep#N event: its steps come with the full load",
             "ascend_text": "no step_trace_time.csv: its steps come with the full load"}


def _folder_bytes(folder: Path) -> int:
    total = 0
    for f in folder.rglob("*"):
        try:
            total += f.stat().st_size if f.is_file() else 0
        except OSError:
            continue
    return total


def _too_large_to_scan() -> str:
    """Why a trace without ``ProfilerStep`` above :data:`ITERATION_SCAN_MAX_BYTES` has no
    preview."""
    return (f"no ProfilerStep#N event, and above {ITERATION_SCAN_MAX_BYTES >> 30} GiB of "
            "traces the training iterations are not looked for ahead of the load (the scan "
            "would hold the load back by seconds per GB); its steps come with the full load")


def describe(p: Preview) -> str:
    """One sentence for people: what the preview read (used by the dashboard)."""
    if p.profile is None:
        return "no quick step reading for this format"
    ranks = getattr(p.profile, "ranks", None) or [p.profile.meta.rank]
    return (f"steps of {counted(len(ranks), 'rank')} from {p.steps_from} in "
            f"{p.seconds:.1f} s")
