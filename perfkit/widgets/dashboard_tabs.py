"""The dashboard's tabs: their titles, the ones that follow the job, and one tab on its own
(:func:`tab_panel`, for the notebooks)."""

from __future__ import annotations

import os
from typing import Any

import ipywidgets as W

from ..errors import InvalidArgumentError
from ..job import Job
from .dashboard_open import open_profile
from .job import JobPanel
from .tabs import TAB_CLASSES, Context, Tab

__all__ = ["TAB_TITLES", "JOB_TABS", "new_tab", "tab_panel"]

#: The tabs, in the order of the tuning cycle, then the journal of the cycle (a new tab: a
#: module of :mod:`perfkit.widgets.tabs` registered in its ``TAB_CLASSES``, and its title
#: here).
TAB_TITLES = ("Overview", "Timeline", "Operators", "Communication", "Memory", "Recompute",
              "Planner", "Advice", "History")
#: Tabs whose figures depend on the job (redrawn when it changes): the Operators tab prices
#: the element-wise chains on the job's hardware (:mod:`perfkit.widgets.operator_chains`); the
#: Communication tab splits the ranks into the job's pipeline stages.
JOB_TABS = ("Overview", "Operators", "Communication", "Memory", "Recompute", "Planner",
            "Advice")


def new_tab(title: str, ctx: Context) -> Tab:
    if title not in TAB_CLASSES:
        raise InvalidArgumentError("title", "must be one of " + ", ".join(TAB_CLASSES), title)
    return TAB_CLASSES[title](ctx)


def tab_panel(title: str, profile: Any, job: Job | JobPanel | None = None) -> W.VBox:
    """One tab of the dashboard on its own, computed for ``profile`` (for the notebooks).

    Parameters
    ----------
    title : str
        One of :data:`TAB_TITLES`.
    profile : Profile, Cluster, str or path
        A loaded profile, a bundled sample's name or a path (see :func:`open_profile`).
    job : perfkit.Job or JobPanel, optional
        The job the Overview, Memory, Recompute, Planner and Advice tabs use (default: the
        one :func:`perfkit.infer_job` reads from ``profile``).

    Returns
    -------
    ipywidgets.VBox
        The tab with its controls; a failure shows its message inside the tab.
    """
    if title not in TAB_TITLES:
        raise InvalidArgumentError("title", "must be one of " + ", ".join(TAB_TITLES), title)
    if isinstance(profile, (str, os.PathLike)):
        profile = open_profile(profile)
    if isinstance(job, JobPanel):
        panel_job = job
    else:
        panel_job = JobPanel()
        if isinstance(job, Job):
            panel_job.set_job(job)
        else:
            panel_job.set_profile(profile)
    panel = new_tab(title, Context(panel_job, tabs=TAB_TITLES))
    panel.show(profile)
    panel.refresh()
    return panel
