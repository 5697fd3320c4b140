"""Record real PyTorch (CPU) Kineto traces of a tiny Llama trained with 2-rank DDP.

Pinned environment: **torch==2.13.0 (CPU build)**, in its own virtual environment, not the
project's (perfkit does not depend on torch)::

    python3 -m venv /tmp/venvs/torch
    /tmp/venvs/torch/bin/pip install torch==2.13.0
    /tmp/venvs/torch/bin/python tools/make_kineto_llama.py --out data/kineto-tiny-llama

What it does: two processes (gloo backend, world size 2) each train a 2-layer Llama-style
decoder (RMSNorm, rotary attention, SwiGLU MLP; hidden 64, 4 heads, sequence 64, vocabulary
256) on random tokens with DistributedDataParallel and AdamW. ``torch.profiler`` records
CPU activity with shapes and memory on steps 3 and 4 (schedule wait=1, warmup=1, active=2),
and each rank's Chrome trace is written gzip'd as ``rank{r}.pt.trace.json.gz`` (Kineto
adds ``distributedInfo`` with the rank and world size because the process group is up).
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F  # noqa: N812
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile, schedule

PINNED_TORCH = "2.13.0"
HIDDEN, HEADS, LAYERS, SEQ, VOCAB, BATCH = 64, 4, 2, 64, 256, 4


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
    pos = torch.arange(x.shape[-2], dtype=torch.float32)
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = torch.outer(pos, inv)
    cos, sin = ang.cos().repeat(1, 2), ang.sin().repeat(1, 2)
    half = torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1)
    return x * cos + half * sin


class Block(nn.Module):
    """One decoder layer: attention and SwiGLU MLP with pre-norms and residuals."""

    def __init__(self) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(HIDDEN)
        self.wqkv = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False)
        self.wo = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.ffn_norm = RMSNorm(HIDDEN)
        self.w1 = nn.Linear(HIDDEN, 4 * HIDDEN, bias=False)
        self.w3 = nn.Linear(HIDDEN, 4 * HIDDEN, bias=False)
        self.w2 = nn.Linear(4 * HIDDEN, HIDDEN, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = self.wqkv(self.attention_norm(x)).split(HIDDEN, dim=-1)
        q, k, v = (t.view(b, s, HEADS, -1).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(rotary(q), rotary(k), v, is_causal=True)
        x = x + self.wo(att.transpose(1, 2).reshape(b, s, HIDDEN))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class TinyLlama(nn.Module):
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


def worker(rank: int, world: int, out: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DistributedDataParallel(TinyLlama())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(rank)
    tmp = Path(out) / f".rank{rank}.json"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True,
                 schedule=schedule(wait=1, warmup=1, active=2, repeat=1)) as prof:
        for _ in range(4):
            tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
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
    ap.add_argument("--out", type=Path, default=Path("data/kineto-tiny-llama"))
    ap.add_argument("--port", type=int, default=29533)
    args = ap.parse_args()
    if not torch.__version__.startswith(PINNED_TORCH):
        print(f"warning: traces were made with torch {PINNED_TORCH}, this is {torch.__version__}")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory():
        mp.spawn(worker, args=(2, str(args.out), args.port), nprocs=2, join=True)
    for f in sorted(args.out.glob("*.json.gz")):
        print(f, f.stat().st_size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
