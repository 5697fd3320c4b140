"""Time one context-parallel rank's attention as PyTorch's load-balanced ring computes it.

torchtitan's context parallelism (``context_parallel`` of
``torch.distributed.tensor.experimental``, as its performance table ran it in December
2024) shards a causal sequence of ``S`` tokens over ``n`` ranks in ``2n`` chunks, rank
``r`` holding chunks ``r`` and ``2n − 1 − r``, and runs ``n`` ring steps per layer: the
first a causal call of the rank's ``S/n`` queries on its own keys, then, for the keys of
rank ``r − i``, an unmasked call of all ``S/n`` queries on the first half of those keys
(``i ≤ r``) or of the second half of the queries on all of them (``i > r``). After each
forward call the partial output and log-sum-exp are merged into the running result in
float32; the backward runs one flash backward per step with the final output and
log-sum-exp and adds each step's gradients into float32 accumulators (the query's held,
the keys' and values' travelling with them round the ring).

This script computes exactly that on one GPU, the ring's communication left out (every
rank's key/value chunks are sliced from one full tensor), so what it times is a rank's
computing time: the flash calls and the merges and accumulations around them. Per case it
records the device time of each kernel kind (flash forward, flash backward, the rest) read
with ``torch.profiler`` (CUDA activity only, so the host's launches are not in it), and
the wall time between CUDA events. It also times single flash and cuDNN SDPA calls,
forward and forward+backward, at the ring's call shapes and at square lengths 4k-32k, and
checks on a small case that the emulated ring's output equals plain causal attention.

Shapes: Llama 3.1 8B's attention (32 query heads, head dim 128, batch 1, bf16; torchtitan
repeats the 8 key/value heads to 32 before SDPA), ``S`` = 32k (n = 1), 64k (2), 128k (4),
256k (8): the layouts of torchtitan's Table 2 (``docs/performance.md`` at
``d4c86e3758a8``), whose ranks all hold 32k tokens.

Run on a machine with a CUDA GPU and PyTorch, from the repository's root::

    python tools/measure_ring_attention.py --out ring_attention.json

``--smoke`` runs tiny shapes on whatever device there is (the CPU's flash kernels).
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

HEADS, HEAD_DIM = 32, 128
RING = ((32768, 1), (65536, 2), (131072, 4), (262144, 8))
SQUARE = (4096, 8192, 16384, 32768)
_FLASH_FWD = re.compile(r"flash.*fwd|fwd.*flash|fmha.*fprop|flash_fwd", re.IGNORECASE)
_FLASH_BWD = re.compile(r"flash.*bwd|bwd.*flash|fmha.*bprop|dot_do|convert_dq|flash_bwd",
                        re.IGNORECASE)


def flash_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool):
    """One flash call: ``(out, lse, saved)`` where ``saved`` is what its backward needs."""
    if q.device.type == "cuda":
        r = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False)
        return r[0], r[1], r[2:8]
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)
    return out, lse, ()


def flash_backward(grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   out: torch.Tensor, lse: torch.Tensor, saved: tuple, causal: bool):
    """The flash backward of one call, given the (final) output and log-sum-exp."""
    if q.device.type == "cuda":
        cq, ck, mq, mk, seed, offset = saved
        return torch.ops.aten._scaled_dot_product_flash_attention_backward(
            grad, q, k, v, out, lse, cq, ck, mq, mk, 0.0, causal, seed, offset)
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        grad, q, k, v, out, lse, 0.0, causal)


def shard(x: torch.Tensor, rank: int, n: int) -> torch.Tensor:
    """Rank ``rank``'s load-balanced share of a (B, H, S, d) tensor: chunks r and 2n−1−r."""
    chunks = x.chunk(2 * n, dim=2)
    return torch.cat((chunks[rank], chunks[2 * n - 1 - rank]), dim=2)


def ring_steps(rank: int, n: int):
    """Per ring step: (whose keys, which queries, which keys, causal) as the ring slices."""
    for i in range(n):
        src = (rank - i) % n
        if i == 0:
            yield src, slice(None), slice(None), True
        elif i <= rank:
            yield src, slice(None), "first", False
        else:
            yield src, "second", slice(None), False


def _part(x: torch.Tensor, which) -> torch.Tensor:
    half = x.shape[2] // 2
    if which == "first":
        return x[:, :, :half]
    if which == "second":
        return x[:, :, half:]
    return x


def ring_forward(q: torch.Tensor, ks: list, vs: list, rank: int, n: int):
    """The rank's forward: flash calls merged in float32 (PyTorch's ``_SDPAMerger``)."""
    out = lse = None
    saved = []
    for src, qs, kvs, causal in ring_steps(rank, n):
        qq, kk, vv = _part(q, qs), _part(ks[src], kvs), _part(vs[src], kvs)
        block, block_lse, keep = flash_forward(qq, kk, vv, causal)
        saved.append(keep)
        block, block_lse = block.float(), block_lse.float().unsqueeze(-1)
        if out is None:
            out, lse = block, block_lse
            continue
        o, m = _part(out, qs), _part(lse, qs)
        o.sub_(torch.sigmoid(block_lse - m) * (o - block))
        m.sub_(F.logsigmoid(m - block_lse))
    return out.to(q.dtype), lse.squeeze(-1), saved


def ring_backward(grad: torch.Tensor, q: torch.Tensor, ks: list, vs: list,
                  out: torch.Tensor, lse: torch.Tensor, saved: list, rank: int, n: int):
    """The rank's backward: one flash backward per step, gradients added in float32."""
    dq = torch.zeros_like(q, dtype=torch.float32)
    dks = {src: torch.zeros_like(ks[src], dtype=torch.float32) for src in range(n)}
    dvs = {src: torch.zeros_like(vs[src], dtype=torch.float32) for src in range(n)}
    for (src, qs, kvs, causal), keep in zip(ring_steps(rank, n), saved, strict=True):
        g = flash_backward(_part(grad, qs), _part(q, qs), _part(ks[src], kvs),
                           _part(vs[src], kvs), _part(out, qs), _part(lse, qs).contiguous(),
                           keep, causal)
        _part(dq, qs).add_(g[0])
        _part(dks[src], kvs).add_(g[1])
        _part(dvs[src], kvs).add_(g[2])
    return dq, dks, dvs


def inputs(seq: int, n: int, device: torch.device, heads: int = HEADS, d: int = HEAD_DIM):
    full = [torch.randn(1, heads, seq, d, device=device, dtype=torch.bfloat16) for _ in range(3)]
    q = [shard(full[0], r, n) for r in range(n)]
    k = [shard(full[1], r, n) for r in range(n)]
    v = [shard(full[2], r, n) for r in range(n)]
    return full, q, k, v


def check(device: torch.device, seq: int, n: int) -> float:
    """Largest error of the emulated ring's output and gradients (every rank's ring run,
    the keys' and values' gradients summed over the ranks) against plain causal
    attention and its autograd backward in float32 on the same bf16 inputs, as a share
    of the reference's largest magnitude."""
    full, q, k, v = inputs(seq, n, device, heads=4, d=64)
    ref = [t.float().requires_grad_() for t in full]
    reference = F.scaled_dot_product_attention(*ref, is_causal=True)
    grad_full = torch.randn_like(reference)
    grads = torch.autograd.grad(reference, ref, grad_full)
    dk_total = [torch.zeros_like(k[0], dtype=torch.float32) for _ in range(n)]
    dv_total = [torch.zeros_like(v[0], dtype=torch.float32) for _ in range(n)]
    worst = 0.0
    for r in range(n):
        out, lse, saved = ring_forward(q[r], k, v, r, n)
        worst = max(worst, (out.float() - shard(reference, r, n)).abs().max().item())
        grad = shard(grad_full, r, n).to(q[r].dtype)
        dq, dks, dvs = ring_backward(grad, q[r], k, v, out, lse, saved, r, n)
        worst = max(worst, (dq - shard(grads[0], r, n)).abs().max().item())
        for src in range(n):
            dk_total[src] += dks[src]
            dv_total[src] += dvs[src]
    for src in range(n):
        worst = max(worst, (dk_total[src] - shard(grads[1], src, n)).abs().max().item(),
                    (dv_total[src] - shard(grads[2], src, n)).abs().max().item())
    scale = max(t.abs().max().item() for t in (reference, *grads))
    return worst / scale


def kernel_split(prof) -> dict:
    split = {"flash_fwd_ms": 0.0, "flash_bwd_ms": 0.0, "other_ms": 0.0}
    for event in prof.key_averages():
        us = 0.0
        for name in ("device_time_total", "cuda_time_total", "self_device_time_total"):
            us = float(getattr(event, name, 0.0) or 0.0)
            if us:
                break
        if us <= 0 or event.key.startswith(("ProfilerStep", "cuda")):
            continue
        key = ("flash_fwd_ms" if _FLASH_FWD.search(event.key) else
               "flash_bwd_ms" if _FLASH_BWD.search(event.key) else "other_ms")
        split[key] += us / 1e3
    return split


def timed(fn, iters: int, device: torch.device) -> tuple[float, dict]:
    """Mean wall ms per call between CUDA events, and the kernels' device ms by kind."""
    fn()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda *_: None)
    sync(device)
    activities = [ProfilerActivity.CUDA] if device.type == "cuda" else [ProfilerActivity.CPU]
    with profile(activities=activities) as prof:
        fn()
        sync(device)
    split = {k: round(v, 3) for k, v in kernel_split(prof).items()}
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(device)
    return (time.perf_counter() - start) * 1e3 / iters, split


def ring_case(seq: int, n: int, rank: int, iters: int, device: torch.device) -> dict:
    full, q, k, v = inputs(seq, n, device)
    del full
    grad = torch.randn_like(q[rank])
    state = {}

    def forward() -> None:
        state["fwd"] = ring_forward(q[rank], k, v, rank, n)

    def both() -> None:
        out, lse, saved = ring_forward(q[rank], k, v, rank, n)
        ring_backward(grad, q[rank], k, v, out, lse, saved, rank, n)

    fwd_ms, fwd_split = timed(forward, iters, device)
    all_ms, all_split = timed(both, iters, device)
    local = seq // n
    flops_fwd = 4.0 * local * seq * HEADS * HEAD_DIM / 2.0  # the rank's causal share
    return {"seq": seq, "cp": n, "rank": rank, "local_tokens": local,
            "fwd_flops": flops_fwd, "fwd_wall_ms": round(fwd_ms, 3),
            "fwd_kernels": fwd_split, "fwd_bwd_wall_ms": round(all_ms, 3),
            "fwd_bwd_kernels": all_split}


def call_case(backend: str, lq: int, lkv: int, causal: bool, iters: int,
              device: torch.device) -> dict:
    q = torch.randn(1, HEADS, lq, HEAD_DIM, device=device, dtype=torch.bfloat16,
                    requires_grad=True)
    k, v = (torch.randn(1, HEADS, lkv, HEAD_DIM, device=device, dtype=torch.bfloat16,
                        requires_grad=True) for _ in range(2))
    grad = torch.randn_like(q)
    kind = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]

    def forward() -> None:
        with torch.no_grad(), sdpa_kernel(kind):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def both() -> None:
        with sdpa_kernel(kind):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.autograd.grad(out, (q, k, v), grad)

    fwd_ms, fwd_split = timed(forward, iters, device)
    all_ms, all_split = timed(both, iters, device)
    flops = 4.0 * lq * lkv * HEADS * HEAD_DIM * (0.5 if causal else 1.0)
    return {"backend": backend, "seq_q": lq, "seq_kv": lkv, "causal": causal,
            "fwd_flops": flops, "fwd_wall_ms": round(fwd_ms, 3), "fwd_kernels": fwd_split,
            "fwd_bwd_wall_ms": round(all_ms, 3), "fwd_bwd_kernels": all_split}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=240.0)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    started = time.monotonic()
    ring, squares = RING, SQUARE
    if args.smoke:
        global HEADS, HEAD_DIM
        HEADS, HEAD_DIM = 2, 64
        ring, squares = ((256, 1), (512, 2), (1024, 4)), (256,)
    result: dict = {"environment": environment(device), "script": "tools/measure_ring_attention.py",
                    "heads": HEADS, "head_dim": HEAD_DIM, "iters": args.iters,
                    "failures": {}, "cut_short": [], "ring": [], "calls": []}

    def save() -> None:
        result["seconds"] = round(time.monotonic() - started, 1)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")

    result["ring_check_relative_error"] = check(device, 1024 if args.smoke else 8192, 4)
    print("ring check", result["ring_check_relative_error"], flush=True)
    for seq, n in ring:
        for rank in sorted({0, n // 2, n - 1}) if n > 1 else (0,):
            if time.monotonic() - started > args.budget_s:
                result["cut_short"].append(f"ring {seq} {n} {rank}")
                continue
            try:
                result["ring"].append(ring_case(seq, n, rank, args.iters, device))
                print(json.dumps(result["ring"][-1]), flush=True)
            except RuntimeError as error:
                result["failures"][f"ring {seq} {n} {rank}"] = str(error)[:300]
            if device.type == "cuda":
                torch.cuda.empty_cache()
            save()
    shapes = [(s, s, c) for s in squares for c in (True, False)]
    top = squares[-1]
    shapes += [(top, top // 2, False), (top // 2, top, False)]
    for backend in ("flash", "cudnn") if device.type == "cuda" else ("flash",):
        for lq, lkv, causal in shapes:
            if time.monotonic() - started > args.budget_s:
                result["cut_short"].append(f"call {backend} {lq} {lkv} {causal}")
                continue
            try:
                result["calls"].append(call_case(backend, lq, lkv, causal, args.iters, device))
                print(json.dumps(result["calls"][-1]), flush=True)
            except RuntimeError as error:
                result["failures"][f"call {backend} {lq} {lkv} {causal}"] = str(error)[:300]
        save()
    save()
    print(f"wrote {args.out}: {len(result['ring'])} ring cases, {len(result['calls'])} calls, "
          f"{len(result['failures'])} failures, {result['seconds']} s", flush=True)
    return 0 if result["ring"] and result["ring_check_relative_error"] < 0.02 else 1


if __name__ == "__main__":
    sys.exit(main())
