"""Time the analyses and the advisor on a lazy (Dask) cluster against the eager (pandas) one.

The same folder is loaded twice, with the local engine (pandas frames) and with
``engine="dask"`` on a ``LocalCluster`` of ``--workers`` worker processes (one thread each;
the lazy cluster reads its ranks from the Parquet cache, a fresh temporary one), the loads
not timed. Then every public analysis of
:mod:`perfkit.analysis` that takes a cluster, and ``perfkit.advise``, runs on each, in
alternation, ``--repeat`` times; the medians and their ratio are printed (and written as
JSON with ``--results``).

Usage::

    python benchmarks/dask_vs_pandas.py [--path data/simulated/llama2-13b-baseline-dp16]
        [--workers 2] [--repeat 3] [--results out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

__all__ = ["main", "cases"]


def cases() -> list[tuple[str, Callable[[Any], Any]]]:
    """(name, call) of every analysis timed, and the advisor last."""
    import perfkit as pk
    from perfkit import analysis as A

    hw = pk.Hardware.preset("ascend-910b")
    model = pk.ModelSpec.preset("llama2-13b")
    pp = pk.ParallelConfig(dp=16, num_micro_batches=1)
    return [
        ("step_breakdown", A.step_breakdown),
        ("slow_ranks", A.slow_ranks),
        ("stage_balance", lambda c: A.stage_balance(c, parallel=pp)),
        ("comm_overlap", A.comm_overlap),
        ("comm_summary", A.comm_summary),
        ("comm_bandwidth_summary", lambda c: A.comm_bandwidth_summary(c, hardware=hw)),
        ("slow_links", A.slow_links),
        ("top_operators", lambda c: A.top_operators(c, n=None)),
        ("operator_bound", A.operator_bound),
        ("ai_cpu_operators", A.ai_cpu_operators),
        ("tiny_kernels", A.tiny_kernels),
        ("unfused_patterns", A.unfused_patterns),
        ("recompute_evidence", A.recompute_evidence),
        ("operator_efficiency", A.operator_efficiency),
        ("elementwise_chains", A.elementwise_chains),
        ("data_loading", A.data_loading),
        ("host_bound", A.host_bound),
        ("sync_points", A.sync_points),
        ("memory_peaks", A.memory_peaks),
        ("memory_timeline", lambda c: A.memory_timeline(c, max_points=50)),
        ("largest_allocations", A.largest_allocations),
        ("memory_vs_theory", lambda c: A.memory_vs_theory(c, model=model, parallel=pp)),
        ("rank_step_summary", A.rank_step_summary),
        ("rank_comm_summary", A.rank_comm_summary),
        ("advise", lambda c: pk.advise(c)),
    ]


def _time(call: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=str(ROOT / "data" / "simulated"
                                          / "llama2-13b-baseline-dp16"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--results", default=None)
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="perfkit-dask-vs-pandas-")
    os.environ["PERFKIT_CACHE_DIR"] = tmp  # set before the workers start: they inherit it
    from distributed import Client, LocalCluster

    import perfkit as pk

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as lc, Client(lc) as client:
        eager = pk.load(args.path, cache=False, progress=False)
        lazy = pk.load(args.path, engine="dask", client=client, progress=False)
        assert type(lazy).__name__ == "DaskCluster", type(lazy)
        times: dict[str, dict[str, list[float]]] = {}
        for name, call in cases():
            call(eager)  # first calls read the tables (not what is timed)
            call(lazy)
            t = times.setdefault(name, {"pandas": [], "dask": []})
            for _ in range(args.repeat):
                t["pandas"].append(_time(lambda call=call: call(eager)))
                t["dask"].append(_time(lambda call=call: call(lazy)))
    shutil.rmtree(tmp, ignore_errors=True)
    rows = []
    for name, t in times.items():
        p, d = statistics.median(t["pandas"]), statistics.median(t["dask"])
        rows.append({"case": name, "pandas_s": p, "dask_s": d, "ratio": d / p if p else None,
                     "pandas_runs": t["pandas"], "dask_runs": t["dask"]})
    analyses = [r for r in rows if r["case"] != "advise"]
    total_p = sum(r["pandas_s"] for r in analyses)
    total_d = sum(r["dask_s"] for r in analyses)
    summary = {"path": args.path, "ranks": len(eager.ranks), "workers": args.workers,
               "repeat": args.repeat, "analyses_pandas_s": total_p, "analyses_dask_s": total_d,
               "analyses_ratio": total_d / total_p, "rows": rows, "load": os.getloadavg()}
    print(f"{len(eager.ranks)} ranks, LocalCluster of {args.workers} workers, "
          f"median of {args.repeat}")
    print("| analysis | pandas s | dask s | dask / pandas |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['pandas_s']:.3f} | {r['dask_s']:.3f} | {r['ratio']:.2f} |")
    print(f"| all analyses (sum) | {total_p:.2f} | {total_d:.2f} | {total_d / total_p:.2f} |")
    if args.results:
        Path(args.results).write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
