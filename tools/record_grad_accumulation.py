"""Record what PyTorch's autograd does to ``.grad`` when a step runs several micro-batches.

Pinned environment: **torch==2.13.0 (CPU build)**, in its own virtual environment, not the
project's (perfkit does not depend on torch)::

    python3 -m venv /tmp/venvs/torch
    /tmp/venvs/torch/bin/pip install torch==2.13.0
    /tmp/venvs/torch/bin/python tools/record_grad_accumulation.py \\
        --out tests/data/grad_accumulation_cpu

What it does: a three-parameter model (an embedding and two bias-free linear layers of
distinct shapes, fp32) runs one training step of ``--micro-batches`` micro-batches (the
gradients set to None first, as ``optimizer.zero_grad()`` does by default, then one
``backward()`` per micro-batch, then AdamW), under ``torch.profiler`` with CPU activity
and shapes, one step recorded after one of warm-up. The Chrome trace is written gzip'd as
``trace.json.gz``. Which operators autograd's ``AccumulateGrad`` node runs on each
micro-batch, and on which shapes, is what ``perfkit.calc.grad_accumulation``'s
``"autograd"`` pricing rests on (``tests/test_grad_accumulation_recorded.py`` reads it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import tempfile
from pathlib import Path

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule

PINNED_TORCH = "2.13.0"
VOCAB, HIDDEN, FFN, TOKENS = 96, 40, 56, 32


class Tiny(nn.Module):
    """Embedding, up-projection, down-projection: three parameters, three shapes."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.up = nn.Linear(HIDDEN, FFN, bias=False)
        self.down = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(self.embed(tokens)))).pow(2).mean()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--micro-batches", type=int, default=3)
    args = ap.parse_args()
    if not torch.__version__.startswith(PINNED_TORCH):
        raise SystemExit(f"torch {PINNED_TORCH} expected, found {torch.__version__}")
    torch.manual_seed(0)
    model = Tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = [torch.randint(0, VOCAB, (TOKENS,)) for _ in range(args.micro_batches)]
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                     schedule=schedule(wait=0, warmup=1, active=1),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
            for _ in range(2):
                opt.zero_grad()  # set_to_none=True, PyTorch's default since 2.0
                for tokens in batches:
                    model(tokens).backward()
                opt.step()
                prof.step()
        with raw.open("rb") as src, gzip.open(args.out / "trace.json.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
    shapes = {name: list(p.shape) for name, p in model.named_parameters()}
    (args.out / "environment.json").write_text(json.dumps({
        "torch": torch.__version__, "micro_batches": args.micro_batches,
        "parameters": shapes, "dtype": "float32", "tokens_per_micro_batch": TOKENS},
        indent=1) + "\n")


if __name__ == "__main__":
    main()
