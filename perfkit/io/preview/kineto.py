"""A Kineto rank's steps for :mod:`perfkit.io.preview.steps`, read without parsing its trace.

:func:`kineto_rank_steps` gives a rank's steps-only Profile from the device tasks of each
``ProfilerStep`` (the full load's step time), else from the ranges Kineto draws on the
device lane, else from the host spans; a trace without ``ProfilerStep`` has its training
iterations as steps (:func:`_iteration_rank_steps`, :func:`_iteration_host_steps`).
``meta.extra["preview_steps"]`` names the basis, :data:`_KINETO_FROM` says it for people.
:func:`_cached_steps` reads a rank's steps back from perfkit's cache, and
:func:`_host_spans_only` reads every Kineto rank again by its host spans, so that one
figure is shown over the ranks. What each figure is, and when the preview uses it, is in
:mod:`perfkit.io.preview.steps`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...profile import Profile, ProfileMeta
from ..cache import store as cache
from ..detect.sources import RankSource
from ..engines.local import _key
from ..kineto.iterations import FROM_OPTIMIZER
from ..kineto.marks import iteration_spans, step_scan
from ..kineto.scan import first_spans, iteration_steps, lane_steps, step_events, steps_on_device

__all__ = ["kineto_rank_steps"]  # the rest is private to perfkit.io.preview.steps


_FROM_CACHE = "perfkit's cache"
#: ``meta.extra`` key of a Kineto rank's host ``ProfilerStep`` spans (``step``, ``ts_us``,
#: ``dur_us``), read by the preview's byte scan and used again to cut steps from the trace
#: (:mod:`perfkit.io.preview.excerpt`).
STEP_SPANS = "step_spans"
#: Where a Kineto rank's preview steps come from, by basis (``meta.extra["preview_steps"]``).
_KINETO_FROM = {"device": "the device tasks of each ProfilerStep",
                "device_lane": "the ProfilerStep ranges on the device lane",
                "host_is_step": "the ProfilerStep spans",
                "host": "the host ProfilerStep spans",
                "iterations": "the device tasks of each training iteration, inferred from "
                              + FROM_OPTIMIZER,
                "iteration_spans": "the training iterations' spans, inferred from "
                                   + FROM_OPTIMIZER,
                "iteration_host": "the host spans of the training iterations after the "
                                  "first, inferred from " + FROM_OPTIMIZER}
#: Bases whose step time is a host span, not the step the full load gives
#: (:attr:`~perfkit.io.preview.steps.Preview.host_spans`).
_HOST_BASES = frozenset({"host", "iteration_host"})


def _cached_steps(source: RankSource) -> tuple[Profile, str] | None:
    """The steps table of a Kineto rank's cache entry (what the full load will read back),
    or None where it cannot be read."""
    if source.fmt != "kineto":
        return None
    f = cache.entry_path(_key(source)) / "steps.parquet"
    try:
        steps = cache.read_table_file(f)
    except Exception:  # noqa: BLE001 - a missing or damaged entry: the full load rebuilds it
        return None
    meta = ProfileMeta("kineto", framework="pytorch", rank=source.rank, device_type="gpu",
                       path=str(source.path), notes=["preview: steps of perfkit's cache"],
                       extra={"preview_steps": "cached"})
    return Profile(meta, {"steps": steps}), _FROM_CACHE


def _host_spans_only(sources: list[RankSource], profiles: list[Profile], froms: set[str]
                     ) -> tuple[list[Profile], set[str]]:
    """The ranks again, every Kineto rank by its host spans (see
    :func:`perfkit.io.preview.steps.preview`)."""
    by_path = {str(Path(s.path)): s for s in sources}
    out, where = [], froms - {*_KINETO_FROM.values(), _FROM_CACHE}
    for p in profiles:
        if p.meta.extra.get("preview_steps") in ("device", "host_is_step", "cached",
                                                  "device_lane", "iterations",
                                                  "iteration_spans"):
            got = kineto_rank_steps(by_path[p.meta.path], device=False, lane=False)
            if got is not None:
                p = got[0]
        out.append(p)
        if p.meta.source_format == "kineto":
            where.add(_KINETO_FROM[p.meta.extra.get("preview_steps", "host")])
    return out, where


def kineto_rank_steps(source: RankSource, device: bool, lane: bool = True,
                       why: list[str] | None = None, scan: bool = True
                       ) -> tuple[Profile, str] | None:
    """A Kineto rank's steps: the device steps where they can be read, else (``lane``) the
    device-lane copies of the steps, else the host spans (``meta.extra["preview_steps"]``
    says which, see :attr:`~perfkit.io.preview.steps.Preview.host_spans` and
    :attr:`~perfkit.io.preview.steps.Preview.device_lane`). A trace without ``ProfilerStep`` has
    its optimizer's iterations as steps: with the device steps
    (:func:`_iteration_rank_steps`), or else their host spans, found by the byte scan
    (:func:`_iteration_host_steps`, unless ``scan`` is False); None otherwise, and ``why``
    says why, but where ``scan`` was False (:func:`perfkit.io.preview.steps.preview` then says
    the traces were too large to scan)."""
    f = Path(source.path)
    if device:
        (rows, lane_rows), events = step_events(f), None
    else:  # one byte scan: the ProfilerStep events, or the events telling iterations
        rows, lane_rows, events = step_scan(f, iterations=scan)
    spans = first_spans(rows)
    if spans.empty:
        rule: list[str] = []
        got = _iteration_rank_steps(source, f, rule) if device else \
            _iteration_host_steps(source, f, events, rule) if scan else None
        if got is None and why is not None and (device or scan):
            why.append(_no_iterations(rule))  # else the preview says the trace is too large
        return got
    found = steps_on_device(f, rows) if device else None
    on_lane = lane_steps(lane_rows, spans) if lane and found is None else None
    if on_lane is not None:
        steps = _measured_steps(on_lane)
        basis, note = "device_lane", (
            "preview: step time = the ProfilerStep range Kineto draws on the device lane "
            "(gpu_user_annotation), the device's pace, and the device's wait before it; the "
            "full load's step (first to last device task the step launched, and the wait "
            "before) and the split follow")
    elif found is not None and len(found):
        steps = _measured_steps(found)
        basis, note = "device", ("preview: step time = first to last device task of each "
                                 "ProfilerStep and the device's wait before the first, as "
                                 "the full load; the split needs the device tasks' names, "
                                 "read by the full load")
    else:
        steps = pd.DataFrame({"step": spans["step"].to_numpy(),
                              "total_us": spans["dur_us"].to_numpy(np.float64),
                              "computing_us": np.nan})
        if found is not None:  # spans but no device task in any: the loader's step too
            basis, note = "host_is_step", ("preview: step time = the ProfilerStep span (no "
                                           "device task in the trace's steps), as the full "
                                           "load")
        else:
            basis, note = "host", ("preview: the host ProfilerStep span, not the step time "
                                   "(first to last device task), which comes with the full "
                                   "load; the split too")
    meta = ProfileMeta("kineto", framework="pytorch", rank=source.rank,
                       device_type="gpu", path=str(f), notes=[note],
                       extra={"preview_steps": basis, STEP_SPANS: spans})
    return Profile(meta, {"steps": steps}), _KINETO_FROM[basis]


def _measured_steps(found: pd.DataFrame) -> pd.DataFrame:
    """The preview's steps table of measured steps (``step``, ``total_us``,
    ``preparing_us``): the split (``computing_us``) needs the device tasks' names, read by
    the full load."""
    return pd.DataFrame({"step": found["step"].to_numpy(np.int64),
                         "total_us": found["total_us"].to_numpy(np.float64),
                         "computing_us": np.nan,
                         "preparing_us": found["preparing_us"].to_numpy(np.float64)})


def _no_iterations(rule: list[str]) -> str:
    """Why a trace without ``ProfilerStep`` has no preview: ``rule`` holds the note of
    :func:`~perfkit.io.kineto.iterations.optimizer_spans` where its annotations tell no
    iteration (else it has none)."""
    why = "; " + rule[0].removeprefix("steps: ") if rule else \
        " nor optimizer iterations (Optimizer.step#<Class>.step annotations)"
    return f"no ProfilerStep#N event{why}; its steps come with the full load"


def _iteration_rank_steps(source: RankSource, f: Path, notes: list[str]
                          ) -> tuple[Profile, str] | None:
    """The steps of a Kineto trace without ``ProfilerStep``: its training iterations, by
    the full load's rule (:func:`perfkit.io.kineto.iterations.optimizer_spans`), each one's
    device step measured as :func:`~perfkit.io.kineto.scan.kineto_device_steps` measures a
    ProfilerStep's; where no device task was launched in any, the iteration's span, as the
    full load. The ``step_mark`` column (:data:`perfkit.analysis.steps.STEP_MARK`) names
    the annotation, as in the full load's steps table, so that
    :func:`perfkit.analysis.steps.step_basis` says the steps were inferred. None where the
    rule gives no step (``notes`` then says why, where the trace has some annotation)."""
    got = iteration_steps(f, notes)
    if got is None:
        return None
    found, spans, mark = got
    if len(found):
        steps = _measured_steps(found)
        basis, note = "iterations", (
            "preview: step time = first to last device task of each training iteration "
            f"(no ProfilerStep: the iterations inferred from {FROM_OPTIMIZER}, {mark}, as "
            "the full load) and the device's wait before the first; the split needs the "
            "device tasks' names, read by the full load")
    else:
        steps = pd.DataFrame({"step": spans["step"].to_numpy(np.int64),
                              "total_us": (spans["end_ns"] - spans["start_ns"]).to_numpy(
                                  np.int64) / 1000.0,
                              "computing_us": np.nan})
        basis, note = "iteration_spans", (
            "preview: step time = the span of each training iteration (no ProfilerStep: "
            f"inferred from {FROM_OPTIMIZER}, {mark}; no device task in them), as the full "
            "load")
    # what ends each step (analysis.steps.STEP_MARK), as in the full load's table
    steps["step_mark"] = pd.array([mark] * len(steps), dtype=TEXT)
    meta = ProfileMeta("kineto", framework="pytorch", rank=source.rank,
                       device_type="gpu", path=str(f), notes=[note],
                       extra={"preview_steps": basis})
    return Profile(meta, {"steps": steps}), _KINETO_FROM[basis]


def _iteration_host_steps(source: RankSource, f: Path, events: pd.DataFrame | None,
                          notes: list[str]) -> tuple[Profile, str] | None:
    """A large Kineto trace without ``ProfilerStep``: each training iteration's host span
    but the first (:func:`~perfkit.io.kineto.marks.iteration_spans`), with ``step_mark``
    as in the full load's table, labelled as host spans
    (:attr:`~perfkit.io.preview.steps.Preview.host_spans`); None where ``events``
    (:func:`~perfkit.io.kineto.marks.step_scan`; None: no optimizer annotation) tell no
    iteration (``notes`` then says why)."""
    got = None if events is None else iteration_spans(events, notes)
    if got is None:
        return None
    spans, mark = got
    steps = pd.DataFrame({"step": spans["step"].to_numpy(np.int64),
                          "total_us": (spans["end_ns"] - spans["start_ns"]).to_numpy(
                              np.int64) / 1000.0,
                          "computing_us": np.nan})
    steps["step_mark"] = pd.array([mark] * len(steps), dtype=TEXT)
    note = ("preview: the host span of each training iteration (no ProfilerStep: inferred "
            f"from {FROM_OPTIMIZER}, {mark}, by the full load's rule, from the end of the "
            "previous iteration's last optimizer step to the end of its own), not the step "
            "time (first to last device task), which comes with the full load, as do the "
            "split and the first iteration (it begins at the trace's first host event, "
            "which this reading does not look for)")
    meta = ProfileMeta("kineto", framework="pytorch", rank=source.rank,
                       device_type="gpu", path=str(f), notes=[note],
                       extra={"preview_steps": "iteration_host"})
    return Profile(meta, {"steps": steps}), _KINETO_FROM["iteration_host"]
