"""perfkit's loaders against the parsing limit, measured in the same run, at several sizes.

For each input (a 2-rank Kineto folder, one Ascend rank) and each size (``--scales``,
fractions of the full inputs of ``loaders_generate.py``) the runs are interleaved:
the parsing limit (``parsing_limit.py``, one process; and with ``--limit-workers`` the
same number of processes perfkit uses), the same limit with transparent huge pages off
(``--small-pages``: the kernel setting perfkit's loads run under,
``perfkit/_hugepages.py``) and ``perfkit.load`` with the cache off (``_loaders_one.py``),
``--repeat`` times. Every run is a fresh process; measured around it: wall seconds, CPU
seconds of the process tree (its rusage, children included) and peak resident memory
summed over the process tree (sampled from /proc every 20 ms); measured inside it: the
seconds of the load itself (imports excluded). The load average is recorded before each
run (the machine may be shared).

Then, on the full-size Ascend rank: a cached reopen plus ``step_breakdown``, reading every
table, and ``perfkit.advise`` twice on the loaded rank (``_advise_one.py``, fresh
processes; user and system time, page faults and peak growth of each part). Peers
(HolisticTraceAnalysis, msprof-analyze) run with ``--peers`` from their own virtual
environments, once per input at full size.

Usage::

    python benchmarks/loaders_generate.py --out /tmp/perfkit-bench --scales 0.25,0.5,1
    python benchmarks/loaders_bench.py --data /tmp/perfkit-bench --results out.json
    rm -rf /tmp/perfkit-bench
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "measure", "tree_rss"]

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
PAGE = os.sysconf("SC_PAGE_SIZE")


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants."""
    total = 0
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/statm") as fh:
                total += int(fh.read().split()[1]) * PAGE
        except OSError:
            continue
        stack.extend(_children(p))
    return total


#: A folder without a perfkit package, for the commands that name the tree to measure by
#: ``PYTHONPATH`` (see :func:`measure`).
NEUTRAL_CWD = tempfile.gettempdir()

# The processes measured use byte code, as an installed package does (pip writes it at
# install; a checkout writes it on its first import). Where the environment forbids it
# (PYTHONDONTWRITEBYTECODE, set on some build machines), every fresh process would compile
# the modules changed since the last write, and that compile time would be measured as
# import and advise time (16 modules, 25 ms of one ``pk.advise`` on 2026-11-25).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def measure(cmd: list[str], env: dict[str, str] | None = None,
            timeout: float = 3600, cwd: str | None = None) -> dict[str, Any]:
    """Run ``cmd``: wall and CPU seconds, peak tree RSS (bytes), exit code, stdout JSON.

    ``cwd``: where it runs. A ``python -c`` or ``python -m`` command imports from its
    folder first, before ``PYTHONPATH``: run from a checkout, it would measure that
    checkout's perfkit whatever tree ``PYTHONPATH`` names (:data:`NEUTRAL_CWD` avoids it).
    """
    peak = 0
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})}, text=True, cwd=cwd)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.02)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        done.set()
        t.join()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        inner = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    except json.JSONDecodeError:
        inner = {}
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_bytes": peak, "rc": proc.returncode,
            "load_before": load, "inner": inner, "stderr_tail": err[-1500:]}


def _warm(path: Path) -> int:
    """Read every file once (warm page cache); return the bytes."""
    size = 0
    for f in ([path] if path.is_file() else sorted(path.rglob("*"))):
        if f.is_file():
            with open(f, "rb") as fh:
                while chunk := fh.read(1 << 24):
                    size += len(chunk)
    return size


def _input_bytes(kind: str, path: Path) -> int:
    """The bytes the parsing limit reads (the two large files of an Ascend rank)."""
    if kind == "ascend":
        out = path / "ASCEND_PROFILER_OUTPUT"
        return sum((out / n).stat().st_size for n in ("kernel_details.csv", "trace_view.json"))
    return sum(f.stat().st_size for f in path.glob("*.json"))


def _runs(kind: str, path: Path, repeat: int, limit_workers: bool) -> dict[str, Any]:
    """Interleaved runs of the limit(s) and perfkit on one input."""
    py = sys.executable
    limit = [py, str(HERE / "parsing_limit.py"), str(path), "--workers", "1"]
    limit_small = [*limit, "--small-pages"]  # huge pages off, as perfkit runs its loads
    limit_par = [py, str(HERE / "parsing_limit.py"), str(path)]
    perfkit = [py, str(HERE / "_loaders_one.py"), str(path), "--no-cache"]
    res: dict[str, list[dict[str, Any]]] = {"limit": [], "limit_small_pages": [],
                                            "perfkit": []}
    if limit_workers and kind == "kineto":
        res["limit_parallel"] = []
    for i in range(repeat):
        order = [("limit", limit), ("perfkit", perfkit), ("limit_small_pages", limit_small)]
        if "limit_parallel" in res:
            order.append(("limit_parallel", limit_par))
        if i % 2:  # alternate who goes first, so a drift in load hurts both alike
            order.reverse()
        for name, cmd in order:
            r = measure(cmd)
            if r["rc"] != 0:
                raise SystemExit(f"{name} failed on {path}: {r['stderr_tail']}")
            res[name].append(r)
            print(f"  {kind} {path.parent.name if kind == 'ascend' else path.name} "
                  f"{name:15s} wall {r['wall_s']:6.2f} s  cpu {r['cpu_s']:6.2f} s  "
                  f"peak {r['peak_rss_bytes'] / 1e9:5.2f} GB  load {r['load_before']:.1f}",
                  flush=True)
    return res


def _summary(res: dict[str, list[dict[str, Any]]], size: int) -> dict[str, Any]:
    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in res[name])

    pk_inner = statistics.median(r["inner"]["load_and_tables_s"] for r in res["perfkit"])
    lim_inner = statistics.median(r["inner"]["total_s"] for r in res["limit"])
    small_inner = statistics.median(r["inner"]["total_s"] for r in res["limit_small_pages"])
    out = {
        "input_mb": size / 1e6,
        "limit_wall_s": med("limit", "wall_s"), "perfkit_wall_s": med("perfkit", "wall_s"),
        "limit_cpu_s": med("limit", "cpu_s"), "perfkit_cpu_s": med("perfkit", "cpu_s"),
        "limit_inner_s": lim_inner, "perfkit_inner_s": pk_inner,
        "limit_peak_gb": max(r["peak_rss_bytes"] for r in res["limit"]) / 1e9,
        "perfkit_peak_gb": max(r["peak_rss_bytes"] for r in res["perfkit"]) / 1e9,
        "load_avg": statistics.median(r["load_before"] for r in [*res["limit"],
                                                                  *res["perfkit"]]),
    }
    out["ratio_wall"] = out["perfkit_wall_s"] / out["limit_wall_s"]
    out["ratio_cpu"] = out["perfkit_cpu_s"] / out["limit_cpu_s"]
    out["ratio_inner"] = pk_inner / lim_inner
    out["ratio_wall_paired"] = statistics.median(
        p["wall_s"] / q["wall_s"] for p, q in zip(res["perfkit"], res["limit"], strict=True))
    out["perfkit_s_per_mb"] = pk_inner / out["input_mb"]
    out["limit_s_per_mb"] = lim_inner / out["input_mb"]
    # the limit under the same kernel setting as perfkit (transparent huge pages off)
    out["limit_small_pages_wall_s"] = med("limit_small_pages", "wall_s")
    out["limit_small_pages_inner_s"] = small_inner
    out["limit_small_pages_peak_gb"] = max(
        r["peak_rss_bytes"] for r in res["limit_small_pages"]) / 1e9
    out["ratio_wall_small_pages"] = out["perfkit_wall_s"] / out["limit_small_pages_wall_s"]
    out["ratio_inner_small_pages"] = pk_inner / small_inner
    out["limit_small_pages_s_per_mb"] = small_inner / out["input_mb"]
    if "limit_parallel" in res:
        out["limit_parallel_wall_s"] = med("limit_parallel", "wall_s")
        out["limit_parallel_peak_gb"] = max(r["peak_rss_bytes"]
                                            for r in res["limit_parallel"]) / 1e9
        out["ratio_wall_vs_parallel_limit"] = out["perfkit_wall_s"] / \
            out["limit_parallel_wall_s"]
    return out


def _cached(rank: Path, repeat: int) -> dict[str, Any]:
    """Cached reopen + step_breakdown, and advise, in fresh processes (fresh cache)."""
    with tempfile.TemporaryDirectory(prefix="perfkit-bench-cache-") as cache_dir:
        env = {"PERFKIT_CACHE_DIR": cache_dir}
        first = measure([sys.executable, str(HERE / "_loaders_one.py"), str(rank)], env)
        runs = [measure([sys.executable, str(HERE / "_advise_one.py"), str(rank)], env)
                for _ in range(repeat)]
    inner = [r["inner"] for r in runs]
    out: dict[str, Any] = {
        "first_load_s": first["inner"].get("load_and_tables_s"),
        "reopen_plus_step_breakdown_s": statistics.median(
            i["reopen_s"] + i["step_breakdown_s"] for i in inner),
        "process_wall_to_step_breakdown_s": statistics.median(
            i["import_s"] + i["reopen_s"] + i["step_breakdown_s"] for i in inner),
    }
    for part in ("reopen", "step_breakdown", "read_tables", "advise_first", "advise_again"):
        for what in ("s", "user_s", "sys_s", "page_faults", "maxrss_growth_mb"):
            out[f"{part}_{what}"] = statistics.median(i[f"{part}_{what}"] for i in inner)
        out[f"{part}_all_s"] = sorted(i[f"{part}_s"] for i in inner)
    return {
        **out,
        "findings": inner[0].get("findings"),
        "runs": runs,
    }


def _split(c: dict[str, Any], part: str) -> str:
    """``user … s, system … s, … page faults, peak +… MB`` of one timed part (medians)."""
    return (f"user {c[part + '_user_s']:.2f} s, system {c[part + '_sys_s']:.2f} s, "
            f"{c[part + '_page_faults']:,.0f} page faults, "
            f"peak +{c[part + '_maxrss_growth_mb']:.0f} MB")


def _peers(kineto: Path, ascend_rank: Path, hta_python: str, msprof: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if Path(hta_python).exists():
        code = ("import sys; from hta.trace_analysis import TraceAnalysis; "
                "TraceAnalysis(trace_dir=sys.argv[1])")
        out["hta_kineto"] = measure([hta_python, "-c", code, str(kineto)])
    if Path(msprof).exists():
        tmp = Path(tempfile.mkdtemp(prefix="perfkit-bench-msprof-"))
        try:
            out["msprof_advisor"] = measure(
                [msprof, "advisor", "all", "-d", str(ascend_rank), "-o", str(tmp / "adv"),
                 "-l", "en", "--force"])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _machine() -> dict[str, Any]:
    import msgspec
    import pandas as pd
    import pyarrow as pa

    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in
                   Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpus": os.cpu_count(), "cpu": cpu, "mem_gb": mem / 2**30,
            "python": platform.python_version(), "pandas": pd.__version__,
            "pyarrow": pa.__version__, "msgspec": msgspec.__version__,
            "date": time.strftime("%Y-%m-%d"), "platform": platform.platform()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/tmp/perfkit-bench",
                    help="folder of loaders_generate.py (scale-<s>/kineto, scale-<s>/ascend)")
    ap.add_argument("--scales", default="0.25,0.5,1")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=["kineto", "ascend"], default=None)
    ap.add_argument("--no-limit-workers", action="store_true",
                    help="skip the Kineto limit run with one process per file")
    ap.add_argument("--no-cached", action="store_true", help="skip the reopen/advise runs")
    ap.add_argument("--peers", action="store_true", help="also run HTA and msprof-analyze")
    ap.add_argument("--hta-python", default="/tmp/venvs/hta/bin/python")
    ap.add_argument("--msprof", default="/tmp/venvs/msprof/bin/msprof-analyze")
    ap.add_argument("--results", default=None, help="write the raw results as JSON here")
    args = ap.parse_args(argv)
    data = Path(args.data)
    scales = [s.strip() for s in args.scales.split(",") if s.strip()]
    results: dict[str, Any] = {"machine": _machine(), "args": vars(args), "inputs": {}}
    kinds = [args.only] if args.only else ["kineto", "ascend"]
    for scale in scales:
        base = data / f"scale-{scale}"
        for kind in kinds:
            path = base / "kineto" if kind == "kineto" else \
                base / "ascend" / "rank0_ascend_pt"
            if not path.exists():
                raise SystemExit(f"{path} missing: run loaders_generate.py --scales {scale}")
            _warm(path)
            size = _input_bytes(kind, path)
            print(f"{kind} at scale {scale}: {size / 1e6:.0f} MB", flush=True)
            runs = _runs(kind, path, args.repeat, not args.no_limit_workers)
            results["inputs"][f"{kind}@{scale}"] = {"scale": float(scale), "kind": kind,
                                                    "path": str(path),
                                                    "summary": _summary(runs, size),
                                                    "runs": runs}
    full = data / f"scale-{scales[-1]}"
    if not args.no_cached and "ascend" in kinds:
        results["cached_ascend"] = _cached(full / "ascend" / "rank0_ascend_pt", args.repeat)
    if args.peers:
        results["peers"] = _peers(full / "kineto", full / "ascend" / "rank0_ascend_pt",
                                  args.hta_python, args.msprof)
    _report(results, kinds, scales)
    if args.results:
        Path(args.results).write_text(json.dumps(results, indent=1, default=str))
    return results


def _report(res: dict[str, Any], kinds: list[str], scales: list[str]) -> None:
    m = res["machine"]
    print(f"\n{m['cpus']} CPUs ({m['cpu']}), {m['mem_gb']:.0f} GiB, Python {m['python']}, "
          f"pandas {m['pandas']}, pyarrow {m['pyarrow']}, msgspec {m['msgspec']}, "
          f"{m['date']}")
    print("\n| input | MB | limit s | perfkit s | perfkit / limit (wall) | paired | "
          "CPU ratio | in-process ratio | perfkit peak GB | limit peak GB | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for kind in kinds:
        for scale in scales:
            s = res["inputs"][f"{kind}@{scale}"]["summary"]
            print(f"| {kind} ×{scale} | {s['input_mb']:.0f} | {s['limit_wall_s']:.2f} | "
                  f"{s['perfkit_wall_s']:.2f} | {s['ratio_wall']:.2f} | "
                  f"{s['ratio_wall_paired']:.2f} | {s['ratio_cpu']:.2f} | "
                  f"{s['ratio_inner']:.2f} | {s['perfkit_peak_gb']:.2f} | "
                  f"{s['limit_peak_gb']:.2f} | {s['load_avg']:.1f} |")
    print("\nThe limit with transparent huge pages off, as perfkit runs its loads:\n"
          "\n| input | limit (small pages) s | perfkit / it (wall) | in-process ratio | "
          "its peak GB |")
    print("|---|---|---|---|---|")
    for kind in kinds:
        for scale in scales:
            s = res["inputs"][f"{kind}@{scale}"]["summary"]
            print(f"| {kind} ×{scale} | {s['limit_small_pages_wall_s']:.2f} | "
                  f"{s['ratio_wall_small_pages']:.2f} | {s['ratio_inner_small_pages']:.2f} | "
                  f"{s['limit_small_pages_peak_gb']:.2f} |")
    for kind in kinds:
        s = res["inputs"][f"{kind}@{scales[-1]}"]["summary"]
        if "limit_parallel_wall_s" in s:
            print(f"\n{kind} ×{scales[-1]}: limit with one process per file "
                  f"{s['limit_parallel_wall_s']:.2f} s, {s['limit_parallel_peak_gb']:.2f} GB; "
                  f"perfkit / that limit = {s['ratio_wall_vs_parallel_limit']:.2f}")
    print("\n| input | perfkit s/MB (in-process) | limit s/MB | limit (small pages) s/MB | "
          "perfkit per-MB vs smallest |")
    print("|---|---|---|---|---|")
    for kind in kinds:
        first = res["inputs"][f"{kind}@{scales[0]}"]["summary"]["perfkit_s_per_mb"]
        for scale in scales:
            s = res["inputs"][f"{kind}@{scale}"]["summary"]
            print(f"| {kind} ×{scale} | {s['perfkit_s_per_mb'] * 1e3:.2f} ms | "
                  f"{s['limit_s_per_mb'] * 1e3:.2f} ms | "
                  f"{s['limit_small_pages_s_per_mb'] * 1e3:.2f} ms | "
                  f"{s['perfkit_s_per_mb'] / first - 1:+.0%} |")
    c = res.get("cached_ascend")
    if c:
        print(f"\nAscend rank, cached: reopen {c['reopen_s']:.3f} s + step_breakdown "
              f"{c['step_breakdown_s']:.3f} s = {c['reopen_plus_step_breakdown_s']:.3f} s "
              f"(with Python start and imports: {c['process_wall_to_step_breakdown_s']:.2f} s); "
              f"reading every table {c['read_tables_s']:.2f} s; "
              f"advise on the loaded rank {c['advise_first_s']:.2f} s "
              f"({_split(c, 'advise_first')}; all runs "
              f"{', '.join(f'{x:.2f}' for x in c['advise_first_all_s'])} s), "
              f"again {c['advise_again_s']:.2f} s ({_split(c, 'advise_again')}); "
              f"first load {c['first_load_s']:.1f} s")
    for name, r in (res.get("peers") or {}).items():
        print(f"{name}: {r['wall_s']:.1f} s, {r['peak_rss_bytes'] / 1e9:.2f} GB (exit {r['rc']})")


if __name__ == "__main__":
    main()
