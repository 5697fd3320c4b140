"""GPU copies and fills (``Memcpy DtoD``, ``Memset``) are ``memory`` on every trace.

``top_operators(by="type")`` groups GPU kernels by their shared class; the copy *kernels*
(``direct_copy_kernel``, ``CatArrayBatchedCopy``, a HIP ``batched_transpose``) form the
class ``copy``, which is computation. The device's copies and fills (Kineto ``gpu_memcpy``
/ ``gpu_memset``, ``Memcpy`` / ``Memset`` in PyTorch 1.9) must not share that group: its
category would be that of whichever task came first in the trace (``memory`` on the
PyTorch 1.9 ResNet traces, ``compute`` on the MI300X, DeepSeek and HTA ones).

Every expected count and time is read from the raw trace here (``json`` through
:func:`raw_kineto.raw_events`): the event's category, and its step, the host
``ProfilerStep#N`` span (else the optimizer's iteration, :class:`raw_kineto.Iterations`)
that its runtime launch (same ``correlation``) started in.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
from raw_kineto import Iterations, raw_events
from shared_samples import KINETO_TRACES, sample

import perfkit as pk
from perfkit.analysis import top_operators

pytestmark = pytest.mark.shared_samples

TRACES = KINETO_TRACES

#: Kineto categories (lower-cased) of both schemas: device copies and fills, kernels.
COPY = {"gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset"}
KERNEL = {"kernel"}
RUNTIME = {"cuda_runtime", "cuda_driver", "runtime", "hip_runtime"}


def _stepped_tasks(events: list[dict[str, Any]]) -> list[tuple[str, Decimal]]:
    """(lower-cased category, duration) of each device task launched inside a step; of
    every device task when the trace has no step at all (no ``ProfilerStep`` nor
    optimizer step: B200 eager), the whole trace being then one step."""
    x = [e for e in events if e.get("ph") == "X"]
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in x
                   if str(e.get("name", "")).startswith("ProfilerStep#")
                   and str(e.get("cat", "")).lower() in ("cpu_op", "operator",
                                                          "user_annotation"))
    launch: dict[Any, Decimal] = {}
    for e in x:
        corr = (e.get("args") or {}).get("correlation")
        if str(e.get("cat", "")).lower() in RUNTIME and corr is not None:
            launch.setdefault(corr, e["ts"])
    iterations = None if spans else Iterations(events)
    out = []
    for e in x:
        cat = str(e.get("cat", "")).lower()
        if cat not in COPY and cat not in KERNEL:
            continue
        ts = launch.get((e.get("args") or {}).get("correlation"))
        if iterations is not None and not iterations.spans:
            inside = True
        elif ts is None:
            continue
        elif iterations is not None:
            inside = iterations.index(ts) is not None
        else:  # the latest span starting at or before the launch, if it lasts past it
            before = [s for s in spans if s[0] <= ts]
            inside = bool(before) and ts < before[-1][1]
        if inside:
            out.append((cat, Decimal(e["dur"])))
    return out


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize("name", list(TRACES))
def test_copies_and_fills_are_memory_and_copy_kernels_compute(name: str) -> None:
    tasks = _stepped_tasks(raw_events(sample(TRACES[name])))
    want_n = Counter(COPY[c] for c, _ in tasks if c in COPY)
    want_us = {t: sum(float(d) for c, d in tasks if COPY.get(c) == t) for t in want_n}
    n_kernels = sum(c in KERNEL for c, _ in tasks)
    assert want_n and n_kernels  # every trace has copies or fills, and kernels

    p = pk.load(sample(TRACES[name]), cache=False, progress=False)
    top = top_operators(p, by="type", n=None, include_communication=True)
    memory = top[top["category"] == "memory"].set_index("type")
    # one group per kind of copy, holding every copy or fill of the steps and nothing else
    assert dict(memory["count"]) == dict(want_n)
    for kind, us in want_us.items():
        assert memory.loc[kind, "total_us"] == pytest.approx(us, rel=1e-9, abs=1e-6)
    # the kernels, copy kernels included, are the other groups
    rest = top[top["category"] != "memory"]
    assert set(rest["category"]) <= {"compute", "communication"}
    assert int(rest["count"].sum()) == n_kernels
    copy_kernels = top[top["type"] == "copy"]
    assert list(copy_kernels["category"]) in ([], ["compute"])
