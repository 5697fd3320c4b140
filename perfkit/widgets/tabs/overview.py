"""The Overview tab: the headline, the step per rank and the steps table.

The top findings come as the advisor finds them (:meth:`Context.stream_findings`): the
first ones, ranked among what has come so far, while the slower rules still run (the page
says so), then the final ranked list. While a large profile is still being read, the tab
shows its steps, read first (:mod:`perfkit.io.preview.steps`): the step time and, where the step
file gives it, the step split; the findings, throughput and MFU wait for the rest.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from typing import Any

import ipywidgets as W
import pandas as pd

from ... import analysis as A
from ... import charts as C
from ..._shares import rounded_split
from ...advisor.finding import share_of_step, step_basis_note
from ...analysis.recorded import withheld_text
from ...analysis.timeline import has_timed_events
from ...format import counted, time_text
from ...tables import over_ranks
from ..headline import (
    Figure,
    finding_tab,
    headline,
    headline_html,
    split_parts,
    top_findings,
    with_exposed_comm,
)
from ..job import unknowns_html
from ..load_notes import plain_note
from ..markup import STYLE, frame_html, note
from ..overview import profile_facts, step_shares
from ..render import close_widgets, spinner_html
from .base import (
    ALL_RANKS,
    Context,
    JobTab,
    all_ranks_value,
    heading,
    html_widget,
    rank_picker,
    ranks_of,
    set_ranks,
)

__all__ = ["OverviewTab"]


#: What the Overview waits for once the files are read: the job, and the findings after it.
_JOB_WAIT = ("the job (model, batch) that the throughput and MFU need, and then the top "
             "findings")
#: What it waits for while it shows the figures of a few steps read first
#: (:mod:`perfkit.widgets.first_answer`): the whole profile's, before and after its files
#: are read.
_WHOLE_WAIT = ("the device tasks of every step: the whole profile's figures, and the top "
               "findings, come with them")
_WHOLE_JOB_WAIT = "the whole profile's job, and then the top findings"


class OverviewTab(JobTab):
    """Headline (step time, throughput, MFU, step split, top findings), what perfkit could
    not read (once for every tab), the step per rank, the steps table and what was
    opened."""

    title = "Overview"
    waits_for = ("the device tasks: the top findings, and the job (model, batch) that the "
                 "throughput and MFU need, come with them")

    def __init__(self, ctx: Context) -> None:
        self.rank = rank_picker("steps of")
        self.steps_table = W.HTML()
        self._steps: pd.DataFrame | None = None
        self._slowest: Any = None  # perfkit.analysis.SlowestRank of 3 ranks or more
        self._findings_box = W.VBox()
        #: the rows of the findings box of the last build, by what they show
        #: (:meth:`_show_findings` keeps a row that shows the same again)
        self._rows: tuple[W.VBox, dict[Any, W.Widget]] = (self._findings_box, {})
        self._streaming = False
        self._step_ms: float | None = None  # the step time the headline shows
        super().__init__(ctx)
        self.keep.add(id(self.rank))
        self.rank.observe(lambda _c: self._draw_steps(), names="value")

    def show(self, profile: Any) -> None:
        super().show(profile)
        set_ranks(self.rank, ranks_of(profile))

    def build(self, profile: Any) -> list[W.Widget]:
        steps = A.step_breakdown(profile)
        step_s = A.measured_step_s(steps) if not steps.empty else math.nan
        self._step_ms = step_s * 1e3 if math.isfinite(step_s) else None
        known = self.ctx.known_findings(profile)
        head = headline(profile, steps, self.current, known)
        # the findings come in finish(), once the rest is on show
        self._streaming = known is None
        rows: dict[Any, W.Widget] = {}
        self._findings_box = W.VBox(self._working(0, rows) if self._streaming
                                    else self._findings(head.findings, rows))
        self._rows = (self._findings_box, rows)
        out: list[W.Widget] = [html_widget(headline_html(head, _split_missing(steps))),
                               self._findings_box]
        # what the profile did not give, said once for every tab (they refer here)
        unknown = unknowns_html(self.current, "dashboard" if self.ctx.open_tab else "python")
        if unknown:
            out.append(html_widget(unknown))
        # the loader's notes as the tabs say theirs: tables and columns in words
        facts = profile_facts(profile, self.current)
        facts["value"] = [plain_note(v) if f == "note" else v
                          for f, v in zip(facts["fact"], facts["value"], strict=True)]
        facts = html_widget(frame_html(facts, "What was opened", max_rows=40, wrap=("value",)))
        if steps.empty:
            return out + [html_widget(note(
                "No training steps were found in this profile (no step markers and no step "
                "trace), so there is no step breakdown; the Operators and Memory tabs may "
                "still have data.")), facts]
        withheld = withheld_text(steps)
        if withheld:  # no step with a time: no chart of empty bars
            return out + [html_widget(note(f"No step breakdown: {withheld}.")), facts]
        self._steps = with_exposed_comm(steps)
        # the one slowest rank the findings and the Communication tab name too
        self._slowest = (A.slowest_rank(profile, parallel=getattr(self.current, "parallel",
                                                                  None))
                         if steps["rank"].nunique() >= 3 else None)
        parts = split_parts(self._steps)
        chart = C.step_breakdown_chart(self._steps, parts=parts, select=True,
                                       title="Where the step time goes, per rank (click a "
                                             "rank for its steps)")
        self.steps_table = W.HTML()
        self._draw_steps()
        return out + [self.chart(chart, self._on_pick), self.rank, self.steps_table, facts]

    def finish(self) -> None:
        with self.building:  # what this build drew: the profile and the findings' place
            if not self._streaming:
                return
            self._streaming = False
            profile, box, generation = self.profile, self._findings_box, self.generation

        def show(found: list[Any], done: bool) -> None:
            if self.generation != generation or self.stale:
                raise _Superseded  # redrawn meanwhile (another profile, another job)
            self._show_findings(found, done, box)
        try:
            self.ctx.stream_findings(profile, show)
        except _Superseded:
            pass

    def _show_findings(self, found: list[Any], done: bool, box: W.VBox | None = None
                       ) -> None:
        """Show the top findings of ``found`` (so far, or final when ``done``) in ``box``
        (default: the last build's)."""
        box = self._findings_box if box is None else box
        # the rows already on show are kept where they show the same: each finding streamed
        # would otherwise make the whole list again, every widget of it opened in the
        # browser and closed again at the next finding
        made = self._rows[1] if self._rows[0] is box else {}
        rows = self._findings(top_findings(found), made) if done or found else []
        if not done:
            rows = self._working(len(found), made) + rows[1:]
        old = box.children
        box.children = tuple(rows)
        shown = {id(r) for r in rows}
        close_widgets(old, keep=shown)
        closed = {id(r) for r in old} - shown
        for key in [k for k, w in made.items() if id(w) in closed]:
            del made[key]

    @staticmethod
    def _working(count: int, made: dict[Any, W.Widget] | None = None) -> list[W.Widget]:
        """The findings' heading while the advisor works, and how many it found so far;
        ``made``: the rows on show, whose working line is updated rather than replaced."""
        so_far = (f"{count} found so far, ranked among themselves: the list may still change"
                  if count else "none found yet")
        markup = STYLE + ("<div class='pk-h'>Top findings (time at stake per step)</div>"
                          + spinner_html(f"The advisor is still working ({so_far}) …"))
        line = made.get("working") if made is not None else None
        if isinstance(line, W.HTML):
            line.value = markup
        else:
            line = W.HTML(markup)
            if made is not None:
                made["working"] = line
        return [line]

    def waiting(self, opening: Any) -> list[W.Widget]:
        """The steps read first (:mod:`perfkit.io.preview.steps`), and a progress bar for the
        rest; without them, the progress bar only."""
        early = getattr(opening.preview, "profile", None)
        # a few whole steps read meanwhile (large Kineto traces): their step time where the
        # step figure read first is the host's span, their throughput and MFU until the
        # whole profile's job, their split until the whole profile's steps
        cut = getattr(opening, "first", None)
        if early is None:
            return self._no_steps_yet(opening) + super().waiting(opening)
        steps = A.step_breakdown(early)
        head = headline(early, steps, None)
        first = head.figures[0]
        # Kineto host ProfilerStep spans are the host's pace: perfkit's step is the
        # device's (the preview reads it where it can, and then says host_spans=False)
        host = bool(getattr(opening.preview, "host_spans", False))
        # the files are read (the background opening then shows the whole profile's
        # steps): only the job is still being worked out
        whole = bool(getattr(opening, "whole_profile", False))
        if whole:
            steps_first = [Figure(first.name, first.text, first.note + "; the whole profile "
                                  "is read", first.warning)]
        elif host:
            # a trace without ProfilerStep: its iterations' spans, told by the optimizer
            iterations = bool(A.steps.inferred_steps(steps))
            kind = "training iteration span" if iterations else "ProfilerStep span"
            span = first.note.replace("slowest rank's step", "slowest rank's " + kind
                                      ).replace("one rank's step", "one rank's " + kind)
            steps_first = [
                cut.step_figure() if cut is not None else
                Figure("step time", "…", "comes with the device tasks, still being read: "
                                         "each step from its first to its last GPU task"),
                Figure("host iteration span" if iterations else "host step span",
                       first.text, span + "; read first (the host's pace, not the device's"
                       + ("; the first iteration, which begins at the trace's first "
                          "event, comes with the rest" if iterations else "") + ")")]
        else:
            lane = bool(getattr(opening.preview, "device_lane", False))
            steps_first = [Figure(first.name, first.text, first.note + "; read first, from "
                                  + opening.preview.steps_from
                                  + ("; close to the step the full load gives (first to "
                                     "last GPU task), which replaces it" if lane else ""),
                                  first.warning)]
        being = "being worked out from them" if whole else "still being read"
        head.figures = [*steps_first, *(cut.figures() if cut is not None else [
            Figure("throughput", "…", "comes with the job: its batch and sequence length are "
                                      f"read from the operator shapes, {being}"),
            Figure("MFU", "…", "comes with the job: the model is read from the operator "
                               f"shapes, {being}")])]
        split_known = "computing_us" in steps and steps["computing_us"].notna().any()
        from_first = None
        if not split_known and cut is not None and len(cut.breakdown):
            head.split, split_known = cut.split(), True
            from_first = html_widget(note(
                f"The split above is that of {cut.source()}; the whole profile's comes "
                "with the device tasks, still being read."))
        missing = (None if split_known else "The split (computing, exposed communication, "
                   "free) comes with the device tasks, still being read.")
        return [html_widget(headline_html(head, missing)),
                *([from_first] if from_first is not None else []),
                html_widget("<div class='pk-h'>Top findings (time at stake per step)</div>"),
                *opening.widgets(self._waiting_for(whole, cut is not None))]

    def _waiting_for(self, whole: bool, cut: bool) -> str:
        """What the Overview waits for: the device tasks until the files are read
        (``whole``), then the job; where a few steps read first (``cut``) already give
        figures, the whole profile's."""
        if cut:
            return _WHOLE_JOB_WAIT if whole else _WHOLE_WAIT
        return _JOB_WAIT if whole else self.waits_for

    @staticmethod
    def _no_steps_yet(opening: Any) -> list[W.Widget]:
        """Why the page has no step figure while the profile is read: the preview's notes
        (each file without a quick step reading, and why), the first two of them."""
        why = [str(n) for n in getattr(opening.preview, "notes", None) or []]
        if not why:
            return []
        more = len(why) - 2
        text = ("No step time yet: the steps come with the full load, still being read ("
                + "; ".join(why[:2])
                + (f"; {counted(more, 'more file')} without a quick step reading"
                   if more > 0 else "") + ").")
        return [html_widget(note(text))]

    def _findings(self, findings: list[Any], made: dict[Any, W.Widget] | None = None
                  ) -> list[W.Widget]:
        """The rows of the top ``findings``; ``made``: rows already made, by what they
        show, taken again where they show the same (new ones are added to it)."""
        made = {} if made is None else made

        def row(key: Any, new: Callable[[], W.Widget]) -> W.Widget:
            if key not in made:
                made[key] = new()
            return made[key]

        if not findings:
            markup = ("<div class='pk-h'>Top findings</div>"
                      + note("No finding: the advisor saw nothing abnormal."))
            return [row(("html", markup), lambda: html_widget(markup))]
        title = "Top findings (time at stake per step)"
        rows: list[W.Widget] = [row(("heading", title), lambda: heading(title))]
        basis = step_basis_note(findings, self._step_ms, len(ranks_of(self.profile)),
                                self._steps)
        if basis:
            said = note(basis[0].upper() + basis[1:] + ".")
            rows.append(row(("html", said), lambda: html_widget(said)))
        drawable = has_timed_events(self.profile)
        for i, f in enumerate(findings, 1):
            stake = (f"{time_text(f.ms_per_step * 1e3)} per step "
                     f"({share_of_step(f, self._step_ms)})"
                     if f.measured else "time at stake not measurable from the profile")
            tab = finding_tab(f.area, self.ctx.tabs, drawable)
            text = (f"<div class='pk-finding'>{i}. <b>{html.escape(stake)}</b> — "
                    f"{html.escape(f.title)}</div>")
            rows.append(row(("finding", text, tab), lambda text=text, tab=tab:
                            self._finding_row(text, tab)))
        return rows

    def _finding_row(self, text: str, tab: str) -> W.HBox:
        """One finding's row: its *Evidence* button (which opens ``tab``) and ``text``."""
        button = W.Button(description=f"Evidence: {tab} ›",
                          tooltip=f"Open the {tab} tab, which shows the evidence",
                          layout=W.Layout(width="auto", min_width="170px"))
        button.add_class("pk-evidence")
        if self.ctx.open_tab is None:
            button.disabled = True
        else:
            button.on_click(lambda _b, tab=tab: self.ctx.open_tab(tab))
        return W.HBox([button, html_widget(text)], layout=W.Layout(align_items="center"))

    def _on_pick(self, points: list[dict[str, Any]]) -> None:
        ranks = [p["rank"] for p in points if "rank" in p]
        self.rank.value = int(ranks[0]) if ranks else all_ranks_value(self.rank)

    def _draw_steps(self) -> None:
        steps = self._steps
        if steps is None or steps.empty:
            self.steps_table.value = ""
            return
        data, shares, split = step_shares(steps)
        rank = self.rank.value
        ranks = pd.unique(data["rank"].dropna()) if "rank" in data.columns else []
        if len(ranks) <= 1:  # one rank: its own steps, no spread
            rank = int(ranks[0]) if len(ranks) else None
        if rank == ALL_RANKS:
            # each step's split over the ranks: its parts summed over the ranks, shares of
            # their summed steps (as the headline's split), so that they add up to 100 %
            parts = {c: c.removesuffix("_share") + "_us" for c in shares}
            spread = over_ranks(data, ["step"], ["step_us"],
                                keep={**{u: "sum" for u in parts.values()},
                                      "split_us": "sum"}, sort=False)
            whole = spread["split_us"].where(spread["split_us"] > 0)
            spread[list(shares)] = _shown(pd.DataFrame(
                {c: spread[u].astype("float64") / whole for c, u in parts.items()}))
            spread = spread.sort_values("step", kind="mergesort")
            headers = dict(shares)
            split = split.replace("(shares of the step time", "(shares of the step time "
                                  "summed over the ranks").replace(
                "sum of its parts,", "sum of its parts over the ranks,")
            headers.update({"step_median_us": "step time, median over ranks",
                            "step_min_us": "shortest over the ranks",
                            "step_max_us": "longest over the ranks",
                            "worst_rank": "rank that ended last"})
            said = "" if self._slowest is None else note(
                self._slowest.sentence + " The table's last rank is the one that ended each "
                "step last: ranks that wait for a slow peer inside a collective end with "
                "it, so that rank need not be a slow one.")
            self.steps_table.value = STYLE + said + frame_html(
                spread, f"Steps: each step's time over the ranks{split}",
                columns=["step", "step_median_us", "step_min_us", "step_max_us", "worst_rank",
                         *shares],
                headers=headers, max_rows=30)
        else:
            one = data if rank is None else data[(data["rank"].astype("Int64") == rank)
                                                 .fillna(False).to_numpy(bool)]
            headers = {"step_us": "step time", **shares}
            self.steps_table.value = STYLE + frame_html(
                one, ("Steps" if rank is None else f"Steps of rank {rank}")
                + f": each step's time{split}",
                columns=["step", "step_us", *shares], headers=headers, max_rows=30)

    def static_html(self) -> str:
        parts = []
        for c in self.body.children:
            if isinstance(c, W.HTML):
                parts.append(c.value)
            elif c is self._findings_box:  # the findings' texts, without their buttons
                parts.extend(w.value for row in c.children
                             for w in (row.children if isinstance(row, W.HBox) else [row])
                             if isinstance(w, W.HTML))
        if self.charts:
            parts.insert(1, C.chart_to_svg(self.charts[0].chart))
        return self.message.value + "".join(parts)


class _Superseded(Exception):
    """The tab's profile or job changed while its findings were coming: stop them."""


def _shown(shares: pd.DataFrame) -> pd.DataFrame:
    """A split's shares as the table shows them, rounded to 0.1 % so that each row's shown
    shares add up to 100.0 % (:func:`perfkit._shares.rounded_split`)."""
    return rounded_split(shares) if not shares.empty else shares


def _split_missing(steps: pd.DataFrame) -> str | None:
    """What the headline's split says when the profile gives no computing / communication
    / free split but its step trace's phases (legacy MindSpore): the chart shows those."""
    withheld = withheld_text(steps)
    if withheld:
        return f"No step split: {withheld}."
    if steps.empty or C.step_parts(steps) != C.TRACE_PHASES:
        return None
    return ("No computing / communication / free split in this profile: its step trace "
            "gives each step's phases instead, the step interval (waiting for data), forward "
            "and backward, and the step tail, which the chart below stacks per rank.")
