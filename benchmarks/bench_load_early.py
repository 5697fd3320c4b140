"""Seconds until ``pk.load`` returns and its steps can be read, waiting or not.

Each run is a fresh process; ``perfkit.load`` is named (its modules imported) before the
clock starts. Two modes, interleaved:

- ``wait=False``: ``return_s`` until ``pk.load(path, wait=False)`` returns, ``steps_s``
  until ``.steps`` has been read (early when the step files give the parse's table,
  ``steps_early``), ``all_s`` until ``.wait()`` returns (the whole profile parsed);
- ``wait=True`` (the default): ``pk.load(path)`` returns with everything parsed
  (``return_s`` = ``steps_s`` = ``all_s``).

Each input is measured cold (a fresh ``PERFKIT_CACHE_DIR``: parsed) and warm (the cache
the cold run wrote). The load average is printed before each run.

Run::

    python benchmarks/bench_load_early.py --data /tmp/progressive-bench    # ~5 min, 2 cores
    python benchmarks/bench_load_early.py --repeat 3 --results out.json

The inputs are ``kineto/`` (a 1.1 GB pair of Kineto traces) and ``ascend/`` (a 0.87 GB
torch_npu rank) under ``--data``, written by ``loaders_generate.py --out DIR`` (needs
``../shared/samples``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from bench_progressive import _load, _size  # noqa: E402 - the progressive benchmark's helpers
from bench_progressive import _run as run_child  # noqa: E402

__all__ = ["main"]

CHILD = r"""
import json, sys, time
import perfkit as pk

load = pk.load  # imports the loaders: not timed
path, mode = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
prof = load(path, wait=(mode == "wait=True"))
returned = time.perf_counter() - t0
early = bool(prof.loading is not None and prof.loading.steps_early)
steps = prof.steps
steps_s = time.perf_counter() - t0
prof.wait()
done = time.perf_counter() - t0
print(json.dumps({"return_s": returned, "steps_s": steps_s, "all_s": done,
                  "steps_early": early, "steps": len(steps)}))
"""

MODES = ("wait=False", "wait=True")


def _run(path: Path, mode: str, cache: Path) -> dict[str, Any]:
    return run_child(path, mode, cache, CHILD)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/tmp/progressive-bench")
    ap.add_argument("--inputs", default="kineto,ascend")
    ap.add_argument("--repeat", type=int, default=1, help="cold and warm runs per mode")
    ap.add_argument("--results", default=None, help="write the runs as JSON here")
    args = ap.parse_args(argv)
    data = Path(args.data)
    results: dict[str, Any] = {}
    for name in args.inputs.split(","):
        path = data / name
        if not path.exists():
            raise SystemExit(f"{path} is missing: python benchmarks/loaders_generate.py "
                             f"--out {data}")
        print(f"== {name}: {path} ({_size(path) / 1e9:.2f} GB)", flush=True)
        runs: dict[str, list[dict[str, Any]]] = {}
        for _ in range(args.repeat):
            for mode in MODES:
                with tempfile.TemporaryDirectory(prefix="perfkit-bench-cache-") as cache:
                    for state in ("cold", "warm"):
                        print(f"   {mode:10s} {state}  ({_load()})", flush=True)
                        r = _run(path, mode, Path(cache))
                        runs.setdefault(f"{mode} {state}", []).append(r)
                        print(f"      returned {r['return_s']:.3f} s; {r['steps']} steps "
                              f"read after {r['steps_s']:.3f} s"
                              f"{' (early)' if r['steps_early'] else ''}; all parsed "
                              f"after {r['all_s']:.2f} s", flush=True)
        print(f"-- {name}: medians (s)   returned   steps read   all parsed")
        for key, rs in runs.items():
            print(f"   {key:17s} {statistics.median(r['return_s'] for r in rs):9.3f}"
                  f" {statistics.median(r['steps_s'] for r in rs):12.3f}"
                  f" {statistics.median(r['all_s'] for r in rs):12.2f}")
        results[name] = runs
    print(_load())
    if args.results:
        Path(args.results).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
