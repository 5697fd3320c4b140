"""PyTorch's own FLOP counts for one training step of the tiny Llama of data/kineto-tiny-llama.

Runs the model of ``tools/make_kineto_llama.py`` (same class, same shapes: batch 4,
sequence 64) for one training step (forward, loss, backward, AdamW step) under
``torch.utils.flop_counter.FlopCounterMode`` and writes its per-operator counts, the
reference that ``tests/analysis/test_efficiency.py`` checks
:func:`perfkit.analysis.operator_efficiency` against on the recorded Kineto trace.

FlopCounterMode registers no formula for the CPU flash-attention kernel that the trace
ran (``aten::_scaled_dot_product_flash_attention_for_cpu`` and its backward), so it
counts no attention FLOPs on CPU; the script records what torch's own formulas
(``flop_counter.sdpa_flop_count`` / ``sdpa_backward_flop_count``) give for the recorded
shapes instead. Distributed data parallelism does not change any FLOP count, so one
process is enough.

Pinned environment: **torch==2.13.0 (CPU build)** in its own virtual environment::

    python3 -m venv /tmp/venv-torch
    /tmp/venv-torch/bin/pip install torch==2.13.0
    /tmp/venv-torch/bin/python tools/flop_counts_kineto_llama.py \\
        --out tests/analysis/kineto_tiny_llama_flops.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_kineto_llama import (  # noqa: E402
    BATCH,
    HEADS,
    HIDDEN,
    LAYERS,
    PINNED_TORCH,
    SEQ,
    VOCAB,
    TinyLlama,
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path,
                    default=Path("tests/analysis/kineto_tiny_llama_flops.json"))
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = TinyLlama()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1))
    counter = FlopCounterMode(display=False)
    with counter:
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    per_op = {str(k): int(v) for k, v in counter.get_flop_counts()["Global"].items()}
    head = HIDDEN // HEADS
    q = (BATCH, HEADS, SEQ, head)
    attention = {
        "shape_q_k_v": list(q),
        "forward_per_call": int(flop_counter.sdpa_flop_count(q, q, q)),
        "backward_per_call": int(flop_counter.sdpa_backward_flop_count(q, q, q, q)),
        "calls_per_step": LAYERS,
        "note": "torch's formulas count the full (non-causal) score matrix; the trace's "
                "attention is causal (is_causal=True in its Concrete Inputs)",
    }
    record = {
        "torch": torch.__version__,
        "pinned_torch": PINNED_TORCH,
        "model": {"hidden": HIDDEN, "heads": HEADS, "layers": LAYERS, "seq": SEQ,
                  "vocab": VOCAB, "batch": BATCH},
        "what": "FlopCounterMode per-operator FLOPs of one training step (forward, loss, "
                "backward, AdamW step) of tools/make_kineto_llama.py's TinyLlama",
        "flop_counter_mode_per_step": per_op,
        "flop_counter_mode_total_per_step": int(counter.get_total_flops()),
        "attention_formulas": attention,
        "made_by": "tools/flop_counts_kineto_llama.py",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
