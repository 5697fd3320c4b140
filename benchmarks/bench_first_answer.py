"""The first answer, side by side in one run: import, ``perfkit info``, advise, loading.

Issue 32's targets, each measured in fresh processes on this machine:

- ``import perfkit``: seconds inside the process (median of ``--import-runs``, default 5),
  and the process's wall time (Python's start included); target ≤ 0.3 s;
- ``perfkit info sample:NAME`` (default ``slow-rank``): the whole command's wall time with a
  cold cache (a fresh ``PERFKIT_CACHE_DIR``: the sample is parsed) and a warm one (median
  of ``--repeat``); target ≤ 2 s warm;
- ``pk.advise`` on the 1 M-task Ascend rank (``loaders_generate.py``'s, reopened from the
  cache, its tables read first: ``_advise_one.py``), and the seconds until
  ``pk.advise_iter`` yields its first and third findings; target ≤ 0.5 s;
- ``perfkit serve``: seconds from the address printed to the step time seen in headless
  Chromium (``bench_serve.py``, ``--serve-runs`` runs, default 4); target ≤ 3 s;
- loading against the parsing limit (``loaders_bench.py``'s interleaved runs of
  ``parsing_limit.py`` and ``perfkit.load``) on a smaller generated rank
  (``--load-rows``, default 250 000 device tasks, to keep the run short).

With ``--before DIR`` (another checkout, e.g. ``/work/main``) the import and ``info``
figures are measured on it too, interleaved, and printed in a second column. The load
average is printed before each part: on a shared machine it explains most of the spread.

Run::

    python benchmarks/bench_first_answer.py                       # ~7 min on 2 cores
    python benchmarks/bench_first_answer.py --before /work/main --results out.json

The inputs are written under ``--data`` (default ``/tmp/perfkit-first-answer``) by
``loaders_generate.py`` when missing (needs ``../shared/samples``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from loaders_bench import (  # noqa: E402 - the benchmarks' shared helpers
    NEUTRAL_CWD,
    _cached,
    _input_bytes,
    _machine,
    _runs,
    _summary,
    _warm,
    measure,
)

__all__ = ["main"]

IMPORT_CODE = ("import time; t = time.perf_counter(); import perfkit; "
               "print(time.perf_counter() - t)")


def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _env(tree: Path, **extra: str) -> dict[str, str]:
    return {"PYTHONPATH": str(tree), **extra}


def _imports(trees: dict[str, Path], runs: int) -> dict[str, Any]:
    """``import perfkit`` in fresh processes, interleaved between the trees."""
    got: dict[str, dict[str, list[float]]] = {k: {"in_process_s": [], "process_wall_s": []}
                                              for k in trees}
    for _ in range(runs):
        for name, tree in trees.items():
            r = measure([sys.executable, "-c", IMPORT_CODE], _env(tree), cwd=NEUTRAL_CWD)
            if r["rc"] != 0:
                raise SystemExit(f"import perfkit failed ({name}): {r['stderr_tail']}")
            done = subprocess.run([sys.executable, "-c", IMPORT_CODE], capture_output=True,
                                  text=True, env={**os.environ, **_env(tree)}, check=True,
                                  cwd=NEUTRAL_CWD)
            got[name]["in_process_s"].append(float(done.stdout.strip()))
            got[name]["process_wall_s"].append(r["wall_s"])
    return {name: {k: statistics.median(v) for k, v in parts.items()} | {"runs": parts}
            for name, parts in got.items()}


def _info(trees: dict[str, Path], sample: str, repeat: int) -> dict[str, Any]:
    """``perfkit info sample:NAME``: cold cache once, then warm ``repeat`` times."""
    out: dict[str, Any] = {}
    cmd = [sys.executable, "-m", "perfkit.cli", "info", f"sample:{sample}"]
    with tempfile.TemporaryDirectory(prefix="perfkit-first-answer-cache-") as tmp:
        caches = {name: str(Path(tmp) / name) for name in trees}
        for name, tree in trees.items():
            r = measure(cmd, _env(tree, PERFKIT_CACHE_DIR=caches[name]), cwd=NEUTRAL_CWD)
            if r["rc"] != 0:
                raise SystemExit(f"perfkit info failed ({name}): {r['stderr_tail']}")
            out[name] = {"cold_s": r["wall_s"], "cold_cpu_s": r["cpu_s"], "warm": []}
        for _ in range(repeat):
            for name, tree in trees.items():
                r = measure(cmd, _env(tree, PERFKIT_CACHE_DIR=caches[name]), cwd=NEUTRAL_CWD)
                out[name]["warm"].append({"wall_s": r["wall_s"], "cpu_s": r["cpu_s"],
                                          "load": r["load_before"]})
    for v in out.values():
        v["warm_s"] = statistics.median(w["wall_s"] for w in v["warm"])
        v["warm_cpu_s"] = statistics.median(w["cpu_s"] for w in v["warm"])
    return out


def _generate(dest: Path, rows: int, trace_mb: int) -> Path:
    rank = dest / "ascend" / "rank0_ascend_pt"
    if not rank.exists():
        print(f"generating {rows:,} device tasks under {dest} ...", flush=True)
        subprocess.run([sys.executable, str(HERE / "loaders_generate.py"), "--out", str(dest),
                        "--only", "ascend", "--kernel-rows", str(rows),
                        "--trace-mb", str(trace_mb)], check=True)
    return rank


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/tmp/perfkit-first-answer")
    ap.add_argument("--sample", default="slow-rank", help="bundled sample for perfkit info")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--import-runs", type=int, default=5)
    ap.add_argument("--load-rows", type=int, default=250_000,
                    help="device tasks of the rank loaded against the parsing limit")
    ap.add_argument("--before", default=None, help="another checkout to measure alongside")
    ap.add_argument("--serve-runs", type=int, default=4)
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: "
                    "import,info,serve,advise,load")
    ap.add_argument("--results", default=None, help="write the raw results as JSON here")
    args = ap.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    trees = {"now": ROOT} | ({"before": Path(args.before).resolve()} if args.before else {})
    results_path = Path(args.results).resolve() if args.results else None
    data = Path(args.data).resolve()
    # `python -c` and `python -m` put the working folder first on sys.path: run them from
    # a neutral one, so that each tree's PYTHONPATH decides which perfkit is imported
    os.chdir(tempfile.gettempdir())
    res: dict[str, Any] = {"machine": _machine(), "args": vars(args),
                           "load_start": os.getloadavg()}
    if "import" not in skip:
        print(f"import perfkit ({_load()})", flush=True)
        res["import"] = _imports(trees, args.import_runs)
    if "info" not in skip:
        print(f"perfkit info sample:{args.sample} ({_load()})", flush=True)
        res["info"] = _info(trees, args.sample, args.repeat)
    if "serve" not in skip:
        import bench_serve

        print(f"perfkit serve, address to step time in the page ({_load()})", flush=True)
        res["serve"] = bench_serve.measure(trees, args.serve_runs)
    if "advise" not in skip:
        rank = _generate(data / "full", 1_000_000, 520)
        print(f"advise on the 1 M-task rank ({_load()})", flush=True)
        res["advise"] = _cached(rank, args.repeat)
        inner = [r["inner"] for r in res["advise"]["runs"]]
        for key in ("advise_iter_finding1_s", "advise_iter_finding3_s", "advise_iter_all_s"):
            values = [i[key] for i in inner if key in i]
            res["advise"][key] = statistics.median(values) if values else None
    if "load" not in skip:
        rank = _generate(data / "small", args.load_rows, round(520 * args.load_rows / 1e6))
        _warm(rank)
        size = _input_bytes("ascend", rank)
        print(f"loading {size / 1e6:.0f} MB against the parsing limit ({_load()})", flush=True)
        res["load"] = _summary(_runs("ascend", rank, args.repeat, False), size)
    res["load_end"] = os.getloadavg()
    _report(res, list(trees))
    if results_path:
        results_path.write_text(json.dumps(res, indent=1, default=str))
    return res


def _report(res: dict[str, Any], trees: list[str]) -> None:
    m = res["machine"]
    print(f"\n{m['cpus']} CPUs ({m['cpu']}), {m['mem_gb']:.0f} GiB, Python {m['python']}, "
          f"pandas {m['pandas']}, pyarrow {m['pyarrow']}, {m['date']}; load average "
          f"{res['load_start'][0]:.2f} at the start, {res['load_end'][0]:.2f} at the end")
    head = f"{'':44s}" + "".join(f"{t:>12s}" for t in trees) + "  target"
    print(head)

    def row(label: str, values: list[float | None], target: str) -> None:
        cells = "".join(f"{v:>11.2f}s" if v is not None else f"{'-':>12s}" for v in values)
        print(f"{label:44s}{cells}  {target}")

    if "import" in res:
        imp = res["import"]
        row("import perfkit (in process, median)", [imp[t]["in_process_s"] for t in trees],
            "≤ 0.3 s")
        row("  python -c 'import perfkit' (process wall)",
            [imp[t]["process_wall_s"] for t in trees], "")
    if "info" in res:
        info = res["info"]
        row(f"perfkit info sample:{res['args']['sample']}, cold cache",
            [info[t]["cold_s"] for t in trees], "")
        row("  warm cache (median)", [info[t]["warm_s"] for t in trees], "≤ 2 s")
        row("  warm cache, CPU seconds (median)", [info[t]["warm_cpu_s"] for t in trees], "")
    if "serve" in res:
        sv = res["serve"]["summary"]
        row("perfkit serve: address printed (median)",
            [sv[t]["start_to_printed_s"] for t in trees], "")
        row("  then step time in the page (median)",
            [sv[t]["printed_to_visible_s"] for t in trees], "≤ 3 s")
        row("  then step time in the page (max)",
            [sv[t]["printed_to_visible_max_s"] for t in trees], "")
    if "advise" in res:
        a = res["advise"]
        row("pk.advise, 1 M-task rank, first call (median)", [a["advise_first_s"]], "≤ 0.5 s")
        row("  second call (median)", [a["advise_again_s"]], "")
        row("  advise_iter: first finding", [a.get("advise_iter_finding1_s")], "")
        row("  advise_iter: third finding", [a.get("advise_iter_finding3_s")], "")
        row("  cached reopen + step_breakdown", [a["reopen_plus_step_breakdown_s"]], "")
        print("  advise first call, all runs: "
              + ", ".join(f"{v:.2f}" for v in a["advise_first_all_s"]) + " s")
    if "load" in res:
        ld = res["load"]
        print(f"loading {ld['input_mb']:.0f} MB (Ascend rank, medians): perfkit "
              f"{ld['perfkit_wall_s']:.2f} s, peak {ld['perfkit_peak_gb']:.2f} GB; parsing "
              f"limit {ld['limit_wall_s']:.2f} s ({ld['ratio_wall']:.2f}×), with small "
              f"pages {ld['limit_small_pages_wall_s']:.2f} s "
              f"({ld['ratio_wall_small_pages']:.2f}×), peak {ld['limit_peak_gb']:.2f} GB")


if __name__ == "__main__":
    main()
