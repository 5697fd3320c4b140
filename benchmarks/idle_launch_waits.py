"""The idle time of the measured H100 layouts, read from the raw traces, and what three
launch-bound readings of the calibrating profile would predict for it.

Run: python benchmarks/idle_launch_waits.py

For each layout of tests/data/kineto_llama_layouts_h100 and kineto_llama_shapes_h100 and
each profiled step, from the raw JSON (gzip + json; the device tasks whose launch lies in
the step's host ``ProfilerStep`` span, as tests/plan/test_measured_layouts.py reads them):
the device tasks, their computing time (the union of their intervals), the idle time
between the first and the last, split into *launch waits* (gaps before a task whose
launch call began after the previous task had ended: the device waited on the host) and
the rest (the device's own gap from one queued task to the next), and the host's pace:
microseconds between the first and the last launch of the forward (the main thread,
until autograd's thread launches) and of the backward (autograd's thread), per task
launched. Then the timed step less the
mean computing time (environment.json: the idle time without the profiler).

Last, for each layout, the idle predicted from its set's layout ``a`` (its least idle
step) by:

* ``per kernel`` — perfkit's closed model (``plan.calibrate(profile, close=True)``: the
  least idle step's idle spread over the model's kernels), its ``overhead`` part;
* ``replay`` — ``a``'s launches replayed against its tasks with every task's duration
  times ``s`` = the layout's computing time over ``a``'s (a queue: a task starts at the
  later of its launch's end plus the least launch-to-start delay and the previous
  task's end plus the median queued gap), its idle time;
* ``Σ max(0, t − s·d)`` — the fixed gaps plus Σ over ``a``'s tasks of max(0, t − s·d),
  ``t`` the launch time at which that sum is ``a``'s launch waits (bisection);
* ``split`` — the fixed gaps scaled as the model's kernels (per kernel's ratio to
  ``a``) plus ``a``'s launch waits held.

The layouts that run more tasks than ``a`` (recompute, 16 layers) get them in the last
three readings only through ``per kernel``'s ratio (``split``) or not at all.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import statistics
from pathlib import Path

import perfkit as pk
from perfkit import plan

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
SETS = ("kineto_llama_layouts_h100", "kineto_llama_shapes_h100")
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME = {"cuda_runtime", "cuda_driver"}


def read_steps(path: Path) -> dict[int, list[tuple[float, float, dict]]]:
    """Step -> its device tasks (start, duration, launch event), sorted by start."""
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    spans = [(int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("ph") == "X" and e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    launch = {e["args"]["correlation"]: e for e in events if e.get("ph") == "X"
              and e.get("cat") in RUNTIME and "correlation" in e.get("args", {})}
    steps: dict[int, list] = {s: [] for s, _, _ in spans}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in DEVICE:
            call = launch.get(e["args"].get("correlation"))
            if call is None:
                continue
            step = next((s for s, a, b in spans if a <= call["ts"] < b), None)
            if step is not None:
                steps[step].append((float(e["ts"]), float(e["dur"]), call))
    return {s: sorted(t, key=lambda x: x[0]) for s, t in steps.items()}


def reading(tasks: list) -> dict[str, float]:
    """Computing, idle, launch waits (ms), tasks, and the host's µs per task launched."""
    busy = idle = waits = 0.0
    end = tasks[0][0]
    for start, dur, call in tasks:
        if start > end:
            idle += start - end
            if call["ts"] >= end:
                waits += start - end
        busy += max(0.0, start + dur - max(start, end))
        end = max(end, start + dur)
    main = tasks[0][2]["tid"]
    backward = min(c["ts"] for _, _, c in tasks if c["tid"] != main)
    pace = {}
    for name, pick in (("forward", lambda c: c["tid"] == main and c["ts"] < backward),
                       ("backward", lambda c: c["tid"] != main)):
        calls = [c["ts"] for _, _, c in tasks if pick(c)]
        pace[name] = (max(calls) - min(calls)) / len(calls) if calls else float("nan")
    return {"tasks": len(tasks), "busy": busy / 1e3, "idle": idle / 1e3,
            "waits": waits / 1e3, "fixed": (idle - waits) / 1e3, **pace}


def replay(tasks: list, scale: float) -> float:
    """Idle (ms) of ``tasks``' launches replayed with every duration times ``scale``."""
    delay = min(s - (c["ts"] + c["dur"]) for s, _, c in tasks)
    queued = sorted(max(0.0, tasks[i][0] - tasks[i - 1][0] - tasks[i - 1][1])
                    for i in range(1, len(tasks))
                    if tasks[i][2]["ts"] + tasks[i][2]["dur"] + 5 < tasks[i - 1][0]
                    + tasks[i - 1][1])
    gap = queued[len(queued) // 2]
    end, idle = tasks[0][0], 0.0
    for i, (_, dur, call) in enumerate(tasks):
        start = max(end + (gap if i else 0.0), call["ts"] + call["dur"] + delay)
        idle += start - end
        end = start + dur * scale
    return idle / 1e3


def launch_time(durations: list[float], waits_us: float) -> float:
    """``t`` (µs) at which Σ max(0, t − d) over ``durations`` is ``waits_us``."""
    lo, hi = 0.0, max(durations)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sum(max(0.0, mid - d) for d in durations) < waits_us \
            else (lo, mid)
    return (lo + hi) / 2


def print_set(folder: str) -> None:
    env = json.loads((DATA / folder / "environment.json").read_text())["layouts"]
    read = {k: read_steps(DATA / folder / f"{k}.pt.trace.json.gz") for k in env}
    print(f"{folder}: per step, from the raw JSON (ms; host pace µs per task launched)")
    for key, steps in read.items():
        for step, tasks in steps.items():
            r = reading(tasks)
            print(f"  {key} step {step}: {r['tasks']:5d} tasks, computing {r['busy']:6.1f}, "
                  f"idle {r['idle']:5.2f} = launch waits {r['waits']:5.2f} + fixed gaps "
                  f"{r['fixed']:4.2f}; host {r['forward']:4.1f} fwd, {r['backward']:4.1f} bwd")
    base = {s: reading(t) for s, t in read["a"].items()}
    least = min(base, key=lambda s: base[s]["idle"])
    a, tasks = base[least], read["a"][least]
    t = launch_time([d for _, d, _ in tasks], a["waits"] * 1e3)
    cal = plan.calibrate(pk.load(DATA / folder / "a.pt.trace.json.gz", cache=False,
                                 progress=False), close=True)
    print(f"  predicted idle from a's step {least} (t = {t:.1f} µs) against the timed "
          "step less the trace's computing (ms)")
    for key, rec in env.items():
        busy = statistics.mean(reading(v)["busy"] for v in read[key].values())
        timed = statistics.median(rec["timed_steps_ms"])
        model = dataclasses.replace(cal.job.model, num_layers=rec.get("layers", 8),
                                    seq_length=rec.get("seq", 2048))
        parallel = dataclasses.replace(cal.job.parallel, micro_batch_size=rec["micro_batch"],
                                       recompute=rec["recompute"])
        per_kernel = 1e3 * plan.predict(cal, model=model, parallel=parallel,
                                        global_batch_size=rec["micro_batch"],
                                        seq_length=model.seq_length).parts["overhead"]
        s = busy / a["busy"]
        summed = a["fixed"] + sum(max(0.0, t - s * d) for _, d, _ in tasks) / 1e3
        split = a["fixed"] * per_kernel / (1e3 * cal.parts["overhead"]) + a["waits"]
        print(f"  {key}: timed − computing {timed - busy:5.2f} | per kernel {per_kernel:5.2f}"
              f"  replay ×{s:.2f} {replay(tasks, s):5.2f}  Σ max {summed:5.2f}  split "
              f"{split:5.2f}")


if __name__ == "__main__":
    for name in SETS:
        print_set(name)
        print()
