"""``pk.infer_job`` on a large rank, this checkout and another side by side.

Each run is a fresh process (``--one``): it opens the rank (from each tree's own perfkit
cache, filled by a first untimed run), reads every table, then times ``pk.infer_job``
alone (wall and CPU seconds) and prints the job it found. Runs alternate between this
checkout and ``--before DIR`` so that both see the same load; the medians are printed with
the load average and whether both trees found the same job.

Run::

    python benchmarks/bench_infer_job.py RANK_PATH --before /path/to/other-checkout --repeat 3

``RANK_PATH``: e.g. the 1 M-task Ascend rank ``loaders_generate.py`` writes
(``/tmp/perfkit-first-answer/full/ascend/rank0_ascend_pt``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from loaders_bench import measure  # noqa: E402 - the benchmarks' shared helper

__all__ = ["main"]


def _one(path: str) -> None:
    """In a fresh process: open, read the tables, time ``infer_job``; print JSON."""
    warnings.simplefilter("ignore")
    import perfkit as pk

    profile = pk.load(path, progress=False)
    profile.tables()
    wall, cpu = time.perf_counter(), time.process_time()
    job = pk.infer_job(profile)
    print(json.dumps({"infer_job_s": time.perf_counter() - wall,
                      "infer_job_cpu_s": time.process_time() - cpu, "job": repr(job)}))


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--before", default=None, help="another checkout to compare with")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        _one(args.path)
        return
    trees = {"now": HERE.parent}
    if args.before:
        trees["before"] = Path(args.before).resolve()
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="perfkit-bench-job-") as tmp:
        envs = {name: {"PYTHONPATH": str(tree), "PERFKIT_CACHE_DIR": str(Path(tmp) / name)}
                for name, tree in trees.items()}
        cmd = [sys.executable, str(Path(__file__).resolve()), args.path, "--one"]
        for name in trees:  # parse once per tree into its cache, untimed
            measure(cmd, envs[name])
        for _ in range(args.repeat):
            for name in trees:
                r = measure(cmd, envs[name])
                if r["rc"] != 0:
                    raise SystemExit(f"{name} failed: {r['stderr_tail']}")
                runs[name].append({**r["inner"], "load": round(r["load_before"], 1)})
    for name, rs in runs.items():
        print(f"{name:7s} infer_job median {statistics.median(r['infer_job_s'] for r in rs):.2f} s"
              f" (CPU {statistics.median(r['infer_job_cpu_s'] for r in rs):.2f} s); runs "
              f"{[round(r['infer_job_s'], 2) for r in rs]} at load {[r['load'] for r in rs]}")
    if len(runs) == 2:
        jobs = {r["job"] for rs in runs.values() for r in rs}
        print("same job in both trees:", len(jobs) == 1)
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
