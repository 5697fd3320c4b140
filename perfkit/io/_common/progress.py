"""A small progress bar that works in a terminal, in a Jupyter notebook and in a panel.

In a notebook kernel with ipywidgets available it shows an ``IntProgress`` widget with a
label; elsewhere it redraws one line on stderr (``\\r``) when stderr is a terminal, and
prints a final summary line otherwise. No dependency beyond the standard library.

Inside ``with progress_in(box):`` the widget goes into ``box`` (an ipywidgets box of a
panel, such as the dashboard's) instead of the cell's output, and leaves it when done:
a served page shows progress where the panel wants it, and nothing once finished.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TextIO

__all__ = ["Progress", "in_notebook", "progress_in"]

#: The box that :class:`Progress` widgets go into (:func:`progress_in`), if any.
_TARGET: ContextVar[Any] = ContextVar("perfkit_progress_target", default=None)


@contextmanager
def progress_in(box: Any) -> Iterator[Any]:
    """Show the progress bars made inside the ``with`` block in ``box``.

    Parameters
    ----------
    box : ipywidgets.Box
        Where each bar is appended (as one row: the bar and a label saying what it
        counts); a bar removes its row, and closes its widgets, when it is done.

    Notes
    -----
    The setting is a context variable: it holds in the thread (or asyncio task) that
    entered the block; work handed to another thread gets it only through
    :func:`contextvars.copy_context`.
    """
    token = _TARGET.set(box)
    try:
        yield box
    finally:
        _TARGET.reset(token)


def in_notebook() -> bool:
    """True inside a Jupyter (ZMQ) kernel."""
    try:
        from IPython import get_ipython  # type: ignore[import-not-found]
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class Progress:
    """Progress over ``total`` items.

    Parameters
    ----------
    total : int
        Number of items.
    desc : str
        Words shown before the bar.
    enabled : bool
        False makes every method a no-op.
    stream : file, optional
        Where the terminal bar goes (stderr by default).
    """

    def __init__(self, total: int, desc: str = "", enabled: bool = True,
                 stream: TextIO | None = None) -> None:
        self.total = max(int(total), 0)
        self.desc = desc
        self.enabled = enabled
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self._start = time.perf_counter()
        self._widget: Any = None
        self._label: Any = None
        self._row: Any = None
        self._target: Any = None
        self.mode = "off"
        if not enabled:
            return
        target = _TARGET.get()
        if target is not None or in_notebook():
            try:
                import ipywidgets as widgets  # type: ignore[import-not-found]

                self._widget = widgets.IntProgress(value=0, min=0, max=max(self.total, 1))
                # the words in a label of their own: a widget description is cut short
                self._label = widgets.Label(value=self._text(""))
                self._row = widgets.HBox([self._widget, self._label])
                self._row.add_class("pk-progress")
                if target is not None:
                    self._target = target
                    target.children = (*target.children, self._row)
                else:
                    from IPython.display import display  # type: ignore[import-not-found]

                    display(self._row)
                self.mode = "widget"
                return
            except ImportError:
                pass
        self.mode = "tty" if getattr(self.stream, "isatty", lambda: False)() else "lines"
        self._draw("")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _text(self, note: str) -> str:
        words = f"{self.desc}: " if self.desc else ""
        return f"{words}{self.done}/{self.total}" + (f" {note}" if note else "")

    def _draw(self, note: str) -> None:
        if self.mode != "tty":
            return
        width = 30
        frac = self.done / self.total if self.total else 1.0
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        elapsed = time.perf_counter() - self._start
        self.stream.write(f"\r{self.desc} [{bar}] {self.done}/{self.total} "
                          f"{elapsed:5.1f}s {note[:40]:<40}")
        self.stream.flush()

    def update(self, n: int = 1, note: str = "") -> None:
        """Advance by ``n`` items; ``note`` (e.g. the rank just loaded) is shown briefly."""
        if not self.enabled:
            return
        self.done = min(self.done + n, self.total)
        if self.mode == "widget":
            self._widget.value = self.done
            self._label.value = self._text(note)
        else:
            self._draw(note)

    def close(self, note: str = "") -> None:
        """Finish the bar: a newline in a terminal, a summary line in a log, the finished
        bar in a notebook's output; in a panel's box (:func:`progress_in`) it is removed.
        ``note`` ends the summary (``"1 failed"``)."""
        if not self.enabled or self.mode == "closed":
            return
        elapsed = time.perf_counter() - self._start
        tail = f"; {note}" if note else ""
        if self.mode == "tty":
            self._draw(note or "done")
            self.stream.write("\n")
        elif self.mode == "lines":
            self.stream.write(f"{self.desc}: {self.done}/{self.total} in {elapsed:.1f}s{tail}\n")
        elif self.mode == "widget" and self._target is not None:  # done: gone from the box
            self._target.children = tuple(w for w in self._target.children
                                          if w is not self._row)
            for widget in (self._row, self._widget, self._label):
                widget.close()
        elif self.mode == "widget":  # in a notebook's output: what it did stays
            self._widget.bar_style = "warning" if note else "success"
            self._label.value = self._text(f"in {elapsed:.1f}s{tail}")
        self.stream.flush() if self.mode in ("tty", "lines") else None
        self.mode = "closed"
