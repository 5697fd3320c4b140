"""The dashboard's tabs: each wires controls to package functions and formats their frames.

A tab computes when it is first shown (a spinner says so meanwhile, never a blank tab) and
again when its controls or the job change. Charts are live widgets (:mod:`.render`): a
tooltip on every mark, zoom and pan where there are many points, and a click on a bar (a
rank, an operator, a finding) filters the table next to it. Tables aggregate over ranks by
default (median, min, max and the worst rank, :func:`perfkit.tables.over_ranks`) with a
picker to show one rank, and say in their headers what each figure is per.

Nothing is computed here: the figures come from :mod:`perfkit.analysis`,
:func:`perfkit.advise`, :mod:`perfkit.plan` and the helpers of this package.
"""

from __future__ import annotations

import base64
import html
import shutil
import tempfile
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ipywidgets as W
import pandas as pd

from .. import analysis as A
from .. import charts as C
from ..advisor import advise
from ..errors import PerfkitError, ProfileError
from ..export import export_trace
from ..format import bytes_text, share_text, time_text
from ..guards import check_memory, check_step
from ..io.ir import load_ir
from ..job import Job
from ..plan import search
from ..tables import over_ranks, shorten
from .headline import SPLIT_PARTS, finding_tab, headline, headline_html, with_exposed_comm
from .job import JobPanel
from .markup import STYLE, describe_error, error, frame_html, note, warning_html
from .memory_view import (
    FAMILIES,
    default_value,
    families_present,
    memory_series,
    peaks_by_component,
)
from .metrics import summary_html
from .overview import IR_DIR, profile_facts, recompute_tradeoff
from .render import chart_widget, close_widgets, spinner_html
from .summary import job_summary, memory_breakdown

__all__ = ["Context", "Tab", "JobTab", "OverviewTab", "TimelineTab", "OperatorsTab",
           "CommunicationTab",
           "MemoryTab", "RecomputeTab", "PlannerTab", "AdviceTab", "TAB_CLASSES",
           "ALL_RANKS", "READY_CLASS"]

#: The value of a rank picker that shows every rank (aggregated).
ALL_RANKS = -1
#: CSS class of a tab once its body is drawn (the browser tests and the screenshots wait
#: for it).
READY_CLASS = "pk-ready"


def _html(markup: str) -> W.HTML:
    return W.HTML(STYLE + markup)


def _ranks_of(profile: Any) -> list[int]:
    ranks = getattr(profile, "ranks", None)
    if ranks:
        return [int(r) for r in ranks]
    return [int(profile.meta.rank)] if profile.meta.rank is not None else [0]


def _sentence(text: str) -> str:
    """``text`` as a sentence: capital first letter, full stop at the end."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?", ")")) else text + "."


def _one_rank(profile: Any, rank: int) -> Any:
    """The Profile of ``rank`` (a Cluster's member, or the profile itself)."""
    return profile[rank] if getattr(profile, "ranks", None) else profile


def _rank_picker(description: str = "ranks") -> W.Dropdown:
    return W.Dropdown(options=[("all ranks (median, min, max)", ALL_RANKS)], value=ALL_RANKS,
                      description=description, style={"description_width": "initial"},
                      layout=W.Layout(width="300px"))


def _set_ranks(picker: W.Dropdown, ranks: Sequence[int]) -> None:
    picker.options = [("all ranks (median, min, max)", ALL_RANKS)] + [
        (f"rank {r}", r) for r in ranks]
    picker.value = ALL_RANKS


class Context:
    """What the tabs of one dashboard share: the job panel, the way to open a tab, and the
    advisor's findings for the profile and job on show (computed once for both the
    Overview and the Advice tab).

    Attributes
    ----------
    job : JobPanel
    open_tab : callable or None
        ``open_tab(title)`` shows that tab (None outside a dashboard).
    tabs : tuple of str
        The titles of the dashboard's tabs.
    """

    def __init__(self, job: JobPanel, open_tab: Callable[[str], Any] | None = None,
                 tabs: tuple[str, ...] = ()) -> None:
        self.job = job
        self.open_tab = open_tab
        self.tabs = tabs
        self._findings: tuple[Any, Any, list[Any]] | None = None

    def findings(self, profile: Any) -> list[Any]:
        """:func:`perfkit.advise` for ``profile`` and the job on show (cached)."""
        job = self.job.job
        if self._findings is not None and self._findings[0] is profile and \
                self._findings[1] is job:
            return self._findings[2]
        if job is not None:
            found = advise(profile, model=job.model, parallel=job.parallel,
                           hardware=job.hardware)
        else:
            found = advise(profile)
        self._findings = (profile, job, found)
        return found


class Tab(W.VBox):
    """One tab: optional controls, a message line (spinner, error) and a body rebuilt by
    :meth:`build`.

    Attributes
    ----------
    charts : list of altair.JupyterChart
        The chart widgets of the last build (tests and the static snapshot read them).
    """

    title = ""

    def __init__(self, ctx: Context, controls: Sequence[W.Widget] = ()) -> None:
        self.ctx = ctx
        self.profile: Any = None
        self.stale = True
        self.charts: list[Any] = []
        #: ids of widgets shown in the body that outlive a redraw (never closed)
        self.keep: set[int] = set()
        self.message = W.HTML()
        self.body = W.VBox()
        parts = [W.HBox(list(controls), layout=W.Layout(flex_flow="row wrap"))] \
            if controls else []
        super().__init__([*parts, self.message, self.body])
        self.add_class("pk-tab")

    def show(self, profile: Any) -> None:
        """Set the profile; the body is rebuilt by the next :meth:`refresh`."""
        self.profile, self.stale = profile, True
        self.remove_class(READY_CLASS)

    def refresh(self) -> None:
        """Rebuild the body, with a spinner meanwhile; a failure shows its message instead
        (the tab stays usable). The tab carries :data:`READY_CLASS` once drawn."""
        self.stale = False
        self.remove_class(READY_CLASS)
        close_widgets(self.body.children, self.keep)
        self.body.children = ()
        self.charts = []
        if self.profile is None:
            self.message.value = STYLE + note("Open a profile above.")
            self.add_class(READY_CLASS)
            return
        self.message.value = spinner_html(f"Computing the {self.title} tab …")
        try:
            children = self.build(self.profile)
        except Exception as exc:  # noqa: BLE001 - the page must show a message, not a traceback
            self.message.value = error(describe_error(exc, f"the {self.title} tab"))
            self.add_class(READY_CLASS)
            return
        self.message.value = ""
        self.body.children = tuple(children)
        self.add_class(READY_CLASS)

    def chart(self, chart: Any, on_select: Callable[[list[dict[str, Any]]], None] | None
              = None, renderer: str = "svg") -> Any:
        """A chart widget of this tab (:func:`.render.chart_widget`)."""
        widget = chart_widget(chart, on_select, renderer=renderer)
        self.charts.append(widget)
        return widget

    def build(self, profile: Any) -> list[W.Widget]:  # pragma: no cover - abstract
        raise NotImplementedError

    def static_html(self) -> str:
        """The tab's HTML parts (for frontends without widgets)."""
        return self.message.value + "".join(
            c.value for c in self.body.children if isinstance(c, W.HTML))


class JobTab(Tab):
    """A tab whose figures depend on the job of :class:`~perfkit.widgets.job.JobPanel`."""

    @property
    def current(self) -> Job | None:
        """The job the tab draws (the panel's)."""
        return self.ctx.job.job


def _no_job(job: Job | None, what: str) -> W.HTML:
    """The note a view shows instead of computing with a default."""
    if job is None:
        return _html(note(f"No job, so no {what}: open a profile (the job is read from "
                          "it)."))
    gaps = job.missing()
    return _html(note(f"No {what}: the job lacks " + "; ".join(gaps) + ". Set the missing "
                      "values in The job panel above, or load a config there."))


def _warnings(text: str | None) -> list[W.HTML]:
    return [] if not text else [_html(warning_html(text))]


def _heading(text: str) -> W.HTML:
    return _html(f"<div class='pk-h'>{html.escape(text)}</div>")


# --------------------------------------------------------------------------------- Overview

class OverviewTab(JobTab):
    """Headline (step time, throughput, MFU, step split, top findings), the step per rank,
    the steps table and what was opened."""

    title = "Overview"

    def __init__(self, ctx: Context) -> None:
        self.rank = _rank_picker("steps of")
        self.steps_table = W.HTML()
        self._steps: pd.DataFrame | None = None
        super().__init__(ctx)
        self.keep.add(id(self.rank))
        self.rank.observe(lambda _c: self._draw_steps(), names="value")

    def show(self, profile: Any) -> None:
        super().show(profile)
        _set_ranks(self.rank, _ranks_of(profile))

    def build(self, profile: Any) -> list[W.Widget]:
        steps = A.step_breakdown(profile)
        findings = self.ctx.findings(profile)
        head = headline(profile, steps, self.current, findings)
        out: list[W.Widget] = [_html(headline_html(head)), *self._findings(head.findings)]
        facts = _html(frame_html(profile_facts(profile), "What was opened", max_rows=40,
                                 wrap=("value",)))
        if steps.empty:
            return out + [_html(note(
                "No training steps were found in this profile (no step markers and no step "
                "trace), so there is no step breakdown; the Operators and Memory tabs may "
                "still have data.")), facts]
        self._steps = with_exposed_comm(steps)
        parts = {k: v for k, v in SPLIT_PARTS.items()
                 if k != "bubble_us" or self._steps["bubble_us"].fillna(0).gt(0).any()}
        chart = C.step_breakdown_chart(self._steps, parts=parts, select=True,
                                       title="Where the step time goes, per rank (click a "
                                             "rank for its steps)")
        self.steps_table = W.HTML()
        self._draw_steps()
        return out + [self.chart(chart, self._on_pick), self.rank, self.steps_table, facts]

    def _findings(self, findings: list[Any]) -> list[W.Widget]:
        if not findings:
            return [_html("<div class='pk-h'>Top findings</div>"
                          + note("No finding: the advisor saw nothing abnormal."))]
        rows: list[W.Widget] = [_heading("Top findings (time at stake per step)")]
        for i, f in enumerate(findings, 1):
            stake = (f"{time_text(f.ms_per_step * 1e3)} per step ({share_text(f.score)})"
                     if f.measured else "cost not measurable from the profile")
            tab = finding_tab(f.area, self.ctx.tabs)
            text = _html(f"<div class='pk-finding'>{i}. <b>{html.escape(stake)}</b> — "
                         f"{html.escape(f.title)}</div>")
            button = W.Button(description=f"Evidence: {tab} ›",
                              tooltip=f"Open the {tab} tab, which shows the evidence",
                              layout=W.Layout(width="auto", min_width="170px"))
            button.add_class("pk-evidence")
            if self.ctx.open_tab is None:
                button.disabled = True
            else:
                button.on_click(lambda _b, tab=tab: self.ctx.open_tab(tab))
            rows.append(W.HBox([button, text], layout=W.Layout(align_items="center")))
        return rows

    def _on_pick(self, points: list[dict[str, Any]]) -> None:
        ranks = [p["rank"] for p in points if "rank" in p]
        self.rank.value = int(ranks[0]) if ranks else ALL_RANKS

    def _draw_steps(self) -> None:
        steps = self._steps
        if steps is None or steps.empty:
            self.steps_table.value = ""
            return
        shares = {"computing_share": "computing", "comm_exposed_share": "exposed communication",
                  "bubble_share": "pipeline bubble", "free_share": "free"}
        if not steps["bubble_us"].fillna(0).gt(0).any():
            shares.pop("bubble_share")  # no pipeline bubble reported: no column of zeros
        data = steps.assign(comm_exposed_share=steps["comm_exposed_us"] / steps["step_us"])
        rank = self.rank.value
        if rank == ALL_RANKS:
            spread = over_ranks(data, ["step"], ["step_us"],
                                keep={c: "median" for c in shares}, sort=False)
            spread = spread.sort_values("step", kind="mergesort")
            headers = {c: f"{label}, median over ranks" for c, label in shares.items()}
            headers.update({"step_median_us": "step time, median over ranks",
                            "step_min_us": "fastest rank's step",
                            "step_max_us": "slowest rank's step", "worst_rank": "slowest rank"})
            self.steps_table.value = STYLE + frame_html(
                spread, "Steps: each step's time over the ranks and its split (shares of the "
                        "step time)", columns=["step", "step_median_us", "step_min_us",
                                                "step_max_us", "worst_rank", *shares],
                headers=headers, max_rows=30)
        else:
            one = data[data["rank"].astype("Int64") == rank]
            headers = {"step_us": "step time", **shares}
            self.steps_table.value = STYLE + frame_html(
                one, f"Steps of rank {rank} (shares of the step time)",
                columns=["step", "step_us", *shares], headers=headers, max_rows=30)

    def static_html(self) -> str:
        parts = [c.value for c in self.body.children if isinstance(c, W.HTML)]
        if self.charts:
            parts.insert(1, C.chart_to_svg(self.charts[0].chart))
        return self.message.value + "".join(parts)


# --------------------------------------------------------------------------------- Timeline

_MEDIAN_STEP = "representative (median step of the slowest rank)"
#: Most ranks the Timeline draws at once (one or a few, as swimlanes).
TIMELINE_MAX_RANKS = 4
#: Largest trace offered as a download link in the page (bigger ones: open the path).
DOWNLOAD_LIMIT_BYTES = 25 * 2**20


class TimelineTab(Tab):
    """One step of one or a few ranks as swimlanes (:func:`perfkit.analysis.timeline`,
    :func:`perfkit.charts.timeline_chart`): zoom with the wheel, a tooltip per event, the
    longest kernels and collectives labelled; the same window exported for Perfetto
    (:func:`perfkit.export_trace`) into a temporary folder, never the profile's."""

    title = "Timeline"

    def __init__(self, ctx: Context) -> None:
        wide = {"description_width": "initial"}
        self.step = W.Dropdown(options=[(_MEDIAN_STEP, ALL_RANKS)], value=ALL_RANKS,
                               description="step", style=wide,
                               layout=W.Layout(width="400px"))
        self.ranks = W.SelectMultiple(options=[], rows=3, description="ranks",
                                      style=wide, layout=W.Layout(width="200px"))
        self.lanes = W.ToggleButtons(options=[("streams", "streams"),
                                              ("computing / communication / free",
                                               "categories")],
                                     value="streams", description="lanes",
                                     style={"description_width": "initial",
                                            "button_width": "auto"})
        self.export = W.Button(description="Export for Perfetto", icon="download",
                               tooltip="Write this step of these ranks as a Chrome trace "
                                       "(every event) that Perfetto UI and chrome://tracing "
                                       "open", layout=W.Layout(width="auto"))
        self.exported = W.HTML()
        self.export.on_click(lambda _b: self.export_trace())
        self._folder: Path | None = None
        self._quiet = False
        super().__init__(ctx, [self.step, self.ranks, self.lanes])
        self.keep.update({id(self.export), id(self.exported)})
        for widget in (self.step, self.ranks, self.lanes):
            widget.observe(self._on_control, names="value")

    def show(self, profile: Any) -> None:
        super().show(profile)
        self._quiet = True
        try:
            steps = A.step_breakdown(profile) if profile is not None else pd.DataFrame()
            ids = sorted({int(s) for s in steps.get("step", pd.Series(dtype="Int64"))
                          .dropna()})
            self.step.options = [(_MEDIAN_STEP, ALL_RANKS)] + [(f"step {i}", i) for i in ids]
            self.step.value = ALL_RANKS
            self.ranks.options = [(f"rank {r}", r) for r in _ranks_of(profile)]
            self.ranks.value = ()
        finally:
            self._quiet = False
        self.exported.value = ""

    def _on_control(self, _change: dict[str, Any]) -> None:
        if not self._quiet:
            self.refresh()

    def _chosen_step(self) -> int | None:
        return None if self.step.value == ALL_RANKS else int(self.step.value)

    def _chosen_ranks(self) -> list[int] | None:
        picked = list(self.ranks.value)
        return picked[:TIMELINE_MAX_RANKS] if picked else None

    def build(self, profile: Any) -> list[W.Widget]:
        ranks = self._chosen_ranks()
        frame = A.timeline(profile, step=self._chosen_step(), ranks=ranks,
                           lanes=self.lanes.value)
        notes = list(frame.attrs.get("notes", []))
        if not self.ranks.value:
            notes.append("Pick ranks in the list (Ctrl- or Shift-click for several, at most "
                         f"{TIMELINE_MAX_RANKS}); with none picked, the slowest and the "
                         "fastest are drawn.")
        if len(self.ranks.value) > TIMELINE_MAX_RANKS:
            notes.append(f"{len(self.ranks.value)} ranks were picked; the first "
                         f"{TIMELINE_MAX_RANKS} are drawn (a few ranks stay readable).")
        info = frame.attrs.get("timeline", {})
        out: list[W.Widget] = [_html("".join(note(n) for n in notes))]
        if frame.empty:
            out.append(_html(note("No event in this window.")))
        else:
            out.append(_html(note("Scroll over the chart to zoom, drag to pan, double-click "
                                  "to reset; hover an event for its name and duration.")))
            out.append(self.chart(C.timeline_chart(frame, width=960), renderer="canvas"))
            cap = info.get("max_events")
            out.append(_html(note(
                f"{len(frame):,} rects for {int(frame['n_events'].sum()):,} events"
                + (f" (at most {cap:,} are drawn: tiny neighbours are merged into blocks "
                   "that keep their time; the export below has every event)." if cap
                   else "."))))
        out += [W.HBox([self.export, self.exported], layout=W.Layout(align_items="center"))]
        return out

    def export_trace(self) -> Path | None:
        """Write the window on show as a gzipped Chrome trace into a temporary folder and
        show its path and a download link; returns the path (None on a failure)."""
        profile = self.profile
        if profile is None:
            self.exported.value = STYLE + note("Open a profile first.")
            return None
        try:
            if self._folder is None or not self._folder.is_dir():
                self._folder = Path(tempfile.mkdtemp(prefix="perfkit-trace-"))
                weakref.finalize(self, shutil.rmtree, self._folder, True)
            step = self._chosen_step()
            ranks = self._chosen_ranks()
            name = (f"perfkit-trace-step{step if step is not None else 'median'}-ranks"
                    f"{'-'.join(map(str, ranks)) if ranks else 'slowest-fastest'}.json.gz")
            path = export_trace(profile, step=step, ranks=ranks, path=self._folder / name,
                                overwrite=True)
        except Exception as exc:  # noqa: BLE001 - shown in the page
            self.exported.value = error(describe_error(exc, "the export for Perfetto"))
            return None
        size = path.stat().st_size
        link = ""
        if size <= DOWNLOAD_LIMIT_BYTES:
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            link = (f" <a download='{html.escape(path.name)}' "
                    f"href='data:application/gzip;base64,{data}'>Download it</a>.")
        self.exported.value = STYLE + (
            f"<span class='pk-note'>Written <code>{html.escape(str(path))}</code> "
            f"({bytes_text(size)}), on the machine that runs the dashboard.{link} Open it "
            "in Perfetto UI (Open trace file) or chrome://tracing.</span>")
        return path


# -------------------------------------------------------------------------------- Operators

def _per_rank(profile: Any, func: Callable[..., pd.DataFrame], **kwargs: Any) -> pd.DataFrame:
    """``func(rank_profile, **kwargs)`` for every rank, with a ``rank`` column."""
    frames = []
    for r in _ranks_of(profile):
        f = func(_one_rank(profile, r), **kwargs)
        if len(f):
            frames.append(f.assign(rank=r))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


class OperatorsTab(Tab):
    """Device time per operator type or task name: chart (click an operator for its task
    names or its ranks), the table over ranks, the roofline, unfused chains, AI CPU."""

    title = "Operators"

    def __init__(self, ctx: Context) -> None:
        self.group = W.Dropdown(options=[("operator type", "type"), ("task name", "name")],
                                value="type", description="group by",
                                style={"description_width": "initial"},
                                layout=W.Layout(width="230px"))
        self.top_n = W.IntSlider(value=15, min=5, max=40, step=1, description="top",
                                 continuous_update=False, style={"description_width": "initial"},
                                 layout=W.Layout(width="280px"))
        self.rank = _rank_picker("ranks")
        self.detail = W.HTML()
        self._by: pd.DataFrame | None = None
        super().__init__(ctx, [self.group, self.top_n, self.rank])
        for widget in (self.group, self.top_n, self.rank):
            widget.observe(lambda _change: self.refresh(), names="value")

    def show(self, profile: Any) -> None:
        super().show(profile)
        _set_ranks(self.rank, _ranks_of(profile))

    def build(self, profile: Any) -> list[W.Widget]:
        by, n, rank = self.group.value, self.top_n.value, self.rank.value
        scope = profile if rank == ALL_RANKS else _one_rank(profile, rank)
        top = A.top_operators(scope, by=by, n=None)
        if top.empty:
            return [_html(note("This profile has no device operators (kernel_details / "
                               "op_summary or a device trace)."))]
        self._by = top
        what = "operator type" if by == "type" else "task name"
        who = "mean over ranks" if rank == ALL_RANKS else f"rank {rank}"
        chart = C.top_operators_chart(top, label=by, n=n, value="per_step_us", select=True,
                                      title=f"Device time per step by {what} ({who}; click a "
                                            "bar for details)")
        shows = "task names" if by == "type" else "ranks"
        self.detail = W.HTML(STYLE + note(f"Click a bar to see its {shows}."))
        out: list[W.Widget] = [self.chart(chart, self._on_pick), self.detail,
                               _html(self._table(profile, top, by, n, rank))]
        out += self._roofline(scope)
        out.append(_html(self._unfused(scope, rank)))
        out.append(_html(frame_html(A.ai_cpu_operators(scope), "Operators on AI CPU",
                                    columns=None, max_rows=10)))
        return out

    def _table(self, profile: Any, top: pd.DataFrame, by: str, n: int, rank: int) -> str:
        keys = top.head(n)[by].astype(str).tolist()
        if rank != ALL_RANKS or len(_ranks_of(profile)) == 1:
            cols = [c for c in (by, "category", "per_step_us", "share", "count", "mean_us",
                                "bound") if c in top.columns]
            scope = {"per_step_us": "per step", "count": "summed over steps",
                     "mean_us": "per call"}
            title = f"Top {n} by device time" + ("" if rank == ALL_RANKS else f", rank {rank}")
            return frame_html(top.head(n), title, columns=cols, scope=scope,
                              headers={"per_step_us": "device time", "count": "calls",
                                       "mean_us": "mean"})
        per = _per_rank(profile, A.top_operators, by=by, n=None)
        per = per[per[by].astype(str).isin(keys)]
        spread = over_ranks(per, [by], ["per_step_us"], keep={"category": "first"})
        merged = spread.merge(top[[by, "share", "count", "mean_us"]].astype({by: "string"}),
                              left_on=spread[by].astype("string"), right_on=by, how="left",
                              suffixes=("", "_all"))
        merged = merged.drop(columns=[c for c in ("key_0", f"{by}_all") if c in merged.columns])
        headers = {"per_step_median_us": "per step, median over ranks",
                   "per_step_min_us": "per step, min", "per_step_max_us": "per step, max",
                   "worst_rank": "slowest rank", "count": "calls, summed over ranks",
                   "mean_us": "mean per call", "share": "share of device time"}
        cols = [by, "category", "per_step_median_us", "per_step_min_us", "per_step_max_us",
                "worst_rank", "share", "count", "mean_us"]
        return frame_html(merged, f"Top {n} by device time per step, over "
                                  f"{len(_ranks_of(profile))} ranks", columns=cols,
                          headers=headers, max_rows=n)

    def _on_pick(self, points: list[dict[str, Any]]) -> None:
        keys = [p["full"] for p in points if "full" in p]
        if not keys or self.profile is None:
            self.detail.value = STYLE + note("Click a bar to see its details; double-click "
                                             "to clear.")
            return
        key, by = keys[0], self.group.value
        rank = self.rank.value
        scope = self.profile if rank == ALL_RANKS else _one_rank(self.profile, rank)
        try:
            if by == "type":
                names = A.top_operators(scope, by="name", n=None)
                names = names[names["type"].astype(str) == key]
                self.detail.value = STYLE + frame_html(
                    names, f"Task names of type {key}", columns=[
                        "name", "input_shapes", "per_step_us", "count", "mean_us"],
                    scope={"per_step_us": "per step", "mean_us": "per call"},
                    headers={"per_step_us": "device time", "count": "calls",
                             "mean_us": "mean"}, max_rows=15)
            else:
                per = _per_rank(self.profile, A.top_operators, by="name", n=None)
                per = per[per["name"].astype(str) == key].sort_values("per_step_us",
                                                                      ascending=False)
                self.detail.value = STYLE + frame_html(
                    per, f"{shorten(key, 60)} on each rank",
                    columns=["rank", "per_step_us", "count", "mean_us", "max_us"],
                    headers={"per_step_us": "device time per step", "count": "calls",
                             "mean_us": "mean per call", "max_us": "longest call"},
                    max_rows=32)
        except Exception as exc:  # noqa: BLE001 - shown in the page
            self.detail.value = error(describe_error(exc, "the operator's details"))

    def _roofline(self, profile: Any) -> list[W.Widget]:
        eff = A.operator_efficiency(profile)
        if eff.empty or not (eff["achieved_tflops"] > 0).any():
            return [_html(note("No roofline: " + "; ".join(eff.attrs.get("notes", [])[:1])))]
        hw, _why = A.infer_hardware(profile)
        chart = C.roofline_chart(eff, bandwidth_gbps=hw.memory_bandwidth / 1e9 if hw else None,
                                 title="Roofline: one point per operator and shapes, sized by "
                                       "time (scroll to zoom, drag to pan)"
                                       + (f" ({hw.name})" if hw else ""))
        notes = eff.attrs.get("notes", [])
        return [self.chart(chart), _html("".join(note(_sentence(n)) for n in notes))]

    def _unfused(self, profile: Any, rank: int) -> str:
        chains = A.unfused_patterns(profile)
        if chains.empty or rank != ALL_RANKS or "rank" not in chains.columns:
            return frame_html(chains, "Unfused chains a fused kernel could replace",
                              columns=[c for c in ("pattern", "occurrences", "total_us",
                                                   "saving_us", "example",
                                                   "fused_replacement")
                                       if c in chains.columns],
                              headers={"total_us": "time", "saving_us": "saving"},
                              scope={"total_us": "summed over steps"})
        spread = over_ranks(chains, ["pattern"], ["saving_us"],
                            keep={"occurrences": "median", "example": "first",
                                  "fused_replacement": "first"})
        return frame_html(spread, "Unfused chains a fused kernel could replace (saving over "
                                  "the profiled steps, per rank)",
                          columns=["pattern", "saving_median_us", "saving_min_us",
                                   "saving_max_us", "worst_rank", "occurrences", "example",
                                   "fused_replacement"],
                          headers={"saving_median_us": "saving, median over ranks",
                                   "saving_min_us": "min", "saving_max_us": "max",
                                   "occurrences": "occurrences per rank"})


# ---------------------------------------------------------------------------- Communication

class CommunicationTab(Tab):
    """Collectives per kind and group, ranks against their peers (click a rank to filter),
    the slowest links and how much communication is hidden."""

    title = "Communication"

    def __init__(self, ctx: Context) -> None:
        self.rank_detail = W.HTML()
        self._links: pd.DataFrame | None = None
        self._overlap: pd.DataFrame | None = None
        super().__init__(ctx)

    def build(self, profile: Any) -> list[W.Widget]:
        summary = A.comm_summary(profile)
        if summary.empty:
            return [_html(note("This profile has no communication records (one rank, or "
                               "a profiler level without communication tables)."))]
        cols = [c for c in ("op_type", "group", "count", "total_us", "mean_us", "max_us",
                            "transit_share", "wait_share", "idle_share", "ranks")
                if c in summary.columns]
        out: list[W.Widget] = [_html(frame_html(
            summary, "Time per collective and group", columns=cols,
            headers={"op_type": "collective", "count": "calls", "total_us": "time",
                     "mean_us": "mean", "max_us": "longest", "transit_share": "transit",
                     "wait_share": "wait", "idle_share": "idle"},
            scope={"total_us": "summed over ranks and steps", "mean_us": "per call",
                   "count": "summed over ranks"},
            shorten_text={"group": 28}))]
        ranks = A.slow_ranks(profile)
        self._links = A.slow_links(profile)
        self._overlap = A.comm_overlap(profile)
        if not ranks.empty:
            out.append(self.chart(C.slow_ranks_chart(ranks, select=True,
                                                     title="Ranks against their peers (click "
                                                           "a rank for its links)"),
                                  self._on_pick))
        self.rank_detail = W.HTML()
        out.append(self.rank_detail)
        self._draw(None)
        out.append(_html(self._overlap_html()))
        return out

    def _on_pick(self, points: list[dict[str, Any]]) -> None:
        ranks = [int(p["rank"]) for p in points if "rank" in p]
        self._draw(ranks[0] if ranks else None)

    def _draw(self, rank: int | None) -> None:
        links = self._links if self._links is not None else pd.DataFrame()
        cols = [c for c in ("transport", "src_rank", "dst_rank", "size_bytes", "time_us",
                            "bandwidth_gbps", "median_gbps", "ratio_to_median", "slow")
                if c in links.columns]
        headers = {"size_bytes": "size", "time_us": "time", "bandwidth_gbps": "bandwidth",
                   "median_gbps": "peers' median", "ratio_to_median": "of the median (×)",
                   "src_rank": "from rank", "dst_rank": "to rank"}
        if rank is None or links.empty:
            self.rank_detail.value = STYLE + frame_html(
                links, "Links, slowest first (click a rank above to see its links)",
                columns=cols, headers=headers, max_rows=10,
                scope={"size_bytes": "summed over steps", "time_us": "summed over steps"})
            return
        mine = links[(links["src_rank"] == rank) | (links["dst_rank"] == rank)]
        self.rank_detail.value = STYLE + frame_html(
            mine, f"Links of rank {rank}, slowest first (double-click the chart to clear)",
            columns=cols, headers=headers, max_rows=20,
            scope={"size_bytes": "summed over steps", "time_us": "summed over steps"})

    def _overlap_html(self) -> str:
        frame = self._overlap if self._overlap is not None else pd.DataFrame()
        if frame.empty:
            return frame_html(frame, "Communication hidden behind computation")
        spread = over_ranks(frame, [], ["comm_not_overlapped_us", "communication_us"],
                            keep={"overlap_share": "median", "exposed_share": "median"})
        return frame_html(
            spread, "Communication hidden behind computation, over the ranks (per step)",
            columns=["comm_not_overlapped_median_us", "comm_not_overlapped_min_us",
                     "comm_not_overlapped_max_us", "worst_rank", "communication_median_us",
                     "overlap_share", "exposed_share"],
            headers={"comm_not_overlapped_median_us": "exposed, median over ranks",
                     "comm_not_overlapped_min_us": "exposed, min",
                     "comm_not_overlapped_max_us": "exposed, max",
                     "worst_rank": "most exposed rank",
                     "communication_median_us": "all communication, median",
                     "overlap_share": "hidden, median", "exposed_share":
                     "exposed share of the step, median"},
            scope={"comm_not_overlapped_median_us": "summed over steps"})


# ----------------------------------------------------------------------------------- Memory

class MemoryTab(JobTab):
    """Memory over time by component family (ranks folded or one rank), peaks per
    component over the ranks, and the measured peak next to the job's theory."""

    title = "Memory"

    def __init__(self, ctx: Context) -> None:
        self.family = W.Dropdown(options=list(FAMILIES), value=FAMILIES[0],
                                 description="components", style={"description_width": "initial"},
                                 layout=W.Layout(width="250px"))
        self.value = W.Dropdown(options=[("allocated", "allocated_bytes"),
                                         ("reserved", "reserved_bytes"),
                                         ("active", "active_bytes")],
                                value="allocated_bytes", description="quantity",
                                style={"description_width": "initial"},
                                layout=W.Layout(width="200px"))
        self.rank = _rank_picker("ranks")
        self.rank.options = [("max over the ranks", ALL_RANKS)]
        self._timeline: pd.DataFrame | None = None
        self._quiet = False
        super().__init__(ctx, [self.family, self.value, self.rank])
        for widget in (self.family, self.value, self.rank):
            widget.observe(self._on_control, names="value")

    def show(self, profile: Any) -> None:
        super().show(profile)
        self._timeline = None
        self._quiet = True
        try:
            self.rank.options = [("max over the ranks", ALL_RANKS)] + [
                (f"rank {r}", r) for r in _ranks_of(profile)]
            self.rank.value = ALL_RANKS
        finally:
            self._quiet = False

    def _on_control(self, change: dict[str, Any]) -> None:
        if self._quiet:
            return
        if change["owner"] is self.family and self._timeline is not None:
            self._quiet = True
            try:
                picked = default_value(self._timeline, self.family.value)
                if picked:
                    self.value.value = picked
            finally:
                self._quiet = False
        self.refresh()

    def _defaults(self, timeline: pd.DataFrame) -> None:
        """Start on a family and a quantity that have data (never an all-zero series)."""
        present = families_present(timeline)
        self._quiet = True
        try:
            self.family.options = present or list(FAMILIES)
            self.family.value = (present or list(FAMILIES))[0]
            picked = default_value(timeline, self.family.value)
            if picked:
                self.value.value = picked
        finally:
            self._quiet = False

    def build(self, profile: Any) -> list[W.Widget]:
        out: list[W.Widget] = []
        if self._timeline is None:
            self._timeline = A.memory_timeline(profile, max_points=200)
            self._defaults(self._timeline)
        timeline = self._timeline
        column, family = self.value.value, self.family.value
        rank = None if self.rank.value == ALL_RANKS else int(self.rank.value)
        series = memory_series(timeline, column, family=family, rank=rank)
        what = column.removesuffix("_bytes")
        if series.empty:
            out.append(_html(note(f"No {what} memory above zero for the {family} components"
                                  + ("" if rank is None else f" of rank {rank}")
                                  + (" (profile_memory was off?)" if timeline.empty else
                                     "; pick another quantity or family above."))))
        else:
            out.append(self.chart(C.memory_timeline_chart(
                series, value=column, select=True,
                title=f"{what.capitalize()} memory of the {family} components over time "
                      "(scroll to zoom; click a line or a legend entry)"),
                self._on_pick))
            hidden = series.attrs.get("hidden", [])
            if hidden:
                out.append(_html(note(f"Hidden (no {what} byte, or beyond the 12 largest): "
                                      + ", ".join(hidden[:30])
                                      + (" …" if len(hidden) > 30 else ""))))
        self.peaks = W.HTML()
        self._peaks = peaks_by_component(A.memory_peaks(profile))
        self._draw_peaks(None)
        out.append(self.peaks)
        out += self._theory()
        return out

    def _on_pick(self, points: list[dict[str, Any]]) -> None:
        names = [str(p["series"]).split(",")[0] for p in points if "series" in p]
        self._draw_peaks(names[0] if names else None)

    def _draw_peaks(self, component: str | None) -> None:
        peaks = self._peaks
        if component is not None:
            peaks = peaks[peaks["component"] == component]
        caption = ("Peak memory per component over the ranks (components that hold nothing "
                   "are hidden)" if component is None else
                   f"Peak memory of {component} (double-click the chart for all components)")
        self.peaks.value = STYLE + frame_html(
            peaks, caption, max_rows=30,
            headers={"peak_median_bytes": "peak, median over ranks", "peak_min_bytes":
                     "peak, min", "peak_max_bytes": "peak, max", "worst_rank": "highest rank"})

    def _theory(self) -> list[W.Widget]:
        job = self.current
        if job is None or job.model is None or job.hardware is None:
            return [_no_job(job, "memory theory") if job is None or job.model is None
                    else _html(note("No memory theory: the job has no hardware ("
                                    + job.detail("hardware") + "); set it in The job "
                                    "panel."))]
        try:
            memory = memory_breakdown(job.model, job.hardware, job.parallel)
        except PerfkitError as exc:
            return [_html(error(describe_error(exc, "the memory theory")))]
        theory = float(memory["bytes"].sum())
        measured = job.peak_memory_bytes
        guard = check_memory(theory, measured, job, what="the theory (static + activations)")
        if measured:
            ratio = theory / float(measured)
            line = (f"<b>Measured peak</b> {bytes_text(measured)} (framework allocator, "
                    f"allocated; {html.escape(job.detail('peak_memory_bytes'))}) · "
                    f"<b>theory</b> {bytes_text(theory)} (static "
                    f"{bytes_text(memory['bytes'].iloc[:3].sum())} + activations "
                    f"{bytes_text(memory['bytes'].iloc[3])}) · theory / measured "
                    f"{ratio:,.2f}×" + (" ⚠" if not guard.ok else ""))
        else:
            line = (f"<b>Theory</b> {bytes_text(theory)}; no measured peak to compare with ("
                    f"{html.escape(job.detail('peak_memory_bytes'))}).")
        out = [_heading("Measured against the theory of the job (most loaded device)"),
               _html(f"<p style='font-size:13px'>{line}</p>")]
        out += _warnings(guard.warning)
        out.append(self.chart(C.memory_chart(memory, title=f"Memory per device: "
                                                           f"{job.model.name or 'the job'} on "
                                                           f"{job.hardware.name} (theory)")))
        return out


# -------------------------------------------------------------------------------- Recompute

class RecomputeTab(JobTab):
    """Recompute seen in the profile, the job's memory/time trade-off and an IR check."""

    title = "Recompute"

    def __init__(self, ctx: Context) -> None:
        default_ir = IR_DIR / "silu_mul.ir"
        wide = {"description_width": "initial"}
        self.ir_path = W.Text(value=str(default_ir) if default_ir.is_file() else "",
                              placeholder="path of a MindSpore IR dump (.ir or .ir.gz)",
                              description="IR dump", style=wide,
                              layout=W.Layout(width="640px"))
        self.patterns = W.Textarea(value="feed_forward\\.mul\nfeed_forward\\.w1\\.activation",
                                   description="select_recompute patterns", style=wide,
                                   layout=W.Layout(width="640px", height="70px"))
        self.check = W.Button(description="Check the IR", button_style="primary")
        self.ir_result = W.VBox()
        self.check.on_click(lambda _button: self.check_ir())
        super().__init__(ctx)
        self.children = (*self.children, _heading("Do the select_recompute patterns hit "
                                                  "the operators they should?"),
                         self.ir_path, self.patterns, self.check, self.ir_result)

    def build(self, profile: Any) -> list[W.Widget]:
        evidence = A.recompute_evidence(profile)
        if not evidence.empty and "rank" in evidence.columns:
            spread = over_ranks(evidence, ["recompute"], ["recompute_share"],
                                keep={"forward": "median", "backward": "median",
                                      "ratio": "median"})
            table = frame_html(spread, "Recompute seen in the profile (per rank: forward "
                                       "operators re-run in the backward pass)",
                               headers={"recompute_median_share": "recomputed, median",
                                        "recompute_min_share": "recomputed, min",
                                        "recompute_max_share": "recomputed, max",
                                        "ratio": "forward / backward, median",
                                        "forward": "forward ops, median",
                                        "backward": "backward ops, median"},
                               columns=["recompute", "recompute_median_share",
                                        "recompute_min_share", "recompute_max_share",
                                        "ranks", "forward", "backward", "ratio"])
        else:
            table = frame_html(evidence, "Recompute seen in the profile")
        out = [_html(table)]
        job = self.current
        if job is None or job.model is None or job.hardware is None:
            out.append(_no_job(job, "recompute trade-off") if job is None or job.model is None
                       else _html(note("No recompute trade-off: the job has no hardware ("
                                       + job.detail("hardware") + ").")))
            return out
        try:
            tradeoff = recompute_tradeoff(job.model, job.parallel, job.hardware)
        except PerfkitError as exc:
            out.append(_html(error(describe_error(exc, "the recompute trade-off"))))
            return out
        mode = tradeoff[tradeoff["recompute"] == job.parallel.recompute]
        if len(mode) and job.step_time_s:
            guard = check_step(float(mode["step_s"].iloc[0]), job.step_time_s, job,
                               what=f"the estimate for recompute={job.parallel.recompute}")
            out += _warnings(guard.warning)
        out.append(self.chart(C.recompute_tradeoff_chart(
            tradeoff, memory_limit_GiB=job.hardware.memory_bytes / 2**30,
            title="Memory against time for each recompute mode")))
        out.append(_html(frame_html(
            tradeoff, "Memory against time for the job (perfkit.estimate_step, each mode on "
                      "every layer, per device)",
            headers={"activation_GiB": "activations", "memory_GiB": "static + activations",
                     "compute_s": "compute", "step_s": "step",
                     "tokens_per_s_per_device": "tokens/s per device"})))
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
            self.ir_result.children = (_html(error(describe_error(exc, "the IR check"))),)
            return
        self.ir_result.children = (
            _html(frame_html(result.patterns, "Patterns and what they matched", wrap=(
                "matched", "note"))),
            _html(frame_html(result.diagnosis, "Operators the patterns miss or break",
                             wrap=("why", "suggestion"))))


# ---------------------------------------------------------------------------------- Planner

class PlannerTab(JobTab):
    """The job's figures and a search over every way to split it."""

    title = "Planner"

    def __init__(self, ctx: Context) -> None:
        wide = {"description_width": "initial"}
        self.devices = W.BoundedIntText(value=16, min=1, max=1 << 20, description="devices",
                                        style=wide, layout=W.Layout(width="170px"))
        self.batch = W.BoundedIntText(value=1024, min=1, max=1 << 24,
                                      description="global batch (sequences)", style=wide,
                                      layout=W.Layout(width="270px"))
        self.run = W.Button(description="Search strategies", button_style="primary")
        self.result = W.VBox()
        self.run.on_click(lambda _button: self.search())
        super().__init__(ctx)
        self.children = (
            _heading("The job's figures (from The job panel above; edit it there)"),
            *self.children,
            _heading("Every way to split it (perfkit.plan.search on the job's model and "
                     "device; devices and batch start from the job)"),
            W.HBox([self.devices, self.batch, self.run]), self.result)

    def show(self, profile: Any) -> None:
        """Set the profile and start the search from the job's devices and batch."""
        super().show(profile)
        close_widgets(self.result.children)
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
        return [_html(summary_html(job_summary(job)))]

    def search(self) -> None:
        """Rank every layout of the job with :func:`perfkit.plan.search`."""
        job = self.current
        close_widgets(self.result.children)
        if job is None or job.model is None or job.hardware is None:
            self.result.children = (_no_job(job, "strategy search"),)
            return
        self.result.children = (_html(spinner_html("Searching …")),)
        try:
            ranked = search(job.model, job.hardware, self.devices.value, self.batch.value,
                            include_rejected=True)
        except Exception as exc:  # noqa: BLE001 - shown in the page
            self.result.children = (_html(error(describe_error(exc, "the strategy "
                                                                    "search"))),)
            return
        fits = ranked[ranked["fits"]]
        columns = [c for c in ("rank", "dp", "tp", "pp", "vpp", "micro_batch_size",
                               "num_micro_batches", "recompute", "step_s",
                               "tokens_per_second_per_device", "mfu", "memory_bytes")
                   if c in ranked.columns]
        chart = chart_widget(C.strategy_chart(ranked, title=f"{len(ranked):,} candidates, "
                                                            f"{len(fits):,} fit (scroll to "
                                                            "zoom)"))
        self.result.children = (
            chart,
            _html(frame_html(fits, "Fastest that fit", columns=columns, max_rows=10,
                             headers={"step_s": "estimated step", "memory_bytes":
                                      "memory per device", "tokens_per_second_per_device":
                                      "tokens/s per device", "micro_batch_size":
                                      "micro-batch", "num_micro_batches": "micro-batches"})))


# ----------------------------------------------------------------------------------- Advice

class AdviceTab(JobTab):
    """The advisor's findings: ms at stake (click a bar for that finding alone), what was
    seen, what to change, and the details behind each."""

    title = "Advice"

    def __init__(self, ctx: Context) -> None:
        self.table = W.HTML()
        self.goto = W.HBox()
        self._frame: pd.DataFrame | None = None
        super().__init__(ctx)

    def build(self, profile: Any) -> list[W.Widget]:
        self._frame = C.findings_frame(self.ctx.findings(profile))
        out: list[W.Widget] = []
        measured = self._frame[self._frame["measured"].astype(bool)] \
            if not self._frame.empty else self._frame
        if not measured.empty:
            out.append(self.chart(C.findings_chart(
                self._frame, n=12, select=True,
                title="Findings, best first: time at stake per step (click one for it "
                      "alone)"), self._on_pick))
        self.table = W.HTML()
        self.goto = W.HBox()
        self._draw(None)
        return out + [self.goto, self.table]

    def _on_pick(self, points: list[dict[str, Any]]) -> None:
        titles = [p["title"] for p in points if "title" in p]
        self._draw(titles[0] if titles else None)

    def _draw(self, title: str | None) -> None:
        frame = self._frame if self._frame is not None else C.findings_frame([])
        close_widgets(self.goto.children)
        self.goto.children = ()
        if title is not None:
            frame = frame[frame["title"] == title]
            if len(frame) and self.ctx.open_tab is not None:
                tab = finding_tab(str(frame["area"].iloc[0]), self.ctx.tabs)
                button = W.Button(description=f"Evidence: {tab} ›",
                                  layout=W.Layout(width="auto"))
                button.add_class("pk-evidence")
                button.on_click(lambda _b: self.ctx.open_tab(tab))
                self.goto.children = (button,)
        self.table.value = STYLE + "<div class='pk-table'>" + C.findings_html(
            frame, n=None) + "</div>"

    def static_html(self) -> str:
        return self.message.value + self.table.value


#: The tab class of each title.
TAB_CLASSES: dict[str, type[Tab]] = {
    "Overview": OverviewTab, "Timeline": TimelineTab, "Operators": OperatorsTab,
    "Communication": CommunicationTab,
    "Memory": MemoryTab, "Recompute": RecomputeTab, "Planner": PlannerTab,
    "Advice": AdviceTab,
}
