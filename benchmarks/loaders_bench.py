"""Measure perfkit against HolisticTraceAnalysis and msprof-analyze on the generated inputs.

Each tool runs in a fresh subprocess; wall time is measured around it and peak memory is
the largest *sum* of resident memory over the process and all its children, sampled from
/proc every 20 ms (so worker pools are counted). Files are read once beforehand so every
tool starts from a warm page cache.

Usage::

    python benchmarks/loaders_generate.py                    # inputs under /tmp/perfkit-bench
    python benchmarks/loaders_bench.py [--data /tmp/perfkit-bench] [--hta-python PY] [--msprof BIN]

Peers are looked up in their own virtual environments (defaults ``/tmp/venvs/hta`` and
``/tmp/venvs/msprof``); a missing peer is reported as "not run".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["main", "measure"]

ROOT = Path(__file__).resolve().parents[1]
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


def _tree_rss(pid: int) -> int:
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


def measure(cmd: list[str], env: dict[str, str] | None = None,
            timeout: float = 1800) -> dict[str, object]:
    """Run ``cmd``; return wall seconds, peak tree RSS (bytes), exit code and stdout."""
    peak = 0
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})}, text=True)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.02)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        done.set()
        t.join()
    wall = time.perf_counter() - start
    return {"wall_s": wall, "peak_rss_bytes": peak, "rc": proc.returncode, "stdout": out,
            "stderr_tail": err[-2000:]}


def _warm(path: Path) -> int:
    size = 0
    for f in ([path] if path.is_file() else sorted(path.rglob("*"))):
        if f.is_file():
            with open(f, "rb") as fh:
                while chunk := fh.read(1 << 24):
                    size += len(chunk)
    return size


def _perfkit(path: Path, cache_dir: Path) -> dict[str, object]:
    res: dict[str, object] = {}
    cold = measure([sys.executable, str(ROOT / "benchmarks" / "_loaders_one.py"), str(path),
                    "--no-cache"])
    res["cold"] = {**cold, **json.loads(cold["stdout"] or "{}")}
    env = {"PERFKIT_CACHE_DIR": str(cache_dir)}
    first = measure([sys.executable, str(ROOT / "benchmarks" / "_loaders_one.py"), str(path)], env)
    second = measure([sys.executable, str(ROOT / "benchmarks" / "_loaders_one.py"), str(path)], env)
    res["first_cached"] = {**first, **json.loads(first["stdout"] or "{}")}
    res["second_cached"] = {**second, **json.loads(second["stdout"] or "{}")}
    return res


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description="perfkit vs HTA vs msprof-analyze")
    ap.add_argument("--data", default="/tmp/perfkit-bench")
    ap.add_argument("--hta-python", default="/tmp/venvs/hta/bin/python")
    ap.add_argument("--msprof", default="/tmp/venvs/msprof/bin/msprof-analyze")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--results", default=None, help="write the raw results as JSON here")
    args = ap.parse_args(argv)
    data = Path(args.data)
    kineto = data / "kineto"
    ascend_parent = data / "ascend"
    ascend_rank = ascend_parent / "rank0_ascend_pt"
    results: dict[str, object] = {}
    k_size = _warm(kineto)
    a_size = _warm(ascend_rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv") + _warm(
        ascend_rank / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    a_total = _warm(ascend_rank)
    results["sizes"] = {"kineto_bytes": k_size, "ascend_kernel_plus_trace_bytes": a_size,
                        "ascend_rank_bytes": a_total}
    with tempfile.TemporaryDirectory(prefix="perfkit-bench-cache-") as cache_dir:
        results["perfkit_kineto"] = _perfkit(kineto, Path(cache_dir) / "k")
        results["perfkit_ascend"] = _perfkit(ascend_rank, Path(cache_dir) / "a")
    if not args.skip_peers and Path(args.hta_python).exists():
        code = ("import sys; from hta.trace_analysis import TraceAnalysis; "
                "TraceAnalysis(trace_dir=sys.argv[1])")
        results["hta_kineto"] = measure([args.hta_python, "-c", code, str(kineto)])
    if not args.skip_peers and Path(args.msprof).exists():
        out = Path(tempfile.mkdtemp(prefix="perfkit-bench-msprof-"))
        try:
            results["msprof_advisor"] = measure(
                [args.msprof, "advisor", "all", "-d", str(ascend_rank), "-o", str(out / "adv"),
                 "-l", "en", "--force"])
            results["msprof_cluster"] = measure(
                [args.msprof, "cluster", "-d", str(ascend_parent), "-o", str(out / "cl"),
                 "-m", "all", "--export_type", "text", "--force"])
        finally:
            shutil.rmtree(out, ignore_errors=True)
    _report(results)
    if args.results:
        slim = json.loads(json.dumps(results, default=str))
        Path(args.results).write_text(json.dumps(slim, indent=1))


def _row(label: str, r: dict[str, object] | None, size: int) -> str:
    if not r:
        return f"| {label} | not run | | |"
    ok = "" if r.get("rc") == 0 else f" (exit {r.get('rc')})"
    rss = int(r["peak_rss_bytes"])  # type: ignore[arg-type]
    return (f"| {label} | {float(r['wall_s']):.2f}{ok} | {rss / 1e9:.2f} | "  # type: ignore[arg-type]
            f"{rss / size:.2f}x |")


def _report(res: dict[str, object]) -> None:
    sizes = res["sizes"]  # type: ignore[index]
    k = int(sizes["kineto_bytes"])  # type: ignore[index]
    a = int(sizes["ascend_rank_bytes"])  # type: ignore[index]
    pk = res["perfkit_kineto"]  # type: ignore[index]
    pa = res["perfkit_ascend"]  # type: ignore[index]
    lines = [
        f"Kineto input: {k / 1e6:.0f} MB (2 ranks); Ascend rank: {a / 1e6:.0f} MB",
        "",
        "| run | wall s | peak RSS GB | RSS / input |",
        "|---|---|---|---|",
        _row("perfkit load, Kineto (no cache)", pk["cold"], k),
        _row("HTA TraceAnalysis, Kineto", res.get("hta_kineto"), k),  # type: ignore[arg-type]
        _row("perfkit load, Ascend rank (no cache)", pa["cold"], a),
        _row("msprof-analyze advisor all, Ascend rank", res.get("msprof_advisor"), a),  # type: ignore[arg-type]
        _row("msprof-analyze cluster -m all (text), Ascend", res.get("msprof_cluster"), a),  # type: ignore[arg-type]
        "",
        "| cache | first load+tables s | second load+tables s | speed-up |",
        "|---|---|---|---|",
    ]
    for label, r in (("Kineto", pk), ("Ascend", pa)):
        f = float(r["first_cached"]["load_and_tables_s"])
        s = float(r["second_cached"]["load_and_tables_s"])
        lines.append(f"| {label} | {f:.2f} | {s:.3f} | {f / s:.0f}x |")
    hta = res.get("hta_kineto")
    if hta:
        lines.append("")
        lines.append(f"perfkit vs HTA on Kineto (wall): "
                     f"{float(hta['wall_s']) / float(pk['cold']['wall_s']):.1f}x faster")  # type: ignore[index]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
