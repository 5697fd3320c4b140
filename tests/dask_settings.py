"""Dask settings for the tests' in-process clusters: none of the background work that
checks nothing the tests assert.

A ``distributed.LocalCluster`` with in-process workers (``processes=False``) shares the
test process's CPU with the tasks it runs. By default each worker samples every thread's
stack every 10 ms for the dashboard's profile, the event loops check every 20 ms that
they are not blocked, the scheduler moves tasks between workers every second (work
stealing), and monitors sample memory and the system every 100-500 ms. Without that
work the test files on lazy clusters took 10-16 % less CPU (one pytest process each, the
self and child CPU per test, on the shared development VM):
test_advisor_lazy.py 100 s -> 85 s, analysis/test_lazy.py 93 s -> 83 s,
io/test_dask_engine.py 52 s -> 44 s. No test reads the dashboard's profile or the
monitors, and which worker runs a task does not change its result.

Use :func:`quiet_cluster` while the cluster is made: the settings are read when the
scheduler and workers start.
"""

from __future__ import annotations

from typing import Any

__all__ = ["QUIET", "quiet_cluster"]

#: ``dask.config`` keys of the background work the tests do without.
QUIET: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,  # the stack sampler, every 10 ms
    "distributed.admin.tick.interval": "1s",  # the blocked-event-loop check, every 20 ms
    "distributed.scheduler.work-stealing": False,  # rebalancing, every second
    "distributed.admin.system-monitor.interval": "5s",  # CPU/memory/network, every 500 ms
    "distributed.worker.memory.monitor-interval": "5s",  # the worker's memory, every 100 ms
}


def quiet_cluster(**kwargs: Any) -> Any:
    """``distributed.LocalCluster(**kwargs)`` made under :data:`QUIET`."""
    import dask
    import distributed

    with dask.config.set(QUIET):
        return distributed.LocalCluster(**kwargs)
