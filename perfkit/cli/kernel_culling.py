"""The kernels of closed, reloaded and abandoned pages of ``perfkit serve`` end.

Voila starts one kernel per page visit (310-365 MB each with the dashboard) and ends it by
two means, which :func:`perfkit.cli.launcher.serve` both makes work:

- **on unload**: Voila's page sends ``POST /voila/api/shutdown/<kernel>`` (a beacon) on
  ``beforeunload``, with the ``_xsrf`` cookie's value, which jupyter_server checks. Voila
  0.5 never sets that cookie on its notebook page, so every such request was refused
  (HTTP 403 "'_xsrf' argument missing from POST") and every visit, reload or closed tab
  left its kernel running. :func:`page_handler_class` serves the page with a handler that
  sets the cookie (tornado's ``xsrf_token``), so the beacon is accepted.
- **idle culling** (for pages whose beacon never arrives: a killed browser, a lost
  network, a laptop put to sleep): jupyter_server's ``MappingKernelManager`` ends a kernel
  that has had no client connected and no activity for ``cull_idle_timeout`` seconds,
  checked every ``cull_interval`` seconds (:func:`culling_argv`). ``cull_connected=False``:
  a page that is still open keeps its kernel however long it stays idle. Voila never culls
  its preheated kernel (``cull_kernel_if_idle`` of its pooled kernel manager); its idle
  clock starts when a visitor takes it (:func:`idle_clock_from_handover`): it may have
  waited in the pool longer than the timeout, and would otherwise be culled in the
  seconds between Voila handing it to a page and the page connecting to it.

Source: jupyter_server's ``MappingKernelManager`` traits (cull_idle_timeout,
cull_interval, cull_connected, cull_busy), and Voila 0.5's
``shutdown_kernel_handler.py`` and widgets-manager ``beforeunload`` listener.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_IDLE_TIMEOUT_S", "culling_argv", "cull_interval_s", "page_handler_class",
           "with_xsrf_cookie", "idle_clock_from_handover"]

#: Seconds a kernel whose page is gone (no client connected) may stay idle before
#: ``perfkit serve`` ends it, unless ``--kernel-idle-timeout`` says otherwise. Long enough
#: for a page to reconnect after a network hiccup; short enough that a day of visits
#: does not pile up kernels (each one holds 310-365 MB with the dashboard).
DEFAULT_IDLE_TIMEOUT_S = 300
#: Fewest seconds between two culling rounds (the check itself is cheap).
_MIN_INTERVAL_S = 1
#: Most seconds between two culling rounds.
_MAX_INTERVAL_S = 60


def cull_interval_s(idle_timeout_s: int) -> int:
    """Seconds between two culling rounds: a fifth of the timeout, within 1-60 s, so a
    kernel outlives its timeout by at most a fifth of it (a minute at most)."""
    return max(_MIN_INTERVAL_S, min(_MAX_INTERVAL_S, idle_timeout_s // 5))


def culling_argv(idle_timeout_s: int) -> list[str]:
    """Voila command-line arguments that end kernels with no page for ``idle_timeout_s``
    seconds (none when it is 0: culling off)."""
    if idle_timeout_s <= 0:
        return []
    return [f"--MappingKernelManager.cull_idle_timeout={idle_timeout_s}",
            f"--MappingKernelManager.cull_interval={cull_interval_s(idle_timeout_s)}",
            "--MappingKernelManager.cull_connected=False",
            "--MappingKernelManager.cull_busy=False"]


def page_handler_class(base: type) -> type:
    """A subclass of Voila's page handler ``base`` whose GET sets the ``_xsrf`` cookie
    that Voila's unload beacon sends back (see the module's docstring)."""

    class XsrfCookiePageHandler(base):  # type: ignore[misc, valid-type]
        async def get(self, *args: Any, **kwargs: Any) -> Any:
            self.xsrf_token  # noqa: B018 - tornado sets the _xsrf cookie when it is read
            return await super().get(*args, **kwargs)

    XsrfCookiePageHandler.__name__ = XsrfCookiePageHandler.__qualname__ = (
        f"XsrfCookie{base.__name__}")
    return XsrfCookiePageHandler


def with_xsrf_cookie(handlers: list[Any]) -> list[Any]:
    """Voila's handler list with its notebook page handler (``TornadoVoilaHandler``)
    replaced by :func:`page_handler_class` of it; other handlers unchanged."""
    from voila.tornado.handler import TornadoVoilaHandler

    out = []
    for rule in handlers:
        if isinstance(rule, tuple) and len(rule) >= 2 and rule[1] is TornadoVoilaHandler:
            rule = (rule[0], page_handler_class(TornadoVoilaHandler), *rule[2:])
        out.append(rule)
    return out


def _pooled_ids(kernel_manager: Any) -> set[str] | None:
    """Ids of the kernels waiting in Voila's pool (``kernel_manager._pools``: per notebook,
    futures giving ``{"kernel_id": ...}`` once started), or None where there is no pool."""
    pools = getattr(kernel_manager, "_pools", None)
    if not isinstance(pools, dict):
        return None
    ids = set()
    for pool in pools.values():
        for fut in pool if isinstance(pool, list) else ():
            try:
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    ids.add(fut.result().get("kernel_id"))
            except Exception:  # noqa: BLE001, S112 - a future Voila drops itself
                continue
    return ids


def idle_clock_from_handover(kernel_manager: Any) -> None:
    """Make ``kernel_manager`` count a preheated kernel's idle time from when it left
    Voila's pool (handed to a page), not from when it finished drawing the page.

    Wraps the instance's ``cull_kernel_if_idle`` (called for every kernel at each culling
    round): a kernel seen outside the pool for the first time gets ``last_activity`` =
    now, so the page has the whole timeout to connect. No pool (``--no-preheat``): as is.
    """
    from jupyter_server._tz import utcnow

    cull = kernel_manager.cull_kernel_if_idle
    pooled_before: set[str] = set()

    async def cull_kernel_if_idle(kernel_id: str) -> Any:
        pooled = _pooled_ids(kernel_manager)
        if pooled is not None:
            if kernel_id in pooled:
                pooled_before.add(kernel_id)
            elif kernel_id in pooled_before:  # handed to a page since the last round
                pooled_before.discard(kernel_id)
                kernel = kernel_manager.get_kernel(kernel_id)
                kernel.last_activity = utcnow()
        return await cull(kernel_id)

    kernel_manager.cull_kernel_if_idle = cull_kernel_if_idle
