"""Time fused attention kernels by the number of (batch, head) pairs a call holds.

A fused attention kernel spreads its query tiles over the GPU's multiprocessors; with few
(batch, head) pairs and a short sequence there are fewer tiles than multiprocessors and
the call runs below the published curves, which were measured with 16k tokens per call.
This script times PyTorch SDPA's FlashAttention-2 and cuDNN kernels, forward and backward,
at head dimension 128, causal or not, sequence 1k-8k and 1-256 pairs, by their own
device time: each configuration runs ``--iters`` forward + backward calls under
``torch.profiler`` (CUDA activity only) and the kernels' device time is summed by pass
(a kernel name with ``fwd``/``fprop`` is the forward's, ``bwd``/``bprop``/``dot_do``/
``convert_dq`` the backward's), so the host's launch time is not in it.

Run on a machine with a CUDA GPU and PyTorch, from the repository's root::

    python tools/measure_attention_occupancy.py --out attention_occupancy_h100.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure_kernel_rates import environment  # noqa: E402

PAIRS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SEQS = (1024, 2048, 4096, 8192)
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
_FWD = re.compile(r"fwd|fprop", re.IGNORECASE)
_BWD = re.compile(r"bwd|bprop|dot_do|convert_dq", re.IGNORECASE)


def device_us(event: object) -> float:
    for name in ("device_time_total", "cuda_time_total", "self_device_time_total"):
        value = getattr(event, name, None)
        if value:
            return float(value)
    return 0.0


def one(backend: SDPBackend, pairs: int, seq: int, causal: bool, d: int, iters: int,
        device: torch.device) -> dict:
    heads = min(pairs, 32)
    batch = pairs // heads
    q, k, v = (torch.randn(batch, heads, seq, d, device=device, dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    grad = torch.randn(batch, heads, seq, d, device=device, dtype=torch.bfloat16)

    def step() -> None:
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.autograd.grad(out, (q, k, v), grad)

    for _ in range(3):
        step()
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            step()
        torch.cuda.synchronize(device)
    fwd = bwd = 0.0
    names: dict[str, float] = {}
    for event in prof.key_averages():
        us = device_us(event)
        if us <= 0:
            continue
        names[event.key[:120]] = round(us / iters, 3)
        if _FWD.search(event.key):
            fwd += us
        elif _BWD.search(event.key):
            bwd += us
    return {"batch": batch, "heads": heads, "pairs": pairs, "seq": seq, "head_dim": d,
            "causal": causal, "fwd_us": round(fwd / iters, 3), "bwd_us": round(bwd / iters, 3),
            "kernels_us": names}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=240.0)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    device = torch.device("cuda")
    started = time.monotonic()
    pairs, seqs = (PAIRS, SEQS) if not args.smoke else ((1, 4), (256,))
    rows, failures, cut = [], {}, False
    for name, backend in BACKENDS.items():
        for causal in (True, False):
            for seq in seqs:
                for p in pairs:
                    if time.monotonic() - started > args.budget_s:
                        cut = True
                        break
                    try:
                        rows.append({"backend": name, **one(backend, p, seq, causal, 128,
                                                            args.iters, device)})
                    except RuntimeError as error:
                        failures[f"{name} {p} {seq} {causal}"] = str(error)[:200]
        print(f"{name}: {len(rows)} rows, {time.monotonic() - started:.0f} s", flush=True)
    result = {"environment": environment(device),
              "script": "tools/measure_attention_occupancy.py", "iters": args.iters,
              "cut_short": cut, "failures": failures, "rows": rows,
              "seconds": round(time.monotonic() - started, 1)}
    Path(args.out).write_text(json.dumps(result, indent=0) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {len(rows)} rows, {len(failures)} failures", flush=True)
    if args.smoke:
        print(json.dumps(rows[:2]), failures, flush=True)
    # a run whose kernels were not timed (no device time read) fails, so it is not taken
    return 0 if rows and all(r["fwd_us"] > 0 and r["bwd_us"] > 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
