"""Regenerate the simulated teaching profiles in ``data/simulated/`` (and copy the real sample).

Usage::

    python tools/make_data.py                 # simulated scenarios -> data/simulated/
    python tools/make_data.py --real          # also copy the real torch_npu 2-rank sample
    python tools/make_data.py --out /tmp/x    # somewhere else

Every scenario is written by :func:`perfkit.simulate.simulate` with a fixed seed, so a
rerun gives byte-identical files. To stay within the size budget of ``data/`` (30 MB for
everything), the Llama2-13B-like jobs keep the real layer widths, sequence length and
parallel layouts of the seed's case study but only 8 of the 40 layers and a few
micro-batches, and no PMU counters (``aic_metrics=None``) nor per-kernel events in
``trace_view.json`` (``trace_kernels=False``, except for the data-stall scenario). The
fault scenarios use a 4-layer Llama2-7B-like model.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import perfkit as pk
from perfkit.simulate import DataLoadingStall, Fault, SlowLink, SlowRank, simulate

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REAL_SAMPLE = "samples/ascend/msinsight-pt-level1"
REAL_LICENSE = "samples/ascend/LICENSE.Ascend-msinsight.MulanPSL2.txt"

HW = pk.Hardware.preset("ascend-910b")
#: matrix-kernel efficiency used for every scenario: with it the tuned configuration lands
#: near the seed's measured tokens/s/p (see data/simulated/README.md)
EFFICIENCY = 0.78
#: Overlap Analysis tracks of trace_view.json close gaps shorter than this (file size)
MERGE_US = 20.0
LLAMA13B_8L = pk.ModelSpec.preset("llama2-13b").replace(num_layers=8, name="llama2-13b-8l")
LLAMA7B_4L = pk.ModelSpec.preset("llama2-7b").replace(num_layers=4, name="llama2-7b-4l")


@dataclass(frozen=True)
class Scenario:
    """One simulated profile of ``data/simulated/``."""

    name: str
    title: str
    model: pk.ModelSpec
    parallel: pk.ParallelConfig
    steps: int
    faults: tuple[Fault, ...] = ()
    story: str = ""
    look_at: tuple[str, ...] = field(default=())
    trace_kernels: bool = False


SCENARIOS = (
    Scenario(
        "llama2-13b-baseline-dp16", "Llama2-13B-like baseline: pure data parallel, full recompute",
        LLAMA13B_8L,
        pk.ParallelConfig(dp=16, num_micro_batches=4, optimizer_shard=16, recompute="full"),
        steps=1,
        story="The starting point of the seed's Llama2-13B case: every device holds the whole "
              "model (data parallel 16 over two 8-NPU nodes, optimizer state sharded) and "
              "recomputes every layer to fit in memory.",
        look_at=("steps: Computing dominates; the forward kernels appear twice per layer "
                 "(recompute)",
                 "comm_ops: the gradient reduce-scatter / all-gather cross the two nodes "
                 "(RDMA)")),
    Scenario(
        "llama2-13b-tuned-dp8-pp2", "Llama2-13B-like tuned: dp 8 x pp 2, partial recompute",
        LLAMA13B_8L,
        pk.ParallelConfig(dp=8, pp=2, num_micro_batches=8, optimizer_shard=8,
                          recompute="selective", recompute_layers=(1, 0)),
        steps=1,
        story="The seed's tuned configuration: two pipeline stages (one per node), data "
              "parallel 8 inside each node, full recompute only for the first layers of "
              "stage 0 (the seed's recompute [4, 0] of 20 layers per stage, scaled to 4 "
              "layers per stage) and SiLU/Mul selective recompute elsewhere.",
        look_at=("steps: Bubble (hcom_receive) on both stages; less Computing per token than "
                 "the baseline",
                 "memory: stage 0 holds more micro-batches in flight than stage 1")),
    Scenario(
        "slow-rank", "Slow rank: one NPU computes 25 % slower", LLAMA7B_4L,
        pk.ParallelConfig(dp=4, num_micro_batches=2), steps=2, faults=(SlowRank(2, 1.25),),
        story="Four data-parallel ranks; rank 2 runs its compute kernels 25 % slower.",
        look_at=("steps: rank 2's computing_us is the outlier",
                 "comm_ops: the other ranks wait for rank 2 inside the gradient all-reduce "
                 "(wait_us)")),
    Scenario(
        "slow-link", "Slow link: the HCCS link between ranks 2 and 3 at 15 %", LLAMA7B_4L,
        pk.ParallelConfig(dp=4, num_micro_batches=2), steps=2,
        faults=(SlowLink(2, 3, 0.15),),
        story="Four data-parallel ranks; the link between rank 2 and rank 3 delivers 15 % "
              "of its bandwidth, so every gradient all-reduce is paced by it.",
        look_at=("comm_matrix: the 2-3 link's bandwidth_gbps is far below the other links",
                 "comm_ops: transit_us of the all-reduces grows on every rank")),
    Scenario(
        "data-stall", "Data-loading stall: the loader blocks every other step", LLAMA7B_4L,
        pk.ParallelConfig(dp=2, pp=2, num_micro_batches=2), steps=3,
        faults=(DataLoadingStall(120_000.0, every=2),),
        story="Four ranks (dp 2 x pp 2); on steps 1 and 3 the host waits 120 ms for the data "
              "loader before it launches anything.",
        look_at=("steps: preparing_us jumps on the stalled steps; the step takes that much "
                 "longer",
                 "ops: on those steps the host launches nothing for the first 120 ms of the "
                 "ProfilerStep (this scenario keeps every kernel and host op in "
                 "trace_view.json)"),
        trace_kernels=True),
)


def _readme(s: Scenario) -> str:
    p = s.parallel
    lines = [
        f"# {s.title}", "",
        "**Simulated** profile (not a real measurement), written by `perfkit.simulate` "
        "through `tools/make_data.py` with seed 0. It has the layout and file headers of a "
        "torch_npu Level1 text export (one `*_ascend_pt` folder per rank).", "",
        s.story, "",
        "| setting | value |", "|---|---|",
        f"| model | {s.model.name}: hidden {s.model.hidden_size}, {s.model.num_layers} layers, "
        f"{s.model.num_attention_heads} heads, seq {s.model.seq_length}, "
        f"vocab {s.model.vocab_size} |",
        f"| parallel | dp {p.dp}, tp {p.tp}, pp {p.pp}, micro-batch size {p.micro_batch_size}, "
        f"{p.num_micro_batches} micro-batches, optimizer shard {p.optimizer_shard}, "
        f"recompute {p.recompute}"
        + (f" (full layers per stage {list(p.recompute_layers)})"
           if isinstance(p.recompute_layers, tuple) else "") + " |",
        f"| hardware | {HW.name} preset, matrix efficiency {EFFICIENCY} |",
        f"| steps | {s.steps} |",
        f"| faults | {', '.join(repr(f) for f in s.faults) or 'none'} |", "",
        "What to look at:", "",
        *[f"- {x}" for x in s.look_at], "",
        "Load it with `perfkit.load(\"data/simulated/" + s.name + "\")`. The inputs are also "
        "stored under `perfkit_simulation` in every `profiler_metadata.json`.", "",
    ]
    return "\n".join(lines)


def make_scenario(s: Scenario, out: Path) -> Path:
    """Write one scenario (replacing an older copy) with its README."""
    target = out / s.name
    if target.exists():
        shutil.rmtree(target)
    simulate(s.model, s.parallel, HW, steps=s.steps, faults=s.faults, seed=0, out=target,
             efficiency=EFFICIENCY, aic_metrics=None, trace_kernels=s.trace_kernels,
             overlap_merge_us=MERGE_US)
    (target / "README.md").write_text(_readme(s))
    return target


def copy_real(data: Path, shared: Path) -> Path:
    """Copy the real torch_npu 2-rank Level1 sample with its licence."""
    src = shared / REAL_SAMPLE
    if not src.is_dir():
        raise SystemExit(f"real sample not found at {src} (pass --shared)")
    target = data / "ascend-real-pt-level1"
    keep = {"README.md"}
    if target.exists():
        for child in target.iterdir():
            if child.name not in keep:
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    target.mkdir(parents=True, exist_ok=True)
    for rank_dir in sorted(src.iterdir()):
        shutil.copytree(rank_dir, target / rank_dir.name)
    shutil.copy2(shared / REAL_LICENSE, target / Path(REAL_LICENSE).name)
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "data")
    ap.add_argument("--shared", type=Path, default=SHARED)
    ap.add_argument("--real", action="store_true", help="also copy the real sample")
    ap.add_argument("--only", nargs="*", help="scenario names to (re)make")
    args = ap.parse_args(argv)
    sim_root = args.out / "simulated"
    sim_root.mkdir(parents=True, exist_ok=True)
    for s in SCENARIOS:
        if args.only and s.name not in args.only:
            continue
        path = make_scenario(s, sim_root)
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        print(f"{s.name}: {size / 1e6:.2f} MB", file=sys.stderr)
    if args.real:
        copy_real(args.out, args.shared)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
