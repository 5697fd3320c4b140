"""The dashboard's History tab: the tuning journal beside the profile on show.

The tab shows a journal with :func:`~perfkit.widgets.history.history_panel` (progression
of tokens/s per device and MFU over the runs, the table of runs, any two runs compared) and
lets the user add the profile on show to it, with the job of the job panel. Which journal:
the path in the tab's box — by default the user's journal (``$PERFKIT_JOURNAL``, else
``perfkit-journal.sqlite`` in the working folder, :func:`perfkit.journal.default_journal_path`)
when that file exists, else the Llama2-13B case bundled with perfkit (read-only). Adding to
a journal that does not exist yet creates it; the bundled one is never written.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import ipywidgets as W

from ...journal import Journal, default_journal_path
from ...journal.locations import DEFAULT_JOURNAL_NAME
from ...journal.store import bundled_journal_path
from ..history import HistoryPanel
from ..markup import STYLE, describe_error, error, note
from .base import Context, Tab

__all__ = ["HistoryTab", "initial_journal_path"]


def initial_journal_path() -> Path:
    """The journal the tab opens first: the user's when it exists, else the bundled case."""
    own = default_journal_path()
    return own if own.is_file() else bundled_journal_path()


def bundled_sentence() -> str:
    """What the tab says above the bundled journal: it is perfkit's example, not runs of
    the profile on show, and how to keep a journal of one's own."""
    return ("This is the example journal that comes with perfkit: the tuning guide's "
            "Llama2-13B case in three simulated runs, not runs of the profile on show. To "
            "follow your own runs, type the path of your journal in the box (for example "
            f"{DEFAULT_JOURNAL_NAME} in the working folder, or set $PERFKIT_JOURNAL) "
            "and press “Add the profile on show”.")


class HistoryTab(Tab):
    """The tuning journal: its runs and what changed between them; *Add* records the
    profile on show (with the job panel's job) in the journal named in the box."""

    title = "History"
    waits_for = "the profile, to compare it with the runs of the journal"

    def __init__(self, ctx: Context) -> None:
        self.path = W.Text(value=str(initial_journal_path()), description="journal",
                           style={"description_width": "initial"},
                           layout=W.Layout(width="520px"), continuous_update=False)
        self.open_button = W.Button(description="Open", layout=W.Layout(width="80px"))
        self.label = W.Text(placeholder="label of this run (default: the folder's name)",
                            layout=W.Layout(width="300px"))
        self.add_button = W.Button(description="Add the profile on show",
                                   button_style="primary", layout=W.Layout(width="auto"))
        self.status = W.HTML()
        self.panel = HistoryPanel(None)
        super().__init__(ctx, [self.path, self.open_button, self.label, self.add_button])
        self.open_button.on_click(lambda _b: self.refresh())
        self.path.observe(self._on_path, names="value")
        self.add_button.on_click(lambda _b: self.add_profile())
        self.keep.update({id(self.panel), id(self.status)})
        self._sync_add()

    def show(self, profile: Any) -> None:
        """Set the profile (see :meth:`Tab.show`); *Add* follows it at once."""
        super().show(profile)
        self._sync_add()

    def wait(self, opening: Any) -> None:
        """Wait for a profile being opened (see :meth:`Tab.wait`): none to add meanwhile."""
        super().wait(opening)
        self._sync_add()

    def _on_path(self, _change: dict[str, Any]) -> None:
        self._sync_add()  # also while no profile is open (no body is built then)
        self.refresh()

    def _sync_add(self) -> None:
        """*Add* is offered only with a profile on show and a journal that can be written
        (the bundled one is read-only); its tooltip says why not."""
        if self.profile is None:
            why = "open a profile first: there is none on show to add"
        elif self._is_bundled(self._journal_path()):
            why = "the bundled journal is read-only: type the path of your own journal to add runs"
        else:
            why = ""
        self.add_button.disabled = bool(why)
        self.add_button.tooltip = why

    def _journal_path(self) -> Path:
        return Path(self.path.value.strip()).expanduser()

    def _is_bundled(self, path: Path) -> bool:
        try:
            return path.resolve() == bundled_journal_path().resolve()
        except Exception:  # noqa: BLE001 - no bundled journal: nothing to protect
            return False

    def build(self, profile: Any) -> list[W.Widget]:
        path = self._journal_path()
        self._sync_add()
        if not path.is_file():
            self.panel.set_journal(None)
            return [_html(note(f"No journal at {path} yet: “Add the profile on show” "
                               "creates it.")), self.status]
        readonly = self._is_bundled(path)
        try:
            self.panel.set_journal(Journal(path, create=False, readonly=readonly))
        except Exception as exc:  # noqa: BLE001 - the panel says why
            self.panel.set_journal(None)
            return [_html(error(describe_error(exc, f"opening the journal {path}")))]
        if readonly:
            return [_html(note(bundled_sentence())), self.status, self.panel]
        return [self.status, self.panel]

    def add_profile(self) -> None:
        """Record the profile on show in the journal of the path box (created if needed)."""
        if self.profile is None:
            self.status.value = STYLE + note("Open a profile first.")
            return
        path = self._journal_path()
        if self._is_bundled(path):
            self.status.value = STYLE + note("The bundled journal is read-only: type the path "
                                             "of your own journal (it is created if needed).")
            return
        label = self.label.value.strip() or None
        try:
            journal = Journal(path)
            run = journal.add(self.profile, job=self.ctx.job.job, label=label)
        except Exception as exc:  # noqa: BLE001 - shown in the page
            self.status.value = error(describe_error(exc, f"adding the profile to {path}"))
            return
        self.refresh()
        self.status.value = STYLE + (f"<div class='pk-ok'>Added as run {run.id} "
                                     f"<b>{html.escape(run.label)}</b>.</div>")


def _html(markup: str) -> W.HTML:
    return W.HTML(STYLE + markup)
