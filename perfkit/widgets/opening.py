"""A profile being opened in the background: what each tab shows while it waits.

The dashboard opens a large profile in two parts (:meth:`perfkit.widgets.Dashboard.
load_profile`): the steps first (:func:`perfkit.io.preview.steps.preview`, small files, a
fraction of a second), drawn on the Overview at once, then the whole profile
(:func:`perfkit.load`) on a background thread. Meanwhile an :class:`Opening` stands for
it: every tab shows a progress bar and one sentence saying what it waits for
(:meth:`Opening.widgets`), refreshed twice a second until the load ends.

The bar's fraction is the time spent over the time expected: the size of the files to read
over a reading rate (:data:`DEFAULT_RATE_BYTES_PER_S` at first, then the rate the last
load in this process measured: :func:`perfkit.io.engines.loading.expected_seconds`, shared with
``perfkit.load(..., wait=False)``), never above 95 % before the load ends. A profile already
in perfkit's cache is expected to take a second. The sentence says it is an estimate.
"""

from __future__ import annotations

import html
import threading
import time
from typing import Any

import ipywidgets as W

from ..format import bytes_text
from ..io.engines.loading import DEFAULT_RATE_BYTES_PER_S, expected_seconds, record_rate
from .markup import STYLE

__all__ = ["Opening", "DEFAULT_RATE_BYTES_PER_S", "BACKGROUND_BYTES"]

#: Profiles whose files add up to at least this many bytes open in the background (the
#: dashboard's ``background_bytes`` default): below it the whole load takes about a second.
BACKGROUND_BYTES = 64 << 20

_CSS = ("<style>.pk-waiting-text{font-size:13px;color:#444;margin:2px 0 8px 0}</style>")


class Opening:
    """One profile being read on a background thread (see the module docstring).

    Parameters
    ----------
    label : str
        How the page names the profile.
    preview : perfkit.io.preview.steps.Preview
        What was read first: the steps, the size of the rest, whether it is cached.

    Attributes
    ----------
    stage : str
        ``"reading"`` (the files), ``"job"`` (working out the job from the operator
        shapes), ``"done"`` or ``"failed"``.
    started : float
        ``time.perf_counter()`` when the opening began (the background load).
    opened : float
        When the user opened the profile: ``started`` less the preview's seconds. The
        "so far" the page shows counts from here; the time left, from ``started``.
    request : tuple or None
        What was asked for, ``(source, run)`` (set by the dashboard): the same request
        again while it is read is this opening, not a new one.
    whole_profile : bool
        The files are read and :attr:`preview`'s profile is the whole profile (set by the
        dashboard while the job is worked out): the Overview draws its steps.
    """

    def __init__(self, label: str, preview: Any) -> None:
        self.label = label
        self.preview = preview
        self.stage = "reading"
        self.started = time.perf_counter()
        self.opened = self.started - float(getattr(preview, "seconds", 0.0) or 0.0)
        self.read_s: float | None = None
        self.request: tuple[str, Any] | None = None
        self.whole_profile = False
        #: a few whole steps read before the rest (:mod:`perfkit.widgets.first_answer`)
        self.first: Any = None
        self._ended = threading.Event()
        self._shown: list[tuple[W.FloatProgress, W.HTML, str]] = []
        self._lock = threading.Lock()
        self._ticker: threading.Thread | None = None

    # ---- the estimate ------------------------------------------------------------
    def expected_s(self) -> float:
        """Seconds the whole load is expected to take (see the module docstring)."""
        return expected_seconds(self.preview.input_bytes, self.preview.cached)

    def fraction(self) -> float:
        """The bar's fraction: elapsed over expected, at most 0.95 before the end."""
        if self.stage == "done":
            return 1.0
        if self.stage == "job":
            return 0.95
        return min((time.perf_counter() - self.started) / self.expected_s(), 0.95)

    def sentence(self, waits_for: str) -> str:
        """What a tab waits for, and how far the reading is (one sentence)."""
        now = time.perf_counter()
        elapsed = now - self.opened  # since Open: the preview's seconds too
        size = bytes_text(self.preview.input_bytes)
        if self.stage == "job":
            where = (f"the files of {self.label} are read; perfkit is working out the job "
                     f"(model, layout, batch) from the operator shapes ({elapsed:.0f} s so "
                     "far)")
        elif self.preview.cached:
            where = (f"perfkit is reading {self.label} back from its cache ({elapsed:.0f} s "
                     "so far)")
        else:
            left = self.expected_s() - (now - self.started)
            guess = (f"about {left:.0f} s left (an estimate from the size)" if left >= 1
                     else "longer than estimated from the size")
            where = f"perfkit is reading {size} of {self.label}: {elapsed:.0f} s so far, {guess}"
        return f"Waiting for {waits_for}: {where}."

    # ---- the widgets ---------------------------------------------------------------
    def widgets(self, waits_for: str) -> list[W.Widget]:
        """A progress bar and the sentence for a tab that waits for ``waits_for``; both
        are kept up to date until the load ends."""
        bar = W.FloatProgress(value=self.fraction(), min=0.0, max=1.0, bar_style="info",
                              layout=W.Layout(width="420px"))
        bar.add_class("pk-progress")
        text = W.HTML(self._text(waits_for))
        with self._lock:
            self._shown.append((bar, text, waits_for))
        return [bar, text]

    def _text(self, waits_for: str) -> str:
        return (STYLE + _CSS + "<div class='pk-waiting-text'>"
                + html.escape(self.sentence(waits_for)) + "</div>")

    def tick(self) -> None:
        """Redraw every bar and sentence."""
        with self._lock:  # widgets closed by a redraw (no comm any more) are forgotten
            self._shown = [s for s in self._shown if s[0].comm is not None]
            shown = list(self._shown)
        value = self.fraction()
        for bar, text, waits_for in shown:
            bar.value = value
            text.value = self._text(waits_for)

    def start(self, every_s: float = 0.5) -> None:
        """Tick every ``every_s`` seconds on a daemon thread until :meth:`end`."""
        def run() -> None:
            while not self._ended.wait(every_s):
                self.tick()
        self._ticker = threading.Thread(target=run, name="perfkit-opening", daemon=True)
        self._ticker.start()

    def files_read(self) -> None:
        """The load has returned: record the reading rate, say the job comes next."""
        self.read_s = time.perf_counter() - self.started
        if not self.preview.cached:
            record_rate(self.preview.input_bytes, self.read_s)
        self.stage = "job"
        self.tick()

    def end(self, stage: str = "done") -> None:
        """Stop ticking (``stage``: ``"done"`` or ``"failed"``); the widgets are forgotten."""
        self.stage = stage
        self._ended.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()
        with self._lock:
            self._shown.clear()

    @property
    def ended(self) -> bool:
        """True once :meth:`end` was called."""
        return self._ended.is_set()
