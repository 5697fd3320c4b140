"""Loading one Ascend rank: this checkout against another, and the parsing limit, in one run.

Whether a change moved the loader's speed, measured as ``loaders_bench.py`` measures
perfkit (``_loaders_one.py --no-cache``: a fresh process parses the rank and reads its
tables) alternating run by run between this checkout and ``--before DIR``, with the parsing
limit with small pages (``parsing_limit.py --workers 1 --small-pages``, as perfkit loads)
after each pair, so that all three see the same load. Prints each run and the medians of
the wall time and of the time inside the process.

Run::

    python benchmarks/bench_load_before.py --before /tmp/wt-start --repeat 5

The rank is ``bench_first_answer.py``'s 250 000-task one (``--rank``, default
``/tmp/perfkit-first-answer/small/ascend/rank0_ascend_pt``: run that script once first).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from loaders_bench import _machine, measure  # noqa: E402 - the benchmarks' shared helpers

__all__ = ["main"]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", default="/tmp/perfkit-first-answer/small/ascend/rank0_ascend_pt")
    ap.add_argument("--before", required=True, help="the other checkout")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    rank = Path(args.rank)
    if not rank.exists():
        raise SystemExit(f"{rank} is missing: run benchmarks/bench_first_answer.py once")
    trees = {"before": str(Path(args.before).resolve()), "now": str(ROOT)}
    load = [sys.executable, str(HERE / "_loaders_one.py"), str(rank), "--no-cache"]
    limit = [sys.executable, str(HERE / "parsing_limit.py"), str(rank), "--workers", "1",
             "--small-pages"]
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "now": [], "limit": []}
    for i in range(args.repeat):
        order = list(trees.items()) if i % 2 == 0 else list(trees.items())[::-1]
        for name, tree in order:
            r = measure(load, {"PYTHONPATH": tree})
            if r["rc"] != 0:
                raise SystemExit(f"loading failed ({name}): {r['stderr_tail']}")
            runs[name].append({"wall_s": r["wall_s"],
                               "inner_s": r["inner"]["load_and_tables_s"],
                               "peak_gb": r["peak_rss_bytes"] / 1e9})
        r = measure(limit)
        if r["rc"] != 0:
            raise SystemExit(f"the parsing limit failed: {r['stderr_tail']}")
        runs["limit"].append({"wall_s": r["wall_s"], "inner_s": r["inner"]["total_s"],
                              "peak_gb": r["peak_rss_bytes"] / 1e9})
        print("  ".join(f"{n} {runs[n][-1]['wall_s']:.2f} s" for n in runs), flush=True)
    print(_machine())
    out = {n: {k: statistics.median(r[k] for r in v) for k in ("wall_s", "inner_s", "peak_gb")}
           for n, v in runs.items()}
    for n, m in out.items():
        print(f"{n:7s} wall {m['wall_s']:.2f} s  inside the process {m['inner_s']:.2f} s  "
              f"peak {m['peak_gb']:.2f} GB")
    print(f"now / limit {out['now']['wall_s'] / out['limit']['wall_s']:.2f}x, "
          f"before / limit {out['before']['wall_s'] / out['limit']['wall_s']:.2f}x")
    return out


if __name__ == "__main__":
    main()
