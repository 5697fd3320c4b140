"""Every figure of issue 68 ("Fast again") with its target, in one run.

One command prints, side by side with its target (and with the parsing limit where the
figure has one), each figure the CEO measured:

- cached reopen + step breakdown, fresh process: the wall time of
  ``python -c "import perfkit as pk; p = pk.load(PATH); pk.analysis.step_breakdown(p)"``
  on the Kineto pair and on the Ascend rank, both in perfkit's cache (median of
  ``--repeat``); target ≤ 0.5 s;
- ``pk.advise`` on the cached Ascend rank (``_advise_one.py`` via
  ``loaders_bench._cached``); target ≤ 0.5 s;
- ``perfkit info sample:slow-rank``, warm cache (``bench_first_answer._info``); ≤ 2 s;
- ``perfkit serve``: the address printed to the step time in the page
  (``bench_serve.measure``, headless Chromium; skipped without ``/usr/bin/chromium``);
  ≤ 3 s;
- loading the Ascend rank against the parsing limit (``loaders_bench._runs``:
  ``parsing_limit.py`` and ``perfkit.load`` interleaved);
- with ``--tests``: the README's test command (``python -m pytest -n auto --dist
  loadgroup``), its wall time and result line; target ≤ 10 min, 0 failed.

The load average (``os.getloadavg``) is printed at the start and at the end: on a shared
machine it explains most of the spread, so compare runs only at a similar load.

The floor: the wall time of a fresh ``python -c "import pandas, pyarrow.parquet"``
(median of ``--repeat``, after one run that warms the file cache), which every
fresh-process figure above pays before perfkit runs a line of its own (the answers are
DataFrames; the cache is Parquet). Each such figure is printed with its part above the
floor, perfkit's own time (a reopen: the median of its runs each less a floor run made
just before it), so that a machine
whose imports are slow (a cold disk, a slower core) can still be compared with one
whose imports are fast.

Run::

    python benchmarks/summary.py             # the issue's inputs (1 M-task rank, 1.1 GB pair)
    python benchmarks/summary.py --quick     # small inputs, one run each (a few minutes)
    python benchmarks/summary.py --tests --results out.json

The inputs are generated under ``--data`` by ``loaders_generate.py`` when missing (needs
``../shared/samples``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
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

FLOOR = "import pandas, pyarrow.parquet"
REOPEN = ("import sys, perfkit as pk; p = pk.load(sys.argv[1], progress=False); "
          "pk.analysis.step_breakdown(p)")
#: (rows, trace MB) of the Ascend rank and MB of the Kineto pair: full and --quick.
SIZES = {"full": (1_000_000, 520, 1100), "quick": (100_000, 20, 60)}


def _generate(dest: Path, kind: str, quick: bool) -> Path:
    rows, trace_mb, kineto_mb = SIZES["quick" if quick else "full"]
    target = dest / ("ascend/rank0_ascend_pt" if kind == "ascend" else "kineto")
    if not target.exists():
        print(f"generating the {kind} input under {dest} ...", flush=True)
        extra = (["--kernel-rows", str(rows), "--trace-mb", str(trace_mb)] if kind == "ascend"
                 else ["--kineto-mb", str(kineto_mb)])
        subprocess.run([sys.executable, str(HERE / "loaders_generate.py"), "--out", str(dest),
                        "--only", kind, *extra], check=True)
    return target


def _reopen(path: Path, repeat: int) -> dict[str, Any]:
    """Whole-process wall time of a cached reopen + step breakdown (cache filled first)."""
    with tempfile.TemporaryDirectory(prefix="perfkit-summary-cache-") as cache:
        env = {"PYTHONPATH": str(ROOT), "PERFKIT_CACHE_DIR": cache}
        first = measure([sys.executable, "-c", REOPEN, str(path)], env, cwd=NEUTRAL_CWD)
        if first["rc"] != 0:
            raise SystemExit(f"reopen failed on {path}: {first['stderr_tail']}")
        walls, floors = [], []
        for _ in range(repeat):  # each run beside a floor run: the same machine state
            floors.append(_floor_once())
            walls.append(measure([sys.executable, "-c", REOPEN, str(path)], env,
                                 cwd=NEUTRAL_CWD)["wall_s"])
    return {"first_parse_s": first["wall_s"], "all_s": walls, "floor_all_s": floors,
            "median_s": statistics.median(walls),
            "own_s": statistics.median(w - f for w, f in zip(walls, floors, strict=True))}


def _floor_once() -> float:
    """Whole-process wall time of a fresh Python importing what perfkit's answers need."""
    return measure([sys.executable, "-c", FLOOR], cwd=NEUTRAL_CWD)["wall_s"]


def _floor(repeat: int) -> dict[str, Any]:
    """:func:`_floor_once` ``max(3, repeat)`` times, after a first run that warms the
    file cache."""
    _floor_once()
    walls = [_floor_once() for _ in range(max(3, repeat))]
    return {"all_s": walls, "median_s": statistics.median(walls)}


def _suite() -> dict[str, Any]:
    """The README's test command; its wall time and last line."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "auto", "--dist",
                           "loadgroup", "-q", "-p", "no:cacheprovider"], cwd=ROOT,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    return {"wall_s": time.perf_counter() - t0, "rc": done.returncode,
            "result": lines[-1] if lines else done.stderr[-300:]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None,
                    help="inputs folder (default /tmp/perfkit-summary[-quick])")
    ap.add_argument("--quick", action="store_true", help="small inputs, one run each")
    ap.add_argument("--repeat", type=int, default=None, help="runs per figure (default 3)")
    ap.add_argument("--skip", default="", help="comma-separated: reopen,advise,info,serve,load")
    ap.add_argument("--tests", action="store_true", help="also time the README's test command")
    ap.add_argument("--results", default=None, help="write the raw results as JSON here")
    args = ap.parse_args(argv)
    repeat = args.repeat or (1 if args.quick else 3)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    data = Path(args.data or ("/tmp/perfkit-summary-quick" if args.quick
                              else "/tmp/perfkit-summary")).resolve()
    results = Path(args.results).resolve() if args.results else None
    res: dict[str, Any] = {"machine": _machine(), "args": vars(args),
                           "load_start": os.getloadavg()}
    print(f"load average at the start: {_fmt_load(res['load_start'])}", flush=True)
    ascend = _generate(data, "ascend", args.quick)
    res["floor"] = _floor(repeat)
    if "reopen" not in skip:
        kineto = _generate(data, "kineto", args.quick)
        res["reopen"] = {"kineto": _reopen(kineto, repeat), "ascend": _reopen(ascend, repeat)}
    if "advise" not in skip:
        res["advise"] = _cached(ascend, repeat)
    if "info" not in skip:
        from bench_first_answer import _info

        res["info"] = _info({"now": ROOT}, "slow-rank", repeat)["now"]
    if "serve" not in skip and Path("/usr/bin/chromium").exists():
        import bench_serve

        res["serve"] = bench_serve.measure({"now": ROOT}, max(2, repeat))["summary"]["now"]
    if "load" not in skip:
        _warm(ascend)
        res["load"] = _summary(_runs("ascend", ascend, repeat, False),
                               _input_bytes("ascend", ascend))
    if args.tests:
        res["tests"] = _suite()
    res["load_end"] = os.getloadavg()
    _report(res)
    if results:
        results.write_text(json.dumps(res, indent=1, default=str))
    return res


def _fmt_load(load: tuple[float, float, float]) -> str:
    return ", ".join(f"{x:.2f}" for x in load) + " (1, 5, 15 min)"


def _report(res: dict[str, Any]) -> None:
    m = res["machine"]
    quick = ", --quick inputs" if res["args"]["quick"] else ""
    print(f"\n{m['cpus']} CPUs ({m['cpu']}), Python {m['python']}, pandas {m['pandas']}, "
          f"pyarrow {m['pyarrow']}, {m['date']}{quick}")
    print(f"load average: start {_fmt_load(res['load_start'])}; "
          f"end {_fmt_load(res['load_end'])}")
    floor = res["floor"]["median_s"]
    print(f"floor: a fresh python -c {FLOOR!r} takes {floor:.2f} s (median of "
          f"{len(res['floor']['all_s'])}); 'own' is a fresh-process figure less the floor")
    print(f"{'figure':58s}{'measured':>10s}{'own':>7s}  {'target':10s}  parsing limit")

    def row(label: str, value: float | None, target: str, limit: str = "-",
            fresh: bool = False, own_s: float | None = None) -> None:
        cell = f"{value:9.2f}s" if value is not None else f"{'-':>10s}"
        if own_s is None and fresh and value is not None:
            own_s = value - floor
        own = f"{own_s:6.2f}s" if own_s is not None else f"{'-':>7s}"
        met = "" if value is None or not target else (
            " met" if value <= float(target.split()[1]) * (60 if "min" in target else 1)
            else " NOT met")
        print(f"{label:58s}{cell}{own}  {target:10s}  {limit}{met and '   ' + met.strip()}")

    if "reopen" in res:
        for kind, r in res["reopen"].items():
            row(f"cached reopen + step breakdown, fresh process ({kind})", r["median_s"],
                "≤ 0.5 s", own_s=r["own_s"])
    if "advise" in res:
        a = res["advise"]
        row("pk.advise, cached Ascend rank, first call (median)", a["advise_first_s"],
            "≤ 0.5 s")
    if "info" in res:
        row("perfkit info sample:slow-rank, warm cache (median)", res["info"]["warm_s"],
            "≤ 2 s", fresh=True)
    if "serve" in res:
        row("perfkit serve: address printed to step time in the page",
            res["serve"]["printed_to_visible_s"], "≤ 3 s")
    if "load" in res:
        ld = res["load"]
        row(f"loading the Ascend rank ({ld['input_mb']:.0f} MB, no cache)",
            ld["perfkit_wall_s"], "",
            f"{ld['limit_wall_s']:.2f} s ({ld['ratio_wall']:.2f}×; small pages "
            f"{ld['limit_small_pages_wall_s']:.2f} s, {ld['ratio_wall_small_pages']:.2f}×)")
    if "tests" in res:
        t = res["tests"]
        row("the README's test command", t["wall_s"], "≤ 10 min")
        print(f"  {t['result']}")
    else:
        print(f"{'the README test command (pass --tests)':58s}{'not run':>10s}  ≤ 10 min")


if __name__ == "__main__":
    main()
