"""The Advice tab: the advisor's findings, ms at stake, evidence and next steps."""

from __future__ import annotations

from typing import Any

import ipywidgets as W
import pandas as pd

from ... import analysis as A
from ... import charts as C
from ...advisor.finding import share_of_step, step_basis_note
from ...analysis.timeline import has_timed_events
from ...format import time_text
from ..headline import finding_tab
from ..markup import STYLE, note
from ..render import close_widgets
from .base import Context, JobTab, ranks_of

__all__ = ["AdviceTab"]


class AdviceTab(JobTab):
    """The advisor's findings: ms at stake (click a bar for that finding alone), what was
    seen, what to change, and the details behind each."""

    title = "Advice"
    waits_for = "every table: the advisor reads them all"

    def __init__(self, ctx: Context) -> None:
        self.table = W.HTML()
        self.goto = W.HBox()
        self._frame: pd.DataFrame | None = None
        self._basis = ""  # what the shares are of, where it is not the job's step
        super().__init__(ctx)

    def build(self, profile: Any) -> list[W.Widget]:
        findings = self.ctx.findings(profile)
        self._frame = C.findings_frame(findings)
        # a share of the mean over some steps only names them, beside the shares the note
        # below says the basis of once
        self._frame["ms per step"] = [
            f"{time_text(f.ms_per_step * 1e3)} ({share_of_step(f)})"
            if f.measured and f.step_basis else "" for f in findings]
        step_s = getattr(self.current, "step_time_s", None)
        basis = step_basis_note(findings, step_s * 1e3 if step_s else None,
                                len(ranks_of(profile)), A.step_breakdown(profile))
        self._basis = note(basis[0].upper() + basis[1:] + ".") if basis else ""
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
                tab = finding_tab(str(frame["area"].iloc[0]), self.ctx.tabs,
                                  has_timed_events(self.profile))
                button = W.Button(description=f"Evidence: {tab} ›",
                                  layout=W.Layout(width="auto"))
                button.add_class("pk-evidence")
                button.on_click(lambda _b: self.ctx.open_tab(tab))
                self.goto.children = (button,)
        self.table.value = STYLE + self._basis + "<div class='pk-table'>" + \
            C.findings_html(frame, n=None) + "</div>"

    def static_html(self) -> str:
        return self.message.value + self.table.value
