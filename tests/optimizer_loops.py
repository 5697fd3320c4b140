"""Synthetic Kineto traces of training loops without ``ProfilerStep``, written by the tests
that check which optimizer steps end an iteration (:mod:`perfkit.io.kineto.iterations`),
and the iterations those loops really have, by arithmetic on the times written.

Each iteration of :func:`loop_events` is ``100 + 400 * len(phases)`` µs long, from ts
1000; a DataLoader fetch (``enumerate(DataLoader)#...__next__``) may open it; each phase
``(optimizer class, backward functions)`` of it is, from its slot's start ``P``:

- a forward ``aten::mm`` (host thread 1) at ``P``, launching a 100 µs kernel at ``P + 5``;
- the backward functions named (``autograd::engine::evaluate_function: <name>``, on the
  autograd thread 2) from ``P + 150``, 10 µs apart, one launching a 50 µs kernel at
  ``P + 160``;
- ``Optimizer.step#<class>.step`` (thread 1) at ``P + 300`` for 40 µs, launching a 10 µs
  kernel at ``P + 312``.

A phase with no backward function (``()``) has no forward either: its optimizer steps on
the previous phase's gradients (``loss.backward(); opt_a.step(); opt_b.step()``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["FETCH", "loop_events", "write_trace", "true_steps"]

#: What ``torch.utils.data.DataLoader`` names the annotation around each batch it gives.
FETCH = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def loop_events(iterations: int, phases: list[tuple[str, tuple[str, ...]]],
                fetch: bool) -> list[dict[str, Any]]:
    """The events of ``iterations`` iterations of the loop (see the module)."""
    ev: list[dict[str, Any]] = []
    corr = 0

    def launch(tid: int, at: float, run: float, dur: float) -> None:
        nonlocal corr
        corr += 1
        ev.extend([{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                    "tid": tid, "ts": at, "dur": 2, "args": {"correlation": corr}},
                   {"ph": "X", "cat": "kernel", "name": f"k{corr}", "pid": 0, "tid": 7,
                    "ts": run, "dur": dur, "args": {"correlation": corr, "stream": 7,
                                                     "device": 0}}])

    length = 100 + 400 * len(phases)
    for i in range(iterations):
        t = 1000 + length * i
        if fetch:
            ev.append({"ph": "X", "cat": "user_annotation", "name": FETCH, "pid": 1,
                       "tid": 1, "ts": t, "dur": 15})
        for j, (cls, backward) in enumerate(phases):
            p = t + 50 + 400 * j
            if backward:
                ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,
                           "tid": 1, "ts": p, "dur": 10})
                launch(1, p + 1, p + 5, 100)
                ev.extend({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 2,
                           "name": f"autograd::engine::evaluate_function: {name}",
                           "ts": p + 150 + 10 * k, "dur": 5}
                          for k, name in enumerate(backward))
                launch(2, p + 152, p + 160, 50)
            ev.append({"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1,
                       "name": f"Optimizer.step#{cls}.step", "ts": p + 300, "dur": 40})
            launch(1, p + 310, p + 312, 10)
    return ev


def write_trace(path: Path, events: list[dict[str, Any]]) -> Path:
    """``events`` as a Kineto JSON trace at ``path``."""
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def true_steps(events: list[dict[str, Any]], per_iteration: int
               ) -> dict[int, tuple[float, float]]:
    """Iteration -> (device step, wall) in µs of a loop whose iterations each end with
    their ``per_iteration``-th optimizer step: the first begins at the first host event;
    a kernel is in the iteration its launch ran in. The device step runs from its first
    kernel's start to its last kernel's end, plus the device's idle tail after that while
    the iteration lasts (to its end, or to the next iteration's first kernel if sooner);
    the wall adds the device's wait before the first kernel, from the iteration's start or
    the previous iteration's device end (tail included) if later."""
    ends = sorted(e["ts"] + e["dur"] for e in events
                  if e["name"].startswith("Optimizer.step#"))[per_iteration - 1::per_iteration]
    first = min(e["ts"] for e in events if e["cat"] in ("cpu_op", "user_annotation",
                                                          "cuda_runtime"))
    bounds = [first, *ends]
    launched = {e["args"]["correlation"]: e["ts"] for e in events
                if e["cat"] == "cuda_runtime"}
    runs: dict[int, list[tuple[float, float]]] = {}
    for e in events:
        if e["cat"] != "kernel":
            continue
        at = launched[e["args"]["correlation"]]
        k = next((i for i in range(len(ends)) if bounds[i] <= at < bounds[i + 1]), None)
        if k is not None:
            runs.setdefault(k, []).append((e["ts"], e["ts"] + e["dur"]))
    out, done = {}, None
    order = sorted(runs)
    for i, k in enumerate(order):
        lo, hi = min(a for a, _ in runs[k]), max(b for _, b in runs[k])
        start = bounds[k] if done is None else max(bounds[k], done)
        wait = max(lo - start, 0)
        done = hi if done is None else max(done, hi)
        stop = bounds[k + 1] if i + 1 == len(order) else min(
            bounds[k + 1], min(a for a, _ in runs[order[i + 1]]))
        tail = max(stop - done, 0)
        done = max(done, stop)
        out[k] = (hi - lo + tail, hi - lo + tail + wait)
    return out
