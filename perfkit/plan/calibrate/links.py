"""Link efficiency per communication group, and the gradient buckets per step, from a
profile's transfers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...analysis._util import table
from ...analysis.recorded import RECORDED, recorded_steps_text, recorded_tasks
from ...analysis.reduced_dtype import METRIC_ELEMENTS, is_metric
from ...calc.rates import GROUPS, Rates
from ...calc.topology import GROUP_COLLECTIVE, group_bandwidth, layout_group
from ...errors import PerfkitError
from ...format import counted, share_text
from .result import CalibratedJob

__all__: list[str] = []  # private parts of perfkit.plan.calibrate


def _group_kinds(meta: Any) -> dict[str, str]:
    out = {}
    for gid, info in (getattr(meta, "groups", None) or {}).items():
        name = str((info or {}).get("group_name", "")).lower()
        for g in GROUPS:
            if name == g or name.startswith(g + "_") or name.endswith("_" + g):
                out[str(gid)] = g
    return out


def _fit_links(source: Any, job: CalibratedJob, rates: Rates,
               terms: list[tuple[str, float, str]],
               notes: list[str] | None = None) -> tuple[Rates, set[str]]:
    """Link efficiency per group: achieved bandwidth over the model's nominal one.

    Per operation, the bytes this rank sent and the transit time (the largest over the
    transports it used); per group, their sums; the nominal bandwidth is the one the
    model gives the group at its shape (:func:`perfkit.calc.topology.group_bandwidth`:
    intra-node inside a node, the NICs' share with one rank per node, hierarchical in
    between).
    The gradient buckets per step (``dp_buckets``) are counted by :func:`_dp_buckets`;
    why they were not, where they were not, goes to ``notes``.
    """
    kinds = _group_kinds(source.meta)
    if not kinds:
        return rates, set()
    try:
        ops = source.comm_ops
        bw = source.comm_bandwidth
    except (PerfkitError, OSError, ValueError):
        return rates, set()
    if ops is None or bw is None or ops.empty or bw.empty:
        return rates, set()
    ops = ops.assign(kind=ops["group"].astype(str).map(kinds)).dropna(subset=["kind"])
    pairs = ops[["rank", "name", "kind"]].drop_duplicates(["rank", "name"])
    sent = bw[(bw["size_bytes"] > 0) & (bw["transit_us"] > 0)]
    sent = _mesh_walls(sent.merge(pairs, on=["rank", "name"], how="inner"), job)
    moved = sent.groupby(["rank", "name", "kind"], as_index=False)[
        ["size_bytes", "transit_us"]].max()
    eff: dict[str, float] = {}
    changes: dict[str, Any] = {}
    reduce = ops[(ops["kind"] == "dp") & ops["name"].astype(str).str.contains(
        "reduce", case=False)]
    if len(reduce):
        buckets, how = _dp_buckets(reduce, bw, table(source, "steps"))
        if buckets is not None:
            changes["dp_buckets"] = buckets
            terms.append(("dp_buckets", buckets, how))
        elif notes is not None:
            notes.append(how)
    node = job.hardware.topology
    alg, why = _algorithm(bw, pairs, job, rates.collective_algorithm)
    if alg != rates.collective_algorithm:
        changes["collective_algorithm"] = alg
        terms.append(("collective_algorithm", 1.0 if alg == "flat" else 0.0, why))
    for kind, part in moved.groupby("kind"):
        n, per_node = layout_group(job.parallel, str(kind), node.devices_per_node)
        nominal = group_bandwidth(GROUP_COLLECTIVE[str(kind)], n, per_node,
                                  node.bandwidth_among(per_node),
                                  node.nic_bandwidth_per_device, alg)
        achieved = part["size_bytes"].sum() / (part["transit_us"].sum() * 1e-6)
        eff[str(kind)] = min(1.0, float(achieved / nominal))
        terms.append((f"link_efficiency[{kind}]", eff[str(kind)],
                      f"{len(part)} transfers: {achieved / 1e9:.3g} GB/s of "
                      f"{nominal / 1e9:.3g} GB/s nominal"))
    return rates.replace(link_efficiency=eff, **changes), set(eff)


#: Transports of a full-mesh node's links (the SDMA copies HCCS moves its bytes with).
_MESH_TRANSPORTS = ("HCCS", "SDMA")


def _mesh_walls(rows: pd.DataFrame, job: CalibratedJob) -> pd.DataFrame:
    """``rows`` (bandwidth rows with the group ``kind``) with each full-mesh transport's
    transit time as the time the operation spent on its links, not their sum.

    Ascend's transit time of a transport sums the operation's copy tasks, one per link
    (``ascend/msinsight-pt-level1``: 14 SDMA tasks to 7 peers, 1.817 ms in all where they
    run side by side in about 0.27 ms). Inside a full-mesh node a group of ``r`` ranks
    sends over its ``r − 1`` links at once (:meth:`perfkit.specs.Node.bandwidth_among`),
    so the sum is ``r − 1`` times the time the model prices; a point-to-point send uses
    one link. Other transports and nodes are left as they are.
    """
    node = job.hardware.topology
    if rows.empty or not node.mesh or "transport" not in rows.columns:
        return rows
    links = {}
    for kind in rows["kind"].astype(str).unique():
        n, r = layout_group(job.parallel, kind, node.devices_per_node)
        links[kind] = 1.0 if kind == "pp" else max(min(r, node.devices_per_node) - 1.0, 1.0)
    mesh = rows["transport"].astype(str).str.upper().isin(_MESH_TRANSPORTS)
    per = rows["kind"].astype(str).map(links).astype(float)
    return rows.assign(transit_us=rows["transit_us"].where(~mesh, rows["transit_us"] / per))


#: Transports that cross nodes (the rest stay inside one).
_NETWORK = ("RDMA", "ROCE", "IB", "NET")
#: Share of a node-spanning group's bytes over the network above which it ran one flat ring.
FLAT_SHARE = 0.9


def _algorithm(bw: pd.DataFrame, pairs: pd.DataFrame, job: CalibratedJob,
               default: str) -> tuple[str, str]:
    """Which collective algorithm the profile's node-spanning groups ran, and why.

    A group with ``r > 1`` ranks in each of several nodes moves, hierarchically, only
    ``(N−1)/N · (M/r)`` of its ``(r−1)/r · M + (N−1)/N · (M/r)`` bytes per rank over the
    network (at most 1/2 for ``N = 2``, and less for larger ``r``); one flat ring sends all
    of them over its slowest (network) link. More than :data:`FLAT_SHARE` of the bytes
    over RDMA/RoCE/IB: ``"flat"``. No such group, or no transport column: ``default``.
    """
    if "transport" not in bw.columns:
        return default, ""
    node = job.hardware.topology
    rows = bw[bw["size_bytes"] > 0].merge(pairs, on=["rank", "name"], how="inner")
    for kind, part in rows.groupby("kind"):
        n, r = layout_group(job.parallel, str(kind), node.devices_per_node)
        if str(kind) == "pp" or not (1 < r < n):
            continue
        net = part["transport"].astype(str).str.upper().isin(_NETWORK)
        share = float(part.loc[net, "size_bytes"].sum() / part["size_bytes"].sum())
        alg = "flat" if share > FLAT_SHARE else "hierarchical"
        return alg, (f"the {kind} group ({int(n)} ranks, {int(r)} per node) sent "
                     f"{share_text(share, 0)} of its bytes over the network: a {alg} algorithm")
    return default, ""


def _dp_buckets(reduce: pd.DataFrame, bw: pd.DataFrame, steps: Any) -> tuple[int | None, str]:
    """The gradient reductions per step in the data-parallel group, and how they were
    counted (or, with None, why they were not).

    ``dp_buckets`` = the median over (rank, step) of the reductions (``reduce``: the dp
    group's ``comm_ops`` named like a reduction), leaving out:

    - the steps whose device tasks were not recorded in full (``steps.tasks_recorded``,
      :func:`~perfkit.analysis.recorded.recorded_tasks`): a fragment of a step holds a
      fraction of its reductions. None where no step is left.
    - a metric's all-reduce (a loss, a gradient norm:
      :func:`~perfkit.analysis.reduced_dtype.is_metric`, fewer than 1,024 elements).
      ``comm_ops`` carries no element count; ``comm_bandwidth`` carries the bytes each
      rank sent (the largest over its transports), and an element takes at least one
      byte, so fewer than 1,024 bytes sent is fewer than 1,024 elements. A reduction
      whose bytes the profile does not record (or records as 0) is counted.
    """
    if hasattr(steps, "compute"):  # a lazy (Dask) frame: one row per rank and step
        steps = steps.compute()
    which = recorded_steps_text(steps) if RECORDED in steps.columns else None
    if "step" in reduce.columns:
        kept = recorded_tasks(reduce, steps)[0]
        if kept.empty:
            return None, ("the gradient reductions per step in the data-parallel group "
                          "(dp_buckets) are not counted: no step's device tasks were "
                          f"recorded in full (device tasks recorded for {which}), and a "
                          "fragment of a step holds a fraction of its reductions")
        reduce = kept
    keys = [c for c in ("rank", "step", "name") if c in reduce.columns and c in bw.columns]
    sizes = bw.groupby(keys, as_index=False)["size_bytes"].max()
    sized = reduce.merge(sizes, on=keys, how="left")["size_bytes"].to_numpy(np.float64)
    metric = (sized > 0) & is_metric(np.nan_to_num(sized, nan=np.inf))
    grads = reduce[~metric]
    if grads.empty:
        return None, ("the gradient reductions per step in the data-parallel group "
                      f"(dp_buckets) are not counted: its {counted(len(reduce), 'reduction')} "
                      f"each send fewer than {METRIC_ELEMENTS:,} bytes, a metric's (a loss, "
                      "a gradient norm), not gradients")
    per_step = grads.groupby(["rank", "step"]).size() if "step" in grads.columns \
        else grads.groupby("rank").size()
    buckets = max(1, int(round(float(per_step.median()))))
    how = ("gradient reductions per step in the data-parallel group (the median over "
           f"{counted(len(per_step), '(rank, step) pair' if 'step' in grads.columns else 'rank')}"
           + (f", over {which}, whose device tasks were recorded in full" if which else "")
           + ")")
    if metric.any():
        how += (f"; {counted(int(metric.sum()), 'reduction')} sending fewer than "
                f"{METRIC_ELEMENTS:,} bytes (fewer than {METRIC_ELEMENTS:,} elements) left "
                "out, as a metric's (a loss, a gradient norm), not gradients")
    return buckets, how
