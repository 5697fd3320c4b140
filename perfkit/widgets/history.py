"""The History panel: a tuning journal's progression, its runs, and any two compared.

``history_panel(journal_or_path)`` shows a :class:`perfkit.Journal` (or the journal file at
a path): the progression of tokens/s per device and MFU over the runs (labels as x,
:func:`perfkit.charts.journal_progress_chart`), the table of runs, and a compare view of
any two runs — the sentence and the config diff on top, the time diff below (metrics,
the job's step and its parts, the operators that moved most, the findings that appeared or
disappeared). Everything shown comes from :meth:`perfkit.Journal.runs` and
:meth:`perfkit.Journal.compare`, and the verdict above the diff (faster / slower / no
change) from :func:`perfkit.compare.stored_verdict`, the verdict of :func:`perfkit.compare`
on the stored step times; this module only wires widgets to them.

The panel never raises into the page: a missing, empty, foreign or damaged journal, or
any error while comparing, becomes a message in the panel.
"""

from __future__ import annotations

import html
import os
from typing import Any

import ipywidgets as W
import pandas as pd

from .. import charts as C
from ..compare import stored_verdict, verdict_sentence
from ..journal import Journal
from ..journal.text import STYLE, config_diff_html, runs_html, time_diff_html

__all__ = ["HistoryPanel", "history_panel", "EMPTY_MESSAGE"]

#: What the panel says when the journal has no run.
EMPTY_MESSAGE = ("The journal has no run yet. Add one with <code>journal.add(PROFILE, "
                 "label=...)</code> or <code>perfkit journal add PROFILE --label ...</code>.")


def _box(text: str, kind: str = "info") -> str:
    colors = {"info": ("#31708f", "#d9edf7", "#bce8f1"),
              "error": ("#a94442", "#f2dede", "#ebccd1")}
    fg, bg, border = colors[kind]
    return (f"<div style='color:{fg};background:{bg};border:1px solid {border};"
            f"padding:8px;border-radius:4px;margin:4px 0'>{text}</div>")


def _error(exc: BaseException) -> str:
    return html.escape(" ".join(str(exc).split()) or type(exc).__name__)


class HistoryPanel(W.VBox):
    """The panel returned by :func:`history_panel`.

    Attributes
    ----------
    journal : perfkit.Journal or None
        The journal shown (None when it could not be opened: ``message`` says why).
    runs : pandas.DataFrame or None
        Its :meth:`~perfkit.Journal.runs`.
    comparison : perfkit.journal.RunComparison or None
        The last comparison shown.
    header, message, chart, table : ipywidgets.HTML
        The journal's path and size, a message (empty journal, errors), the progression
        chart (inline SVG) and the table of runs.
    base, new : ipywidgets.Dropdown
        The two runs compared (run ids; labels shown). Changing one recomputes.
    config_diff, time_chart, time_diff : ipywidgets.HTML
        The compare view: sentence and job changes on top, then the step and operator
        charts and the time tables.
    """

    def __init__(self, journal_or_path: Journal | str | os.PathLike[str] | None = None
                 ) -> None:
        self.journal: Journal | None = None
        self.runs: pd.DataFrame | None = None
        self.comparison: Any = None
        self.verdict: Any = None
        self.header = W.HTML()
        self.message = W.HTML()
        self.chart = W.HTML()
        self.table = W.HTML()
        style = {"description_width": "70px"}
        self.base = W.Dropdown(description="compare", style=style,
                               layout=W.Layout(width="320px"))
        self.new = W.Dropdown(description="with", style=style, layout=W.Layout(width="320px"))
        self.config_diff = W.HTML()
        self.time_chart = W.HTML()
        self.time_diff = W.HTML()
        self._compare_box = W.VBox([W.HTML("<h4 style='margin:8px 0 2px'>Compare two runs"
                                           "</h4>"),
                                    W.HBox([self.base, self.new]), self.config_diff,
                                    self.time_chart, self.time_diff])
        super().__init__([self.header, self.message, self.chart, self.table,
                          self._compare_box])
        self.base.observe(self._on_select, names="value")
        self.new.observe(self._on_select, names="value")
        self._updating = False
        self.set_journal(journal_or_path)

    # ---- journal ----------------------------------------------------------------------
    def set_journal(self, journal_or_path: Journal | str | os.PathLike[str] | None) -> None:
        """Show another journal (a Journal, or the path of a journal file; None: none)."""
        self.journal = None
        try:
            if journal_or_path is None:
                self._clear(_box("No journal chosen. Give <code>history_panel</code> a "
                                 "<code>perfkit.Journal</code> or the path of a journal "
                                 "file."))
                return
            if isinstance(journal_or_path, Journal):
                self.journal = journal_or_path
            elif isinstance(journal_or_path, (str, os.PathLike)):
                self.journal = Journal(journal_or_path, create=False)
            else:
                got = html.escape(type(journal_or_path).__name__)
                self._clear(_box("<b>Not a journal:</b> give a perfkit.Journal or the path of "
                                 f"a journal file (got {got}).", "error"))
                return
        except Exception as exc:  # noqa: BLE001 - the panel never raises into the page
            self._clear(_box(f"<b>The journal cannot be opened:</b> {_error(exc)}", "error"))
            return
        self.refresh()

    def refresh(self) -> None:
        """Read the journal again (after runs were added elsewhere) and redraw."""
        if self.journal is None:
            return
        try:
            self.runs = self.journal.runs()
        except Exception as exc:  # noqa: BLE001
            self._clear(_box(f"<b>The journal cannot be read:</b> {_error(exc)}", "error"))
            return
        runs = self.runs
        ro = ", read-only" if self.journal.readonly else ""
        self.header.value = (f"<div style='font-size:13px'><b>Tuning journal</b> "
                             f"<code>{html.escape(str(self.journal.path))}</code>: "
                             f"{len(runs)} run{'s' if len(runs) != 1 else ''}{ro}</div>")
        if runs.empty:
            self._clear(_box(EMPTY_MESSAGE), keep_header=True)
            return
        self.message.value = ""
        self.chart.value = self._render(lambda: C.chart_to_svg(C.journal_progress_chart(
            runs, title="Progression over the runs")), "the progression chart")
        self.table.value = runs_html(runs)
        self._compare_box.layout.display = None
        options = [(f"{r.id}: {r.label}", int(r.id)) for r in runs.itertuples(index=False)]
        self._updating = True
        try:
            self.base.options = options
            self.new.options = options
            ids = [v for _, v in options]
            self.base.value = ids[-2] if len(ids) > 1 else ids[0]
            self.new.value = ids[-1]
        finally:
            self._updating = False
        self._show_comparison()

    def _clear(self, message: str, keep_header: bool = False) -> None:
        if not keep_header:
            self.header.value = ""
        self.message.value = message
        self.chart.value = self.table.value = ""
        self.config_diff.value = self.time_chart.value = self.time_diff.value = ""
        self._compare_box.layout.display = "none"
        self.comparison = None

    @staticmethod
    def _render(make: Any, what: str) -> str:
        try:
            return make()
        except Exception as exc:  # noqa: BLE001 - a chart that fails leaves the rest
            return _box(f"<b>{what} cannot be drawn:</b> {_error(exc)}", "error")

    # ---- compare ----------------------------------------------------------------------
    def select(self, base: int | str, new: int | str) -> None:
        """Compare two runs (ids or labels)."""
        if self.journal is None:
            return
        try:
            a, b = self.journal.run(base).id, self.journal.run(new).id
        except Exception as exc:  # noqa: BLE001
            self.config_diff.value = _box(f"<b>No such run:</b> {_error(exc)}", "error")
            return
        self._updating = True
        try:
            self.base.value, self.new.value = a, b
        finally:
            self._updating = False
        self._show_comparison()

    def _on_select(self, _change: dict[str, Any]) -> None:
        if not self._updating:
            self._show_comparison()

    def _show_comparison(self) -> None:
        if self.journal is None or self.base.value is None or self.new.value is None:
            return
        try:
            cmp = self.journal.compare(self.base.value, self.new.value)
        except Exception as exc:  # noqa: BLE001
            self.comparison = None
            self.config_diff.value = _box(f"<b>The runs cannot be compared:</b> "
                                          f"{_error(exc)}", "error")
            self.time_chart.value = self.time_diff.value = ""
            return
        if self.base.value == self.new.value:  # nothing to compare: said, not drawn
            self.comparison = None
            self.config_diff.value = _box(
                "The same run on both sides: a run compared with itself shows no change. "
                "Choose two different runs.")
            self.time_chart.value = self.time_diff.value = ""
            return
        self.comparison = cmp
        try:
            self.verdict = stored_verdict(cmp)
            said = verdict_sentence(self.verdict, cmp.base_label, cmp.new_label)
            verdict = (f"<p style='margin:4px 0'><b>{html.escape(self.verdict.word.upper())}"
                       f"</b>: {html.escape(said)}</p>")
        except Exception as exc:  # noqa: BLE001 - the diff below still shows
            self.verdict, verdict = None, _box(f"<b>No verdict:</b> {_error(exc)}", "error")
        self.config_diff.value = verdict + config_diff_html(cmp)
        charts = [self._render(lambda: C.chart_to_svg(C.journal_breakdown_chart(
                      cmp.breakdown, cmp.base_label, cmp.new_label,
                      title="Where the step time went")), "the step chart")
                  if not cmp.breakdown.empty else "",
                  self._render(lambda: C.chart_to_svg(C.journal_operators_chart(
                      cmp.operators, title="Operators that moved most")),
                      "the operator chart") if not cmp.operators.empty else ""]
        self.time_chart.value = (STYLE + "<div style='display:flex;flex-wrap:wrap;gap:24px'>"
                                 + "".join(f"<div>{c}</div>" for c in charts if c)
                                 + "</div>")
        self.time_diff.value = time_diff_html(cmp)

    # ---- static outputs ---------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        """Add a static snapshot (chart, table, compare view) for frontends without
        widgets (nbconvert, ``perfkit report``, GitHub); live frontends (JupyterLab,
        Voila) render the widget view."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        bundle["text/html"] = "".join(w.value for w in (
            self.header, self.message, self.chart, self.table, self.config_diff,
            self.time_chart, self.time_diff))
        return bundle


def history_panel(journal_or_path: Journal | str | os.PathLike[str] | None = None
                  ) -> HistoryPanel:
    """The History panel of a tuning journal.

    Parameters
    ----------
    journal_or_path : perfkit.Journal, path or None
        A journal, or the path of a journal file (opened without creating one). A missing,
        empty, foreign or damaged file gives a panel that says so.

    Returns
    -------
    HistoryPanel
        The progression chart (tokens/s per device and MFU over the runs, labels as x),
        the table of runs and a compare view of any two runs (by default the last two):
        the config diff on top, the time diff below.
    """
    return HistoryPanel(journal_or_path)
