"""Analyses over the canonical tables; each returns a pandas DataFrame.

Every analysis takes a Profile, a Cluster or a lazy cluster (``load(..., engine="dask")``);
on a lazy cluster it reduces the tables on the Dask workers and returns the same small
frame (see :mod:`perfkit.analysis._frames` and docs/dask.md).
"""

from .cluster import (
    data_loading,
    host_bound,
    slow_ranks,
    stage_balance,
    stage_imbalance_us,
    sync_points,
)
from .collective_bw import collective_bandwidth, collective_bandwidth_summary
from .communication import comm_bandwidth_summary, comm_overlap, comm_summary, slow_links
from .compare import compare_profiles, compare_steps, kernel_class
from .efficiency import (
    attention_chains,
    elementwise_chains,
    infer_hardware,
    operator_costs,
    operator_efficiency,
    unfused_savings,
)
from .host_comm import host_collective_waits
from .memory import largest_allocations, memory_peaks, memory_timeline, memory_vs_theory
from .operators import (
    ai_cpu_operators,
    operator_bound,
    recompute_evidence,
    tiny_kernels,
    top_operators,
    unfused_patterns,
)
from .rank_summary import rank_comm_summary, rank_step_breakdown, rank_step_summary
from .recompute import RecomputeCheck, match_pattern, recompute_check, recompute_scopes
from .steps import derive_steps, exposed_comm_us, measured_step_s, step_breakdown, step_wall_us
from .timeline import timeline, timeline_window, window_events

__all__ = [
    "RecomputeCheck", "match_pattern", "recompute_check", "recompute_scopes",
    # steps
    "step_breakdown", "derive_steps", "measured_step_s", "step_wall_us", "exposed_comm_us",
    # operators
    "top_operators", "operator_bound", "ai_cpu_operators", "tiny_kernels", "unfused_patterns",
    "recompute_evidence",
    # operator efficiency from shapes (roofline)
    "operator_efficiency", "operator_costs", "infer_hardware", "elementwise_chains",
    "attention_chains", "unfused_savings",
    # compare
    "compare_profiles", "compare_steps", "kernel_class",
    # communication
    "comm_summary", "comm_bandwidth_summary", "collective_bandwidth",
    "collective_bandwidth_summary", "slow_links", "comm_overlap",
    "host_collective_waits",
    # cluster
    "slow_ranks", "stage_balance", "stage_imbalance_us", "data_loading", "host_bound",
    "sync_points",
    # memory
    "memory_peaks", "memory_timeline", "largest_allocations", "memory_vs_theory",
    # per-rank summaries of a cluster
    "rank_step_breakdown", "rank_step_summary", "rank_comm_summary",
    # timeline of one step
    "timeline", "timeline_window", "window_events",
]
