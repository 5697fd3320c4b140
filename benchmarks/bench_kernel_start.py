"""What every notebook kernel pays before its first chart: imports, a kernel, a report.

Each figure is a fresh process's wall time on this machine, with ``--before DIR`` (another
checkout) measured too, its runs interleaved with this tree's:

- *charts import*: ``python -c "import perfkit.charts, perfkit.widgets"`` (what a notebook's
  first chart, and the dashboard's kernel, import);
- *kernel*: start a Jupyter kernel (``perfkit.report.notebook_client``), import perfkit's
  charts and widgets in it and stop it, as every guided notebook and test execution does;
- *report*: ``perfkit report sample:NAME`` (default ``slow-rank``: the guided notebook
  00_start_here run in a kernel and written as HTML).

Run::

    python benchmarks/bench_kernel_start.py --repeat 3 [--before /path/to/checkout]
        [--results out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from loaders_bench import (  # noqa: E402 - the benchmarks' shared helpers
    NEUTRAL_CWD,
    _machine,
    measure,
)

__all__ = ["main"]

CHARTS = "import perfkit.charts, perfkit.widgets"
KERNEL = """
import nbformat
from perfkit import report
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
    "import perfkit as pk, perfkit.charts, perfkit.widgets")])
report.notebook_client(nb, cwd=".", timeout=300, transport="ipc").execute()
assert not any(o.output_type == "error" for o in nb.cells[0].outputs), nb.cells[0].outputs
"""
REPORT = "import sys; from perfkit.cli import main; sys.exit(main())"


def _parts(sample: str, out_dir: str) -> dict[str, list[str]]:
    return {"charts_import": [sys.executable, "-c", CHARTS],
            "kernel": [sys.executable, "-c", KERNEL],
            "report": [sys.executable, "-c", REPORT, "report", f"sample:{sample}", "-o",
                       str(Path(out_dir) / "report.html"), "--no-progress"]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Measure, print a table, and return (and optionally write) the raw figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sample", default="slow-rank")
    ap.add_argument("--before", default=None, help="another checkout to measure alongside")
    ap.add_argument("--results", default=None, help="write the raw results as JSON here")
    args = ap.parse_args(argv)
    trees = {"now": ROOT} | ({"before": Path(args.before).resolve()} if args.before else {})
    runs: dict[str, dict[str, list[dict[str, float]]]] = {t: {} for t in trees}
    with tempfile.TemporaryDirectory(prefix="perfkit-kernel-start-") as tmp:
        caches = {t: str(Path(tmp) / f"cache-{t}") for t in trees}
        for i in range(args.repeat):
            for part, cmd in _parts(args.sample, tmp).items():
                for name, tree in trees.items():
                    env = {"PYTHONPATH": str(tree), "PERFKIT_CACHE_DIR": caches[name]}
                    r = measure(cmd, env, cwd=NEUTRAL_CWD)
                    if r["rc"] != 0:
                        raise SystemExit(f"{part} failed ({name}): {r['stderr_tail']}")
                    runs[name].setdefault(part, []).append(
                        {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "load": r["load_before"]})
                    print(f"run {i + 1} {part:14s} {name:6s} {r['wall_s']:6.2f} s "
                          f"(load average {r['load_before']:.2f})", flush=True)
    summary = {name: {part: statistics.median(x["wall_s"] for x in got)
                      for part, got in parts.items()} for name, parts in runs.items()}
    print(f"\nmedian wall seconds of {args.repeat} runs ({os.cpu_count()} CPUs):")
    print(f"{'':16s}" + "".join(f"{n:>10s}" for n in trees))
    for part in _parts(args.sample, "").keys():
        print(f"{part:16s}" + "".join(f"{summary[n][part]:10.2f}" for n in trees))
    result = {"machine": _machine(), "trees": {k: str(v) for k, v in trees.items()},
              "median_wall_s": summary, "runs": runs}
    if args.results:
        Path(args.results).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
