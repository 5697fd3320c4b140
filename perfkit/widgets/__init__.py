"""ipywidgets panels used by the notebooks and the Voila dashboard.

Panels wire controls to package functions; the numbers they show come from
:mod:`perfkit.calc` through the pure helpers of :mod:`perfkit.widgets.summary`, for the
job :func:`perfkit.infer_job` reads from the profile (:mod:`perfkit.widgets.job`).

The panels are imported on first use (PEP 562 module ``__getattr__``): the pure helpers
(:mod:`perfkit.widgets.summary`, :mod:`perfkit.widgets.headline`) serve ``perfkit info``
without loading ipywidgets or Altair.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from .._lazy import LazyPackage, resolve

#: The submodule that defines each public name.
_HOME: dict[str, str | None] = {
    "TAB_TITLES": "dashboard",
    "Dashboard": "dashboard",
    "dashboard": "dashboard",
    "tab_panel": "dashboard",
    "JobDevice": "device",
    "job_device": "device",
    "MemoryLimit": "device",
    "memory_limit": "device",
    "Explorer": "explorers",
    "bandwidth_explorer": "explorers",
    "slow_ranks_explorer": "explorers",
    "HistoryPanel": "history",
    "history_panel": "history",
    "IRCase": "ir_case",
    "ir_case": "ir_case",
    "JobNote": "job",
    "JobPanel": "job",
    "evidence_html": "job",
    "job_panel": "job",
    "missing_note": "job",
    "skip_note": "job",
    "MetricsPanel": "metrics",
    "metrics_panel": "metrics",
    "summary_html": "metrics",
    "LinearityExplorer": "overview",
    "StepTimeExplorer": "overview",
    "bundled_ir": "overview",
    "bundled_profile": "overview",
    "bundled_profiles": "overview",
    "linearity_explorer": "overview",
    "measured_step_s": "overview",
    "profile_facts": "overview",
    "step_chart": "overview",
    "step_shares": "overview",
    "step_time_explorer": "overview",
    "job_figures": "summary",
    "job_summary": "summary",
    "memory_breakdown": "summary",
    "metrics_summary": "summary",
    "StartingStep": "what_if",
    "starting_step": "what_if",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    """Import the public ``name`` from its submodule on first use."""
    return resolve(__name__, _HOME, globals(), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


sys.modules[__name__].__class__ = LazyPackage


if TYPE_CHECKING:  # what the names are, for type checkers and editors
    from .dashboard import TAB_TITLES, Dashboard, dashboard, tab_panel  # noqa: F401
    from .device import JobDevice, MemoryLimit, job_device, memory_limit  # noqa: F401
    from .explorers import Explorer, bandwidth_explorer, slow_ranks_explorer  # noqa: F401
    from .history import HistoryPanel, history_panel  # noqa: F401
    from .ir_case import IRCase, ir_case  # noqa: F401
    from .job import (  # noqa: F401
        JobNote,
        JobPanel,
        evidence_html,
        job_panel,
        missing_note,
        skip_note,
    )
    from .metrics import MetricsPanel, metrics_panel, summary_html  # noqa: F401
    from .overview import (  # noqa: F401
        LinearityExplorer,
        StepTimeExplorer,
        bundled_ir,
        bundled_profile,
        bundled_profiles,
        linearity_explorer,
        measured_step_s,
        profile_facts,
        step_time_explorer,
    )
    from .summary import job_figures, job_summary, memory_breakdown, metrics_summary  # noqa: F401
    from .what_if import StartingStep, starting_step  # noqa: F401
