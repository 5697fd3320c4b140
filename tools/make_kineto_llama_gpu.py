"""Record real PyTorch Kineto traces, CPU and CUDA, of a small Llama trained with 2-rank DDP.

Run on a machine with an NVIDIA GPU and PyTorch (CUDA build), in its own environment (perfkit
does not depend on torch)::

    python tools/make_kineto_llama_gpu.py --out tests/data/kineto_llama_h100

What it does: two processes (world size 2, both on GPU 0 with the ``gloo`` backend when the
machine has one GPU, as NCCL refuses two ranks on one device; ``nccl`` with one GPU each
when there are two) each train a Llama-style decoder (RMSNorm, rotary attention through
``scaled_dot_product_attention``, SwiGLU MLP; sizes below) on random tokens with
DistributedDataParallel, AdamW and bf16 autocast. ``torch.profiler`` records CPU and CUDA
activity with shapes and memory on steps 4 and 5 (schedule wait=1, warmup=2, active=2), and
each rank's Chrome trace is written gzip'd as ``rank{r}.pt.trace.json.gz`` (Kineto adds
``distributedInfo`` because the process group is up). ``environment.json`` records the
versions, the GPU and the sizes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F  # noqa: N812
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile, schedule

HIDDEN, HEADS, LAYERS, SEQ, VOCAB, BATCH = 1024, 16, 4, 1024, 32000, 4
FFN = 2816  # Llama's 8/3 x hidden, rounded to a multiple of 256
STEPS = 5


class RMSNorm(nn.Module):
    """Root-mean-square layer norm (Llama)."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary(x: torch.Tensor) -> torch.Tensor:
    """Apply rotary position embedding to ``(b, heads, s, d)``."""
    d = x.shape[-1]
    pos = torch.arange(x.shape[-2], dtype=torch.float32, device=x.device)
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d))
    ang = torch.outer(pos, inv)
    cos, sin = ang.cos().repeat(1, 2).to(x.dtype), ang.sin().repeat(1, 2).to(x.dtype)
    half = torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1)
    return x * cos + half * sin


class Block(nn.Module):
    """One decoder layer: attention and SwiGLU MLP with pre-norms and residuals (this
    script's sizes by default; tools/make_kineto_llama_layouts.py gives its own).

    ``width`` is the attention's width, ``heads`` heads of ``width / heads`` each (default
    ``hidden``): one tensor-parallel rank's share of a layer of ``tp`` times the heads has
    ``width = hidden / tp`` (tools/make_kineto_llama_layouts.py)."""

    def __init__(self, hidden: int = HIDDEN, heads: int = HEADS, ffn: int = FFN,
                 width: int | None = None) -> None:
        super().__init__()
        self.hidden, self.heads = hidden, heads
        self.width = hidden if width is None else width
        self.attention_norm = RMSNorm(hidden)
        self.wqkv = nn.Linear(hidden, 3 * self.width, bias=False)
        self.wo = nn.Linear(self.width, hidden, bias=False)
        self.ffn_norm = RMSNorm(hidden)
        self.w1 = nn.Linear(hidden, ffn, bias=False)
        self.w3 = nn.Linear(hidden, ffn, bias=False)
        self.w2 = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = self.wqkv(self.attention_norm(x)).split(self.width, dim=-1)
        q, k, v = (t.view(b, s, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(rotary(q), rotary(k), v, is_causal=True)
        x = x + self.wo(att.transpose(1, 2).reshape(b, s, self.width))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    """Embedding, decoder layers, final norm and output head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def worker(rank: int, world: int, out: str, port: int, backend: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DistributedDataParallel(Llama().to(device), device_ids=[device.index])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    gen = torch.Generator(device=device).manual_seed(rank)
    tmp = Path(out) / f".rank{rank}.json"
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 profile_memory=True,
                 schedule=schedule(wait=1, warmup=2, active=2, repeat=1)) as prof:
        for _ in range(STEPS):
            tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen, device=device)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(tokens[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, VOCAB).float(),
                                       tokens[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            torch.cuda.synchronize(device)
            prof.step()
    prof.export_chrome_trace(str(tmp))
    with open(tmp, "rb") as src, gzip.open(Path(out) / f"rank{rank}.pt.trace.json.gz",
                                           "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    tmp.unlink()
    dist.barrier()
    dist.destroy_process_group()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("tests/data/kineto_llama_h100"))
    ap.add_argument("--port", type=int, default=29541)
    args = ap.parse_args()
    gpus = torch.cuda.device_count()
    if gpus == 0:
        raise SystemExit("no CUDA device")
    backend = "nccl" if gpus >= 2 else "gloo"
    args.out.mkdir(parents=True, exist_ok=True)
    mp.spawn(worker, args=(2, str(args.out), args.port, backend), nprocs=2, join=True)
    env = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(0),
           "gpus": gpus, "backend": backend, "world_size": 2, "python": platform.python_version(),
           "model": {"hidden": HIDDEN, "heads": HEADS, "layers": LAYERS, "ffn": FFN,
                     "vocab": VOCAB, "seq": SEQ, "micro_batch": BATCH, "dtype": "bf16 autocast",
                     "optimizer": "AdamW (fused)"},
           "profiler": {"activities": ["CPU", "CUDA"], "record_shapes": True,
                        "profile_memory": True, "schedule": "wait=1, warmup=2, active=2"}}
    (args.out / "environment.json").write_text(json.dumps(env, indent=1) + "\n")
    for f in sorted(args.out.iterdir()):
        print(f, f.stat().st_size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
