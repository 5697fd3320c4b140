"""Regenerate the simulated teaching profiles in ``data/simulated/``.

Usage::

    python tools/make_data.py                 # simulated scenarios -> data/simulated/
    python tools/make_data.py --only NAME     # one scenario
    python tools/make_data.py --out /tmp/x    # somewhere else

Every scenario is written by :func:`perfkit.simulate.simulate` with a fixed seed, so a
rerun gives byte-identical files. To stay within the size budget of ``data/`` (30 MB for
everything), the Llama2-13B-like jobs keep the real layer widths, sequence length and
parallel layouts of the seed's case study but only 8 of the 40 layers and a few
micro-batches, and no PMU counters (``aic_metrics=None``) nor per-kernel events in
``trace_view.json`` (``trace_kernels=False``). The data-stall scenario keeps every kernel in
``trace_view.json``; ``llama2-7b-tp2`` (2 ranks) keeps that and the PMU counters too: it is
the complete Level1 export of the bundle. The fault scenarios and ``llama2-7b-tp2`` use a
4-layer Llama2-7B-like model.

The other bundled profiles were recorded by the project (``data/kineto-tiny-llama``:
``tools/make_kineto_llama.py``; ``data/mindspore-cpu-tiny-llama``:
``tools/make_mindspore_cpu_profile.py``). Profiles recorded by other projects are never
bundled: the tests read them from ``shared/samples`` beside the checkout.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from perfkit.simulate.scenarios import (
    EFFICIENCY,
    LLAMA7B_4L,
    LLAMA13B_8L,
    MERGE_US,
    SCENARIOS,
    Scenario,
    write_scenario,
)

ROOT = Path(__file__).resolve().parents[1]

# The scenario definitions live in perfkit.simulate.scenarios (``perfkit simulate
# --scenario NAME`` uses the same ones); the names below are kept for older imports.
__all__ = ["SCENARIOS", "Scenario", "EFFICIENCY", "MERGE_US", "LLAMA13B_8L", "LLAMA7B_4L",
           "HW", "make_scenario", "main"]
HW = SCENARIOS[0].hardware  # every scenario runs on the same preset (HARDWARE)


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
        "Load it with `perfkit.load(\"sample:" + s.name + "\")`. The inputs are also "
        "stored under `perfkit_simulation` in every `profiler_metadata.json`.", "",
    ]
    return "\n".join(lines)


def make_scenario(s: Scenario, out: Path) -> Path:
    """Write one scenario (replacing an older copy) with its README."""
    target = out / s.name
    if target.exists():
        shutil.rmtree(target)
    write_scenario(s, target)
    (target / "README.md").write_text(_readme(s))
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "data")
    ap.add_argument("--only", nargs="*", help="scenario names to (re)make")
    args = ap.parse_args(argv)
    sim_root = args.out / "simulated"
    sim_root.mkdir(parents=True, exist_ok=True)
    for s in SCENARIOS:
        if args.only and s.name not in args.only:
            continue
        if not s.bundled and not args.only:  # only in the journal (tools/make_journal.py)
            continue
        path = make_scenario(s, sim_root)
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        print(f"{s.name}: {size / 1e6:.2f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
