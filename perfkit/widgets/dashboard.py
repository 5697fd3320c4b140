"""The Voila dashboard: a profile picker and one tab per step of the tuning cycle.

``dashboard(profile)`` returns an ipywidgets panel with

* a **profile picker**: the bundled samples, a path on the machine that runs the kernel,
  or an upload of a zipped profile (size limit, extracted safely into a temporary folder
  by :func:`perfkit.io.archive.extract_profile_archive`);
* **The job** (:class:`~perfkit.widgets.job.JobPanel`): the model, layout, hardware and
  batch read from the profile by :func:`perfkit.infer_job`, each value with its source;
  the user edits any field or loads a config there. Every figure that mixes theory with
  measurement (MFU, the memory theory, the recompute trade-off, the planner, the advice)
  is about that job; a tab whose job lacks something says what instead of computing with a
  default, and a figure that cannot be right carries the guard's warning
  (:mod:`perfkit.guards`). Opening another profile starts a new job: nothing of the
  previous profile survives;
* the tabs **Overview, Operators, Communication, Memory, Recompute, Planner, Advice**,
  each drawn from :mod:`perfkit.analysis`, :mod:`perfkit.plan`, :func:`perfkit.advise`
  and the chart builders of :mod:`perfkit.charts`; a tab is computed when it is first
  shown, so the first chart appears as soon as the overview is ready.

Every failure (a wrong path, a damaged file, an unexpected bug) becomes a message in the
page; the panel keeps working and keeps the last profile that opened. Nothing is
computed here: this module wires controls to package functions and formats their frames.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ipywidgets as W
import pandas as pd

from .. import analysis as A
from .. import charts as C
from ..advisor import advise
from ..errors import InvalidArgumentError, PerfkitError, ProfileError
from ..guards import check_memory, check_step
from ..io.archive import DEFAULT_MAX_UPLOAD_BYTES, extract_profile_archive
from ..io.detect import load
from ..io.ir import load_ir
from ..job import Job
from ..plan import search
from .job import JobPanel
from .metrics import _TABLE_STYLE, summary_html
from .overview import (
    IR_DIR,
    bundled_profile,
    bundled_profiles,
    measured_step_s,
    profile_facts,
    recompute_tradeoff,
)
from .summary import job_summary, memory_breakdown

__all__ = ["TAB_TITLES", "JOB_TABS", "DEFAULT_PROFILE", "Dashboard", "dashboard",
           "tab_panel", "open_profile", "describe_error", "frame_html"]

#: The tabs, in the order of the tuning cycle.
TAB_TITLES = ("Overview", "Operators", "Communication", "Memory", "Recompute", "Planner",
              "Advice")
#: The bundled sample opened when no profile is given.
DEFAULT_PROFILE = "simulated/llama2-13b-baseline-dp16"

_STYLE = _TABLE_STYLE + (
    "<style>"
    ".pk-frame table{border-collapse:collapse;font-size:12px}"
    ".pk-frame td,.pk-frame th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
    ".pk-frame td:first-child,.pk-frame th:first-child,.pk-left td,.pk-left th"
    "{text-align:left}"
    ".pk-frame caption{text-align:left;font-weight:600;padding:6px 0 2px 0}"
    ".pk-note{color:#555;font-size:12px;margin:4px 0}"
    ".pk-ok{color:#2d572c;background:#dff0d8;border:1px solid #d6e9c6;padding:6px;"
    "border-radius:4px}"
    ".pk-job-warn{color:#8a6d3b;background:#fcf8e3;border:1px solid #faebcc;padding:6px;"
    "border-radius:4px;margin:4px 0}"
    "</style>")


# --------------------------------------------------------------------------------------
# pure helpers
# --------------------------------------------------------------------------------------

def describe_error(exc: BaseException, doing: str) -> str:
    """A one-paragraph message for the page: what failed and why, never a traceback.

    Parameters
    ----------
    exc : BaseException
        What was raised.
    doing : str
        What the dashboard was doing, e.g. ``"opening /data/run1"``.

    Returns
    -------
    str
        Plain text. A :class:`~perfkit.errors.PerfkitError` carries its own explanation
        (it names the file and the problem); anything else is reported with its type as
        an unexpected error.
    """
    if isinstance(exc, PerfkitError):
        return f"Could not finish {doing}: {exc}"
    return (f"Unexpected error while {doing}: {type(exc).__name__}: {exc}. "
            "This is probably a perfkit bug; please report it with the profile's format.")


def frame_html(frame: pd.DataFrame, caption: str | None = None, max_rows: int = 20,
               float_format: str = "{:,.3f}", align: str = "right") -> str:
    """A small HTML table of ``frame`` (text escaped), or a note when it is empty.

    Parameters
    ----------
    frame : pandas.DataFrame
        What to show; the index is dropped.
    caption : str, optional
        Shown above the table.
    max_rows : int
        Rows kept (the first ones); a note says how many were left out.
    float_format : str
        Format of floating-point cells.
    align : {"right", "left"}
        Alignment of the cells after the first (numbers read best on the right).

    Returns
    -------
    str
    """
    head = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    if frame.empty:
        title = f"<b>{html.escape(caption)}</b>: " if caption else ""
        return f"<p class='pk-note'>{title}nothing in this profile.</p>"
    shown = frame.head(max_rows)
    table = shown.to_html(index=False, escape=True, na_rep="–", border=0,
                          float_format=float_format.format)
    table = re.sub(r"<table[^>]*>", lambda _m: f"<table>{head}", table, count=1)
    more = (f"<p class='pk-note'>{len(frame) - max_rows:,} more rows not shown.</p>"
            if len(frame) > max_rows else "")
    kind = "pk-frame pk-left" if align == "left" else "pk-frame"
    return f"<div class='{kind}'>{table}{more}</div>"


def _note(text: str) -> str:
    return f"<p class='pk-note'>{html.escape(text)}</p>"


def _error(text: str) -> str:
    return f"{_STYLE}<div class='pk-error'>{html.escape(text)}</div>"


def _svg(chart: Any) -> W.HTML:
    return W.HTML(C.chart_to_svg(chart))


def _html(markup: str) -> W.HTML:
    return W.HTML(_STYLE + markup)


def _no_job(job: Job | None, what: str) -> W.HTML:
    """The note a view shows instead of computing with a default."""
    if job is None:
        return _html(_note(f"No job, so no {what}: open a profile (the job is read from "
                           "it)."))
    gaps = job.missing()
    return _html(_note(f"No {what}: the job lacks " + "; ".join(gaps) + ". Set the missing "
                       "values in The job panel above, or load a config there."))


def _warning(text: str | None) -> list[W.HTML]:
    return [] if not text else [_html(f"<div class='pk-job-warn'>{html.escape(text)}</div>")]


def open_profile(source: str | os.PathLike[str]) -> Any:
    """Load a profile for the dashboard: a bundled sample's name or a path.

    Parameters
    ----------
    source : str or path
        A name of :func:`~perfkit.widgets.bundled_profiles` (``"simulated/slow-rank"``)
        or a folder or file on this machine (``~`` is expanded).

    Returns
    -------
    Profile or Cluster
        From :func:`perfkit.load`.

    Raises
    ------
    perfkit.errors.ProfileError
        The path does not exist or cannot be read as a profile.
    """
    text = str(source).strip()
    if not text:
        raise InvalidArgumentError("path", "is empty: type the folder of a profile", text)
    if text in bundled_profiles() or text.startswith("sample:"):
        return load(bundled_profile(text))
    path = Path(text).expanduser()
    if not path.exists():
        raise ProfileError(path, "no such file or folder on the machine that runs the "
                                 "dashboard")
    return load(path)


# --------------------------------------------------------------------------------------
# tabs
# --------------------------------------------------------------------------------------

class _Tab(W.VBox):
    """One tab: optional controls, a message line and a body rebuilt by :meth:`build`."""

    title = ""

    def __init__(self, controls: Sequence[W.Widget] = ()) -> None:
        self.profile: Any = None
        self.stale = True
        self.message = W.HTML()
        self.body = W.VBox()
        parts = [W.HBox(list(controls))] if controls else []
        super().__init__([*parts, self.message, self.body])

    def show(self, profile: Any) -> None:
        """Set the profile; the body is rebuilt by the next :meth:`refresh`."""
        self.profile, self.stale = profile, True

    def refresh(self) -> None:
        """Rebuild the body; a failure shows its message instead (the tab stays usable)."""
        self.stale = False
        if self.profile is None:
            self.message.value = _STYLE + _note("Open a profile above.")
            self.body.children = ()
            return
        try:
            children = self.build(self.profile)
        except Exception as exc:  # noqa: BLE001 - the page must show a message, not a traceback
            self.message.value = _error(describe_error(exc, f"the {self.title} tab"))
            self.body.children = ()
            return
        self.message.value = ""
        self.body.children = tuple(children)

    def build(self, profile: Any) -> list[W.Widget]:  # pragma: no cover - abstract
        raise NotImplementedError


class _JobTab(_Tab):
    """A tab whose figures depend on the job of :class:`~perfkit.widgets.job.JobPanel`."""

    def __init__(self, job: JobPanel, controls: Sequence[W.Widget] = ()) -> None:
        self.job = job
        super().__init__(controls)

    @property
    def current(self) -> Job | None:
        """The job the tab draws (the panel's)."""
        return self.job.job


class _OverviewTab(_JobTab):
    title = "Overview"

    def build(self, profile: Any) -> list[W.Widget]:
        steps = A.step_breakdown(profile)
        facts = _html(frame_html(profile_facts(profile), "What was opened", align="left"))
        if steps.empty:
            return [_html(_note("No training steps were found in this profile (no step "
                                "markers and no step trace), so there is no step "
                                "breakdown; the Operators and Memory tabs may still "
                                "have data.")), facts]
        step_s = measured_step_s(steps)
        columns = [c for c in ("rank", "step", "step_us", "computing_share",
                               "comm_not_overlapped_share", "free_share", "bubble_share")
                   if c in steps.columns]
        return [
            _html(f"<p><b>Measured step:</b> {step_s:,.3f} s (median over steps of the "
                  "slowest rank's step time)</p>"),
            *self._figures(),
            _svg(C.step_breakdown_chart(steps, title="Where the step time goes, per rank")),
            facts,
            _html(frame_html(steps[columns], "Steps (µs and shares of the step)"))]

    def _figures(self) -> list[W.Widget]:
        job = self.current
        if job is None or job.missing():
            return [_no_job(job, "throughput or MFU")]
        try:
            summary = job_summary(job)
        except PerfkitError as exc:
            return [_html(_error(describe_error(exc, "the job's figures")))]
        keys = ("tokens_per_s_per_device", "tokens_per_s_per_p", "mfu", "hfu")
        return [_html(f"<p><b>The job's figures</b> ({html.escape(job.describe())})</p>"
                      + summary_html(summary[summary["key"].isin(keys)]))]


class _OperatorsTab(_Tab):
    title = "Operators"

    def __init__(self) -> None:
        self.group = W.Dropdown(options=[("operator type", "type"), ("task name", "name")],
                                value="type", description="group by",
                                layout=W.Layout(width="260px"))
        self.top_n = W.IntSlider(value=15, min=5, max=40, step=1, description="top",
                                 continuous_update=False, layout=W.Layout(width="320px"))
        super().__init__([self.group, self.top_n])
        for widget in (self.group, self.top_n):
            widget.observe(lambda _change: self.refresh(), names="value")

    def build(self, profile: Any) -> list[W.Widget]:
        by, n = self.group.value, self.top_n.value
        top = A.top_operators(profile, by=by, n=n)
        if top.empty:
            return [_html(_note("This profile has no device operators (kernel_details / "
                                "op_summary or a device trace)."))]
        label = "Device time per operator type" if by == "type" else \
            "Device time per task name"
        columns = [c for c in (by, "category", "count", "total_us", "mean_us", "share",
                               "ai_cpu", "bound") if c in top.columns]
        out = [_svg(C.top_operators_chart(top, label=by, n=n, title=label)),
               _html(frame_html(top[columns], f"Top {n} by device time"))]
        out += _roofline(profile)
        out.append(_html(frame_html(A.unfused_patterns(profile),
                                    "Unfused chains a fused kernel could replace")))
        out.append(_html(frame_html(A.ai_cpu_operators(profile), "Operators on AI CPU")))
        return out


def _roofline(profile: Any) -> list[W.Widget]:
    """The roofline of the profiled operators (FLOPs and bytes from their shapes)."""
    eff = A.operator_efficiency(profile)
    if eff.empty or not (eff["achieved_tflops"] > 0).any():
        return [_html(_note("No roofline: " + "; ".join(eff.attrs.get("notes", [])[:1])))]
    hw, _why = A.infer_hardware(profile)
    chart = C.roofline_chart(eff, bandwidth_gbps=hw.memory_bandwidth / 1e9 if hw else None,
                             title="Roofline: one point per operator and shapes, sized by "
                                   "time" + (f" ({hw.name})" if hw else ""))
    notes = " ".join(eff.attrs.get("notes", []))
    return [_svg(chart), _html(_note(notes))] if notes else [_svg(chart)]


class _CommunicationTab(_Tab):
    title = "Communication"

    def build(self, profile: Any) -> list[W.Widget]:
        summary = A.comm_summary(profile)
        if summary.empty:
            return [_html(_note("This profile has no communication records (one rank, or "
                                "a profiler level without communication tables)."))]
        out = [_html(frame_html(summary, "Time per collective and group"))]
        ranks = A.slow_ranks(profile)
        if not ranks.empty:
            out.append(_svg(C.slow_ranks_chart(ranks, title="Ranks against their peers")))
        out.append(_html(frame_html(A.slow_links(profile), "Links, slowest first",
                                    max_rows=10)))
        out.append(_html(frame_html(A.comm_overlap(profile),
                                    "Communication hidden behind computation, per rank")))
        return out


class _MemoryTab(_JobTab):
    title = "Memory"

    def __init__(self, job: JobPanel) -> None:
        self.value = W.Dropdown(options=[("reserved", "reserved_bytes"),
                                         ("allocated", "allocated_bytes"),
                                         ("active", "active_bytes")],
                                value="reserved_bytes", description="series",
                                layout=W.Layout(width="240px"))
        super().__init__(job, [self.value])
        self.value.observe(lambda _change: self.refresh(), names="value")

    def build(self, profile: Any) -> list[W.Widget]:
        out = []
        timeline = A.memory_timeline(profile, max_points=200)
        column = self.value.value
        if column in timeline.columns and timeline[column].notna().any():
            out.append(_svg(C.memory_timeline_chart(timeline, value=column,
                                                    title="Memory over time")))
        else:
            out.append(_html(_note(f"No {column.removesuffix('_bytes')} memory samples in "
                                   "this profile (profile_memory was off?).")))
        out.append(_html(frame_html(A.memory_peaks(profile), "Peaks per rank and component")))
        job = self.current
        if job is None or job.model is None or job.hardware is None:
            out.append(_no_job(job, "memory theory") if job is None or job.model is None
                       else _html(_note("No memory theory: the job has no hardware ("
                                        + job.detail("hardware") + "); set it in The job "
                                        "panel.")))
            return out
        try:
            memory = memory_breakdown(job.model, job.hardware, job.parallel)
        except PerfkitError as exc:
            out.append(_html(_error(describe_error(exc, "the memory theory"))))
            return out
        guard = check_memory(float(memory["bytes"].sum()), job.peak_memory_bytes, job,
                             what="the theory (static + activations)")
        out.append(_html(_note(f"Theory for the job ({job.describe()}), most loaded device:")))
        out += _warning(guard.warning)
        out.append(_svg(C.memory_chart(memory, title=f"Memory per device: "
                                                     f"{job.model.name or 'the job'} on "
                                                     f"{job.hardware.name}")))
        return out


class _RecomputeTab(_JobTab):
    title = "Recompute"

    def __init__(self, job: JobPanel) -> None:
        default_ir = IR_DIR / "silu_mul.ir"
        self.ir_path = W.Text(value=str(default_ir) if default_ir.is_file() else "",
                              placeholder="path of a MindSpore IR dump (.ir or .ir.gz)",
                              description="IR dump", layout=W.Layout(width="620px"))
        self.patterns = W.Textarea(value="feed_forward\\.mul\nfeed_forward\\.w1\\.activation",
                                   description="select_recompute",
                                   layout=W.Layout(width="620px", height="70px"))
        self.check = W.Button(description="Check the IR", button_style="primary")
        self.ir_result = W.VBox()
        self.check.on_click(lambda _button: self.check_ir())
        super().__init__(job)
        self.children = (*self.children, W.HTML("<b>Do the select_recompute patterns hit "
                                                "the operators they should?</b>"),
                         self.ir_path, self.patterns, self.check, self.ir_result)

    def build(self, profile: Any) -> list[W.Widget]:
        evidence = A.recompute_evidence(profile)
        out = [_html(frame_html(evidence, "Recompute seen in the profile"))]
        job = self.current
        if job is None or job.model is None or job.hardware is None:
            out.append(_no_job(job, "recompute trade-off") if job is None or job.model is None
                       else _html(_note("No recompute trade-off: the job has no hardware ("
                                        + job.detail("hardware") + ").")))
            return out
        try:
            tradeoff = recompute_tradeoff(job.model, job.parallel, job.hardware)
        except PerfkitError as exc:
            out.append(_html(_error(describe_error(exc, "the recompute trade-off"))))
            return out
        mode = tradeoff[tradeoff["recompute"] == job.parallel.recompute]
        if len(mode) and job.step_time_s:
            guard = check_step(float(mode["step_s"].iloc[0]), job.step_time_s, job,
                               what=f"the estimate for recompute={job.parallel.recompute}")
            out += _warning(guard.warning)
        out.append(_svg(C.recompute_tradeoff_chart(
            tradeoff, memory_limit_GiB=job.hardware.memory_bytes / 2**30,
            title="Memory against time for each recompute mode")))
        out.append(_html(frame_html(tradeoff, "Memory against time for the job "
                                              "(perfkit.estimate_step, each mode on every "
                                              "layer)")))
        return out

    def check_ir(self) -> None:
        """Run :func:`perfkit.analysis.recompute_check` on the IR path and patterns."""
        patterns = [p.strip() for p in self.patterns.value.splitlines() if p.strip()]
        try:
            path = Path(self.ir_path.value.strip()).expanduser()
            if not path.is_file():
                raise ProfileError(path, "no such IR dump on the machine that runs the "
                                         "dashboard")
            result = A.recompute_check(load_ir(path), patterns)
        except Exception as exc:  # noqa: BLE001 - shown in the page
            self.ir_result.children = (_html(_error(describe_error(exc, "the IR check"))),)
            return
        self.ir_result.children = (
            _html(frame_html(result.patterns, "Patterns and what they matched")),
            _html(frame_html(result.diagnosis, "Operators the patterns miss or break")))


class _PlannerTab(_JobTab):
    title = "Planner"

    def __init__(self, job: JobPanel) -> None:
        self.devices = W.BoundedIntText(value=16, min=1, max=1 << 20,
                                        description="devices")
        self.batch = W.BoundedIntText(value=1024, min=1, max=1 << 24,
                                      description="global batch")
        self.run = W.Button(description="Search strategies", button_style="primary")
        self.result = W.VBox()
        self.run.on_click(lambda _button: self.search())
        super().__init__(job)
        self.children = (
            W.HTML("<b>The job's figures</b> (from The job panel above; edit it there)"),
            *self.children,
            W.HTML("<b>Every way to split it</b> (perfkit.plan.search on the job's model and "
                   "device; devices and batch start from the job)"),
            W.HBox([self.devices, self.batch, self.run]), self.result)

    def show(self, profile: Any) -> None:
        """Set the profile and start the search from the job's devices and batch."""
        super().show(profile)
        self.result.children = ()

    def build(self, profile: Any) -> list[W.Widget]:
        job = self.current
        if job is not None:
            if job.world_size:
                self.devices.value = int(job.world_size)
            if job.global_batch_size:
                self.batch.value = int(job.global_batch_size)
        if job is None or job.missing():
            return [_no_job(job, "figures")]
        summary = job_summary(job)
        return [_html(summary_html(summary))]

    def search(self) -> None:
        """Rank every layout of the job with :func:`perfkit.plan.search`."""
        job = self.current
        if job is None or job.model is None or job.hardware is None:
            self.result.children = (_no_job(job, "strategy search"),)
            return
        try:
            ranked = search(job.model, job.hardware, self.devices.value, self.batch.value,
                            include_rejected=True)
        except Exception as exc:  # noqa: BLE001 - shown in the page
            self.result.children = (_html(_error(describe_error(exc, "the strategy "
                                                                     "search"))),)
            return
        fits = ranked[ranked["fits"]]
        columns = [c for c in ("rank", "dp", "tp", "pp", "vpp", "micro_batch_size",
                               "num_micro_batches", "recompute", "step_s",
                               "tokens_per_second_per_device", "mfu", "memory_bytes")
                   if c in ranked.columns]
        self.result.children = (
            _svg(C.strategy_chart(ranked, title=f"{len(ranked):,} candidates, "
                                                f"{len(fits):,} fit")),
            _html(frame_html(fits[columns], "Fastest that fit", max_rows=10)))


class _AdviceTab(_JobTab):
    title = "Advice"

    def build(self, profile: Any) -> list[W.Widget]:
        job = self.current
        if job is not None:
            findings = C.findings_frame(advise(profile, model=job.model,
                                               parallel=job.parallel,
                                               hardware=job.hardware))
        else:
            findings = C.findings_frame(advise(profile))
        out = []
        if not findings.empty:
            out.append(_svg(C.findings_chart(findings, title="Findings, best first")))
        out.append(_html(C.findings_html(findings, n=None)))
        return out


#: Tabs whose figures depend on the job (redrawn when it changes).
JOB_TABS = ("Overview", "Memory", "Recompute", "Planner", "Advice")


def _new_tab(title: str, job: JobPanel) -> _Tab:
    if title not in TAB_TITLES:
        raise InvalidArgumentError("title", "must be one of " + ", ".join(TAB_TITLES), title)
    kinds: dict[str, Any] = {"Overview": _OverviewTab, "Memory": _MemoryTab,
                             "Recompute": _RecomputeTab, "Planner": _PlannerTab,
                             "Advice": _AdviceTab}
    if title in kinds:
        return kinds[title](job)
    return {"Operators": _OperatorsTab, "Communication": _CommunicationTab}[title]()


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
    panel = _new_tab(title, panel_job)
    panel.show(profile)
    panel.refresh()
    return panel


# --------------------------------------------------------------------------------------
# the dashboard
# --------------------------------------------------------------------------------------

class Dashboard(W.VBox):
    """The panel returned by :func:`dashboard`.

    Attributes
    ----------
    profile : Profile, Cluster or None
        The profile shown (the last one that opened).
    source : str or None
        Where it came from (bundled name, path, or uploaded file name).
    error : str or None
        The message of the last failure, if the last attempt failed.
    samples : ipywidgets.Dropdown
        Bundled samples; choosing one opens it.
    path : ipywidgets.Text
        A path on the kernel's machine; Enter or the *Open* button opens it.
    upload : ipywidgets.FileUpload
        A zipped profile (at most ``upload_limit_bytes``).
    status : ipywidgets.HTML
        What is open, or the error message.
    job : JobPanel
        "The job": what the profile says was trained, editable; every job tab follows it.
    tabs : ipywidgets.Tab
        One child per :data:`TAB_TITLES`; ``panels`` maps the title to the tab.
    """

    def __init__(self, upload_limit_bytes: int = DEFAULT_MAX_UPLOAD_BYTES) -> None:
        self.profile: Any = None
        self.source: str | None = None
        self.error: str | None = None
        self.upload_limit_bytes = int(upload_limit_bytes)
        self._upload_dir: Path | None = None
        wide = W.Layout(width="460px")
        self.samples = W.Dropdown(options=[("— choose —", "")] + [(n, n) for n in
                                                                  bundled_profiles()],
                                  value="", description="bundled sample", layout=wide,
                                  style={"description_width": "110px"})
        self.path = W.Text(placeholder="/path/to/your/profile (folder or file)",
                           description="or a path", layout=W.Layout(width="460px"),
                           style={"description_width": "110px"}, continuous_update=False)
        self.open_button = W.Button(description="Open", button_style="primary",
                                    layout=W.Layout(width="80px"))
        self.upload = W.FileUpload(accept=".zip", multiple=False,
                                   description="Upload .zip")
        self.status = W.HTML()
        self.job = JobPanel()
        self.panels: dict[str, _Tab] = {t: _new_tab(t, self.job) for t in TAB_TITLES}
        self.tabs = W.Tab(children=[self.panels[t] for t in TAB_TITLES], titles=TAB_TITLES)
        limit = f"{self.upload_limit_bytes / 2**20:,.0f} MiB"
        picker = W.VBox([
            W.HBox([self.samples]),
            W.HBox([self.path, self.open_button]),
            W.HBox([self.upload, W.HTML(f"<span class='pk-note'>a zipped profile folder, "
                                        f"at most {limit}</span>")]),
        ])
        super().__init__([W.HTML(_STYLE), picker, self.status, self.job, self.tabs])
        self.add_class("pk-dashboard")
        self.samples.observe(self._on_sample, names="value")
        self.path.observe(self._on_path, names="value")
        self.open_button.on_click(lambda _button: self.load_profile(self.path.value))
        self.upload.observe(self._on_upload, names="value")
        self.tabs.observe(lambda _change: self._refresh_selected(), names="selected_index")
        self.job.observe_job(self._on_job_change)
        self._refresh_selected()

    # ---- opening -----------------------------------------------------------------------
    def load_profile(self, source: str | os.PathLike[str], label: str | None = None) -> bool:
        """Open a bundled sample or a path and redraw the tabs.

        Parameters
        ----------
        source : str or path
            As for :func:`open_profile`.
        label : str, optional
            How to name it in the page (default: ``source``).

        Returns
        -------
        bool
            True when it opened; False when it failed (the message is in the page and
            the previous profile stays on show).
        """
        shown = label or str(source)
        self.status.value = _STYLE + _note(f"Opening {shown} …")
        try:
            profile = open_profile(source)
        except Exception as exc:  # noqa: BLE001 - shown in the page, never a traceback
            self._fail(describe_error(exc, f"opening {shown}"))
            return False
        self.profile, self.source, self.error = profile, shown, None
        ranks = getattr(profile, "ranks", None) or [profile.meta.rank]
        self.status.value = _STYLE + (
            f"<div class='pk-ok'>Opened <code>{html.escape(shown)}</code>: "
            f"{html.escape(str(profile.meta.source_format))}, {len(ranks)} rank(s).</div>")
        for panel in self.panels.values():
            panel.show(profile)
        # a new job from this profile: nothing of the previous one survives
        self.job.set_profile(profile)
        return True

    def _fail(self, message: str) -> None:
        """Show ``message`` and say which profile stays on show."""
        self.error = message
        kept = f" Still showing {self.source}." if self.profile is not None else ""
        self.status.value = _error(message + kept)

    def _on_path(self, change: dict[str, Any]) -> None:
        if change["new"].strip():
            self.load_profile(change["new"])

    def _on_job_change(self, _job: Job | None) -> None:
        for title in JOB_TABS:
            self.panels[title].stale = True
        self._refresh_selected()

    def _on_sample(self, change: dict[str, Any]) -> None:
        if change["new"]:
            self.load_profile(change["new"])

    def _on_upload(self, change: dict[str, Any]) -> None:
        files = change["new"]
        if not files:
            return
        item = files[0]
        name = str(item.get("name", "upload.zip"))
        try:
            size = int(item.get("size") or len(item["content"]))
            if size > self.upload_limit_bytes:
                raise ProfileError(name, f"is {size / 2**20:,.1f} MiB, above the upload "
                                         f"limit of {self.upload_limit_bytes / 2**20:,.0f} "
                                         "MiB; copy it to the server and open its path")
            folder = Path(tempfile.mkdtemp(prefix="perfkit-upload-"))
            try:
                root = extract_profile_archive(bytes(item["content"]), folder / "profile",
                                               name=name,
                                               max_compressed_bytes=self.upload_limit_bytes)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
        except Exception as exc:  # noqa: BLE001 - shown in the page
            self._fail(describe_error(exc, f"reading the upload {name}"))
            return
        finally:
            self.upload.value = ()
        if self.load_profile(root, label=name):
            _remove_folder(self._upload_dir)
            self._upload_dir = folder
            weakref.finalize(self, _remove_folder, folder)
        else:
            _remove_folder(folder)

    # ---- static fallback ---------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        """Add a static snapshot (status and overview) for frontends without widgets."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        overview = self.panels["Overview"]
        parts = [self.status.value, self.job.summary.value, self.job.warnings.value,
                 overview.message.value,
                 *(child.value for child in overview.body.children
                   if isinstance(child, W.HTML))]
        bundle["text/html"] = _STYLE + "".join(parts)
        return bundle

    # ---- tabs --------------------------------------------------------------------------
    def _refresh_selected(self) -> None:
        index = self.tabs.selected_index or 0
        panel = self.panels[TAB_TITLES[index]]
        if panel.stale:
            panel.refresh()

    def select(self, title: str) -> _Tab:
        """Show the tab ``title`` (computing it if needed) and return it."""
        if title not in TAB_TITLES:
            raise InvalidArgumentError("title", "must be one of " + ", ".join(TAB_TITLES),
                                       title)
        self.tabs.selected_index = TAB_TITLES.index(title)
        self._refresh_selected()
        return self.panels[title]


def _remove_folder(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def dashboard(profile: str | os.PathLike[str] | None = None, *,
              upload_limit_bytes: int = DEFAULT_MAX_UPLOAD_BYTES) -> Dashboard:
    """The dashboard panel: profile picker and the seven tabs.

    Parameters
    ----------
    profile : str or path, optional
        What to open first: a bundled sample's name (:func:`bundled_profiles`) or a path.
        None opens :data:`DEFAULT_PROFILE` when the bundled data is there.
    upload_limit_bytes : int
        Largest zipped profile accepted by the upload button (compressed size); larger
        profiles are opened by path.

    Returns
    -------
    Dashboard
        An ``ipywidgets.VBox``. A profile that cannot be opened shows its message in the
        page instead of raising.
    """
    board = Dashboard(upload_limit_bytes=upload_limit_bytes)
    if profile is None and DEFAULT_PROFILE in bundled_profiles():
        profile = DEFAULT_PROFILE
    if profile is not None:
        board.load_profile(profile)
    return board
