"""The Timeline tab: one step of a few ranks as swimlanes, exported for Perfetto."""

from __future__ import annotations

import base64
import html
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

import ipywidgets as W
import pandas as pd

from ... import analysis as A
from ... import charts as C
from ...analysis.recorded import fragment_text
from ...analysis.timeline import has_timed_events
from ...export import export_trace
from ...format import bytes_text, counted
from ..markup import STYLE, describe_error, error, note, warning_html
from .base import ALL_RANKS, Context, Tab, html_widget, ranks_of

__all__ = ["TimelineTab", "empty_timeline_note"]


_MEDIAN_STEP = "representative (median step of the slowest rank)"
#: The same choice on a profile of one rank, which is not the slowest of anything.
_MEDIAN_STEP_ONE = "representative (median step)"
#: Most ranks the Timeline draws at once (one or a few, as swimlanes).
TIMELINE_MAX_RANKS = 4
#: Largest trace offered as a download link in the page (bigger ones: open the path).
DOWNLOAD_LIMIT_BYTES = 25 * 2**20

#: Width of the timeline's plot in pixels: with its lane names (up to about 180 px) it fits
#: the tab of a 1024 px window, where a 960 px plot made the tab scroll sideways.
TIMELINE_WIDTH = 780


#: The files of msprof-analyze's cluster summary, with what each holds.
_CLUSTER_FILES = {
    "cluster_step_trace_time.csv": "each rank's step totals: computing, communication, "
                                   "free time, pipeline bubble",
    "cluster_communication.json": "figures per collective: time split, bandwidth",
    "cluster_communication_matrix.json": "figures per link",
    "communication_group.json": "the communication groups",
}


def empty_timeline_note(profile: Any) -> str:
    """Why the Timeline tab draws nothing for a profile without timed events
    (:func:`perfkit.analysis.timeline.has_timed_events`): what the profile holds, why no
    timeline comes of it, where its figures are shown and what to open instead."""
    meta = getattr(profile, "meta", None)
    fmt = getattr(meta, "source_format", None) or "this"
    if fmt == "cluster_analysis_output":
        folder = Path(str(getattr(meta, "path", "") or ""))
        held = [f"{name} ({what})" for name, what in _CLUSTER_FILES.items()
                if (folder / name).is_file()]
        ranks = getattr(profile, "ranks", None) or [meta.rank]
        return ("No timeline: this folder is msprof-analyze's cluster summary "
                "(cluster_analysis_output) of "
                f"{counted(len(ranks), 'rank')}, not a recording of events. It holds "
                + ("; ".join(held) if held else "summary tables")
                + ", but no device task or host operator with its start and duration, so "
                "nothing can be placed in time. Its figures are on the Overview (each "
                "rank's step split) and the Communication tab (collectives, links, exposed "
                "communication). To draw a timeline, open what msprof-analyze read (the "
                "folder given to its -d): the ranks' own profiler output, the *_ascend_pt "
                "(torch_npu) or *_ascend_ms (MindSpore) folders with "
                "ASCEND_PROFILER_OUTPUT/trace_view.json or kernel_details.csv, all of them "
                "or one rank's.")
    return (f"No timeline: this {fmt} profile has no device task or host operator with its "
            "start and duration, which a timeline draws, so nothing can be placed in time; "
            "its step and communication figures are on the Overview and the Communication "
            "tab. A torch_npu or MindSpore export with trace_view.json or "
            "kernel_details.csv, or a Kineto trace, would fill this tab.")


class TimelineTab(Tab):
    """One step of one or a few ranks as swimlanes (:func:`perfkit.analysis.timeline`,
    :func:`perfkit.charts.timeline_chart`): zoom with the wheel, a tooltip per event, the
    longest kernels and collectives labelled; the same window exported for Perfetto
    (:func:`perfkit.export_trace`) into a temporary folder, never the profile's."""

    title = "Timeline"
    waits_for = "the device tasks and host operators it draws in time"

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
                                       "open", layout=W.Layout(width="auto", min_width="190px",
                                                        flex="0 0 auto"))
        self.exported = W.HTML()
        self.export.on_click(lambda _b: self.export_trace())
        self._folder: Path | None = None
        self._quiet = False
        super().__init__(ctx, [self.step, self.ranks, self.lanes])
        #: the row of the step, ranks and lanes pickers (hidden when nothing can be drawn)
        self.controls = self.children[0]
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
            ranks = ranks_of(profile)
            median = _MEDIAN_STEP if len(ranks) > 1 else _MEDIAN_STEP_ONE
            self.step.options = [(median, ALL_RANKS)] + [(f"step {i}", i) for i in ids]
            self.step.value = ALL_RANKS
            self.ranks.options = [(f"rank {r}", r) for r in ranks]
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
        drawable = has_timed_events(profile)
        self.controls.layout.display = "" if drawable else "none"
        if not drawable:  # a summary-only export: say what it holds, not the API's error
            return [html_widget(note(empty_timeline_note(profile)))]
        ranks = self._chosen_ranks()
        # the default slowest rank among its stage's ranks, as the other tabs name it
        frame = A.timeline(profile, step=self._chosen_step(), ranks=ranks,
                           lanes=self.lanes.value,
                           parallel=getattr(self.ctx.job.job, "parallel", None))
        notes = list(frame.attrs.get("notes", []))
        if not self.ranks.value and len(self.ranks.options) > 1:  # one rank: nothing to pick
            notes.append("Pick ranks in the list (Ctrl- or Shift-click for several, at most "
                         f"{TIMELINE_MAX_RANKS}); with none picked, the slowest and the "
                         "fastest are drawn.")
        if len(self.ranks.value) > TIMELINE_MAX_RANKS:
            notes.append(f"{len(self.ranks.value)} ranks were picked; the first "
                         f"{TIMELINE_MAX_RANKS} are drawn (a few ranks stay readable).")
        info = frame.attrs.get("timeline", {})
        # a step whose task list was cut short: said first, before anything is read off it
        fragment = fragment_text(A.step_breakdown(profile), info.get("step"),
                                 tuple(info.get("ranks", ())))
        out: list[W.Widget] = [html_widget(warning_html(fragment))] if fragment else []
        out.append(html_widget("".join(note(n) for n in notes)))
        if frame.empty:
            out.append(html_widget(note("No event in this window.")))
        else:
            out.append(html_widget(note("Scroll over the chart to zoom, drag to pan, double-click "
                                        "to reset; hover an event for its name and duration.")))
            out.append(self.chart(C.timeline_chart(frame, width=TIMELINE_WIDTH,
                                                   fragment=fragment is not None),
                                  renderer="canvas"))
            cap = info.get("max_events")
            out.append(html_widget(note(
                f"{len(frame):,} rects for {int(frame['n_events'].sum()):,} events"
                + (f" (at most {cap:,} are drawn: tiny neighbours are merged into blocks "
                   "that keep their time; the export below has every event)." if cap
                   else ".")
                + (" These events are a fragment of the step: its other device tasks were "
                   "not recorded (see the warning above)." if fragment else ""))))
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
                                overwrite=True,
                                parallel=getattr(self.ctx.job.job, "parallel", None))
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
