"""Benchmark ``pk.load(engine="dask")`` against the local engine on a 64-rank profile.

Steps (``python benchmarks/dask_bench.py``, all under ``--out``, never in the repository):

1. build one torch_npu Level1 rank of about ``--kernel-rows`` device tasks and a
   ``--trace-mb`` MB ``trace_view.json`` from the real sample (``loaders_generate.py``), then
   copy it to ``--ranks`` rank folders (``rank{r}_ascend_pt`` with ``profiler_info_{r}.json``);
2. in a fresh process each, with an empty cache each: the local engine (process pool of
   ``--workers``), then Dask on a ``LocalCluster`` of ``--workers`` single-threaded worker
   processes limited to ``--memory-limit`` each, for the first 16 ranks and for all ranks;
   the Dask runs then compute two cluster-level aggregations on the lazy tables
   (communication per rank, device time per rank and category over all kernels);
3. print a table, write ``--results`` (JSON), delete the generated data unless ``--keep``.

Peak memory per worker is the kernel's high-water mark (``VmHWM``) of each worker process,
read while it runs (local pool) or at the end (Dask workers): not a sampled estimate.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _hwm_bytes(pid: int) -> int:
    """Peak resident memory of process ``pid`` (VmHWM), 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out += [int(x) for x in fh.read().split()]
    except OSError:
        pass
    for c in list(out):
        out += _children(c)
    return out


class _Watch:
    """Samples the VmHWM of this process's children every 50 ms (per pid maximum)."""

    def __init__(self) -> None:
        self.peaks: dict[int, int] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            for c in _children(me):
                self.peaks[c] = max(self.peaks.get(c, 0), _hwm_bytes(c))
            time.sleep(0.05)

    def stop(self) -> dict[int, int]:
        self._stop.set()
        self._t.join()
        return self.peaks


# ----------------------------------------------------------------------------- data

def generate(out: Path, ranks: int, kernel_rows: int, trace_mb: int) -> dict[str, Any]:
    """Write ``ranks`` copies of one grown Ascend rank under ``out/profile``."""
    sys.path.insert(0, str(HERE))
    from loaders_generate import _ascend  # the grower of the loader benchmark

    seed = out / "seed"
    _ascend(seed, kernel_rows, trace_mb)
    src = seed / "rank0_ascend_pt"
    info = json.loads((src / "profiler_info_0.json").read_text())
    prof = out / "profile"
    prof.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        dst = prof / f"rank{r}_ascend_pt"
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("profiler_info_*.json"))
        info["rank_id"] = r
        (dst / f"profiler_info_{r}.json").write_text(json.dumps(info))
    shutil.rmtree(seed)
    size = sum(f.stat().st_size for f in prof.rglob("*") if f.is_file())
    per_rank = sum(f.stat().st_size for f in (prof / "rank0_ascend_pt").rglob("*")
                   if f.is_file())
    return {"ranks": ranks, "total_bytes": size, "rank_bytes": per_rank}


# ----------------------------------------------------------------------------- one run

def _one(args: argparse.Namespace) -> dict[str, Any]:
    """Run one measurement in this (fresh) process; prints a JSON line."""
    os.environ["PERFKIT_CACHE_DIR"] = args.cache
    os.environ.pop("PERFKIT_CACHE", None)
    import perfkit as pk

    path = Path(args.data)
    wanted = list(range(args.subset)) if args.subset else None
    res: dict[str, Any] = {"engine": args.engine, "ranks": args.subset or args.ranks,
                           "workers": args.workers}
    if args.engine == "local":
        watch = _Watch()
        t0 = time.perf_counter()
        c = pk.load(path, ranks=wanted, engine="local", workers=args.workers, progress=False)
        res["load_s"] = time.perf_counter() - t0
        peaks = watch.stop()
        res["loaded"] = len(c)
        res["worker_peak_bytes"] = sorted(peaks.values(), reverse=True)[:args.workers]
        res["client_peak_bytes"] = _hwm_bytes(os.getpid())
        res["dask_imported"] = "dask" in sys.modules
        return res
    from distributed import Client, LocalCluster

    from perfkit.analysis._frames import aggregate
    from perfkit.analysis.rank_summary import rank_comm_summary

    t0 = time.perf_counter()
    lc = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      memory_limit=args.memory_limit, dashboard_address=":0")
    client = Client(lc)
    res["start_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    c = pk.load(path, ranks=wanted, engine="dask", client=client, progress=False)
    res["load_s"] = time.perf_counter() - t0
    res["loaded"] = len(c)
    after_load = client.run(lambda: _hwm_bytes(os.getpid()))
    t0 = time.perf_counter()
    comm = rank_comm_summary(c)
    per_cat = aggregate(c.kernels, ["rank", "category"], {"dur_us": ["count", "sum"]})
    res["aggregate_s"] = time.perf_counter() - t0
    res["aggregate_rows"] = [len(comm), len(per_cat)]
    res["kernel_rows"] = int(per_cat["dur_us_count"].sum())
    end = client.run(lambda: _hwm_bytes(os.getpid()))
    res["worker_peak_after_load_bytes"] = sorted(after_load.values(), reverse=True)
    res["worker_peak_bytes"] = sorted(end.values(), reverse=True)
    res["client_peak_bytes"] = _hwm_bytes(os.getpid())
    client.close()
    lc.close()
    return res


# ----------------------------------------------------------------------------- driver

def _gb(b: float) -> str:
    return f"{b / 2**30:.2f}"


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/perfkit-dask-bench")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--kernel-rows", type=int, default=250_000)
    ap.add_argument("--trace-mb", type=int, default=70)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="2GiB")
    ap.add_argument("--results", default=None)
    ap.add_argument("--keep", action="store_true", help="do not delete the generated data")
    ap.add_argument("--skip-generate", action="store_true")
    # internal: one measurement in a child process
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--engine", default="local", help=argparse.SUPPRESS)
    ap.add_argument("--data", default="", help=argparse.SUPPRESS)
    ap.add_argument("--cache", default="", help=argparse.SUPPRESS)
    ap.add_argument("--subset", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print("RESULT " + json.dumps(_one(args)), flush=True)
        return
    out = Path(args.out).resolve()
    if ROOT in out.parents or out == ROOT:
        raise SystemExit("refusing to write benchmark data inside the repository")
    out.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(out).free
    report: dict[str, Any] = {"free_disk_bytes_before": free, "cpus": os.cpu_count()}
    try:
        if not args.skip_generate:
            t0 = time.perf_counter()
            report["data"] = generate(out, args.ranks, args.kernel_rows, args.trace_mb)
            report["data"]["generate_s"] = time.perf_counter() - t0
            print(f"generated {report['data']}", flush=True)
        runs = [("local", 0), ("dask", max(1, args.ranks // 4)), ("dask", 0)]
        report["runs"] = []
        for engine, subset in runs:
            cache = out / f"cache-{engine}-{subset or args.ranks}"
            shutil.rmtree(cache, ignore_errors=True)
            cmd = [sys.executable, str(Path(__file__).resolve()), "--one", "--engine", engine,
                   "--data", str(out / "profile"), "--cache", str(cache),
                   "--subset", str(subset), "--ranks", str(args.ranks),
                   "--workers", str(args.workers), "--memory-limit", args.memory_limit]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t0
            line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode or not line:
                raise SystemExit(f"run {engine}/{subset} failed:\n{proc.stderr[-4000:]}")
            res = json.loads(line[-1][len("RESULT "):])
            res["process_s"] = wall
            res["cache_bytes"] = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())
            report["runs"].append(res)
            print(json.dumps(res), flush=True)
            shutil.rmtree(cache, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(out / "profile", ignore_errors=True)
            shutil.rmtree(out / "seed", ignore_errors=True)
    full = [r for r in report["runs"] if r["engine"] == "dask" and r["ranks"] == args.ranks][0]
    per_rank = full["load_s"] * args.workers / args.ranks  # worker-seconds per rank
    report["per_rank_worker_s"] = per_rank
    report["projection_1024"] = {n: 1024 * per_rank / n for n in (2, 16, 64, 128, 256)}
    print("\n| run | ranks | load s | aggregate s | peak per worker GB | client peak GB |")
    print("|---|---|---|---|---|---|")
    for r in report["runs"]:
        agg = f"{r['aggregate_s']:.1f}" if "aggregate_s" in r else "-"
        print(f"| {r['engine']} | {r['ranks']} | {r['load_s']:.1f} | {agg} | "
              f"{_gb(max(r['worker_peak_bytes']))} | {_gb(r['client_peak_bytes'])} |")
    print(f"\nper-rank cost: {per_rank:.2f} worker-seconds; projected load of 1024 ranks: "
          + ", ".join(f"{n} workers {s / 60:.1f} min" for n, s in
                      report["projection_1024"].items()))
    if args.results:
        Path(args.results).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
