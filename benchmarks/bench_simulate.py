"""Time :func:`perfkit.simulate.simulate` on a realistic job and report the output size.

Usage::

    python benchmarks/bench_simulate.py [--micro-batches 128] [--out /tmp/bench_sim] [--light]

The job is the seed's tuned Llama2-13B layout at full size: 40 layers, sequence 4096,
dp 8 x pp 2 (16 ranks), micro-batch size 1, 128 micro-batches, recompute [4, 0] plus
SiLU/Mul selective recompute, 3 steps. ``--light`` drops the PMU columns and the per-kernel
trace_view events (the settings used for data/). The folder is deleted afterwards unless
``--keep`` is given.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import perfkit as pk
from perfkit.simulate import simulate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--micro-batches", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench_simulate"))
    ap.add_argument("--light", action="store_true")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    model = pk.ModelSpec.preset("llama2-13b")
    par = pk.ParallelConfig(dp=8, pp=2, num_micro_batches=args.micro_batches,
                            optimizer_shard=8, recompute="selective", recompute_layers=(4, 0))
    if args.out.exists():
        shutil.rmtree(args.out)
    extra = {"aic_metrics": None, "trace_kernels": False} if args.light else {}
    t0 = time.perf_counter()
    simulate(model, par, pk.Hardware.preset("ascend-910b"), steps=args.steps, seed=0,
             out=args.out, **extra)
    wall = time.perf_counter() - t0
    files = [f for f in args.out.rglob("*") if f.is_file()]
    rows = sum(sum(1 for _ in open(f, "rb")) - 1 for f in files
               if f.name == "kernel_details.csv")
    print(json.dumps({"ranks": par.world_size, "steps": args.steps,
                      "micro_batches": args.micro_batches, "light": args.light,
                      "write_s": round(wall, 2), "kernel_rows": rows,
                      "bytes": sum(f.stat().st_size for f in files)}, indent=2))
    if not args.keep:
        shutil.rmtree(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
