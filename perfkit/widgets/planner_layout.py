"""The Planner's "Predict a layout" box: the layout a user types, predicted as
``perfkit plan`` predicts it (:func:`layout_prediction`), with the assumptions on show.

The ranking shows the layouts the search finds best; a user who wants one layout in
particular (the next run's: dp 8, pp 2) types it here, or picks one of the ranking
(:meth:`LayoutBox.offer`), which sets the knobs to it and predicts it whole (its sequence
parallelism and optimizer sharding too, which have no knob), so the line says what the
ranking's row says. Knobs left at 0 keep the profiled run's, as the command's options do
(:func:`perfkit.plan.relayout.relayout`: dp follows the device count where tp·pp·cp
change, the micro-batches keep the run's global batch).
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable
from typing import Any

import ipywidgets as W
import pandas as pd

from ..calc.pipeline import split_when_uneven
from ..errors import PerfkitError
from ..format import bytes_text, time_text
from ..plan import predict
from ..plan.assumed import assumed_calibration
from ..plan.relayout import layout_text, per_device_text, relayout
from .markup import STYLE, error, note
from .planner_words import change_words, stages_text

__all__ = ["LayoutBox", "layout_prediction", "LAYOUT_KNOBS", "NO_PICK"]

#: The knobs the box offers: (ParallelConfig field, label).
LAYOUT_KNOBS = (("dp", "dp"), ("tp", "tp"), ("pp", "pp"), ("vpp", "vpp"), ("cp", "cp"),
                ("micro_batch_size", "micro-batch"),
                ("num_micro_batches", "micro-batches"))

#: The ranking picker's first entry: nothing picked.
NO_PICK = "pick a layout of the ranking below"


def layout_prediction(calibration: Any, job: Any, options: dict[str, Any],
                      assumed: Any = None) -> Any:
    """The prediction of the profiled job on the layout ``options`` give
    (:func:`~perfkit.plan.relayout.relayout` of ``job.parallel``), with ``calibration``'s
    rates and, where given, the panel's assumptions (:func:`perfkit.plan.assumed.
    assumed_calibration`); the global batch is the run's unless the micro-batches are
    given — what ``perfkit plan`` predicts for the same options.

    Raises
    ------
    perfkit.errors.ParallelConfigError
        The layout breaks a rule, or the run's batch does not split over it.
    """
    target = relayout(job.parallel, options, job.global_batch_size)
    cal = assumed_calibration(calibration, assumed) if assumed is not None else calibration
    batch = None if options.get("num_micro_batches") else job.global_batch_size
    return predict(cal, parallel=target, global_batch_size=batch)


class LayoutBox:
    """The controls (a count per knob, 0: the run's; recompute) and the line a prediction
    writes (:attr:`widget`). ``state()`` gives the calibration, the job and the
    assumptions on show when the button is pressed."""

    def __init__(self, state: Callable[[], tuple[Any, Any, Any]]) -> None:
        self.state = state
        wide = {"description_width": "initial"}
        self.knobs = {name: W.BoundedIntText(value=0, min=0, max=1 << 20, description=label,
                                             style=wide, layout=W.Layout(width="150px"))
                      for name, label in LAYOUT_KNOBS}
        self.recompute = W.Dropdown(options=["the run's", "none", "selective", "full"],
                                    description="recompute", style=wide,
                                    layout=W.Layout(width="200px"))
        self.button = W.Button(description="Predict this layout")
        self.button.on_click(lambda _b: self.predict())
        self.pick = W.Dropdown(options=[(NO_PICK, None)], value=None, disabled=True,
                               layout=W.Layout(width="460px"))
        self.pick.observe(self._picked, names="value")
        self.offered: dict[int, Any] = {}  # pick value -> the row's ParallelConfig
        self.said = W.HTML()
        self.prediction: Any = None
        box = {"flex_flow": "row wrap", "align_items": "center"}
        self.widget = W.VBox([
            W.HTML(STYLE + "<div class='pk-h'>Predict a layout</div>" + note(
                "The profiled job on another split, by the model and assumptions above (as "
                "perfkit plan PATH --dp N ... predicts it): 0 keeps the run's value; with "
                "tp, pp or cp changed and dp at 0, dp keeps the device count; the run's "
                "global batch is kept unless the micro-batches are given.")),
            W.HBox([*self.knobs.values(), self.recompute, self.button],
                   layout=W.Layout(**box)),
            self.pick, self.said])

    def offer(self, best: Any) -> None:
        """Offer the ranked layouts of ``best`` (:func:`perfkit.widgets.prediction.
        best_layouts`; not the profiled one) in the picker; None empties it."""
        rows = [] if best is None else [
            (i, f"rank {int(r['rank'])}: {r['changes']} ({r['step_band']})", r["parallel"])
            for i, (_, r) in enumerate(best.iterrows())
            if not r["profiled"] and pd.notna(r["rank"])]
        self.offered = {i: layout for i, _, layout in rows}
        self.pick.value = None
        self.pick.options = [(NO_PICK, None), *((text, i) for i, text, _ in rows)]
        self.pick.disabled = not rows

    def _picked(self, change: dict[str, Any]) -> None:
        if change["new"] is None:
            return
        layout = self.offered[change["new"]]
        for name, widget in self.knobs.items():
            widget.value = int(getattr(layout, name))
        options = list(self.recompute.options)
        self.recompute.value = layout.recompute if layout.recompute in options else options[0]
        self._predict(dataclasses.asdict(layout))

    def options(self) -> dict[str, Any]:
        """The knobs set (above 0) and the recompute chosen, by ParallelConfig field."""
        out: dict[str, Any] = {n: int(w.value) for n, w in self.knobs.items() if w.value}
        if self.recompute.value != "the run's":
            out["recompute"] = self.recompute.value
        return out

    def predict(self) -> None:
        """Predict the layout typed and write its line (or why it cannot be predicted)."""
        self._predict(self.options())

    def _predict(self, options: dict[str, Any]) -> None:
        calibration, job, assumed = self.state()
        if job is None or job.model is None:
            self.said.value = STYLE + note("No job to predict: open a profile whose model "
                                           "perfkit can read.")
            return
        try:
            pred = layout_prediction(calibration, job, options, assumed)
        except PerfkitError as exc:
            self.prediction = None
            self.said.value = STYLE + error(str(exc))
            return
        self.prediction = pred
        self.said.value = STYLE + f"<p>{html.escape(prediction_line(pred))}</p>"


def prediction_line(pred: Any) -> str:
    """``dp 8 × tp 1 × pp 2, micro-batch 2 × 4, recompute full: step 1.41 s (band
    1.34 s – 1.48 s), 5,823 tokens/s per device on 16 devices, memory 4.96 GiB of
    57.6 GiB (fits); changes from the run: dp 16 → 8, pp 1 → 2, ...``"""
    p = pred.parallel
    split = split_when_uneven(pred.model.num_layers, p.pp, p.vpp)
    layout = layout_text(dataclasses.asdict(p)) + stages_text(split[0] if split else None)
    tps = ", " + per_device_text(pred.tokens_per_second_per_device, p.world_size)
    fits = "fits" if pred.fits else "does not fit"
    changes = (f"; changes from the run: {', '.join(map(change_words, pred.changes))}"
               if pred.changes else "; the profiled layout itself")
    band = (f"band {time_text(pred.low_s * 1e6)} – {time_text(pred.high_s * 1e6)}"
            if pred.low_s > 0 else f"band up to {time_text(pred.high_s * 1e6)}: the "
            "model's uncertainty is larger than the step itself, so it bounds it from "
            "above only")
    return (f"{layout}: step {time_text(pred.step_s * 1e6)} ({band}){tps}, memory "
            f"{bytes_text(pred.memory_bytes)} of {bytes_text(pred.memory_limit_bytes)} "
            f"({fits}){changes}")
