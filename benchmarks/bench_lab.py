"""Time ``perfkit lab make`` for a class, as an instructor runs it, and ``perfkit lab grade``.

Usage::

    python benchmarks/bench_lab.py [--students 30] [--out /tmp/class] [--runs 3]
                                   [--workers-1] [--results FILE]

Each run is the command line itself (``perfkit lab make OUT --students N``) in a fresh
process, default workers (one per core), timed from start to exit: Python's start and
perfkit's import included. ``--workers-1`` adds runs with ``--workers 1`` (one process:
its user + system time is the whole CPU cost of a pack, which the parallel runs spread
over the cores). The load average before each run is recorded: the machine may be shared,
and a busy machine stretches wall time, not CPU time. The target (issue 28): a pack for
30 students in under a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _run(argv: list[str]) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    return {"wall_s": round(wall, 2), "load_before": round(load, 2),
            "cpu_reaped_s": round(after.ru_utime - before.ru_utime
                                  + after.ru_stime - before.ru_stime, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--out", type=Path, default=Path("/tmp/class"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers-1", action="store_true", dest="serial")
    ap.add_argument("--results", type=Path, default=None)
    args = ap.parse_args(argv)
    perfkit = [sys.executable, "-m", "perfkit.cli"]
    out: dict[str, Any] = {"students": args.students, "cpus": os.cpu_count(),
                           "python": platform.python_version(), "runs": []}
    kinds = ["default"] + (["workers-1"] if args.serial else [])
    for i in range(args.runs):
        for kind in kinds:
            shutil.rmtree(args.out, ignore_errors=True)
            cmd = perfkit + ["lab", "make", str(args.out), "--students", str(args.students)]
            if kind == "workers-1":
                cmd += ["--workers", "1"]
            run = {"run": i + 1, "workers": kind, **_run(cmd)}
            grade = _run(perfkit + ["lab", "grade", str(args.out)])
            run["grade_wall_s"] = grade["wall_s"]
            run["pack_mb"] = round(sum(f.stat().st_size for f in args.out.rglob("*")
                                       if f.is_file()) / 2**20, 1)
            out["runs"].append(run)
            print(json.dumps(run), flush=True)
    walls = sorted(r["wall_s"] for r in out["runs"] if r["workers"] == "default")
    out["median_wall_s"] = walls[len(walls) // 2]
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}, indent=2))
    if args.results:
        args.results.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
