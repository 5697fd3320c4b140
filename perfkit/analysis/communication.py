"""Communication analyses: per operator type and group, bandwidth, slow links, overlap.

The seed's step 4 of the model-parallel check reads the time split of each communication
operator: *transit* (data actually moving — if long, look at the link bandwidth), *wait*
(the operator waits for its peers — if long, a slow rank holds the group back) and
*synchronisation*. The functions here compute those shares from ``comm_ops``, the
achieved bandwidth per transport from ``comm_bandwidth`` against the hardware's nominal
bandwidth, the slow links of ``comm_matrix`` and the overlap of communication with
computation per rank (from :func:`~perfkit.analysis.steps.step_breakdown`).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from .._text_dtype import TEXT
from ._frames import aggregate, any_values, collect, compute_all, is_lazy, transform, with_position
from ._util import add_note, empty_frame, has_values, robust_z, table, typed
from .collectives import comm_op_type
from .link_nominal import LATENCY_BOUND_BYTES, NOMINAL_TRANSPORT, transport_nominal
from .recorded import RECORDED, recorded_steps_text
from .steps import exposed_comm_us, step_breakdown, step_wall_us

__all__ = ["comm_op_type", "comm_summary", "comm_tasks", "comm_bandwidth_summary", "slow_links",
           "comm_overlap", "NOMINAL_TRANSPORT", "COMM_SUMMARY_COLUMNS", "SLOW_LINK_COLUMNS"]

COMM_SUMMARY_COLUMNS: dict[str, str | pd.StringDtype] = {
    "op_type": TEXT, "group": TEXT, "count": "int64", "total_us": "float64",
    "mean_us": "float64", "max_us": "float64", "transit_us": "float64", "wait_us": "float64",
    "sync_us": "float64", "idle_us": "float64", "transit_share": "float64",
    "wait_share": "float64", "sync_share": "float64", "idle_share": "float64",
    "ranks": "int64",
}

SLOW_LINK_COLUMNS: dict[str, str | pd.StringDtype] = {
    "transport": TEXT, "group": TEXT, "src_rank": "Int64", "dst_rank": "Int64",
    "size_bytes": "float64", "time_us": "float64", "bandwidth_gbps": "float64",
    "median_gbps": "float64", "ratio_to_median": "float64", "z": "float64", "slow": "boolean",
    "rank_space": TEXT, "recorded_by": "Int64",
}


_PARTS = ("transit_us", "wait_us", "sync_us", "idle_us")


def _comm_keys(frame: pd.DataFrame, by_group: bool) -> pd.DataFrame:
    """``_op`` and ``_grp``: the text keys :func:`comm_summary` groups by ("" for NA)."""
    grp = frame["group"].astype(TEXT).fillna("") if by_group and "group" in frame.columns \
        else pd.Series("", index=frame.index, dtype=TEXT)
    return frame.assign(_op=comm_op_type(frame["name"]).astype(TEXT).fillna(""), _grp=grp)


def _lazy_comm_summary(c: Any, by_group: bool) -> pd.DataFrame:
    """:func:`comm_summary` of a lazy ``comm_ops``: per (kind, group, rank) sums, combined.

    Every (kind, group, rank) group lies in one partition; the per-rank rows are then
    combined in pandas, in the order the eager ``groupby(sort=False)`` meets them.
    """
    parts = [p for p in _PARTS if p in c.columns]
    cols = ["name", "rank", "elapse_us", *parts, *(["group"] if "group" in c.columns else [])]
    c = with_position(transform(c[cols], lambda f: _comm_keys(f, by_group)))
    spec = {"elapse_us": ["size", "count", "sum", "max"], "_pos": ["min"],
            **{p: ["count", "sum"] for p in parts}}
    a = aggregate(c, ["_op", "_grp", "rank"], spec, dropna=False)
    g = a.groupby(["_op", "_grp"], sort=False)
    out = g.agg(count=("elapse_us_size", "sum"), total_us=("elapse_us_sum", "sum"),
                n=("elapse_us_count", "sum"), max_us=("elapse_us_max", "max"),
                ranks=("rank", "count"), pos=("_pos_min", "min"))
    out["mean_us"] = out["total_us"] / out["n"].where(out["n"] > 0)
    for p in _PARTS:
        if p in parts:
            out[p] = g[f"{p}_sum"].sum().where(g[f"{p}_count"].sum() > 0)
        else:
            out[p] = np.nan
    out = out.sort_values("pos", kind="mergesort").reset_index()
    out = out.rename(columns={"_op": "op_type", "_grp": "group"})
    out["group"] = pd.NA if not by_group else out["group"].replace("", pd.NA)
    for p in _PARTS:
        out[p.replace("_us", "_share")] = out[p] / out["total_us"].where(out["total_us"] > 0)
    out = out.sort_values("total_us", ascending=False, kind="mergesort")
    return typed(out, COMM_SUMMARY_COLUMNS).reset_index(drop=True)


#: Why :func:`comm_summary` is empty: neither table records a collective.
_NO_COMM = ("no communication operators (comm_ops) and no communication task among the "
            "device's tasks (kernels); Ascend needs profiler_level Level1")


#: Columns of :func:`comm_tasks` (those of ``comm_ops`` that device tasks record).
_TASK_COLUMNS: dict[str, str | pd.StringDtype] = {
    "rank": "Int64", "step": "Int64", "group": TEXT, "name": TEXT, "start_us": "float64",
    "elapse_us": "float64"}


def _is_comm_task(k: Any) -> Any:
    """Rows of ``kernels`` that are communication tasks (pandas or lazy frame)."""
    return k["category"].eq("communication").fillna(False)


def comm_tasks(profile: Any) -> pd.DataFrame:
    """The device's communication tasks (``kernels`` of category ``communication``) in the
    layout of ``comm_ops``: ``rank``, ``step``, ``name``, ``start_us`` and ``elapse_us``
    (the task's duration), ``group``.

    The stand-in for ``comm_ops`` when a profile records its collectives only as device
    tasks (a lone Ascend ``kernel_details.csv``, whose HCCL rows are one per collective):
    ``group`` NA and no transit / wait / sync / idle split. Empty when there are none.
    """
    k = table(profile, "kernels")
    if "category" not in k.columns or "dur_us" not in k.columns:
        return empty_frame(_TASK_COLUMNS)
    rows = collect(k, ["rank", "step", "name", "start_us", "dur_us"], where=_is_comm_task)
    rows = rows.rename(columns={"dur_us": "elapse_us"})
    rows = rows.assign(**{c: pd.NA for c in _TASK_COLUMNS if c not in rows.columns})
    return typed(rows, _TASK_COLUMNS).reset_index(drop=True)


def comm_summary(profile: Any, by_group: bool = True) -> pd.DataFrame:
    """Communication time per operator type (and group): count, total, time-split shares.

    The collectives are those of ``comm_ops``. A profile with no ``comm_ops`` rows whose
    device tasks include communication tasks (a lone Ascend ``kernel_details.csv``: its
    HCCL rows, one per collective) is summed from those tasks (:func:`comm_tasks`): each
    task's duration is the collective's time; group and time split are not recorded
    (NA), a note says so and ``attrs["source"]`` is ``"kernels"``.

    Returns
    -------
    DataFrame
        :data:`COMM_SUMMARY_COLUMNS`, sorted by ``total_us``: ``total_us`` is the sum of
        ``elapse_us``; ``transit/wait/sync/idle_us`` sums of those parts (NA when the
        source has no split, e.g. Kineto); ``*_share`` = part / total; ``ranks`` the number
        of ranks contributing. ``group`` is NA when not grouping or not recorded.
        A lazy cluster is summed per (kind, group, rank) on the workers and combined
        here (sums may differ from the eager ones in the last bits).
    """
    c = table(profile, "comm_ops")
    if is_lazy(c) and any_values(c, "elapse_us"):
        return _lazy_comm_summary(c, by_group)
    if is_lazy(c) or c.empty or not has_values(c, "elapse_us"):
        c = comm_tasks(profile)
        if c.empty or not has_values(c, "elapse_us"):
            return empty_frame(COMM_SUMMARY_COLUMNS, _NO_COMM)
        out = _summary_of(c, by_group)
        out.attrs["source"] = "kernels"
        return add_note(out, f"from the device's {len(c)} communication tasks (kernels), as "
                             "the profile has no communication operators (comm_ops): each "
                             "task's duration is its collective's time; group and transit / "
                             "wait / idle split not recorded")
    return _summary_of(c, by_group)


def _summary_of(c: pd.DataFrame, by_group: bool) -> pd.DataFrame:
    """:func:`comm_summary` of an eager frame of collectives (``name``, ``rank``,
    ``elapse_us``, optional ``group`` and time-split parts)."""
    c = c.assign(op_type=comm_op_type(c["name"]))
    keys = ["op_type", "group"] if by_group else ["op_type"]
    if not by_group:
        c = c.assign(group=pd.NA)
    parts = ["transit_us", "wait_us", "sync_us", "idle_us"]
    for p in parts:
        if p not in c.columns:
            c[p] = np.nan
    g = c.groupby([c[k].astype(TEXT).fillna("") for k in keys], sort=False)
    # one reduction per column: a third of the time of the same named aggregation, on
    # tables of a few rows where pandas' overhead is all the cost
    e = g["elapse_us"]
    out = pd.DataFrame({"count": e.size(), "total_us": e.sum(), "mean_us": e.mean(),
                        "max_us": e.max(), "ranks": g["rank"].nunique()})
    out[parts] = g[parts].sum(min_count=1)  # NA where a group has no such part
    out = out.reset_index()
    if not by_group:
        out["group"] = pd.NA
    for p in parts:
        out[p.replace("_us", "_share")] = out[p] / out["total_us"].where(out["total_us"] > 0)
    out["group"] = out["group"].replace("", pd.NA)
    out = out.sort_values("total_us", ascending=False, kind="mergesort")
    return typed(out, COMM_SUMMARY_COLUMNS).reset_index(drop=True)


def _moved(b: Any) -> Any:
    """Rows of ``comm_bandwidth`` that moved data over a link (not a LOCAL copy)."""
    return ((b["size_bytes"] > 0) & (b["transit_us"] > 0)
            & ~b["transport"].astype(TEXT).str.upper().eq("LOCAL").fillna(False))


def comm_bandwidth_summary(profile: Any, hardware: Any = None) -> pd.DataFrame:
    """Achieved bandwidth per transport against the hardware's nominal bandwidth.

    Parameters
    ----------
    profile : Profile or Cluster
    hardware : perfkit.Hardware, optional
        Gives the nominal bandwidth (``intra_node_bandwidth`` for HCCS/SIO/NVLink,
        ``inter_node_bandwidth`` for RDMA, ``pcie_bandwidth`` for PCIe when the hardware
        has one; bytes/s).

    Returns
    -------
    DataFrame
        Per ``transport``: ``ops``, ``size_bytes``, ``transit_us``, ``bandwidth_gbps``
        (= total bytes / total transit time, GB/s = 10^9 B/s), ``median_op_gbps`` and
        ``min_op_gbps`` over operators, ``nominal_gbps`` and ``efficiency`` (achieved /
        nominal; NA without ``hardware``) and ``nominal_of`` (what the nominal is the
        bandwidth of: ``"one of 7 HCCS links"`` in a full-mesh node, whose transit time
        is one link's, or ``"per device"``; :func:`~perfkit.analysis.link_nominal.
        transport_nominal`). Transports with no bytes and LOCAL copies are left out.
    """
    cols = {"transport": TEXT, "ops": "int64", "size_bytes": "float64",
            "transit_us": "float64", "bandwidth_gbps": "float64", "median_op_gbps": "float64",
            "min_op_gbps": "float64", "nominal_gbps": "float64", "efficiency": "float64",
            "nominal_of": TEXT}
    b = table(profile, "comm_bandwidth")
    if is_lazy(b):  # only the rows of operators that moved data leave the workers
        b = collect(b, ["transport", "size_bytes", "transit_us"], where=_moved) \
            if any_values(b, "size_bytes") else pd.DataFrame()
    if b.empty or not has_values(b, "size_bytes"):
        return empty_frame(cols, "no per-transport bandwidth (comm_bandwidth) in this profile")
    b = b[_moved(b)]
    if b.empty:
        return empty_frame(cols, "no transport moved data")
    b = b.assign(_op_gbps=b["size_bytes"] / b["transit_us"] / 1e3,
                 transport=b["transport"].astype(TEXT).str.upper())
    g = b.groupby("transport")
    out = pd.DataFrame({"ops": g["size_bytes"].size(), "size_bytes": g["size_bytes"].sum(),
                        "transit_us": g["transit_us"].sum(),
                        "median_op_gbps": g["_op_gbps"].median(),
                        "min_op_gbps": g["_op_gbps"].min()}).reset_index()
    out["bandwidth_gbps"] = out["size_bytes"] / out["transit_us"] / 1e3
    nominal = [transport_nominal(hardware, t) if hardware is not None else (np.nan, "")
               for t in out["transport"]]
    out["nominal_gbps"] = [gbps for gbps, _ in nominal]
    out["nominal_of"] = [of or pd.NA for _, of in nominal]
    out["efficiency"] = out["bandwidth_gbps"] / out["nominal_gbps"]
    out = out.sort_values("size_bytes", ascending=False)
    return typed(out, cols).reset_index(drop=True)


def slow_links(profile: Any, ratio: float = 0.7, z_threshold: float = 3.0,
               min_bytes: float = LATENCY_BOUND_BYTES) -> pd.DataFrame:
    """Links whose bandwidth is far below the other links of the same transport.

    Per (transport, source, destination) link (and, for group-local ranks, per group and
    recording rank: see below) the bandwidth is total bytes / total time over
    the matrix rows (the ``-total`` rows of Ascend's matrix when present, otherwise every
    row). A link is *slow* when its bandwidth is below ``ratio`` × the transport's median
    **and** its robust z-score (:func:`~perfkit.analysis._util.robust_z`) is below
    ``-z_threshold``. LOCAL (same-device) copies are left out, and so are links that moved
    less than ``min_bytes`` in total: their time is latency, not bandwidth.

    Returns
    -------
    DataFrame
        :data:`SLOW_LINK_COLUMNS`, slowest first. ``rank_space`` says, row by row, which
        ranks ``src_rank``/``dst_rank`` are: ``"global"`` where the matrix row has global
        ranks (recorded, or mapped by the loader from the group's rank list, e.g.
        ``parallel_group_info`` or ``communication_group.json``, or by the cluster from a
        group whose every member is loaded; see ``meta.groups``), ``"local"`` where only
        the ranks within the communication group are known. A link of local ranks is one
        per communication ``group`` (the matrix's ``op@group`` suffix) and per
        ``recorded_by``, the rank whose matrix file recorded it (the matrix row's
        ``rank``): local ranks 0 -> 1 of two groups are two different pairs of devices,
        two rows told apart by their group. ``group`` and ``recorded_by`` are NA for
        global ranks, which name a link on their own.
    """
    m = table(profile, "comm_matrix")
    if is_lazy(m):
        if not any_values(m, "size_bytes"):
            return empty_frame(SLOW_LINK_COLUMNS, "no link matrix (comm_matrix) in this "
                                                  "profile")
        return _slow_links_of(_lazy_links(m), ratio, z_threshold, min_bytes)
    if m.empty or not has_values(m, "size_bytes"):
        return empty_frame(SLOW_LINK_COLUMNS, "no link matrix (comm_matrix) in this profile")
    m = m[_link_rows(m)]
    name = m["name"].astype(TEXT).fillna("")
    if name.str.endswith("-total").any():
        m = m[name.str.endswith("-total")]
    if m.empty:
        return empty_frame(SLOW_LINK_COLUMNS, "no link moved data")
    g = m.pipe(_link_keys).groupby(_LINK_KEYS, dropna=False)[["size_bytes", "time_us"]].sum()
    g = g.reset_index()
    return _slow_links_of(g, ratio, z_threshold, min_bytes)


#: Keys of a link in :func:`slow_links` (see :func:`_link_keys`).
_LINK_KEYS = ["transport", "_local", "_grp", "_by", "_src", "_dst"]


def _link_keys(f: pd.DataFrame) -> pd.DataFrame:
    """``f`` with the keys of each row's link (:data:`_LINK_KEYS`).

    ``_src``/``_dst`` are the row's global ranks where it has both, else (``_local``) its
    group-local ranks, told apart by the group ``_grp`` and by ``_by``, the rank whose
    file recorded the row. Rows of global ranks get ``""`` and -1 there: no key is NA, so
    pandas of any version and Dask group them alike.
    """
    src = pd.to_numeric(f["src_rank"], errors="coerce")
    dst = pd.to_numeric(f["dst_rank"], errors="coerce")
    local = pd.Series(False, index=f.index)
    if "src_local" in f.columns:
        local = src.isna() | dst.isna()
        src = src.where(~local, pd.to_numeric(f["src_local"], errors="coerce"))
        dst = dst.where(~local, pd.to_numeric(f["dst_local"], errors="coerce"))
    grp = f["group"].astype(TEXT).fillna("") if "group" in f.columns else ""
    by = pd.to_numeric(f["rank"], errors="coerce").fillna(-1) if "rank" in f.columns else -1
    return f.assign(transport=f["transport"].astype(TEXT).str.upper(),
                    _local=local, _src=src, _dst=dst,
                    _grp=pd.Series(grp, index=f.index, dtype=TEXT).where(local, ""),
                    _by=pd.Series(by, index=f.index, dtype="int64").where(local, -1))


def _link_rows(m: Any) -> Any:
    """Matrix rows that moved data over a link (not LOCAL)."""
    return (~m["transport"].astype(TEXT).str.upper().isin(["LOCAL"]).fillna(False)
            & (m["time_us"] > 0) & (m["size_bytes"] > 0))


def _lazy_links(m: Any) -> pd.DataFrame:
    """Per-link byte and time sums of a lazy ``comm_matrix`` (the rule of :func:`slow_links`).

    One small reduction decides which rows count (``-total`` rows when there are any); one
    groupby-aggregation sums the links.
    """
    m = m[_link_rows(m)]
    total = m["name"].astype(TEXT).fillna("").str.endswith("-total")
    (has_total,) = compute_all(total.any())
    if bool(has_total):
        m = m[m["name"].astype(TEXT).fillna("").str.endswith("-total")]
    m = transform(m, _link_keys)
    g = aggregate(m, _LINK_KEYS, {"size_bytes": ["sum"], "time_us": ["sum"]}, dropna=False)
    return g.rename(columns={"size_bytes_sum": "size_bytes", "time_us_sum": "time_us"})


def _slow_links_of(g: pd.DataFrame, ratio: float, z_threshold: float,
                   min_bytes: float) -> pd.DataFrame:
    """Robust-z verdict on per-link sums (``keys``, ``size_bytes``, ``time_us``)."""
    if g.empty:
        return empty_frame(SLOW_LINK_COLUMNS, "no link moved data")
    g = g[g["size_bytes"] >= min_bytes].reset_index(drop=True)
    if g.empty:
        return empty_frame(SLOW_LINK_COLUMNS, f"no link moved {min_bytes:.0f} bytes or more")
    g["bandwidth_gbps"] = g["size_bytes"] / g["time_us"] / 1e3
    rz = robust_z(g["bandwidth_gbps"], g["transport"])
    g["median_gbps"] = rz["median"]
    g["z"] = rz["z"]
    g["ratio_to_median"] = g["bandwidth_gbps"] / g["median_gbps"]
    g["slow"] = (g["ratio_to_median"] < ratio) & (g["z"] < -z_threshold)
    local = g["_local"].astype(bool)
    g = g.rename(columns={"_src": "src_rank", "_dst": "dst_rank"})
    g["group"] = g["_grp"].astype(TEXT).where(local)
    g["recorded_by"] = pd.Series(g["_by"], dtype="Int64").where(local & (g["_by"] >= 0))
    g["rank_space"] = np.where(local, "local", "global")
    out = g.sort_values("ratio_to_median", kind="mergesort")[list(SLOW_LINK_COLUMNS)]
    out = out.astype(SLOW_LINK_COLUMNS).reset_index(drop=True)
    if local.all():
        add_note(out, "global ranks unknown (no parallel_group_info): links use local ranks "
                      "of their communication group")
    elif local.any():
        add_note(out, f"global ranks unknown for {int(local.sum())} of {len(local)} links "
                      "(their groups' rank lists are not in the profile): those use local "
                      "ranks of their communication group")
    return out


def comm_overlap(profile: Any) -> pd.DataFrame:
    """Communication/computation overlap per rank (mean over steps).

    Exposed communication is counted as on the Overview and in the advisor: without the
    pipeline bubble. The profiler's "Communication(Not Overlapped)" holds the pipeline
    receive wait (``bubble_us``, the time a later stage waits for the activations of an
    earlier one), which is not a transfer to speed up; ``comm_exposed_us`` leaves it out
    (:func:`~perfkit.analysis.steps.exposed_comm_us`) and ``bubble_us`` keeps it beside.

    Returns
    -------
    DataFrame
        ``rank``, ``steps``, ``step_wall_us`` (the step's wall: the device span and the
        wait before it, :func:`~perfkit.analysis.step_wall_us`, the step time the headline
        shows; named apart from :func:`~perfkit.analysis.step_breakdown`'s ``step_us``,
        the device span alone), ``communication_us``, ``overlapped_us``,
        ``comm_not_overlapped_us`` (the profiler's figure, pipeline receive wait included),
        ``bubble_us`` (that receive wait; NA where the source does not split it out),
        ``comm_exposed_us`` (not-overlapped less the bubble), ``overlap_share``
        (overlapped / communication: how much communication is hidden), ``exposed_share``
        (``comm_exposed_us`` / step time) and ``bubble_share`` (``bubble_us`` / step time).
        Empty, with a note, when the steps hold no communication time although the
        profile records collectives (host collectives of a GPU job: gloo with CUDA
        tensors; a legacy MindSpore step trace, split into phases rather than computing
        and communication), never zeros that would read as "fully hidden".
    """
    cols = {"rank": "Int64", "steps": "int64", "step_wall_us": "float64",
            "communication_us": "float64", "overlapped_us": "float64",
            "comm_not_overlapped_us": "float64", "bubble_us": "float64",
            "comm_exposed_us": "float64", "overlap_share": "float64",
            "exposed_share": "float64", "bubble_share": "float64"}
    s = step_breakdown(profile)
    if s.empty or not has_values(s, "comm_not_overlapped_us"):
        comm = table(profile, "comm_ops")
        n = len(comm) if not s.empty and not is_lazy(comm) else 0
        if n:  # the collectives are there; the steps say nothing of their overlap
            return empty_frame(cols, f"the steps of this profile are not split into "
                                     "computing and communication (the Overview shows the "
                                     "parts its step table gives), so how much of the time "
                                     f"of its {n:,} collectives runs under computation is "
                                     "not measured")
        return empty_frame(cols, "no communication time in the step breakdown")
    talking = (s["communication_us"].fillna(0) > 0) | (s["comm_not_overlapped_us"].fillna(0) > 0)
    if not talking.any():
        comm = table(profile, "comm_ops")
        n = len(comm) if not is_lazy(comm) else 0
        if n:  # a zero would read as "fully hidden": the device never saw them
            host = ("family" in comm.columns
                    and comm["family"].astype(TEXT).eq("gloo").any())
            where = "on host threads (gloo)" if host else "outside the device's streams"
            return empty_frame(cols, f"the {n} collectives of the profile ran {where}, so "
                                     "the device's step split holds no communication time "
                                     "and their overlap with computation is not measured")
    s, which = _measured_steps(s)
    s = s.assign(wall_us=step_wall_us(s), comm_exposed_us=exposed_comm_us(s))
    g = s.groupby("rank", dropna=False).agg(
        steps=("step_us", "size"), step_wall_us=("wall_us", "mean"),
        communication_us=("communication_us", "mean"), overlapped_us=("overlapped_us", "mean"),
        comm_not_overlapped_us=("comm_not_overlapped_us", "mean"),
        bubble_us=("bubble_us", "mean"),
        comm_exposed_us=("comm_exposed_us", "mean")).reset_index()
    g["overlap_share"] = g["overlapped_us"] / g["communication_us"].where(
        g["communication_us"] > 0)
    step = g["step_wall_us"].where(g["step_wall_us"] > 0)
    g["exposed_share"] = g["comm_exposed_us"] / step
    g["bubble_share"] = g["bubble_us"] / step
    out = typed(g, cols)
    if which is not None:
        out.attrs["measured_steps"] = which
    return out


def _measured_steps(s: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The rows of a step breakdown whose communication split is measured
    (``comm_not_overlapped_us`` known), and which steps those are in words, where they
    are some of a rank's steps only; the rank's rows as they are where none is measured.

    Raw CANN output that kept the timeline of iteration 1 of 10
    (``ascend/mindinsight-legacy``'s PROF folder, :mod:`perfkit.io.cann.tables`)
    splits step 1 only: its exposed communication is a share of step 1 (87.3 % = 41.53 /
    47.59 ms), not of the mean of the 10 steps (116 %), as the advisor counts it
    (:func:`perfkit.advisor.communication._step_basis`). The words are the Advice tab's
    (:meth:`perfkit.advisor.context.Context.basis_over`): ``"step 1 of 10, the only step
    with its communication measured"``, ``"steps 1–3 of 10, the steps with their
    communication measured"``; per rank where the ranks differ.
    """
    known = s["comm_not_overlapped_us"].notna()
    rank = s["rank"].astype("Int64")
    some = known.groupby(rank.fillna(-1).to_numpy(), sort=False).transform("any")
    keep = (known | ~some).to_numpy(bool)
    stepped = s["step"].notna().to_numpy(bool)
    which = None if keep.all() else recorded_steps_text(pd.DataFrame(
        {"rank": rank.array, "step": s["step"].astype("Int64").array,
         RECORDED: pd.array(keep, dtype="boolean")})[stepped])
    if which is None:
        return s, None
    m = re.fullmatch(r"(steps?) (\S+) of (\d+)", which)
    words = (f"the steps with their communication measured: {which}" if m is None else
             f"{which}, the only step with its communication measured" if m[1] == "step"
             else f"{which}, the steps with their communication measured")
    return s[keep], words
