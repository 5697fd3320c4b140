"""Record a real PyTorch CPU Kineto trace of attention run as 3-D bmm, softmax, bmm.

The eager attention of HuggingFace's ViT / TimeSformer (``q @ kᵀ`` of 4-D tensors, which
``aten::matmul`` runs as a 3-D ``aten::bmm`` with batch and heads folded together, a scale,
softmax, dropout, ``@ v``), two layers, trained with SGD and a cross-entropy loss: the
trace holds the forward and the backward (``BmmBackward0``'s products and
``aten::_softmax_backward_data``) of each attention, with ``record_shapes=True``.

Run with a separate virtual environment holding torch (perfkit does not depend on it)::

    python3 -m venv /tmp/venvs/torch
    /tmp/venvs/torch/bin/pip install torch==2.14.1 numpy
    /tmp/venvs/torch/bin/python tools/make_kineto_bmm_attention.py \
        --out tests/data/kineto_bmm_attention_cpu
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

HIDDEN, HEADS, SEQ, BATCH, LAYERS, CLASSES = 64, 4, 32, 2, 2, 10


class Attention(nn.Module):
    """Eager multi-head self-attention: a fused QKV projection, bmm, softmax, bmm."""

    def __init__(self) -> None:
        super().__init__()
        self.d = HIDDEN // HEADS
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.out = nn.Linear(HIDDEN, HIDDEN)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, h = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, HEADS, self.d).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * self.d ** -0.5
        probs = self.drop(scores.softmax(dim=-1))
        return x + self.out((probs @ v).transpose(1, 2).reshape(b, n, h))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(*[Attention() for _ in range(LAYERS)])
    head = nn.Linear(HIDDEN, CLASSES)
    opt = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.1)
    x = torch.randn(BATCH, SEQ, HIDDEN)
    y = torch.randint(0, CLASSES, (BATCH,))
    tmp = Path(tempfile.mkdtemp())

    def save(prof: profile) -> None:
        prof.export_chrome_trace(str(tmp / "trace.json"))

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=1), on_trace_ready=save) as prof:
        for _ in range(3):
            loss = nn.functional.cross_entropy(head(model(x).mean(dim=1)), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    with open(tmp / "trace.json", "rb") as src, \
            gzip.open(args.out / "bmm_attention.pt.trace.json.gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
