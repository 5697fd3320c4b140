"""Reopen a cached rank, run step_breakdown, read its tables and advise twice; print JSON.

Run by benchmarks/loaders_bench.py in a fresh process (the rank must be in the cache).
A reopen reads tables lazily, so every table is read (``tables()``, timed on its own)
before the first ``perfkit.advise``: that call is the advisor on the loaded rank, as a
user who loaded it and then asks for advice sees it. The second call shows the same
work in a process that has already grown to its size. Then ``perfkit.advise_iter``: the
seconds until its first and third findings, and until its last.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

__all__: list[str] = []


def _timed(prefix: str, fn: Callable[[], Any], out: dict[str, Any]) -> Any:
    """Run ``fn``; record its wall, user and system seconds and minor page faults."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    # user time is perfkit's work; system time is mostly the page faults of the memory
    # it touches for the first time, whose cost varies with the machine's state
    out.update({f"{prefix}_s": wall, f"{prefix}_user_s": after.ru_utime - before.ru_utime,
                f"{prefix}_sys_s": after.ru_stime - before.ru_stime,
                f"{prefix}_page_faults": after.ru_minflt - before.ru_minflt,
                f"{prefix}_maxrss_growth_mb": (after.ru_maxrss - before.ru_maxrss) / 1024})
    return result


def main() -> None:
    """``python benchmarks/_advise_one.py RANK_PATH``."""
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    import perfkit as pk

    pk.load, pk.advise, pk.analysis  # noqa: B018 - perfkit imports them on first use
    out["import_s"] = time.perf_counter() - t0
    prof = _timed("reopen", lambda: pk.load(sys.argv[1], progress=False), out)
    _timed("step_breakdown", lambda: pk.analysis.step_breakdown(prof), out)
    _timed("read_tables", prof.tables, out)
    # perfkit.analysis resolves its names on first use (issue 68): the analyses the advisor
    # runs are imported here, timed on their own, as `pk.analysis` used to import them all
    _timed("import_analyses", lambda: [getattr(pk.analysis, n) for n in pk.analysis.__all__],
           out)
    found = _timed("advise_first", lambda: pk.advise(prof), out)
    _timed("advise_again", lambda: pk.advise(prof), out)
    t0 = time.perf_counter()
    for i, _ in enumerate(pk.advise_iter(prof), 1):
        if i in (1, 3):
            out[f"advise_iter_finding{i}_s"] = time.perf_counter() - t0
    out["advise_iter_all_s"] = time.perf_counter() - t0
    out["findings"] = [f.title for f in found]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
