"""The Planner tab: the profiled layout measured against predicted (calibrated on the open
profile), its measured model FLOPs utilisation (the Overview's figure), the layouts that fit
ranked with it with their bands, and the job's figures.

On an inference profile (:meth:`perfkit.Job.training_step` False) the step model, which
predicts a training step, says nothing of the run: the tab says so, shows the measured
step and the MFU of the inference step, and predicts a training step of the model (and
ranks its layouts) only on request, under a heading that says it is not this run."""

from __future__ import annotations

import dataclasses
import html
from typing import Any

import ipywidgets as W
import pandas as pd

from ... import charts as C
from ...charts.planner import STRATEGY_POINTS
from ...format import counted, time_text
from ...plan.assumed import Assumptions, assumed_calibration, predict_assumed
from ..markup import describe_error, error, frame_html, note
from ..metrics import summary_html
from ..planner_assumed import AssumedPanel, predict_kwargs
from ..planner_closing import CLOSING_OPTIONS, closing_label, closing_sentence
from ..planner_layout import LayoutBox
from ..planner_measured import (
    TRAINING_PLAN_HEADING,
    inference_step_sentence,
    measured_mfu_sentence,
)
from ..prediction import (
    PREDICTED_MFU,
    PlannerFit,
    batch_text,
    best_layouts,
    comparison_sentence,
    fit_job,
    measured_against_predicted,
    measured_step,
    packed_step_tokens,
    ranked_layouts,
    ranking_sentence,
    scheme_sentence,
)
from ..render import chart_widget, close_widgets, spinner_html
from ..summary import job_summary
from .base import Context, JobTab, heading, html_widget, no_job_note

__all__ = ["PlannerTab"]

#: Rows of the job's figures the Planner leaves out: the uncalibrated prediction, which the
#: Planner's own prediction above replaces (the same figure when it has no calibration).
_UNCALIBRATED_ROWS = ("predicted_step_s", "predicted_mfu")

#: Rows of the job's figures that count a training step's memory (weights, gradients,
#: optimizer state, activations kept for the backward pass), left out on an inference step,
#: whose ``memory_gib`` row is the forward-only theory (:mod:`perfkit.job.inference_memory`).
_TRAINING_MEMORY_ROWS = ("static_gib", "activation_gib")

_BEST_HEADERS = {"rank": "rank", "changes": "what changes from the profiled job",
                 "step_band": "predicted step (band)",
                 "tokens_per_second_per_device": "tokens/s per device",
                 "mfu": PREDICTED_MFU,
                 "memory_fit": "memory per device of usable", "fits": "fits"}


class PlannerTab(JobTab):
    """The profiled layout measured against predicted, and every way to split the job,
    both with the model calibrated on the open profile (:func:`perfkit.plan.calibrate`).

    Attributes
    ----------
    fit : PlannerFit or None
        What the figures were predicted with (the calibration, or why there is none).
    comparison : pandas.DataFrame or None
        The profiled layout measured against predicted (the chart's data).
    ranked : pandas.DataFrame or None
        The last search (:func:`~perfkit.widgets.prediction.ranked_layouts`).
    best : pandas.DataFrame or None
        The table of the fastest layouts that fit with the profiled one in its place
        (:func:`~perfkit.widgets.prediction.best_layouts`).
    plan_button : ipywidgets.Button
        On an inference profile, what predicts a training step of the model and ranks its
        layouts (:meth:`plan_training`); the prediction is not made before.
    closing : ipywidgets.ToggleButtons
        How the calibration is closed (:func:`perfkit.plan.calibrate`'s ``closing``):
        ``"one"`` (default) or ``"kernels"``; changing it calibrates again and redraws the
        comparison and the search (:meth:`refit`), the devices and batch kept.
    """

    title = "Planner"
    waits_for = "the job (model, layout, batch), read from the operator shapes"

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
        self.controls = W.HBox([self.devices, self.batch, self.run])
        self.plan_button = W.Button(description="Predict a training step of this model",
                                    layout=W.Layout(width="auto"))
        self.plan_button.on_click(lambda _button: self.plan_training())
        self.plan = W.VBox()
        self.closing = W.ToggleButtons(
            options=list(CLOSING_OPTIONS), value="one", description="calibration closed",
            style={**wide, "button_width": "auto"},
            tooltips=["one factor on every compute rate but the optimizer's",
                      "the matrix kernels and each pass's memory-bound kernels to their "
                      "measured shares"])
        self.closing.observe(self._closing_chosen, names="value")
        #: the comparison of the profiled layout, redrawn by :meth:`refit`
        self.compared: W.VBox | None = None
        self.fit: PlannerFit | None = None
        self.comparison: pd.DataFrame | None = None
        self.best: pd.DataFrame | None = None
        self.ranked: pd.DataFrame | None = None
        #: the "What the model assumes" panel of the profiled layout (None without one)
        self.assumed: AssumedPanel | None = None
        #: a layout the user types, predicted as perfkit plan predicts it
        self.chosen = LayoutBox(lambda: (
            self.fit.calibration if self.fit is not None else None, self.current,
            self.assumed.assumed if self.assumed is not None else None))
        super().__init__(ctx)
        self.closing.value = ctx.closing
        ctx.follow_closing(lambda closing: setattr(self.closing, "value", closing))
        self.keep |= {id(self.controls), id(self.result), id(self.plan_button),
                      id(self.plan), id(self.closing), id(self.chosen.widget)}

    def show(self, profile: Any) -> None:
        """Set the profile; the next refresh calibrates on it and searches again."""
        super().show(profile)
        close_widgets(self.result.children)
        self.result.children = ()
        self._clear_plan()
        self.fit = self.comparison = self.best = self.ranked = None
        self.compared = self.assumed = None
        self.chosen.reset()

    def build(self, profile: Any) -> list[W.Widget]:
        job = self.current
        self.fit = self.comparison = self.best = self.ranked = None
        self.compared = self.assumed = None
        self.chosen.offer(None)
        if job is not None:
            if job.world_size:
                self.devices.value = int(job.world_size)
            if job.global_batch_size:
                self.batch.value = int(job.global_batch_size)
            packed = packed_step_tokens(job)
            self.batch.description = "global batch (sequences)" if packed is None else \
                f"global batch (rows of {packed:,} packed tokens)"
        self._clear_plan()
        if job is not None and job.training_step() is False:
            close_widgets(self.result.children)
            self.result.children = ()
            return self._inference_widgets(profile)
        if job is None or job.missing():
            close_widgets(self.result.children)
            self.result.children = ()
            return [no_job_note(job, "figures, prediction or strategy search",
                                ("model", "hardware", "step_time_s"),
                                self.ctx.open_tab is not None)]
        self.fit = fit_job(profile, job, self.closing.value)
        self.assumed = AssumedPanel(self.fit.calibration, self.fit.prediction.parallel,
                                    self.fit.prediction.hardware, job.framework,
                                    self._assumed_changed)
        self._apply_assumed()
        self.comparison = measured_against_predicted(profile, self.fit)
        self.compared = W.VBox(self._closed_comparison_widgets())
        self.search()
        return [
            heading("The profiled layout: measured and predicted step"),
            self.closing, self.compared, self.assumed.widget, self.chosen.widget,
            html_widget(f"<p><b>{html.escape(measured_mfu_sentence(job))}</b></p>"
                        + note(f"The table's “{PREDICTED_MFU}” below is at each "
                               "layout's predicted step, not measured.")),
            heading("Other layouts that fit, ranked with the profiled one by predicted step "
                    "(perfkit.plan.search with the same model; devices and batch start from "
                    "the job)"),
            self.controls, self.result,
            *self._figures_widgets(),
        ]

    def _figures_widgets(self, inference: bool = False) -> list[W.Widget]:
        """The job's figures (:func:`~perfkit.widgets.summary.job_summary`) without the
        uncalibrated prediction the Planner's own replaces; for an inference step
        (``inference``) without the static and activation memory of a training step
        either (its memory row is the forward-only theory)."""
        summary = job_summary(self.current)
        summary = summary[~summary["key"].isin(
            _UNCALIBRATED_ROWS + (_TRAINING_MEMORY_ROWS if inference else ()))]
        title = "The job's figures (from The job panel above; edit it there)"
        if inference:
            title = ("The job's figures for this inference step (from The job panel above; "
                     "its memory is the forward-only theory the Memory tab holds against "
                     "the measured peak)")
        return [heading(title), html_widget(summary_html(summary))]

    def _closing_chosen(self, change: dict[str, Any]) -> None:
        """The toggle moved: the dashboard's one closing (:attr:`Context.closing`, which
        the Recompute tab follows) is set, and this tab fits again (:meth:`refit`)."""
        self.ctx.set_closing(change["new"])
        self.refit()

    def refit(self) -> None:
        """Calibrate again with the closing chosen (:attr:`closing`), redraw the profiled
        layout's comparison and search again with the devices and batch as set: what a
        change of the control does. Nothing on a page without the comparison (no job, an
        inference profile: its training prediction is not closed)."""
        with self.building:  # not while a build redraws the tab
            job, profile, box = self.current, self.profile, self.compared
            if box is None or job is None or profile is None or job.missing():
                return
            old = box.children
            drawn = {id(w) for w in old}
            self.charts = [c for c in self.charts if id(c) not in drawn]
            try:
                self.fit = fit_job(profile, job, self.closing.value)
                if self.assumed is not None:
                    self.assumed.recalibrated(self.fit.calibration)
                self._apply_assumed()
                self.comparison = measured_against_predicted(profile, self.fit)
                widgets = self._closed_comparison_widgets()
            except Exception as exc:  # noqa: BLE001 - shown in the page
                self.fit = self.comparison = None
                widgets = [html_widget(error(describe_error(exc, "the calibration")))]
            box.children = tuple(widgets)
            close_widgets(old)
            self.search()

    def _apply_assumed(self, force: bool = False) -> None:
        """Predict the profiled layout again with what the panel assumes
        (:func:`perfkit.plan.assumed.predict_assumed`) where it differs from the
        calibration's own (``force``: always): :attr:`fit`'s prediction becomes that
        one."""
        panel, fit, job = self.assumed, self.fit, self.current
        if panel is None or fit is None or job is None:
            return
        a = panel.assumed
        if not force and not a.changed and not a.behaviour_applies:
            return
        extra = predict_kwargs(job, fit.calibration)
        self.fit = dataclasses.replace(fit, prediction=predict_assumed(fit.calibration, a,
                                                                       **extra))

    def _ranking_inputs(self, job: Any, fit: PlannerFit) -> tuple[Any, PlannerFit]:
        """The job and fit the ranking searches with: with a calibration, its rates and
        the job's hardware as the panel assumes (:func:`perfkit.plan.assumed.
        assumed_calibration`; the search places ranks in its own default order); without
        one, the job's own (the default rates)."""
        panel = self.assumed
        if panel is None or fit.calibration is None or not (
                panel.assumed.changed or panel.assumed.behaviour_applies):
            return job, fit
        cal = assumed_calibration(fit.calibration, panel.assumed)
        return (dataclasses.replace(job, hardware=panel.assumed.hardware),
                dataclasses.replace(fit, calibration=cal))

    def _assumed_changed(self, _assumed: Assumptions) -> None:
        """An assumption was edited: the profiled layout is predicted again with the
        calibration kept (:meth:`_apply_assumed`) and its comparison redrawn."""
        with self.building:
            job, profile, box = self.current, self.profile, self.compared
            if box is None or job is None or profile is None or self.fit is None:
                return
            old = box.children
            drawn = {id(w) for w in old}
            self.charts = [c for c in self.charts if id(c) not in drawn]
            try:
                self._apply_assumed(force=True)
                self.comparison = measured_against_predicted(profile, self.fit)
                widgets = self._closed_comparison_widgets()
            except Exception as exc:  # noqa: BLE001 - shown in the page
                widgets = [html_widget(error(describe_error(exc, "the prediction with "
                                                                 "these assumptions")))]
            box.children = tuple(widgets)
            close_widgets(old)
            self.search()

    def _closed_comparison_widgets(self) -> list[W.Widget]:
        """:meth:`_comparison_widgets` after the sentence saying which closing the figures
        use and when to prefer which (:func:`~perfkit.widgets.planner_closing.
        closing_sentence`)."""
        assert self.fit is not None
        return [html_widget(note(closing_sentence(self.fit, self.closing.value))),
                *self._comparison_widgets()]

    def _clear_plan(self) -> None:
        close_widgets(self.plan.children, {id(self.controls), id(self.result)})
        self.plan.children = ()

    def _inference_widgets(self, profile: Any) -> list[W.Widget]:
        """An inference profile's Planner: the step model is for training; the measured
        step (:func:`~perfkit.widgets.prediction.measured_step`) and its MFU
        (:func:`~perfkit.widgets.planner_measured.measured_mfu_sentence`), the job's
        figures, and a training step of the model predicted only on request."""
        job = self.current
        assert job is not None
        measured = measured_step(profile)
        step = (f"Step time: {time_text(job.step_time_s * 1e6)} (the job's, which its MFU "
                "divides by)." if job.step_time_s else "The profile shows no step time.")
        if not measured.empty:
            span, wait = (float(measured[c].iloc[0]) for c in ("step_s", "wait_s"))
            step += (f" The device's span: {time_text(span * 1e6)} (the slowest rank, median "
                     "step)" + (f"; the device waits {time_text(wait * 1e6)} before each "
                                "step's first task (data, launch)" if wait > 0.005 * span
                                else "") + ".")
        out = [heading("An inference step: the Planner's step model is for training"),
               html_widget(f"<p><b>{html.escape(inference_step_sentence(job))}</b></p>"),
               heading("Measured: this inference run"),
               html_widget(f"<p>{html.escape(step)}</p><p><b>"
                           f"{html.escape(measured_mfu_sentence(job))}</b></p>")]
        if len(measured) > 1:
            out.append(html_widget(frame_html(pd.DataFrame({
                "part": measured["part"],
                "measured": [time_text(v * 1e6) for v in measured["seconds"]]}),
                "Per part (the slowest rank, median step; communication counts what is not "
                "overlapped)")))
        if job.missing():
            out.append(no_job_note(job, "training prediction of this model",
                                   ("model", "hardware", "step_time_s"),
                                   self.ctx.open_tab is not None))
            return out
        out += [*self._figures_widgets(inference=True), heading(TRAINING_PLAN_HEADING),
                html_widget(note(
                    "To plan a training run of this model: the step model predicts a "
                    "training step (forward, backward, optimizer) of the profiled layout, "
                    "calibrated on this profile's kernels, and ranks the layouts that fit. "
                    "None of it is a figure of this inference step.")),
                self.plan_button, self.plan]
        return out

    def plan_training(self) -> None:
        """On an inference profile: predict a training step of the model on the profiled
        layout (calibrated on the profile, :func:`~perfkit.widgets.prediction.fit_job`)
        and rank its layouts (:meth:`search`), shown under :data:`TRAINING_PLAN_HEADING`."""
        with self.building:  # not while a build redraws the tab
            job, profile = self.current, self.profile
            self._clear_plan()
            if job is None or profile is None or job.missing():
                return
            try:
                self.fit = fit_job(profile, job, self.closing.value)
                self.comparison = measured_against_predicted(profile, self.fit)
                widgets = self._comparison_widgets()
            except Exception as exc:  # noqa: BLE001 - shown in the page
                self.plan.children = (html_widget(error(describe_error(
                    exc, "the training prediction"))),)
                return
            self.plan.children = (*widgets, self.controls, self.result)
            self.search()

    def _comparison_widgets(self) -> list[W.Widget]:
        fit, frame = self.fit, self.comparison
        assert fit is not None and frame is not None
        edits = self.assumed.edits() if self.assumed is not None else []
        words = ("<p><b>" + html.escape(comparison_sentence(frame, fit, self.current, edits))
                 + "</b></p>") \
            + note(fit.sentence + " " + scheme_sentence(fit, self.current))
        words += "".join(note(n) for n in fit.notes)
        title = "Step of the profiled layout, " + (
            "calibrated on this profile" + closing_label(fit.calibration)
            + (" and your assumptions" if edits else "")
            if fit.source == "profile" else
            "calibrated on its step time" if fit.source == "step time" else
            "UNCALIBRATED (default rates)")
        table = frame.pivot_table(index="part", columns="run", values="seconds",
                                  sort=False).reset_index()
        table.columns.name = None
        if self.current is not None and self.current.training_step() is False:
            # a training step predicted beside an inference step measured: no chart or
            # column that sets them side by side
            return [html_widget(words), html_widget(frame_html(pd.DataFrame({
                "part": table["part"],
                "predicted training step": [time_text(v * 1e6) for v in table["predicted"]]}),
                "Per part of the predicted training step (not this inference run)"))]
        parts = [html_widget(words), self.chart(C.prediction_chart(frame, title=title))]
        if {"measured", "predicted"} <= set(table.columns):
            shown = pd.DataFrame({
                "part": table["part"],
                "measured": [time_text(v * 1e6) for v in table["measured"]],
                "predicted": [time_text(v * 1e6) for v in table["predicted"]]})
            parts.append(html_widget(frame_html(
                shown, "Per part (measured: the slowest rank, median step; communication "
                "counts what is not overlapped, pipeline waits included)")))
        return parts

    def search(self) -> None:
        """Rank every layout of the job with the model of the prediction above."""
        job = self.current
        close_widgets(self.result.children)
        self.chosen.offer(None)
        if job is None or job.model is None or job.hardware is None:
            self.result.children = (no_job_note(job, "strategy search", ("model", "hardware"),
                                                self.ctx.open_tab is not None),)
            return
        self.result.children = (html_widget(spinner_html("Searching …")),)
        try:
            fit = self.fit if self.fit is not None else fit_job(self.profile, job,
                                                                self.closing.value)
            ranked = ranked_layouts(*self._ranking_inputs(job, fit), self.devices.value,
                                    self.batch.value)
            best = best_layouts(ranked, fit, job.parallel)
            packed = packed_step_tokens(job)
            verdict = ranking_sentence(ranked, fit, job.parallel, packed)
        except Exception as exc:  # noqa: BLE001 - shown in the page
            self.result.children = (html_widget(error(describe_error(exc, "the strategy "
                                                                          "search"))),)
            return
        self.fit, self.best, self.ranked = fit, best, ranked
        self.chosen.offer(best)
        fits = int(ranked["fits"].sum())
        how = "calibrated on this profile" + closing_label(fit.calibration) \
            if fit.source == "profile" else \
            "calibrated on the measured step" if fit.source == "step time" else \
            "UNCALIBRATED: perfkit's default rates, not fitted to this run"
        words = (f"{counted(len(ranked), 'candidate')} over "
                 f"{counted(self.devices.value, 'device')} and "
                 f"{batch_text(self.batch.value, packed)} per step; {fits:,} fit. Step times "
                 f"{how}" + ("; the band is the prediction's (docs/planner.md)."
                             if fit.calibrated else "; calibrate before trusting small "
                             "differences."))
        own = best.loc[best["profiled"]].iloc[0]
        ranked_too = best.loc[best["profiled"], "rank"].notna().all()
        # another job size: the profiled layout's step does not compare, so no diamond
        # among the candidates (it would read as the fastest of them)
        shown = min(len(ranked), STRATEGY_POINTS)  # the fastest: said in the title
        drawn = f"{len(ranked):,} candidates" if shown == len(ranked) else \
            f"the {shown:,} fastest of {len(ranked):,} candidates"
        chart = chart_widget(C.strategy_chart(
            ranked, title=f"{drawn}, {fits:,} fit (scroll to zoom)",
            step_title="predicted step time (s)" if fit.calibrated
            else "predicted step time at the default rates (s)",
            profiled=own.to_dict() if ranked_too else None))
        caption = "Layouts that fit, by predicted step with the same model; " + (
            "the profiled layout (highlighted) in its place" if ranked_too else
            "the profiled layout (highlighted, last) apart, without a rank: it runs another "
            "job size")
        self.result.children = (
            html_widget(f"<p><b>{html.escape(verdict)}</b></p>" + note(words)), chart,
            html_widget(frame_html(
                best, caption, columns=list(_BEST_HEADERS), max_rows=len(best),
                headers=_BEST_HEADERS, wrap=("changes",),
                hot=list(best["profiled"]))))
