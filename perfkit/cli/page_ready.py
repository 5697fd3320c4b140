"""When the page ``perfkit serve`` prints is ready: after Voila's preheated kernel has run it.

With ``preheat_kernel`` Voila starts one kernel as soon as it serves, and that kernel runs
the dashboard notebook (opening the profile, drawing the Overview) before anyone asks for
the page. A browser that asks earlier waits behind Voila's spinner for the rest of that
run: 5 to 15 s on the bundled sample. :func:`announce` therefore waits until that run has
finished (:func:`wait_page_rendered`), saying on stderr what it waits for, and only then
prints the address: a page opened at the printed address answers at once.

Voila (0.5.13) keeps its pool of preheated kernels in ``kernel_manager._pools``: for each
notebook a list of tasks, each giving ``{"task": render task, "kernel_id": …}`` once its
kernel has started; the render task ends when the notebook has run and its page is
rendered. That is not public API: where it is missing or different,
:func:`wait_page_rendered` answers :data:`NO_POOL` at once and the address is printed
without waiting, as before.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["RENDERED", "TIMED_OUT", "FAILED", "NO_POOL", "PREPARE_TIMEOUT_S",
           "PROGRESS_EVERY_S", "wait_page_rendered", "announce"]

#: :func:`wait_page_rendered`: the preheated kernel has run the notebook.
RENDERED = "rendered"
#: Still running after the time allowed.
TIMED_OUT = "timed out"
#: The preheated kernel or its run failed (Voila logged why).
FAILED = "failed"
#: No pool of preheated kernels to wait for (preheating off, or Voila changed).
NO_POOL = "no pool"
#: Longest wait before the address is printed anyway (the page then shows Voila's
#: spinner until the kernel is done, as it did before).
PREPARE_TIMEOUT_S = 60.0
#: A "still preparing" line every so many seconds while waiting.
PROGRESS_EVERY_S = 10.0


def _first_in_pool(kernel_manager: Any, notebook: str | None) -> Any:
    """The task of the first preheated kernel for ``notebook`` (or for the only notebook
    of the pool), or None."""
    pools = getattr(kernel_manager, "_pools", None)
    if not isinstance(pools, dict) or not pools:
        return None
    pool = pools.get(notebook) if notebook in pools else (
        next(iter(pools.values())) if len(pools) == 1 else None)
    if not isinstance(pool, list) or not pool or not isinstance(pool[0], asyncio.Future):
        return None
    return pool[0]


async def _wait(future: asyncio.Future, deadline: float, every_s: float,
                say: Callable[[str], None], started: float) -> bool:
    """Wait for ``future`` until ``deadline`` (monotonic seconds), never cancelling it,
    calling ``say`` every ``every_s`` seconds; True when it is done."""
    while not future.done():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        await asyncio.wait({future}, timeout=min(every_s, left))
        if not future.done() and time.monotonic() < deadline:
            say(f"still preparing the page ({time.monotonic() - started:.0f} s) …")
    return True


def _failed(future: asyncio.Future) -> bool:
    return future.cancelled() or future.exception() is not None


async def wait_page_rendered(kernel_manager: Any, notebook: str | None = None,
                             timeout_s: float = PREPARE_TIMEOUT_S,
                             every_s: float = PROGRESS_EVERY_S,
                             say: Callable[[str], None] = lambda _line: None) -> str:
    """Wait until Voila's first preheated kernel has run ``notebook`` and rendered its page.

    Parameters
    ----------
    kernel_manager : object
        Voila's kernel manager (``Voila.kernel_manager``), made with ``preheat_kernel``.
    notebook : str, optional
        The notebook's path as Voila names it in its pool (relative to its root folder);
        None: the pool's only notebook.
    timeout_s : float
        Longest wait, in seconds.
    every_s : float
        Seconds between two "still preparing" lines.
    say : callable
        Receives one line of progress at a time (the kernel has started; still preparing).

    Returns
    -------
    str
        :data:`RENDERED`, :data:`TIMED_OUT`, :data:`FAILED` or :data:`NO_POOL` (nothing to
        wait for: no preheated kernel, or a Voila whose pool this does not know).

    Notes
    -----
    Voila's tasks are never cancelled or consumed: a page asked for meanwhile gets the
    preheated kernel as usual.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    first = _first_in_pool(kernel_manager, notebook)
    if first is None:
        return NO_POOL
    if not await _wait(first, deadline, every_s, say, started):
        return TIMED_OUT
    if _failed(first):
        return FAILED
    content = first.result()
    render = content.get("task") if isinstance(content, dict) else None
    if not isinstance(render, asyncio.Future):
        return NO_POOL
    say("the kernel has started; it runs the notebook (opens the profile, draws the page) …")
    if not await _wait(render, deadline, every_s, say, started):
        return TIMED_OUT
    return FAILED if _failed(render) else RENDERED


def _say(line: str) -> None:
    print(f"perfkit: {line}", file=sys.stderr, flush=True)


async def announce(app: Any, line: str, preheat: bool, on_ready: Callable[[], None],
                   timeout_s: float = PREPARE_TIMEOUT_S,
                   say: Callable[[str], None] = _say) -> str:
    """Print ``line`` (the address) once the page is ready, then call ``on_ready``.

    Runs on Voila's event loop once it serves (so the port already listens).

    Parameters
    ----------
    app : voila.app.Voila
        The running Voila application (its ``kernel_manager`` and ``notebook_path``).
    line : str
        What to print on stdout when ready: the line with the address.
    preheat : bool
        Whether Voila preheats a kernel; False prints ``line`` at once.
    on_ready : callable
        Called after ``line`` is printed (opens the browser).
    timeout_s : float
        Longest wait for the preheated kernel.
    say : callable
        Where progress lines go (stderr, prefixed ``perfkit:``).

    Returns
    -------
    str
        How the wait ended (:func:`wait_page_rendered`), :data:`NO_POOL` without preheating.
    """
    started = time.monotonic()
    state = NO_POOL
    if preheat:
        manager = getattr(app, "kernel_manager", None)
        notebook = getattr(manager, "notebook_path", None)
        try:
            state = await wait_page_rendered(manager, notebook, timeout_s=timeout_s, say=say)
        except Exception as exc:  # noqa: BLE001 - the address must be printed regardless
            say(f"could not follow the preheated kernel ({type(exc).__name__}: {exc})")
        if state == RENDERED:
            say(f"the page is ready ({time.monotonic() - started:.1f} s)")
        elif state == TIMED_OUT:
            say(f"the page is still being prepared after {timeout_s:.0f} s; the page "
                "shows it once ready")
        elif state == FAILED:
            say("the preheated kernel failed (see Voila's log above); each page starts its "
                "own kernel")
    print(line, flush=True)
    on_ready()
    return state
