"""Link efficiency per communication group, from a profile's transfers."""

from __future__ import annotations

from typing import Any

from ...calc.rates import GROUPS, Rates
from ...errors import PerfkitError
from .result import CalibratedJob
from .solve import _group_span

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
               terms: list[tuple[str, float, str]]) -> tuple[Rates, set[str]]:
    """Link efficiency per group: achieved bandwidth over the model's nominal one.

    Per operation, the bytes this rank sent and the transit time (the largest over the
    transports it used); per group, their sums; the nominal bandwidth is the one the
    model gives the group (intra-node while its ranks fit in a node, else inter-node).
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
    sent = sent.groupby(["rank", "name"], as_index=False)[["size_bytes", "transit_us"]].max()
    moved = sent.merge(pairs, on=["rank", "name"], how="inner")
    eff: dict[str, float] = {}
    changes: dict[str, Any] = {}
    reduce = ops[(ops["kind"] == "dp") & ops["name"].astype(str).str.contains(
        "reduce", case=False)]
    if len(reduce):
        per_step = reduce.groupby(["rank", "step"]).size().median() \
            if "step" in reduce.columns else reduce.groupby("rank").size().median()
        changes["dp_buckets"] = max(1, int(round(float(per_step))))
        terms.append(("dp_buckets", changes["dp_buckets"], "gradient reductions per step "
                      "in the data-parallel group"))
    dpn = job.hardware.devices_per_node
    for kind, part in moved.groupby("kind"):
        span = _group_span(job, str(kind))
        nominal = job.hardware.intra_node_bandwidth if span <= dpn \
            else job.hardware.inter_node_bandwidth
        achieved = part["size_bytes"].sum() / (part["transit_us"].sum() * 1e-6)
        eff[str(kind)] = min(1.0, float(achieved / nominal))
        terms.append((f"link_efficiency[{kind}]", eff[str(kind)],
                      f"{len(part)} transfers: {achieved / 1e9:.3g} GB/s of "
                      f"{nominal / 1e9:.3g} GB/s nominal"))
    return rates.replace(link_efficiency=eff, **changes), set(eff)
