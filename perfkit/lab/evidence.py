"""What a student sees of their own data: the tables of the lab's views.

Each function reads the student's folder with perfkit (:func:`perfkit.load`, the
analyses, the IR check, the planner) and returns a plain DataFrame whose columns carry
their units, for :mod:`perfkit.lab.app` to show. The tables are the evidence a tuning
engineer would look at, never the answer itself: per-rank step parts, operators with
their shapes, memory peaks, link bandwidths, the recompute pattern counts, the planner's
candidates.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from .. import analysis as A
from ..analysis.recorded import recorded_profile
from ..io.engines.local import load
from ..io.ir.graph import load_ir
from ..specs import Hardware, ModelSpec
from .ir import IR_FILE

__all__ = ["Evidence", "VIEWS", "STEP_COLUMNS", "PLANNER_ROWS", "PLANNER_WORDS",
           "PLANNER_LINK_EFFICIENCY", "planner_compute_s"]

#: The views of a student app, in the order of the cycle, with their titles.
#: Layouts the planner's table shows (the step question's tolerance depends on them).
PLANNER_ROWS = 8

#: Every link's share of its bandwidth in the lab's planner (its second round number).
PLANNER_LINK_EFFICIENCY = 0.8

#: What the lab's planner is, on its page: the step model at two round numbers
#: (:meth:`perfkit.calc.rates.Rates.with_terms`), named as the what-if it is, apart from the
#: step model at its fitted rates that the dashboard ranks with.
PLANNER_WORDS = (
    "This planner is perfkit's step model at two round numbers: every matrix product at "
    "the one efficiency you give it, every link at 80 % of its bandwidth. The dashboard's "
    "Planner tab and perfkit.plan.search by default price each kernel by its size instead "
    "(calibrated on a profile where there is one), so they give the same layout a "
    "different step.")



def planner_compute_s(frame: pd.DataFrame) -> pd.Series:
    """The planner's compute per layout: the layers' compute, their recompute, the
    optimizer and the fixed overhead (``compute_s + recompute_s + optimizer_s +
    overhead_s`` of :func:`perfkit.plan.search`), so that compute, the bubble and the
    exposed communication add up to the step."""
    return frame["compute_s"] + frame["recompute_s"] + frame["optimizer_s"] \
        + frame["overhead_s"]


VIEWS = {
    "brief": "Your job and your tasks",
    "job_steps": "Your job: the step, rank by rank",
    "job_operators": "Your job: the costliest operators",
    "job_memory": "Your job: memory",
    "cluster_steps": "The cluster: the step, rank by rank",
    "cluster_comm": "The cluster: collectives and links",
    "ir": "Your IR dump: recompute patterns",
    "calculator": "Calculator: metrics and memory of a layout",
    "planner": "The planner",
}
GIB = 2**30
#: The caption's key to the step tables' derived columns (all in ms).
STEP_COLUMNS = (" (ms): step_ms = preparing + device span, the Overview's step time; "
                "device_span_ms = computing + comm not overlapped + free; exposed_comm_ms "
                "= comm not overlapped − bubble")


class Evidence:
    """The tables of one student's views (each computed once, on first use).

    Parameters
    ----------
    folder : path
        The student's folder.
    sheet : dict
        Their ``lab.json`` (:func:`perfkit.lab.key.read_sheet`).
    """

    def __init__(self, folder: str | os.PathLike[str], sheet: dict[str, Any]) -> None:
        self.folder = Path(folder)
        self.sheet = sheet
        self.brief = sheet["brief"]

    def _load(self, name: str) -> Any:
        return load(self.folder / "profiles" / name, progress=False)

    @cached_property
    def job(self) -> Any:
        """The job's profile."""
        return self._load("job")

    @cached_property
    def cluster(self) -> Any:
        """The cluster's profile."""
        return self._load("cluster")

    @staticmethod
    def _steps(profile: Any) -> pd.DataFrame:
        """Per rank and step, in ms: ``step_ms``, the step time of the Overview
        (:func:`perfkit.analysis.step_wall_us`: Preparing + the device span);
        ``device_span_ms`` (Computing + Communication(Not Overlapped) + Free, the
        breakdown's ``step_us``); the parts of step_trace_time.csv; ``exposed_comm_ms``
        (:func:`perfkit.analysis.exposed_comm_us`: Communication(Not Overlapped) less the
        Bubble, never below 0). Every figure the step questions are computed from (the
        step, exposed communication) is a column: a student needs no other reading."""
        b = A.step_breakdown(profile)
        out = pd.DataFrame({"rank": b["rank"], "step": b["step"]})
        if "step_us" in b.columns:
            out["step_us"] = A.step_wall_us(b)
            out["device_span_us"] = b["step_us"]
        for c in ("computing_us", "comm_not_overlapped_us", "bubble_us"):
            if c in b.columns:
                out[c] = b[c]
        if "comm_not_overlapped_us" in b.columns:
            out["exposed_comm_us"] = A.exposed_comm_us(b)
        for c in ("overlapped_us", "free_us", "preparing_us"):
            if c in b.columns:
                out[c] = b[c]
        for c in list(out.columns):
            if c.endswith("_us"):
                out[c.replace("_us", "_ms")] = out.pop(c).astype("float64") / 1e3
        return out

    def job_steps(self) -> pd.DataFrame:
        """Per rank and step of the job, in ms: the step (the Overview's: preparing +
        device span), the device span, computing, communication not overlapped, bubble,
        exposed communication (not overlapped − bubble), overlapped communication, free,
        preparing (see :meth:`_steps`)."""
        return self._steps(self.job)

    def job_breakdown(self) -> pd.DataFrame:
        """:func:`perfkit.analysis.step_breakdown` of the job (for the chart)."""
        return A.step_breakdown(self.job)

    def cluster_breakdown(self) -> pd.DataFrame:
        """:func:`perfkit.analysis.step_breakdown` of the cluster (for the chart)."""
        return A.step_breakdown(self.cluster)

    def job_operators(self, n: int = 15) -> pd.DataFrame:
        """The job's ``n`` costliest operators (kernel, input shapes, calls,
        total and mean time, share of device time), from
        :func:`perfkit.analysis.operator_efficiency` of the steps whose device tasks were
        recorded in full (:func:`~perfkit.analysis.recorded.recorded_profile`, as the
        Operators tab and :attr:`perfkit.lab.data.StudentData.operators` read them)."""
        hw = Hardware.preset(self.brief["hardware"]["name"])
        ops = A.operator_efficiency(recorded_profile(self.job), hardware=hw, by="name")
        ops = ops.sort_values("total_us", ascending=False, kind="stable")
        total = float(ops["total_us"].sum())
        out = pd.DataFrame({
            "operator": ops["name"].astype(str),
            "input_shapes": ops["input_shapes"].astype(str),
            "calls": ops["count"].astype(int), "total_ms": ops["total_us"] / 1e3,
            "mean_us": ops["mean_us"], "share": ops["total_us"] / total})
        return out.head(n).reset_index(drop=True)

    def operator_counts(self) -> pd.DataFrame:
        """Calls and device time per operator type (:func:`perfkit.analysis.top_operators`),
        with calls per layer and micro-batch on the busiest rank."""
        top = A.top_operators(self.job)
        return pd.DataFrame({"type": top["key"].astype(str), "calls": top["count"],
                             "total_ms": top["total_us"] / 1e3, "share": top["share"]})

    def job_memory(self) -> pd.DataFrame:
        """Peak memory per rank and component (:func:`perfkit.analysis.memory_peaks`), in
        GiB and as a share of device memory."""
        peaks = A.memory_peaks(self.job)
        capacity = float(self.brief["hardware"]["memory_gib"])
        out = pd.DataFrame({
            "rank": peaks["rank"], "component": peaks["component"].astype(str),
            "peak_allocated_bytes": peaks["peak_allocated_bytes"],
            "peak_reserved_bytes": peaks["peak_reserved_bytes"]})
        out["reserved_share"] = out["peak_reserved_bytes"] / (capacity * GIB)
        return out.sort_values(["rank", "component"]).reset_index(drop=True)

    def cluster_steps(self) -> pd.DataFrame:
        """Per rank of the cluster: the step's parts (ms)."""
        return self._steps(self.cluster)

    def cluster_collectives(self) -> pd.DataFrame:
        """The cluster's collectives (:func:`perfkit.analysis.comm_summary`): count, total,
        and the split of their time into transit, wait and idle."""
        cs = A.comm_summary(self.cluster)
        return pd.DataFrame({"collective": cs["op_type"].astype(str), "calls": cs["count"],
                             "total_ms": cs["total_us"] / 1e3,
                             "transit_ms": cs["transit_us"] / 1e3,
                             "wait_ms": cs["wait_us"] / 1e3, "idle_ms": cs["idle_us"] / 1e3,
                             "transit_share": cs["transit_share"],
                             "wait_share": cs["wait_share"]})

    def cluster_per_rank(self) -> pd.DataFrame:
        """Per rank of the cluster: the collectives' elapsed, transit and wait time (ms)."""
        co = self.cluster.comm_ops
        g = co.groupby("rank")[["elapse_us", "transit_us", "wait_us"]].sum().reset_index()
        return pd.DataFrame({"rank": g["rank"], "elapse_ms": g["elapse_us"] / 1e3,
                             "transit_ms": g["transit_us"] / 1e3,
                             "wait_ms": g["wait_us"] / 1e3})

    def cluster_links(self) -> pd.DataFrame:
        """Bandwidth of each link of the cluster (source, destination, GB/s), from the
        communication matrix, in the order of the ranks."""
        links = A.slow_links(self.cluster)
        out = pd.DataFrame({"src_rank": links["src_rank"], "dst_rank": links["dst_rank"],
                            "transport": links["transport"].astype(str),
                            "size_bytes": links["size_bytes"],
                            "time_ms": links["time_us"] / 1e3,
                            "bandwidth_gbps": links["bandwidth_gbps"]})
        return out.sort_values(["src_rank", "dst_rank"]).reset_index(drop=True)

    def recompute_patterns(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The IR check (:func:`perfkit.analysis.recompute_check`): per configured pattern
        (matched, marked, duplicated) and per decoder layer."""
        check = A.recompute_check(load_ir(self.folder / IR_FILE),
                                  self.brief["recompute"]["config"])
        pats = check.patterns[["pattern", "matched", "marked", "duplicated",
                               "marked_not_duplicated", "matched_not_marked"]]
        layers = check.layers[["layer", "forward_ops", "marked_ops", "duplicated_ops",
                               "observed", "configured"]]
        return pats, layers

    def planner(self, efficiency: float, n: int = PLANNER_ROWS) -> pd.DataFrame:
        """The ``n`` best layouts :func:`perfkit.plan.search` finds for the planning job with
        every matrix product at ``efficiency`` and every link at
        :data:`PLANNER_LINK_EFFICIENCY` (what the lab teaches; the dashboard's Planner ranks
        at the step model's fitted rates)."""
        from ..plan import SearchSpace, search

        job = self.brief["planner"]
        plan = search(ModelSpec.preset(job["preset"]), Hardware.preset(job["hardware"]),
                      job["num_devices"], job["global_batch_size"],
                      space=SearchSpace(**job["space"]), efficiency=efficiency,
                      comm_efficiency=PLANNER_LINK_EFFICIENCY)
        out = plan.head(n)
        return pd.DataFrame({
            "rank": out["rank"], "dp": out["dp"], "tp": out["tp"], "pp": out["pp"],
            "recompute": out["recompute"].astype(str),
            "micro_batches": out["num_micro_batches"], "step_s": out["step_s"],
            "compute_s": planner_compute_s(out), "bubble_s": out["bubble_s"],
            "exposed_comm_s": out["exposed_comm_s"],
            "memory_bytes": out["memory_bytes"]}).reset_index(drop=True)
