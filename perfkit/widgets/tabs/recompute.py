"""The Recompute tab: recompute seen in the profile, the trade-off, an IR check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ipywidgets as W
import pandas as pd

from ... import analysis as A
from ... import charts as C
from ...errors import PerfkitError, ProfileError
from ...format import time_text
from ...guards import check_step
from ...io.ir.graph import load_ir
from ...job import Job
from ...job.measured import TRAINING_STEP
from ...plan import layout_saving_s, recompute_off
from ...tables import over_ranks
from ..markup import describe_error, error, frame_html, note
from ..overview import IR_DIR
from ..planner_closing import CHOSEN_IN_PLANNER, closing_label, closing_sentence
from ..prediction import (
    PREDICTED_MFU,
    PlannerFit,
    band_text,
    measured_against_predicted,
    recompute_modes,
    recompute_text,
    scheme_sentence,
)
from .base import Context, JobTab, heading, html_widget, no_job_note, warning_widgets

__all__ = ["RecomputeTab"]


def _step_words(fit: PlannerFit, job: Job, own: Any, measured: pd.DataFrame) -> str:
    """What the trade-off's step times are: the Planner's prediction (the same figure for
    the profiled layout), against the step the Planner measures (``measured``:
    :func:`~perfkit.widgets.prediction.measured_against_predicted`, the device span of the
    slowest rank, median step) and, for a profile without a backward pass, why the two
    do not compare."""
    how = ("calibrated on this profile" + closing_label(fit.calibration)
           if fit.source == "profile" else
           "calibrated on the measured step" if fit.source == "step time" else
           "uncalibrated: perfkit's default rates")
    text = (f"Step times are predicted training steps (forward, backward, optimizer) by the "
            f"Planner's model ({how}): the profiled layout (recompute "
            f"{recompute_text(job.parallel)}) predicts "
            f"{time_text(float(own['step_s']) * 1e6)}, the Planner's figure for it.")
    rows = measured.loc[measured["run"] == "measured"]
    if len(rows):
        step = float(rows["step_s"].iloc[0])
        text += (f" Measured: {time_text(step * 1e6)} on the device (slowest rank, median "
                 "step; the Overview's step also counts the device's wait before it)")
        text += (": the profile runs no backward pass (a forward pass only), so the two do "
                 "not compare." if job.training_step() is False else
                 "; the Planner compares the two part by part.")
    return text


#: What the tab says instead of a trade-off on a profile of an inference step.
_NOT_TRAINING = ("Recompute does not apply to this profile: it records an inference (or "
                 "evaluation) step, and recompute trades memory for time in the backward "
                 "pass of training, which this step does not run; no trade-off is shown (")


def _saving_words(fit: PlannerFit, job: Job) -> str:
    """What turning recompute off saves by this model (:func:`perfkit.plan.layout_saving_s`,
    the function the advisor's recompute finding prices the change with, so the Advice
    tab shows the same figure); ``""`` without recompute or a calibration."""
    par = job.parallel
    if fit.calibration is None or (par.recompute == "none" and not par.recompute_layers):
        return ""
    saved = layout_saving_s(fit.calibration, par, recompute_off(par))
    return (f" Turning recompute off saves {time_text(saved * 1e6)} per step by this model "
            "(the Advice tab prices the change with the same figure).")


def _ir_note(profile: Any) -> str:
    """What the IR check is for and what its boxes start on: the check reads a MindSpore
    graph dump against MindFormers' select_recompute patterns, so on a PyTorch run it shows
    the bundled example, not this job; on a MindSpore run the boxes start on that example
    too, and the note says how to give the run's own."""
    framework = str(getattr(getattr(profile, "meta", None), "framework", "") or "")
    if not framework or "mindspore" in framework.lower():
        return note("The boxes start on the bundled example: the MindFormers guide's case "
                    "(silu_mul.ir, a Llama layer whose SiLU and Mul are selected, yet memory "
                    "does not drop) and its patterns. Put your own dump's path "
                    "(MS_DEV_SAVE_GRAPHS=2 writes them; the *_validate_* dump shows the "
                    "clones) and your YAML's select_recompute patterns to check your run.")
    named = {"pytorch": "PyTorch"}.get(framework.lower(), framework)
    return note(f"This check is for MindSpore (MindFormers' select_recompute): it reads a "
                f"MindSpore IR dump, which a {named} run does not write. The boxes hold "
                "the bundled example dump and its patterns, not the open job's; PyTorch "
                "chooses what to recompute in code (torch.utils.checkpoint, selective "
                "activation checkpointing), which the table above counts from the profile.")


#: The diagnosis's problems (:func:`perfkit.analysis.recompute_check`) in words.
PROBLEM_WORDS = {
    "not_marked": "a pattern matched it, but it carries no recompute mark",
    "neighbour_not_recomputed": "marked, but a neighbour is kept: no clone was made",
}


class RecomputeTab(JobTab):
    """Recompute seen in the profile, the job's memory/time trade-off and an IR check.

    Attributes
    ----------
    fit : PlannerFit or None
        The Planner's model the trade-off is predicted with (:func:`~perfkit.widgets.
        prediction.fit_job` on the open profile).
    tradeoff : pandas.DataFrame or None
        :func:`~perfkit.widgets.prediction.recompute_modes`: its profiled row is the
        Planner's prediction of the profiled layout.
    """

    title = "Recompute"
    waits_for = "the operator tables and the job (model, layout)"

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
        self.fit: PlannerFit | None = None
        self.tradeoff: pd.DataFrame | None = None
        super().__init__(ctx)
        ctx.follow_closing(self._closing_changed)
        self.ir_note = W.HTML()
        self.children = (*self.children, heading("Do the select_recompute patterns hit "
                                                 "the operators they should?"),
                         self.ir_note, self.ir_path, self.patterns, self.check,
                         self.ir_result)

    def _closing_changed(self, _closing: str) -> None:
        """The Planner's closing changed (:attr:`Context.closing`): the trade-off is
        predicted again, with it, when the tab is next drawn."""
        with self._state:
            self.stale = True

    def build(self, profile: Any) -> list[W.Widget]:
        self.fit = self.tradeoff = None
        self.ir_note.value = _ir_note(profile)
        evidence = A.recompute_evidence(profile)
        if not evidence.empty and "rank" in evidence.columns:
            spread = over_ranks(evidence, ["recompute"], ["recompute_share"],
                                keep={"forward": "median", "backward": "median",
                                      "ratio": "median"})
            table = frame_html(spread, "Recompute seen in the profile (per rank: attention "
                                       "passes forward against backward, about 1 without "
                                       "recompute and 2 with full recompute)",
                               headers={"recompute_median_share": "recomputed, median",
                                        "recompute_min_share": "recomputed, min",
                                        "recompute_max_share": "recomputed, max",
                                        "ratio": "forward / backward, median",
                                        "forward": "attention passes forward, median",
                                        "backward": "attention passes backward, median"},
                               columns=["recompute", "recompute_median_share",
                                        "recompute_min_share", "recompute_max_share",
                                        "ranks", "forward", "backward", "ratio"])
        else:
            table = frame_html(evidence, "Recompute seen in the profile")
        out = [html_widget(table)]
        job = self.current
        if job is not None and job.training_step() is False:
            out.append(html_widget(note(_NOT_TRAINING + job.observed[TRAINING_STEP][1] + ").")))
            return out
        if job is None or job.model is None or job.hardware is None:
            out.append(no_job_note(job, "recompute trade-off", ("model", "hardware"),
                                   self.ctx.open_tab is not None))
            return out
        try:
            fit = self.ctx.planner_fit(profile, job)
            tradeoff = recompute_modes(fit, job)
        except PerfkitError as exc:
            out.append(html_widget(error(describe_error(exc, "the recompute trade-off"))))
            return out
        own = tradeoff[tradeoff["profiled"]].iloc[0]
        self.fit, self.tradeoff = fit, tradeoff
        out.append(html_widget(note(_step_words(fit, job, own,
                                                measured_against_predicted(profile, fit))
                                    + _saving_words(fit, job)
                                    + fit.gradient_words + " " + scheme_sentence(fit, job))
                               + note(closing_sentence(fit, self.ctx.closing)
                                      + " " + CHOSEN_IN_PLANNER)))
        # a profile without a backward pass: the sentence above says the two do not
        # compare, which is all the guard would say again
        if job.step_time_s and job.training_step() is not False:
            guard = check_step(float(own["step_s"]), job.step_time_s, job,
                               what="the prediction for recompute="
                                    + recompute_text(job.parallel))
            out += warning_widgets(guard.warning)
        out.append(self.chart(C.recompute_tradeoff_chart(
            tradeoff, memory_limit_GiB=fit.prediction.memory_limit_bytes / 2**30,
            title="Memory against time for each recompute mode")))
        shown = tradeoff.assign(step_band=[band_text(r) for _, r in tradeoff.iterrows()])
        out.append(html_widget(frame_html(
            shown, "Memory against time for the job (the Planner's model, perfkit.plan."
                   "predict: each mode on every layer, per device; the profiled layout's row "
                   "is the Planner's prediction)",
            columns=["recompute", "activation_GiB", "memory_GiB", "fits", "compute_s",
                     "step_band", "tokens_per_s_per_device", "mfu"],
            headers={"activation_GiB": "activations", "memory_GiB": "static + activations",
                     "compute_s": "compute", "step_band": "predicted step (band)",
                     "tokens_per_s_per_device": "tokens/s per device",
                     "mfu": PREDICTED_MFU},
            hot=list(tradeoff["profiled"]), wrap=("recompute",))))
        out += [html_widget(note(n)) for n in tradeoff.attrs.get("notes", [])]
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
            self.ir_result.children = (html_widget(error(describe_error(exc, "the IR check"))),)
            return
        diagnosis = result.diagnosis.assign(
            problem=result.diagnosis["problem"].map(PROBLEM_WORDS).fillna(
                result.diagnosis["problem"]))
        self.ir_result.children = (
            html_widget(frame_html(result.patterns, "Patterns and what they matched",
                                   wrap=("pattern",))),
            html_widget(frame_html(
                diagnosis, "Operators the patterns miss or break",
                columns=["layer", "op", "path", "problem", "neighbour_op", "suggested_pattern",
                         "explanation"],
                wrap=("path", "problem", "suggested_pattern", "explanation"))))
