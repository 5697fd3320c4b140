"""The Memory tab: memory over time, peaks per component, measured against theory."""

from __future__ import annotations

import html
import re
from typing import Any

import ipywidgets as W
import pandas as pd

from ... import analysis as A
from ... import charts as C
from ...calc.memory import STATIC_SCHEME_NAMES
from ...errors import PerfkitError
from ...format import bytes_text
from ...guards import check_memory
from ...job.activations import activation_text
from ..inference_memory import inference_theory, why_inference
from ..load_notes import TABLE_WORDS, notes_about
from ..markup import STYLE, describe_error, error, frame_html, note
from ..memory_view import (
    FAMILIES,
    default_value,
    families_offered,
    memory_series,
    peaks_by_component,
)
from ..summary import memory_breakdown
from .base import (
    ALL_RANKS,
    Context,
    JobTab,
    heading,
    html_widget,
    no_job_note,
    rank_picker,
    ranks_of,
    set_ranks,
    shows_all,
    warning_widgets,
)

__all__ = ["MemoryTab", "MEMORY_TABLES", "no_memory_text"]

#: The rank picker's choice of all the ranks: the chart keeps each moment's largest value.
_MAX_OVER_RANKS = "max over the ranks"

#: The tables the Memory tab draws, and what its notes call them: the loader's notes about
#: them (a memory file of another run left out, ...) are said on the tab, under its peaks.
MEMORY_TABLES = {t: TABLE_WORDS[t] for t in ("memory", "op_memory")}


#: A loader's note's own "profile_memory was off" (its parenthesis), which
#: :func:`no_memory_text` says once for them all.
_FLAG = re.compile(r"\s*\((?:written when )?profile_memory=(?:True|False)\)")


def no_memory_text(loading: list[str]) -> str:
    """The Memory tab's one line for a profile without memory data: that there is none,
    what the loader found missing (``loading``, :func:`~perfkit.widgets.load_notes.
    notes_about`'s sentences, joined, their own "profile_memory" parentheses dropped) and
    what would record it (the profilers' ``profile_memory=True``: torch_npu's, Kineto's
    and MindSpore's option of that name)."""
    found = [_FLAG.sub("", n).rstrip(". ") for n in loading]
    found = [n[:1].lower() + n[1:] for n in found if n]
    missing = f": {'; '.join(found)}" if found else ""
    return (f"No memory data in this profile{missing}. A profile recorded with "
            "profile_memory=True gives the memory over time, the peaks per component and "
            "the measured peak to hold against the theory.")


class MemoryTab(JobTab):
    """Memory over time by component family (ranks folded or one rank), peaks per
    component over the ranks, and the measured peak next to the job's theory."""

    title = "Memory"
    waits_for = "the memory tables, and the job (model, batch) the memory theory needs"

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
        self.rank = rank_picker("ranks")
        self.rank.options = [(_MAX_OVER_RANKS, ALL_RANKS)]
        self._timeline: pd.DataFrame | None = None
        self._quiet = False
        super().__init__(ctx, [self.family, self.value, self.rank])
        self.controls = self.children[0]  # hidden where there is no memory data to pick in
        for widget in (self.family, self.value, self.rank):
            widget.observe(self._on_control, names="value")

    def show(self, profile: Any) -> None:
        super().show(profile)
        self._timeline = None
        self._quiet = True
        try:
            set_ranks(self.rank, ranks_of(profile), everything=_MAX_OVER_RANKS)
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

    def _defaults(self, timeline: pd.DataFrame, device_type: str | None = None) -> None:
        """Start on a family and a quantity that have data (never an all-zero series),
        among the families the device can have (:func:`families_offered`)."""
        offered = families_offered(timeline, device_type)
        self._quiet = True
        try:
            self.family.options = offered
            self.family.value = offered[0]
            picked = default_value(timeline, self.family.value)
            if picked:
                self.value.value = picked
        finally:
            self._quiet = False

    def build(self, profile: Any) -> list[W.Widget]:
        out: list[W.Widget] = []
        if self._timeline is None:
            self._timeline = A.memory_timeline(profile, max_points=200)
            self._defaults(self._timeline, getattr(profile.meta, "device_type", None))
        timeline = self._timeline
        self._peaks = peaks_by_component(A.memory_peaks(profile))
        loading = notes_about(profile, MEMORY_TABLES)
        empty = default_value(timeline) is None and self._peaks.empty
        self.controls.layout.display = "none" if empty else ""
        if empty:
            # nothing to draw nor to list: say so once, with what would record it
            self.peaks = W.HTML()
            return [html_widget(note(no_memory_text(loading)))] + self._theory(False)
        column, family = self.value.value, self.family.value
        rank = None if shows_all(self.rank) else int(self.rank.value)
        series = memory_series(timeline, column, family=family, rank=rank)
        what = column.removesuffix("_bytes")
        if series.empty:
            out.append(html_widget(note(f"No {what} memory above zero for the {family} components"
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
                out.append(html_widget(note(f"Hidden (no {what} byte, or beyond the 12 largest): "
                                            + ", ".join(hidden[:30])
                                            + (" …" if len(hidden) > 30 else ""))))
        self.peaks = W.HTML()
        self._draw_peaks(None)
        out.append(self.peaks)
        if loading:
            out.append(html_widget("".join(note(n) for n in loading)))
        out += self._theory()
        return out

    def _on_pick(self, points: list[dict[str, Any]]) -> None:
        names = [str(p["series"]).split(",")[0] for p in points if "series" in p]
        self._draw_peaks(names[0] if names else None)

    def _draw_peaks(self, component: str | None) -> None:
        """The peaks table: per component its peak over the ranks (median, min, max and
        the highest rank), or, on a profile of one rank, that rank's peak alone (the
        median, min and max of one value are that value thrice)."""
        peaks = self._peaks
        if component is not None:
            peaks = peaks[peaks["component"] == component]
        ranks = ranks_of(self.profile)
        if len(ranks) == 1:
            caption = (f"Peak memory per component, rank {ranks[0]} (components that hold "
                       "nothing are hidden)" if component is None else
                       f"Peak memory of {component}, rank {ranks[0]} (double-click the chart "
                       "for all components)")
            self.peaks.value = STYLE + frame_html(
                peaks, caption, max_rows=30,
                columns=[c for c in ("family", "component", "quantity", "peak_max_bytes")
                         if c in peaks.columns],
                headers={"peak_max_bytes": "peak"})
            return
        caption = ("Peak memory per component over the ranks (components that hold nothing "
                   "are hidden)" if component is None else
                   f"Peak memory of {component} (double-click the chart for all components)")
        self.peaks.value = STYLE + frame_html(
            peaks, caption, max_rows=30,
            headers={"peak_median_bytes": "peak, median over ranks", "peak_min_bytes":
                     "peak, min", "peak_max_bytes": "peak, max", "worst_rank": "highest rank"})

    def _theory(self, has_memory: bool = True) -> list[W.Widget]:
        job = self.current
        if job is None or job.model is None or job.hardware is None:
            return [no_job_note(job, "memory theory", ("model", "hardware"),
                                self.ctx.open_tab is not None)]
        if job.training_step() is False:
            return self._inference_theory(has_memory)
        try:
            memory = memory_breakdown(job)
        except PerfkitError as exc:
            return [html_widget(error(describe_error(exc, "the memory theory")))]
        theory = float(memory["bytes"].sum())
        scheme = STATIC_SCHEME_NAMES[memory.attrs["static_scheme"]]  # the job's framework's
        measured = job.peak_memory_bytes
        guard = check_memory(theory, measured, job, what="the theory (static + activations)")
        # the theory is static + activations, and says so whether or not a peak was measured
        parts = (f"static, {scheme}, {bytes_text(memory['bytes'].iloc[:3].sum())} + "
                 f"activations {bytes_text(memory['bytes'].iloc[3])}, "
                 f"{html.escape(activation_text(job.activation_model))}")
        # what static memory counts per parameter, in the run's type (an fp16
        # Megatron-LM run's fp16 gradient buffer and fp32 main gradients, ...)
        counts = f"Static memory counts {html.escape(memory.attrs['static_note'])}."
        if memory.attrs["static_scheme"] == job.static_scheme:  # why this scheme, as the
            # Planner says it (a simulated PyTorch export counted by MindSpore's scheme)
            counts += f" The {scheme}: {html.escape(job.static_scheme_detail)}."
        return self._section("Measured against the theory of the job (most loaded device)",
                             _against_peak(job, theory, "theory", parts, guard, has_memory),
                             counts, guard, memory, "theory")

    def _inference_theory(self, has_memory: bool) -> list[W.Widget]:
        """The measured peak against the forward-only theory of a profile without a
        backward pass (:func:`~perfkit.widgets.inference_memory.
        inference_memory_breakdown`: weights + KV cache + the step's largest transient),
        not a training step's."""
        job = self.current
        try:
            theory = inference_theory(job)
        except PerfkitError as exc:
            return [html_widget(error(describe_error(exc, "the inference memory theory")))]
        counts = (f"The profile runs no backward pass ({html.escape(why_inference(job))}): "
                  f"the theory counts a forward-only step, "
                  f"{html.escape(theory.memory.attrs['note'])}.")
        return self._section("Measured against the inference theory of the job (forward "
                             "only, most loaded device)",
                             _against_peak(job, theory.total, theory.name, theory.parts,
                                           theory.guard, has_memory),
                             counts, theory.guard, theory.memory, theory.name)

    def _section(self, title: str, line: str, counts: str, guard: Any,
                 memory: pd.DataFrame, theory_name: str) -> list[W.Widget]:
        """The theory's section: its heading, the line against the peak, what it counts,
        the guard's warning and the chart of its components."""
        job = self.current
        out = [heading(title),
               html_widget(f"<p style='font-size:13px'>{line}</p>"
                           f"<p style='font-size:13px'>{counts}</p>")]
        out += warning_widgets(guard.warning)
        out.append(self.chart(C.memory_chart(memory, title=f"Memory per device: "
                                                           f"{job.model.name or 'the job'} on "
                                                           f"{job.hardware.name} "
                                                           f"({theory_name})")))
        return out


def _against_peak(job: Any, theory: float, name: str, parts: str, guard: Any,
                  has_memory: bool) -> str:
    """The theory ``name`` (its total and ``parts``) against the job's measured peak, or
    why there is none (said above already when the profile holds no memory data)."""
    measured = job.peak_memory_bytes
    if not measured:
        why = f" ({html.escape(job.detail('peak_memory_bytes'))})" if has_memory else ""
        return (f"<b>{name.capitalize()}</b> {bytes_text(theory)} ({parts}); no measured "
                f"peak to compare with{why}.")
    # the peak's own detail says what it is (the framework allocator's peak allocated on
    # the most loaded rank, or a figure the user set)
    return (f"<b>Measured peak</b> {bytes_text(measured)} "
            f"({html.escape(job.detail('peak_memory_bytes'))}) · "
            f"<b>{name}</b> {bytes_text(theory)} ({parts}) · theory / measured "
            f"{theory / float(measured):,.2f}×" + (" ⚠" if not guard.ok else ""))

