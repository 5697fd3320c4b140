"""Analyses over the canonical tables; each returns a pandas DataFrame.

Every analysis takes a Profile, a Cluster or a lazy cluster (``load(..., engine="dask")``);
on a lazy cluster it reduces the tables on the Dask workers and returns the same small
frame (see :mod:`perfkit.analysis._frames` and docs/dask.md).

The names are resolved on first use (PEP 562, as ``perfkit`` itself does):
``pk.analysis.step_breakdown`` imports :mod:`perfkit.analysis.steps` and what it needs,
not every analysis (their imports took 0.4 s of a cached reopen's 1.2 s).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from .._lazy import LazyPackage, lazy_attribute

#: Where each public name lives: the submodule (relative to this package) that defines it.
_HOME: dict[str, str | None] = {
    "data_loading": "cluster",
    "host_bound": "cluster",
    "slow_ranks": "cluster",
    "stage_balance": "cluster",
    "stage_imbalance_us": "cluster",
    "sync_points": "cluster",
    "SlowestRank": "slowest",
    "slowest_rank": "slowest",
    "slowest_rank_of": "slowest",
    "collective_bandwidth": "collective_bw",
    "collective_bandwidth_summary": "collective_bw",
    "comm_bandwidth_summary": "communication",
    "comm_overlap": "communication",
    "comm_summary": "communication",
    "slow_links": "communication",
    "compare_profiles": "compare",
    "compare_steps": "compare",
    "kernel_class": "compare",
    "attention_chains": "efficiency",
    "elementwise_chains": "efficiency",
    "infer_hardware": "efficiency",
    "operator_costs": "efficiency",
    "operator_efficiency": "efficiency",
    "unfused_savings": "efficiency",
    "host_collective_waits": "host_comm",
    "largest_allocations": "memory",
    "memory_peaks": "memory",
    "memory_timeline": "memory",
    "memory_vs_theory": "memory",
    "ai_cpu_operators": "operators",
    "operator_bound": "operators",
    "recompute_evidence": "operators",
    "tiny_kernels": "operators",
    "top_operators": "operators",
    "unfused_patterns": "operators",
    "rank_comm_summary": "rank_summary",
    "rank_step_breakdown": "rank_summary",
    "rank_step_summary": "rank_summary",
    "RecomputeCheck": "recompute",
    "match_pattern": "recompute",
    "recompute_check": "recompute",
    "recompute_scopes": "recompute",
    "derive_steps": "steps",
    "exposed_comm_us": "steps",
    "measured_step_s": "steps",
    "step_breakdown": "steps",
    "step_wall_us": "steps",
    "timeline": "timeline",
    "timeline_window": "timeline",
    "window_events": "timeline",
}

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
    "sync_points", "SlowestRank", "slowest_rank", "slowest_rank_of",
    # memory
    "memory_peaks", "memory_timeline", "largest_allocations", "memory_vs_theory",
    # per-rank summaries of a cluster
    "rank_step_breakdown", "rank_step_summary", "rank_comm_summary",
    # timeline of one step
    "timeline", "timeline_window", "window_events",
]


def __getattr__(name: str) -> Any:
    """Import the public ``name`` on first use and keep it as a module attribute.

    A submodule (``pk.analysis.efficiency``) is imported on first use too, as the eager
    package made every one an attribute.
    """
    return lazy_attribute(__name__, _HOME, globals(), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


sys.modules[__name__].__class__ = LazyPackage

if TYPE_CHECKING:  # what the names are, for type checkers and editors
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
    from .slowest import SlowestRank, slowest_rank, slowest_rank_of
    from .steps import derive_steps, exposed_comm_us, measured_step_s, step_breakdown, step_wall_us
    from .timeline import timeline, timeline_window, window_events
