"""Record real Kineto traces of one small Llama trained at several layouts on one GPU.

A measured set for the planner: the same model, data and optimizer, trained on one NVIDIA
GPU at layouts that differ in one knob each, so that a prediction made from one run's
profile (``perfkit.plan.calibrate`` then ``perfkit.plan.predict``) can be checked against
the others' measured steps (``tests/plan/test_measured_layouts.py``)::

    a   micro-batch 4, no recompute          (the run a user has)
    b   micro-batch 4, full recompute        (every decoder layer's forward run again in
                                              the backward: torch.utils.checkpoint)
    c   micro-batch 8, no recompute
    d   micro-batch 8, full recompute
    e   16 layers instead of 8, micro-batch 4, no recompute
    f   sequence 4,096 instead of 2,048, micro-batch 2 (the same tokens as a), no recompute
    g   micro-batch 2, no recompute
    h   one rank's share of tensor parallelism 2, micro-batch 4, no recompute
    i   one rank's share of tensor parallelism 4, micro-batch 4, no recompute
    j   one rank's share of tensor parallelism 2, micro-batch 4, full recompute

(``tests/data/kineto_llama_layouts_h100`` holds a-d, ``tests/data/kineto_llama_shapes_h100``
a again with e-g, ``tests/data/kineto_llama_tp_h100`` a again with h-j, each set recorded
in one process on one machine.)

Run on a machine with a CUDA GPU and PyTorch, in its own environment (perfkit does not
depend on torch)::

    python tools/make_kineto_llama_layouts.py --out tests/data/kineto_llama_layouts_h100

Per layout, in one process, one after the other: the model is built from the same seed;
``torch.profiler`` records CPU and CUDA activity with shapes and memory on steps 4 and 5
(schedule wait=1, warmup=2, active=2), written gzip'd as ``<layout>.pt.trace.json.gz``;
then, with the profiler off, ``--timed`` more steps are timed with CUDA events (the step
time without the profiler's cost) and the allocator's peak is read
(``torch.cuda.max_memory_allocated``, reset before the layout). ``environment.json``
records the versions, the GPU, the model, and per layout the timed steps and the peak.

The decoder layer (RMSNorm, rotary, SwiGLU) is ``make_kineto_llama_gpu.Block`` at this
script's sizes (run from ``tools/``'s parent: Python finds the module beside the script).

One GPU cannot run tensor or pipeline parallelism (NCCL refuses two ranks on one device,
and gloo's host all-reduce would be most of the step). What it can run is one rank's share
of a tensor-parallel layout (h-j), as Megatron-LM splits a layer over ``tp`` ranks: the
query, key and value projections and the MLP's gate and up projections by their output
columns (``heads / tp`` heads, ``ffn / tp`` columns), the attention output and the MLP's
down projection by their input rows, the embedding and the output head by the vocabulary
(``vocab / tp`` rows; the loss is the cross-entropy over the rank's part of the logits,
targets taken modulo it); the norms, rotary embedding of the rank's heads, residual adds
and the optimizer's step over the rank's parameters run as on every rank. What it leaves
out is the communication: the all-reduces after the attention and the MLP (forward and
backward), the embedding's and the vocabulary-parallel loss's. So the step of h-j is a tp
rank's computing time, which the planner's prediction gives as its step less its
``tp_comm`` part.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import shutil
import statistics
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: N812
from make_kineto_llama_gpu import Block, RMSNorm
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.checkpoint import checkpoint

HIDDEN, HEADS, LAYERS, SEQ, VOCAB = 2048, 16, 8, 2048, 32000
FFN = 5632  # Llama's 8/3 x hidden, rounded to a multiple of 256
#: layout name: (micro-batch, full recompute, layers, sequence, tensor-parallel share)
LAYOUTS = {"a": (4, False, LAYERS, SEQ, 1), "b": (4, True, LAYERS, SEQ, 1),
           "c": (8, False, LAYERS, SEQ, 1), "d": (8, True, LAYERS, SEQ, 1),
           "e": (4, False, 2 * LAYERS, SEQ, 1), "f": (2, False, LAYERS, 2 * SEQ, 1),
           "g": (2, False, LAYERS, SEQ, 1), "h": (4, False, LAYERS, SEQ, 2),
           "i": (4, False, LAYERS, SEQ, 4), "j": (4, True, LAYERS, SEQ, 2)}
WAIT, WARMUP, ACTIVE = 1, 2, 2
#: ``--wide``: Llama 2 7B's layer (hidden 4096, 32 heads of 128, FFN 11008), half the
#: layers of every layout (4 for 8): the same layouts on a model whose GEMMs take a larger
#: share of the step (``tests/data/kineto_llama_wide_tp_h100``)
WIDE = {"hidden": 4096, "heads": 32, "ffn": 11008}


class Llama(nn.Module):
    """Embedding, decoder layers (each recomputed in the backward when ``recompute``),
    final norm and output head; of ``tp > 1``, one tensor-parallel rank's share of them
    (the module docstring)."""

    def __init__(self, recompute: bool, layers: int = LAYERS, tp: int = 1) -> None:
        super().__init__()
        self.recompute = recompute
        self.vocab = VOCAB // tp
        self.embed = nn.Embedding(self.vocab, HIDDEN)
        self.layers = nn.ModuleList(Block(HIDDEN, HEADS // tp, FFN // tp, HIDDEN // tp)
                                    for _ in range(layers))
        self.norm = RMSNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, self.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False) if self.recompute else layer(x)
        return self.head(self.norm(x))


def train_step(model: Llama, opt: torch.optim.Optimizer, tokens: torch.Tensor) -> None:
    """Forward, loss, backward and the optimizer's step, in bf16 autocast."""
    tokens = tokens % model.vocab  # a tp rank's share of the vocabulary (module docstring)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, model.vocab).float(),
                               tokens[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def record(name: str, micro_batch: int, recompute: bool, layers: int, seq: int, tp: int,
           out: Path, timed: int) -> dict:
    """Profile one layout, then time it without the profiler; its figures."""
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.cuda.init()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    torch.manual_seed(0)
    model = Llama(recompute, layers, tp).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    gen = torch.Generator(device=device).manual_seed(0)

    def batch() -> torch.Tensor:
        return torch.randint(0, VOCAB, (micro_batch, seq + 1), generator=gen, device=device)

    tmp = out / f".{name}.json"
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 profile_memory=True,
                 schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1)) as prof:
        for _ in range(WAIT + WARMUP + ACTIVE):
            train_step(model, opt, batch())
            torch.cuda.synchronize(device)
            prof.step()
    prof.export_chrome_trace(str(tmp))
    with open(tmp, "rb") as src, gzip.open(out / f"{name}.pt.trace.json.gz", "wb",
                                           compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    tmp.unlink()
    times = []
    for _ in range(timed):
        tokens = batch()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        train_step(model, opt, tokens)
        end.record()
        torch.cuda.synchronize(device)
        times.append(start.elapsed_time(end))
    figures = {"micro_batch": micro_batch, "recompute": "full" if recompute else "none",
               "layers": layers, "seq": seq, **({"tp_share": tp} if tp > 1 else {}),
               "timed_steps_ms": [round(t, 3) for t in times],
               "timed_step_median_ms": round(statistics.median(times), 3),
               "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(device)}
    print(name, json.dumps(figures), flush=True)
    del model, opt
    return figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("tests/data/kineto_llama_layouts_h100"))
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--timed", type=int, default=20, help="steps timed without the profiler")
    ap.add_argument("--wide", action="store_true", help="the wider model of WIDE")
    args = ap.parse_args()
    global HIDDEN, HEADS, FFN, LAYERS
    if args.wide:  # read by Llama and environment.json below
        HIDDEN, HEADS, FFN, LAYERS = WIDE["hidden"], WIDE["heads"], WIDE["ffn"], LAYERS // 2
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device")
    args.out.mkdir(parents=True, exist_ok=True)
    layouts = {}
    for name in args.layouts.split(","):
        mb, rc, layers, seq, tp = LAYOUTS[name]
        layers = layers // 2 if args.wide else layers
        layouts[name] = record(name, mb, rc, layers, seq, tp, args.out, args.timed)
    env = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(0),
           "python": platform.python_version(), "world_size": 1,
           "model": {"hidden": HIDDEN, "heads": HEADS, "layers": LAYERS, "ffn": FFN,
                     "vocab": VOCAB, "seq": SEQ, "dtype": "bf16 autocast",
                     "note": "layers and seq are the defaults; each layout gives its own; "
                             "tp_share: one tensor-parallel rank's share of the layers, "
                             "embedding and head, without the communication (the "
                             "script's docstring)",
                     "optimizer": "AdamW (fused)", "attention": "scaled_dot_product_attention"
                     " (causal)"},
           "profiler": {"activities": ["CPU", "CUDA"], "record_shapes": True,
                        "profile_memory": True,
                        "schedule": f"wait={WAIT}, warmup={WARMUP}, active={ACTIVE}"},
           "layouts": layouts}
    (args.out / "environment.json").write_text(json.dumps(env, indent=1) + "\n")
    for f in sorted(args.out.iterdir()):
        print(f, f.stat().st_size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
