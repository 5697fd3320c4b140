"""ipywidgets panels used by the notebooks and the Voila dashboard.

Panels wire controls to package functions; the numbers they show come from
:mod:`perfkit.calc` through the pure helpers of :mod:`perfkit.widgets.summary`, for the
job :func:`perfkit.infer_job` reads from the profile (:mod:`perfkit.widgets.job`).
"""

from .dashboard import TAB_TITLES, Dashboard, dashboard, tab_panel
from .explorers import Explorer, bandwidth_explorer, slow_ranks_explorer
from .history import HistoryPanel, history_panel
from .job import JobNote, JobPanel, evidence_html, job_panel, missing_note
from .metrics import MetricsPanel, metrics_panel, summary_html
from .overview import (
    LinearityExplorer,
    StepTimeExplorer,
    bundled_ir,
    bundled_profile,
    bundled_profiles,
    linearity_explorer,
    measured_step_s,
    profile_facts,
    recompute_tradeoff,
    step_time_explorer,
)
from .summary import job_figures, job_summary, memory_breakdown, metrics_summary

__all__ = ["Dashboard", "TAB_TITLES", "dashboard", "tab_panel", "Explorer", "JobPanel",
           "job_panel", "evidence_html", "job_summary", "job_figures", "JobNote",
           "missing_note",
           "bandwidth_explorer", "slow_ranks_explorer", "MetricsPanel", "memory_breakdown",
           "metrics_panel", "metrics_summary", "summary_html", "StepTimeExplorer",
           "bundled_ir", "bundled_profile", "bundled_profiles", "measured_step_s",
           "profile_facts", "step_time_explorer", "LinearityExplorer", "linearity_explorer",
           "recompute_tradeoff", "HistoryPanel", "history_panel"]
