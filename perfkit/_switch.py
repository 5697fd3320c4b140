"""A process-wide setting switched for the length of perfkit's calls, across threads.

Used by :mod:`perfkit._hugepages` and :mod:`perfkit._freed_memory`: blocks nest and may
run in several threads at once; the outermost block switches the setting, the last one
to end switches it back.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["ProcessSwitch"]


class ProcessSwitch:
    """Switch a process-wide setting while any :meth:`block` is open.

    Parameters
    ----------
    switch_on : callable
        Called by the outermost block; returns whether it changed anything (only then is
        ``switch_back`` called).
    switch_back : callable
        Called when the last open block ends.
    keep_env : str
        An environment variable: set to ``keep``, blocks change nothing.
    """

    def __init__(self, switch_on: Callable[[], bool], switch_back: Callable[[], None],
                 keep_env: str) -> None:
        self._switch_on, self._switch_back, self.keep_env = switch_on, switch_back, keep_env
        self._lock = threading.Lock()
        self._depth = 0  # open blocks, in every thread
        self._switched = False  # whether the outermost block changed the setting

    @contextmanager
    def block(self) -> Iterator[None]:
        """Within the block, the setting is switched (see the class)."""
        if os.environ.get(self.keep_env, "").strip().lower() == "keep":
            yield
            return
        with self._lock:
            if self._depth == 0:
                self._switched = self._switch_on()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._switched:
                    self._switch_back()
                    self._switched = False
