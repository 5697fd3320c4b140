"""The Kineto preview side by side with the full load: seconds and the step time each gives.

For each input (a Kineto file or folder), in one process, one after the other:

- ``scan_preview_s``: :func:`perfkit.io.preview.steps.preview` with ``device_steps=False`` (a
  byte scan for the ``ProfilerStep`` events: the copies on the device lane where the trace
  has them, else the host spans; in a trace without ``ProfilerStep``, the host spans of
  its training iterations but the first, the events that tell them found by a byte scan
  too, :mod:`perfkit.io.kineto.marks`; ``scan_basis`` says which) and the step it gives
  (``scan_step_s``: the median over steps of the slowest rank's; None where the scan
  finds no step);
- ``device_preview_s``: the same with ``device_steps=True`` (each step's first to last
  device task, :func:`perfkit.io.preview.steps.kineto_device_steps`; a trace without
  ``ProfilerStep``: each training iteration's, the iterations inferred from the
  optimizer's ``Optimizer.step#<Class>.step`` annotations as the full load does) and
  ``device_step_s``;
- ``full_load_s``: ``perfkit.load(path, cache=False)`` and ``full_step_s``
  (:func:`perfkit.analysis.measured_step_s` of its step breakdown);

``equal`` says whether the device preview's step equals the full load's. The load average
is printed with each run (the machine's other work moves every figure).

Run::

    python benchmarks/bench_preview.py /tmp/progressive-bench/kineto [/tmp/kf/bench240/kineto]
    python benchmarks/bench_preview.py PATH --repeat 3 --results out.json
    python benchmarks/bench_preview.py PATH --scan-only --repeat 3   # the byte scan alone

The inputs are written by ``loaders_generate.py --out DIR [--kineto-mb N] --only kineto``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "measure"]


def measure(path: str, scan_only: bool = False) -> dict[str, Any]:
    """One side-by-side run on ``path`` (see the module docstring); ``scan_only``: the
    byte-scan preview alone (its CPU seconds too, ``scan_preview_cpu_s``: the process's
    own, which the machine's other work moves less than the wall clock)."""
    import perfkit as pk
    from perfkit import analysis as A
    from perfkit.io.preview.steps import preview

    load = os.getloadavg()[0]
    t, cpu = time.perf_counter(), time.process_time()
    host = preview(path, device_steps=False)
    host_s, host_cpu = time.perf_counter() - t, time.process_time() - cpu
    basis = "device lane" if host.device_lane else "host spans" if host.host_spans else \
        host.steps_from
    if scan_only:
        return {"path": path, "bytes": host.input_bytes, "load_avg": round(load, 2),
                "scan_preview_s": round(host_s, 2), "scan_preview_cpu_s": round(host_cpu, 2),
                "scan_basis": basis, "scan_steps_from": host.steps_from,
                "scan_step_s": None if host.profile is None else A.measured_step_s(
                    A.step_breakdown(host.profile))}
    t = time.perf_counter()
    device = preview(path, device_steps=True)
    device_s = time.perf_counter() - t
    t = time.perf_counter()
    full = pk.load(path, cache=False, progress=False)
    full_s = time.perf_counter() - t
    # None: no quick reading (a trace without ProfilerStep whose optimizer's annotations
    # tell no iteration)
    steps = {name: None if p is None else A.measured_step_s(A.step_breakdown(p))
             for name, p in (("host", host.profile), ("device", device.profile),
                             ("full", full))}
    return {"path": path, "bytes": device.input_bytes, "load_avg": round(load, 2),
            "scan_preview_s": round(host_s, 2), "scan_basis": basis,
            "device_preview_s": round(device_s, 2),
            "full_load_s": round(full_s, 2),
            "device_over_full": round(device_s / full_s, 3),
            "scan_step_s": steps["host"], "device_step_s": steps["device"],
            "full_step_s": steps["full"], "equal": steps["device"] == steps["full"]}


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--scan-only", action="store_true",
                    help="only the byte-scan preview (seconds; no device pass, no load)")
    ap.add_argument("--results", default=None, help="write the runs as JSON here")
    args = ap.parse_args(argv)
    runs = []
    for path in args.paths:
        for _ in range(args.repeat):
            runs.append(measure(path, args.scan_only))
            print(json.dumps(runs[-1]), flush=True)
    if args.results:
        Path(args.results).write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
