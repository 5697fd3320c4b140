"""The canonical tables of one CANN device, from its timeline's event frame.

The one job of this module: turn the events of :mod:`perfkit.io.cann.events` into
``steps`` (with each iteration's window), ``kernels``, ``comm_ops``, ``comm_bandwidth`` and
``comm_matrix``, by the rules :mod:`perfkit.io.cann.raw` describes (what becomes which
table), adding a note wherever the timeline lacks something. Instants stay in ns on the
timeline's clock (the ``*__ns`` and ``step_start_ns`` columns):
:func:`perfkit.io.cann.raw.parse` puts them on the profile's origin.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...format import counted, plural, runs_text
from ..canonical.categories import category
from ..canonical.comm_words import CANN_UNRECORDED
from ..chrome.tables import step_index

__all__: list[str] = []

_OP_TYPE_RE = re.compile(r"([A-Za-z][\w.]*)-op\d+$")
_STEP_CATS = {"Iteration Time": "total_us", "FP_BP Time": "fp_and_bp_us",
              "Iteration Refresh": "tail_us"}
_TRACKS = {"Computing": "computing_us", "Communication": "communication_us",
           "Communication(Not Overlapped)": "comm_not_overlapped_us", "Free": "free_us"}
_TRANSIT_TASKS = ("Memcpy", "Reduce_Inline")
_LINK_CLASSES = {"HCCS": "HCCS", "HCCS_SW": "HCCS", "PCIE": "PCIE", "SIO": "SIO"}


def _steps(ev: pd.DataFrame, notes: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(steps, windows): one row per iteration and its [start, end) window in ns."""
    marks = ev[ev["cat"].isin(list(_STEP_CATS)) & (ev["ph"] == "X")
               & ev["iteration_id"].notna() & ev["ts_ns"].notna()]
    marks = marks.drop_duplicates(["cat", "iteration_id"])
    it = marks[marks["cat"] == "Iteration Time"]
    if it.empty:
        notes.append("steps: no iteration marks (step_trace / Step Trace) in the timeline")
        return pd.DataFrame(), pd.DataFrame(columns=["step", "start_ns", "end_ns"])
    start = it["ts_ns"].astype(np.int64).to_numpy()
    windows = pd.DataFrame({
        "step": it["iteration_id"].astype(np.int64).to_numpy(),
        "start_ns": start,
        "end_ns": start + np.round(it["dur_us"].to_numpy(np.float64) * 1000).astype(np.int64),
    }).sort_values("start_ns", kind="stable").reset_index(drop=True)
    steps = windows[["step"]].copy()
    steps["step_start_ns"] = windows["start_ns"]
    for cat, col in _STEP_CATS.items():
        part = marks[marks["cat"] == cat].set_index("iteration_id")["dur_us"]
        steps[col] = steps["step"].map(part).astype(np.float64)
    aug = ev[(ev["ph"] == "t") & ev["data_aug_us"].notna()]
    if len(aug):
        ids = pd.to_numeric(aug["name"].str.extract(r"(\d+)$", expand=False),
                            errors="coerce")
        bound = pd.Series(aug["data_aug_us"].to_numpy(), index=ids.to_numpy())
        bound = bound[~bound.index.duplicated()]
        steps["iteration_interval_us"] = steps["step"].map(bound).astype(np.float64)
    ov = ev[(ev["proc"] == "Overlap Analysis") & (ev["ph"] == "X") & ev["ts_ns"].notna()]
    ov = ov.drop_duplicates(["name", "ts_ns", "dur_us"])
    if len(ov):
        step = step_index(ov["ts_ns"].astype(np.int64).to_numpy(), windows)
        sums = pd.DataFrame({"step": step, "track": ov["name"].to_numpy(),
                             "dur": ov["dur_us"].to_numpy(np.float64)}).dropna(subset=["step"])
        wide = sums.pivot_table(index="step", columns="track", values="dur", aggfunc="sum")
        have = steps["step"].isin(wide.index)
        for track, col in _TRACKS.items():
            vals = steps["step"].map(wide[track]) if track in wide else np.nan
            # an iteration with Overlap Analysis events but none of this track: 0, not NA
            steps[col] = pd.Series(vals, index=steps.index, dtype=np.float64).where(
                ~have, pd.Series(vals, index=steps.index, dtype=np.float64).fillna(0.0))
        steps["overlapped_us"] = steps["communication_us"] - steps["comm_not_overlapped_us"]
        # the tracks run from the iteration's first task to its last, a few µs inside the
        # Iteration Time: the device's idle time at either end is free time as well, so
        # that the parts cover the iteration and the step time counts all of it
        edges = (steps["total_us"] - steps["computing_us"] - steps["comm_not_overlapped_us"]
                 - steps["free_us"])
        steps["free_us"] = steps["free_us"] + edges.where(edges > 0, 0.0)
        missing = int((~have).sum())
        if missing:  # which ones, by number: the page says it once, in this note
            lacking = [int(i) for i in steps.loc[~have, "step"].dropna()]
            notes.append(f"steps: {plural(missing, 'iteration', 'iterations')} "
                         f"{runs_text(lacking)} of {len(steps)} "
                         f"{plural(missing, 'has', 'have')} no Overlap "
                         f"Analysis events ({plural(missing, 'its', 'their')} msprof_ file "
                         f"is absent): computing / communication / free unknown for "
                         f"{plural(missing, 'it', 'them')}")
    else:
        notes.append("steps: no Overlap Analysis tracks (msprof_*.json): computing / "
                     "communication / free per step unknown; total_us is the iteration time")
    if "iteration_interval_us" in steps:
        _count_the_interval(steps, windows, notes)
    return steps, windows


def _count_the_interval(steps: pd.DataFrame, windows: pd.DataFrame, notes: list[str]) -> None:
    """Each iteration's Data_aug Bound as the device's wait before it (``preparing_us``).

    msprof's Iteration Time of iteration N starts at its FP start; its Data_aug Bound is
    the time before, from the end of iteration N-1, while the device waits for the next
    batch: the wait before the step's first device task, which is what ``preparing_us``
    is for every format. MindSpore's step trace counts that step interval in the step
    (interval + FP/BP + tail = total), and the job steps at that pace: the step time
    (``step_us + preparing_us``, :func:`perfkit.analysis.step_wall_us`) counts it too; the
    Overview splits it off as the wait before the first device task, and the Timeline
    draws it before the iteration's tasks. The bound is capped at the gap to the iteration
    before (it is measured to the FP start, a few µs inside the Iteration Time), so that
    no time is counted twice.
    """
    bound = steps["iteration_interval_us"].to_numpy(np.float64)
    order = windows.sort_values("start_ns", kind="stable")
    gap = (order["start_ns"] - order["end_ns"].shift()).to_numpy(np.float64) / 1000.0
    gap_of = dict(zip(order["step"].to_numpy(), gap, strict=True))
    before = steps["step"].map(gap_of).to_numpy(np.float64)
    counted = np.where(np.isnan(bound), 0.0, np.clip(bound, 0.0, None))
    counted = np.where(np.isfinite(before), np.minimum(counted, np.clip(before, 0.0, None)),
                       counted)
    steps["iteration_interval_us"] = np.where(np.isnan(bound), np.nan, counted)
    steps["preparing_us"] = steps["iteration_interval_us"]
    if counted.any():
        notes.append("steps: each step's Data_aug Bound (the device idle from the previous "
                     "iteration's end to its FP start) is its preparing_us, the device's wait "
                     "before its first task; the step time adds it to the iteration, as "
                     "MindSpore's step trace counts its step interval")


def _mark_recorded(steps: pd.DataFrame, kernels: pd.DataFrame, notes: list[str]) -> None:
    """Set ``steps.tasks_recorded`` (:mod:`perfkit.analysis.recorded`): False for an
    iteration with no device task in its window, where other iterations have some.

    msprof exports the timeline one iteration at a time (``task_time_`` / ``msprof_`` /
    ``hccl_`` files of suffix ``{device}_{model}_{iteration}``), while every
    ``step_trace_`` file holds the marks of all iterations: a PROF folder that keeps the
    timeline of some iterations only (``ascend/mindinsight-legacy``'s keeps iteration 1's
    490 tasks and the marks of 10) has steps without their tasks. An iteration runs
    device tasks, so one that holds none was not exported; the figures per step of its
    tasks (the operators, the AI CPU finding) are over the others only. Nothing is set
    when no iteration lacks its tasks, or when the timeline holds no device task at all
    (what there is then is said by the note on ``kernels``).
    """
    if steps.empty or kernels.empty or "step" not in kernels.columns:
        return
    ids = steps["step"].to_numpy(np.int64)
    stepped = pd.to_numeric(kernels["step"], errors="coerce").dropna().to_numpy(np.float64)
    has = np.isin(ids, stepped)
    if has.all() or not has.any():
        return
    steps["tasks_recorded"] = pd.array(has, dtype="boolean")
    done = [int(i) for i in ids[has]]
    lacking = [int(i) for i in ids[~has]]
    n = len(lacking)
    notes.append(f"steps: device tasks recorded for {plural(len(done), 'iteration', 'iterations')} "
                 f"{runs_text(done)} of {len(ids)} (steps.tasks_recorded): "
                 f"{plural(n, 'iteration', 'iterations')} {runs_text(lacking)} "
                 f"{plural(n, 'has', 'have')} no device task in the timeline (only "
                 f"{plural(n, 'its', 'their')} step trace marks were exported), so the "
                 "figures per step of the device tasks are over the others only")


def _op_type(names: pd.Series) -> pd.Series:
    """Operator type from a MindSpore task name (``.../MatMul-op12`` -> ``MatMul``)."""
    return names.str.extract(_OP_TYPE_RE, expand=False).astype(TEXT)


def _kernels(ev: pd.DataFrame, windows: pd.DataFrame, comm_streams: set[int],
             notes: list[str]) -> pd.DataFrame:
    tasks = (ev["proc"] == "Ascend Hardware") & (ev["ph"] == "X") & ev["task_type"].notna()
    timeless = int((tasks & ev["ts_ns"].isna()).sum())
    if timeless:
        notes.append(f"kernels: {counted(timeless, 'device task')} of the CANN timeline "
                     f"{plural(timeless, 'has', 'have')} no readable start (ts): left out, "
                     "since a task cannot be placed in its step without one")
    dev = ev[tasks & ev["ts_ns"].notna()]
    stream = dev["stream_id"].where(dev["stream_id"].notna(),
                                    pd.to_numeric(dev["thread"].str.extract(
                                        r"Stream (\d+)", expand=False), errors="coerce"))
    dev = dev.assign(stream=stream)
    dev = dev.drop_duplicates(["stream", "task_id", "ts_ns", "name"])
    dev = dev.sort_values("ts_ns", kind="stable")
    names = dev["name"].astype(TEXT)
    frame = pd.DataFrame({
        "name": names.to_numpy(), "type": _op_type(names).to_numpy(),
        "core": dev["task_type"].to_numpy(), "stream": dev["stream"].to_numpy(),
        "task_id": dev["task_id"].to_numpy(), "dur_us": dev["dur_us"].to_numpy(np.float64),
    })
    frame["start__ns"] = dev["ts_ns"].to_numpy()
    cat = category(frame["core"].astype(TEXT), frame["type"].astype(TEXT),
                   frame["name"].astype(TEXT))
    on_comm = frame["stream"].isin(list(comm_streams)).to_numpy(bool)
    frame["category"] = cat.where(~on_comm, "communication")
    frame["step"] = step_index(pd.to_numeric(frame["start__ns"]).to_numpy(np.int64), windows) \
        if len(windows) else np.nan
    return frame


def _hccl(ev: pd.DataFrame, windows: pd.DataFrame, notes: list[str]
          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, set[int]]:
    """comm_ops, comm_bandwidth, comm_matrix and the streams HCCL uses."""
    h = ev[(ev["proc"] == "HCCL") & (ev["ph"] == "X") & ev["ts_ns"].notna()]
    h = h.drop_duplicates(["thread", "name", "ts_ns", "dur_us"])
    tasks = h[h["hccl_task"].notna()]
    ops = h[h["hccl_task"].isna()].sort_values("ts_ns", kind="stable")
    streams = {int(s) for s in tasks["hccl_stream"].dropna().unique()}
    start = ops["ts_ns"].astype(np.int64).to_numpy()
    end = start + np.round(ops["dur_us"].to_numpy(np.float64) * 1000).astype(np.int64)
    group = ops["thread"].str.extract(r"^Group (.+?) Communication$", expand=False)
    comm_ops = pd.DataFrame({
        "step": step_index(start, windows) if len(windows) else np.nan,
        "group": group.astype(TEXT).to_numpy(),
        "name": ops["name"].to_numpy(),
        "op_type": ops["name"].str.rsplit("/", n=1).str[-1].str.extract(
            r"^(?:hcom_)?([A-Za-z]+)", expand=False).to_numpy(),
        "elapse_us": ops["dur_us"].to_numpy(np.float64),
    })
    comm_ops["start__ns"] = start
    if not len(ops):
        return comm_ops, pd.DataFrame(), pd.DataFrame(), streams
    t_end = tasks["ts_ns"].astype(np.int64).to_numpy() + np.round(
        tasks["dur_us"].to_numpy(np.float64) * 1000).astype(np.int64)
    # the operator whose window holds the task's end (msprof's rule); ops sorted by start
    idx = np.searchsorted(start, t_end, side="left") - 1
    ok = idx >= 0
    ok[ok] &= t_end[ok] <= end[idx[ok]]
    owner = np.where(ok, idx, -1)
    link = tasks["link"].fillna("").to_numpy(dtype=object)
    transit = (tasks["name"].isin(list(_TRANSIT_TASKS)).to_numpy(bool)
               & (tasks["transport"] == "SDMA").fillna(False).to_numpy(bool)
               & (link != "ON_CHIP")
               & (tasks["src_rank"] != tasks["dst_rank"]).fillna(False).to_numpy(bool)
               & (owner >= 0))
    sel = tasks[transit]
    own = owner[transit]
    kind = pd.Series([_LINK_CLASSES.get(str(x), "SDMA") for x in link[transit]],
                     dtype=TEXT)
    moved = pd.DataFrame({
        "op": own, "transport": kind.to_numpy(),
        "size_bytes": sel["size"].to_numpy(np.float64),
        "transit_us": sel["dur_us"].to_numpy(np.float64),
        "src_local": sel["src_rank"].to_numpy(np.float64),
        "dst_local": sel["dst_rank"].to_numpy(np.float64),
    })
    names = comm_ops["name"].to_numpy()
    per = moved.groupby(["op", "transport"], sort=True).agg(
        size_bytes=("size_bytes", "sum"), transit_us=("transit_us", "sum")).reset_index()
    sdma = moved.groupby("op", sort=True).agg(size_bytes=("size_bytes", "sum"),
                                              transit_us=("transit_us", "sum")).reset_index()
    sdma = sdma.assign(transport="SDMA")
    per = per[per["transport"] != "SDMA"]
    bw = pd.concat([per, sdma[per.columns]], ignore_index=True).sort_values(
        ["op", "transport"], kind="stable")
    bw.insert(0, "name", names[bw["op"].to_numpy(np.int64)] if len(bw) else [])
    bw.insert(0, "step", comm_ops["step"].to_numpy()[bw["op"].to_numpy(np.int64)]
              if len(bw) else [])
    bw["bandwidth_gbps"] = (bw["size_bytes"] / 1e9) / (bw["transit_us"] / 1e6).where(
        bw["transit_us"] > 0)
    bw = bw.drop(columns=["op"]).reset_index(drop=True)
    links = moved.groupby(["op", "src_local", "dst_local", "transport"], sort=True).agg(
        size_bytes=("size_bytes", "sum"), time_us=("transit_us", "sum")).reset_index()
    links.insert(0, "name", names[links["op"].to_numpy(np.int64)] if len(links) else [])
    links.insert(0, "step", comm_ops["step"].to_numpy()[links["op"].to_numpy(np.int64)]
                 if len(links) else [])
    links["group"] = comm_ops["group"].to_numpy()[links["op"].to_numpy(np.int64)] \
        if len(links) else []
    links["bandwidth_gbps"] = (links["size_bytes"] / 1e9) / (links["time_us"] / 1e6).where(
        links["time_us"] > 0)
    links["src_rank"] = np.nan
    links["dst_rank"] = np.nan
    links = links.drop(columns=["op"]).reset_index(drop=True)
    if (tasks["transport"] == "RDMA").any():
        notes.append("comm_bandwidth: RDMA transfers not counted (msprof groups RDMA payload "
                     "and notify tasks, which the exported timeline does not tie together); "
                     "use the analysed export for them")
    if len(comm_ops):  # what the collectives found lack (none found: nothing to say)
        notes.append("comm_ops: " + CANN_UNRECORDED)
    if len(links):
        notes.append("comm_matrix: src_local / dst_local are the HCCL ranks of the tasks "
                     "(local to their communication group, which the timeline does not "
                     "name); src_rank / dst_rank left NA")
    return comm_ops, bw, links, streams

