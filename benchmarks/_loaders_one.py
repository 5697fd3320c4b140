"""Load one input with perfkit and print timings as JSON (run by benchmarks/loaders_bench.py)."""

from __future__ import annotations

import json
import sys
import time

__all__: list[str] = []


def main() -> None:
    """``python benchmarks/_loaders_one.py PATH [--no-cache]``: load, touch every table, report."""
    path = sys.argv[1]
    use_cache = "--no-cache" not in sys.argv
    t0 = time.perf_counter()
    import perfkit.io.engines.local as detect

    t1 = time.perf_counter()
    obj = detect.load(path, cache=use_cache, progress=False)
    t2 = time.perf_counter()
    rows = {name: len(frame) for name, frame in obj.tables().items()}
    t3 = time.perf_counter()
    print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "tables_s": t3 - t2,
                      "load_and_tables_s": t3 - t1, "rows": rows}))


if __name__ == "__main__":
    main()
