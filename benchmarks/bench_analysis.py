"""Speed of every analysis and of the advisor on the bundled and on large profiles.

Run::

    python benchmarks/bench_analysis.py                 # data/, tests/data, ../shared/samples
                                                        # + a simulated cluster
    python benchmarks/bench_analysis.py --large DIR ... # also any profile folder(s), e.g. the
                                                        # outputs of loaders_generate.py

Each profile is loaded once (not timed: see loaders_bench.py for the loaders), its tables
are materialised, then every analysis runs ``--repeat`` times and the best wall time is
kept. The target is < 2 s per analysis on the bundled data. Prints one table per profile
and a final line with the slowest analysis; exits 1 when a bundled profile breaks the
target.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import perfkit as pk
from perfkit import analysis as A
from perfkit.advisor import advise
from perfkit.io.canonical.schema import TABLE_NAMES
from perfkit.io.engines.local import load

__all__ = ["main", "ANALYSES"]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # shared_samples: where other projects' profiles are
import shared_samples  # noqa: E402

DATA = ["kineto-tiny-llama", "mindspore-cpu-tiny-llama", "simulated/llama2-7b-tp2",
        "simulated/slow-rank",
        "simulated/slow-link", "simulated/data-stall", "simulated/llama2-13b-baseline-dp16",
        "simulated/llama2-13b-tuned-dp8-pp2"]
BUNDLED = ["msprof_analyze_level1"]  # tests/data
#: Real profiles of other projects, in ../shared/samples (or $PERFKIT_SHARED_SAMPLES).
SHARED = [shared_samples.PT_LEVEL1, shared_samples.PT_DB_LEVEL1, shared_samples.PT_GPT3_OLD,
          shared_samples.HTA, "ascend/msprof-analyze-tests/timeline_advice",
          shared_samples.CLUSTER_OUTPUT, shared_samples.MINDINSIGHT + "/cluster_propose",
          shared_samples.MINDINSIGHT + "/run_2_normal_run"]
TARGET_S = 2.0

MODEL = pk.ModelSpec.preset("llama2-7b")
HW = pk.Hardware.preset("ascend-910b")


def _analyses(parallel: Any) -> dict[str, Callable[[Any], Any]]:
    return {
        "step_breakdown": A.step_breakdown,
        "step_breakdown(derive)": lambda p: A.step_breakdown(p, derive="always"),
        "top_operators(type)": A.top_operators,
        "top_operators(name_shapes)": lambda p: A.top_operators(p, by="name_shapes"),
        "operator_bound": A.operator_bound,
        "ai_cpu_operators": A.ai_cpu_operators,
        "tiny_kernels": A.tiny_kernels,
        "unfused_patterns": A.unfused_patterns,
        "comm_summary": A.comm_summary,
        "comm_bandwidth_summary": lambda p: A.comm_bandwidth_summary(p, HW),
        "slow_links": A.slow_links,
        "comm_overlap": A.comm_overlap,
        "slow_ranks": A.slow_ranks,
        "stage_balance": lambda p: A.stage_balance(p, parallel=parallel),
        "data_loading": A.data_loading,
        "host_bound": A.host_bound,
        "sync_points": A.sync_points,
        "memory_peaks": A.memory_peaks,
        "memory_timeline": A.memory_timeline,
        "largest_allocations": A.largest_allocations,
        "memory_vs_theory": lambda p: A.memory_vs_theory(p, MODEL, pk.ParallelConfig(tp=8)),
        "compare_profiles(self)": lambda p: A.compare_profiles(p, p),
        "advise": lambda p: advise(p, model=MODEL, parallel=parallel, hardware=HW),
    }


ANALYSES = tuple(_analyses(None))


def bench(label: str, path: Path, repeat: int, parallel: Any = None) -> float:
    """Time every analysis on one profile; return the slowest best time."""
    prof = load(path, cache=False)
    for name in TABLE_NAMES:  # materialise the tables: loading is not what we time
        getattr(prof, name)
    kernels = len(prof.kernels)
    ranks = len(getattr(prof, "profiles", [prof]))
    print(f"\n## {label}  ({ranks} rank(s), {kernels:,} device tasks, "
          f"{len(prof.comm_ops):,} communication ops, {len(prof.memory):,} memory samples)")
    print(f"| analysis | best of {repeat}, s |")
    print("|---|---|")
    worst = 0.0
    for name, fn in _analyses(parallel).items():
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            fn(prof)
            best = min(best, time.perf_counter() - start)
        worst = max(worst, best)
        print(f"| {name} | {best:.3f} |")
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--large", nargs="*", default=[], help="extra profile folders / files")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-simulated", action="store_true",
                    help="skip the simulated 16-rank llama2-13b cluster")
    args = ap.parse_args(argv)
    bundled_worst = 0.0
    paths = [(f"bundled: data/{n}", ROOT / "data" / n) for n in DATA
             if (ROOT / "data" / n).exists()]
    paths += [(f"bundled: tests/data/{n}", ROOT / "tests" / "data" / n) for n in BUNDLED]
    if shared_samples.samples_dir() is None:
        print(f"(the shared samples are left out: {shared_samples.absent_reason()})")
    else:
        paths += [(f"shared: {n}", shared_samples.sample(n)) for n in SHARED]
    for label, path in paths:
        par = pk.ParallelConfig(dp=2, pp=2, num_micro_batches=4) if "propose" in label else None
        bundled_worst = max(bundled_worst, bench(label, path, args.repeat, par))
    worst = bundled_worst
    if not args.no_simulated:
        try:
            from perfkit.simulate import SlowRank, simulate
        except ImportError as exc:  # the simulator may be mid-change in a shared tree
            print(f"\n(simulated cluster skipped: {exc})")
            args.no_simulated = True
    if not args.no_simulated:
        model = pk.ModelSpec.preset("llama2-13b")
        par = pk.ParallelConfig(dp=2, tp=4, pp=2, num_micro_batches=8)
        with tempfile.TemporaryDirectory() as tmp:
            out = simulate(model, par, HW, steps=3, faults=(SlowRank(5),), out=Path(tmp) / "s")
            worst = max(worst, bench("simulated: llama2-13b, 16 ranks (dp2 tp4 pp2, m=8), "
                                     "3 steps", out, 1, par))
    for extra in args.large:
        worst = max(worst, bench(f"large: {extra}", Path(extra), 1))
    print(f"\nslowest analysis on the bundled and shared samples: {bundled_worst:.3f} s "
          f"(target < {TARGET_S} s); slowest overall: {worst:.3f} s")
    return 0 if bundled_worst < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
