"""A small progress bar that works in a terminal and in a Jupyter notebook.

In a notebook kernel with ipywidgets available it shows an ``IntProgress`` widget with a
label; elsewhere it redraws one line on stderr (``\\r``) when stderr is a terminal, and
prints a final summary line otherwise. No dependency beyond the standard library.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["Progress", "in_notebook"]


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
        self.mode = "off"
        if not enabled:
            return
        if in_notebook():
            try:
                import ipywidgets as widgets  # type: ignore[import-not-found]
                from IPython.display import display  # type: ignore[import-not-found]

                self._widget = widgets.IntProgress(value=0, min=0, max=max(self.total, 1),
                                                   description=desc[:20])
                self._label = widgets.Label(value=f"0/{self.total}")
                display(widgets.HBox([self._widget, self._label]))
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
            self._label.value = f"{self.done}/{self.total} {note}"
        else:
            self._draw(note)

    def close(self) -> None:
        """Finish the bar (newline in a terminal, a summary line in a log)."""
        if not self.enabled or self.mode == "closed":
            return
        elapsed = time.perf_counter() - self._start
        if self.mode == "tty":
            self._draw("done")
            self.stream.write("\n")
        elif self.mode == "lines":
            self.stream.write(f"{self.desc}: {self.done}/{self.total} in {elapsed:.1f}s\n")
        elif self.mode == "widget":
            self._widget.bar_style = "success"
            self._label.value = f"{self.done}/{self.total} in {elapsed:.1f}s"
        self.stream.flush() if self.mode in ("tty", "lines") else None
        self.mode = "closed"
