"""``pk.advise`` on the 1 M-task Ascend rank, this checkout and another side by side.

Issue 32's advise target (≤ 0.5 s), measured as ``bench_first_answer.py`` does
(``_advise_one.py``: a fresh process reopens the cached rank, reads its tables, then
calls ``pk.advise`` twice and ``pk.advise_iter`` once), but alternating run by run between
this checkout and ``--before DIR`` (e.g. ``/work/main``), so that both see the same load.
Per tree: medians of the first call's wall, user and system seconds and page faults, of
the second call, and of the seconds to ``advise_iter``'s first and third findings; the
load average before each run; and whether both trees found the same titles.

Run::

    python benchmarks/bench_advise.py --before /work/main --repeat 5

The rank is ``loaders_generate.py``'s (``--data``, default ``/tmp/perfkit-first-answer``:
``bench_first_answer.py`` writes it there); each tree parses it once into a fresh cache
folder first.
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
from loaders_bench import _machine, measure  # noqa: E402 - the benchmarks' shared helpers

__all__ = ["main"]

#: Figures of ``_advise_one.py`` summarised per tree (medians).
FIGURES = ("advise_first_s", "advise_first_user_s", "advise_first_sys_s",
           "advise_first_page_faults", "advise_again_s", "advise_again_user_s",
           "advise_again_sys_s", "advise_iter_finding1_s", "advise_iter_finding3_s",
           "advise_iter_all_s")


def _runs(trees: dict[str, Path], rank: Path, repeat: int) -> dict[str, list[dict[str, Any]]]:
    """``repeat`` runs of ``_advise_one.py`` per tree, alternating, each with its cache."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="perfkit-bench-advise-") as tmp:
        envs = {name: {"PYTHONPATH": str(tree), "PERFKIT_CACHE_DIR": str(Path(tmp) / name)}
                for name, tree in trees.items()}
        for name in trees:  # parse once per tree (its cache key is its own)
            first = measure([sys.executable, str(HERE / "_loaders_one.py"), str(rank)],
                            envs[name])
            if first["rc"] != 0:
                raise SystemExit(f"loading failed ({name}): {first['stderr_tail']}")
        for _ in range(repeat):
            for name in trees:
                r = measure([sys.executable, str(HERE / "_advise_one.py"), str(rank)],
                            envs[name])
                if r["rc"] != 0:
                    raise SystemExit(f"advise failed ({name}): {r['stderr_tail']}")
                runs[name].append({**r["inner"], "load_before": r["load_before"]})
    return runs


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/tmp/perfkit-first-answer")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--before", default=None, help="another checkout to measure alongside")
    ap.add_argument("--results", default=None, help="write the raw results as JSON here")
    args = ap.parse_args(argv)
    rank = Path(args.data).resolve() / "full" / "ascend" / "rank0_ascend_pt"
    if not rank.exists():
        raise SystemExit(f"{rank} is missing: run benchmarks/bench_first_answer.py once")
    trees = ({"before": Path(args.before).resolve()} if args.before else {}) | {"now": ROOT}
    results = Path(args.results).resolve() if args.results else None  # before the chdir
    os.chdir(tempfile.gettempdir())  # each tree's PYTHONPATH decides which perfkit runs
    runs = _runs(trees, rank, args.repeat)
    summary = {name: {k: statistics.median(r[k] for r in rs) for k in FIGURES}
               | {"loads": [r["load_before"] for r in rs],
                  "first_all_s": [round(r["advise_first_s"], 3) for r in rs],
                  "findings": rs[0]["findings"]} for name, rs in runs.items()}
    res = {"machine": _machine(), "args": vars(args), "summary": summary, "runs": runs}
    m = res["machine"]
    print(f"{m['cpus']} CPUs ({m['cpu']}), Python {m['python']}, pandas {m['pandas']}, "
          f"pyarrow {m['pyarrow']}, {m['date']}")
    print(f"{'median of ' + str(args.repeat):34s}" + "".join(f"{t:>12s}" for t in trees))
    for k in FIGURES:
        print(f"{k:34s}" + "".join(f"{summary[t][k]:>12.3f}" if "faults" not in k
                                    else f"{summary[t][k]:>12.0f}" for t in trees))
    for t in trees:
        print(f"{t}: first calls {summary[t]['first_all_s']} s; load before each run "
              + ", ".join(f"{x:.1f}" for x in summary[t]["loads"]))
    if len(trees) > 1:
        same = len({json.dumps(s["findings"]) for s in summary.values()}) == 1
        print("same findings (titles) in both trees:", same)
    if results is not None:
        results.write_text(json.dumps(res, indent=1, default=str))
    return res


if __name__ == "__main__":
    main()
