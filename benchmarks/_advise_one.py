"""Reopen a cached rank, run step_breakdown and perfkit.advise; print timings as JSON.

Run by benchmarks/loaders_bench.py in a fresh process (the rank must be in the cache).
"""

from __future__ import annotations

import json
import resource
import sys
import time

__all__: list[str] = []


def main() -> None:
    """``python benchmarks/_advise_one.py RANK_PATH``."""
    t0 = time.perf_counter()
    import perfkit as pk

    t1 = time.perf_counter()
    prof = pk.load(sys.argv[1], progress=False)
    t2 = time.perf_counter()
    pk.analysis.step_breakdown(prof)
    t3 = time.perf_counter()
    found = pk.advise(prof)
    t4 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_SELF)
    pk.advise(prof)
    after = resource.getrusage(resource.RUSAGE_SELF)
    t5 = time.perf_counter()
    # the second call's CPU split: user time is perfkit's work, system time mostly the
    # page faults of the memory it allocates (which varies with the machine's state)
    print(json.dumps({"import_s": t1 - t0, "reopen_s": t2 - t1, "step_breakdown_s": t3 - t2,
                      "advise_first_s": t4 - t3, "advise_again_s": t5 - t4,
                      "advise_again_user_s": after.ru_utime - before.ru_utime,
                      "advise_again_sys_s": after.ru_stime - before.ru_stime,
                      "advise_again_page_faults": after.ru_minflt - before.ru_minflt,
                      "findings": [f.title for f in found]}))


if __name__ == "__main__":
    main()
