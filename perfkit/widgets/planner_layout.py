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
from ..format import band_range_text, bytes_text, time_text
from ..plan import predict
from ..plan.assumed import assumed_calibration
from ..plan.relayout import layout_text, per_device_text, relayout
from .markup import STYLE, error, note
from .planner_words import change_words, stages_text

__all__ = ["LayoutBox", "layout_prediction", "LAYOUT_KNOBS", "NO_PICK", "NO_PICK_TEXT"]

#: The knobs the box offers: (ParallelConfig field, label).
LAYOUT_KNOBS = (("dp", "dp"), ("tp", "tp"), ("pp", "pp"), ("vpp", "vpp"), ("cp", "cp"),
                ("micro_batch_size", "micro-batch"),
                ("num_micro_batches", "micro-batches"))

#: The ranking picker's value and words when nothing is picked.
NO_PICK = -1
NO_PICK_TEXT = "pick one of the ranking below: it fills the knobs and is predicted"


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
    """The controls (a count per knob, 0: the run's; recompute; a picker of the ranking's
    layouts) and the line a prediction writes (:attr:`widget`). ``state()`` gives the
    calibration, the job and the assumptions on show when a prediction is made.

    A picked layout's settings that have no knob (sequence parallelism, optimizer sharding,
    fully recomputed layers per stage) are kept, and said, until a knob is changed: then
    the typed layout keeps the run's, as ``perfkit plan`` does.
    """

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
        self.pick = W.Dropdown(options=[(NO_PICK_TEXT, NO_PICK)], value=NO_PICK,
                               disabled=True, description="or", style=wide,
                               layout=W.Layout(width="100%", max_width="1100px"))
        self.pick.observe(self._picked, names="value")
        self.offered: dict[int, Any] = {}  # pick value -> the row's ParallelConfig
        self.kept: dict[str, Any] = {}  # the picked layout's settings without a knob
        self.kept_note = W.HTML()
        self._filling = False
        for widget in (*self.knobs.values(), self.recompute):
            widget.observe(self._edited, names="value")
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
            self.pick, self.kept_note, self.said])

    def offer(self, best: Any) -> None:
        """Offer the ranked layouts of ``best`` (:func:`perfkit.widgets.prediction.
        best_layouts`; not the profiled one) in the picker; None empties it. Either way
        the line of an earlier prediction goes (the ranking it came from is redone)."""
        rows = [] if best is None else [
            (i, f"rank {int(r['rank'])}: {r['step_band']}, {r['changes']}", r["parallel"])
            for i, (_, r) in enumerate(best.iterrows())
            if not r["profiled"] and pd.notna(r["rank"])]
        self.offered = {i: layout for i, _, layout in rows}
        self._unpick()
        self.pick.options = [(NO_PICK_TEXT, NO_PICK), *((text, i) for i, text, _ in rows)]
        self.pick.value = NO_PICK
        self.pick.disabled = not rows
        self.said.value, self.prediction = "", None

    def reset(self) -> None:
        """Another profile: no offer, no prediction, every knob back to the run's."""
        self.offer(None)
        self._filling = True
        for widget in self.knobs.values():
            widget.value = 0
        self.recompute.value = "the run's"
        self._filling = False

    def _unpick(self) -> None:
        self.kept, self.kept_note.value = {}, ""
        self._filling = True
        self.pick.value = NO_PICK
        self._filling = False

    def _edited(self, _change: dict[str, Any]) -> None:
        """A knob changed by hand: the layout is no longer the one picked, nor the one
        the line predicted (cleared until the button is pressed)."""
        if self._filling:
            return
        if self.kept or self.pick.value != NO_PICK:
            self._unpick()
        self.said.value, self.prediction = "", None

    def _picked(self, change: dict[str, Any]) -> None:
        if self._filling or change["new"] == NO_PICK:
            return
        layout = self.offered[change["new"]]
        self._filling = True
        for name, widget in self.knobs.items():
            widget.value = int(getattr(layout, name))
        options = list(self.recompute.options)
        self.recompute.value = layout.recompute if layout.recompute in options else options[0]
        self._filling = False
        knobs = {*self.knobs, "recompute"}
        self.kept = {k: v for k, v in dataclasses.asdict(layout).items() if k not in knobs}
        _, job, _ = self.state()
        hidden = [change_words(f"{k} {getattr(job.parallel, k)} → {v}")
                  for k, v in self.kept.items()
                  if job is not None and getattr(job.parallel, k) != v]
        self.kept_note.value = STYLE + note(
            "Also from the ranking, with no knob: " + ", ".join(hidden) + ". Kept until a "
            "knob is changed; a typed layout keeps the run's.") if hidden else ""
        self._predict(self.options())

    def options(self) -> dict[str, Any]:
        """The knobs set (above 0) and the recompute chosen, by ParallelConfig field, over
        the picked layout's settings without a knob (:attr:`kept`)."""
        out: dict[str, Any] = {**self.kept}
        out.update({n: int(w.value) for n, w in self.knobs.items() if w.value})
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
    band = f"band {band_range_text(pred.low_s * 1e6, pred.high_s * 1e6)}" + (
        "" if pred.low_s > 0 else ": the model's uncertainty is larger than the step "
        "itself, so it bounds it from above only")
    return (f"{layout}: step {time_text(pred.step_s * 1e6)} ({band}){tps}, memory "
            f"{bytes_text(pred.memory_bytes)} of {bytes_text(pred.memory_limit_bytes)} "
            f"({fits}){changes}")
