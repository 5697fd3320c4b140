"""Measure what one GPU's kernels achieve by kind and shape: the step model's default rates.

The step model (:mod:`perfkit.calc.gemm_rate`, :mod:`perfkit.calc.attention_rate`,
:mod:`perfkit.calc.rates`) prices each kernel by its kind and shape. This script measures
those rates on the GPU it runs on, so that the defaults rest on measurements with a
provenance rather than on one paper's bars:

``gemm``
    ``torch.nn.functional.linear(x, w)`` (the forward of a linear layer: ``x`` (M, K),
    ``w`` (N, K), cuBLAS's ``NT`` product) in bf16 over a grid of M (tokens) and N, K
    (the widths of Llama-style layers and their tensor-parallel shares), each timed by
    replaying a CUDA graph of ``--reps`` calls, so the time is the GPU's, not the host's
    launches: ``ms`` is the median per call over ``--repeats`` replays.
``gemm_layouts``
    the three products of one linear layer's training step at transformer shapes:
    forward ``x·wᵀ`` (NT), input gradient ``dy·w`` (NN), weight gradient ``dyᵀ·x`` (TN).
``gemm_fp8``
    ``torch._scaled_mm`` on float8 e4m3 operands with unit scales, bf16 output, on a
    subset of the grid (skipped where the GPU or the build has no FP8 product).
``attention``
    ``torch.nn.functional.scaled_dot_product_attention`` in bf16 by backend (FlashAttention,
    cuDNN), sequence length, head dimension, batch × heads and causality; forward alone and
    forward + backward (``torch.autograd.grad``), timed eagerly with CUDA events
    (attention kernels are long enough that launches hide under them).
``memory``
    a copy and an element-wise add over 64 KiB to 1 GiB: bytes moved per second.
``gemm_duty`` (``--only-duty``)
    the ``gemm_layouts`` products alone and alternating with a memory-bound add, as in a
    training step, where the GPU does not sit at its power limit (:func:`gemm_duty`).
``launch``
    the cost of launching a tiny kernel from Python (eager) against replaying it from a
    graph: the per-kernel host cost a profile's gaps show when the host is the bottleneck.

FLOPs: a GEMM does ``2·M·N·K``; attention's forward ``4·b·h·s²·d`` (halved when causal),
its backward 2.5 times the forward (FlashAttention-2's convention, Dao 2023 §4.1).

Run on a machine with a CUDA GPU and PyTorch (perfkit does not depend on torch)::

    python tools/measure_kernel_rates.py --out perfkit/specs/data/kernel_rates_h100.json

``--budget-s`` bounds the whole run: each section stops at its share of the budget and the
file says which sections were cut short. ``--smoke`` runs a few tiny shapes on the CPU to
check the script without a GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

TOKENS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
WIDTHS = (256, 512, 1024, 1536, 2048, 2752, 4096, 5504, 8192, 11008, 14336, 16384)
#: Llama-style (hidden, ffn) pairs and their tensor-parallel shares, for the layouts.
LAYERS = ((4096, 11008), (4096, 14336), (8192, 28672), (2048, 5504))
TP = (1, 2, 4, 8)
SEQS = (512, 1024, 2048, 4096, 8192, 16384)
HEAD_DIMS = (64, 128)
BATCH_HEADS = ((1, 8), (1, 32), (2, 32), (8, 32))
MAX_ATTENTION_TOKENS = 65536
MEMORY_BYTES = tuple(2 ** k for k in range(16, 31, 1))


class Clock:
    """The run's deadline, shared out among sections."""

    def __init__(self, budget_s: float) -> None:
        self.start = time.monotonic()
        self.budget_s = budget_s

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.start)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_graph(fn: Callable[[], object], device: torch.device, reps: int,
               repeats: int) -> tuple[float, float]:
    """Median and minimum milliseconds per call of ``fn``, replayed from a CUDA graph."""
    if device.type != "cuda":
        return time_eager(fn, device, reps, repeats)
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    _sync(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    graph.replay()
    _sync(device)
    per_call = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / reps)
    del graph
    return statistics.median(per_call), min(per_call)


def time_eager(fn: Callable[[], object], device: torch.device, reps: int,
               repeats: int) -> tuple[float, float]:
    """Median and minimum milliseconds per call of ``fn`` launched ``reps`` times a round."""
    for _ in range(2):
        fn()
    _sync(device)
    per_call = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = (torch.cuda.Event(enable_timing=True),
                          torch.cuda.Event(enable_timing=True))
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            per_call.append(start.elapsed_time(end) / reps)
        else:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            per_call.append((time.perf_counter() - t0) * 1e3 / reps)
    return statistics.median(per_call), min(per_call)


def reps_for(flops: float, peak: float) -> int:
    """Calls per timing round: about 2 ms of work a round, 3 to 200 calls."""
    return int(min(200, max(3, 2e-3 / max(flops / peak, 1e-7))))


def gemm_grid(device: torch.device, dtype: torch.dtype, clock: Clock, until: float,
              tokens: tuple[int, ...], widths: tuple[int, ...], repeats: int,
              peak: float) -> tuple[list[dict], bool]:
    rows: list[dict] = []
    for m in tokens:
        for n in widths:
            for k in widths:
                if clock.left() < until:
                    return rows, True
                x = torch.randn(m, k, device=device, dtype=dtype)
                w = torch.randn(n, k, device=device, dtype=dtype)
                out = torch.empty(m, n, device=device, dtype=dtype)
                flops = 2.0 * m * n * k
                ms, best = time_graph(
                    lambda x=x, w=w, out=out: torch.matmul(x, w.t(), out=out), device,
                    reps_for(flops, peak), repeats)
                rows.append({"m": m, "n": n, "k": k, "ms": round(ms, 6),
                             "min_ms": round(best, 6),
                             "tflops": round(flops / ms / 1e9, 2)})
    return rows, False


def gemm_layouts(device: torch.device, dtype: torch.dtype, clock: Clock, until: float,
                 repeats: int, peak: float, layers: tuple[tuple[int, int], ...],
                 tokens: tuple[int, ...]) -> tuple[list[dict], bool]:
    rows: list[dict] = []
    for hidden, ffn in layers:
        for tp in TP:
            for m in tokens:
                # (N, K) of the layer's linear products on one tp rank: fused qkv (as
                # 3·hidden, grouped query attention left aside), attention output, gate+up
                # (fused 2·ffn), down.
                for name, n, k in (("qkv", 3 * hidden // tp, hidden),
                                   ("attn_out", hidden, hidden // tp),
                                   ("gate_up", 2 * ffn // tp, hidden),
                                   ("down", hidden, ffn // tp)):
                    if clock.left() < until:
                        return rows, True
                    x = torch.randn(m, k, device=device, dtype=dtype)
                    w = torch.randn(n, k, device=device, dtype=dtype)
                    dy = torch.randn(m, n, device=device, dtype=dtype)
                    flops = 2.0 * m * n * k
                    reps = reps_for(flops, peak)
                    for layout, fn in (("fwd_nt", lambda x=x, w=w: x @ w.t()),
                                       ("dgrad_nn", lambda dy=dy, w=w: dy @ w),
                                       ("wgrad_tn", lambda dy=dy, x=x: dy.t() @ x)):
                        ms, best = time_graph(fn, device, reps, repeats)
                        rows.append({"hidden": hidden, "ffn": ffn, "tp": tp, "gemm": name,
                                     "layout": layout, "m": m, "n": n, "k": k,
                                     "ms": round(ms, 6), "min_ms": round(best, 6),
                                     "tflops": round(flops / ms / 1e9, 2)})
    return rows, False


def gemm_fp8(device: torch.device, clock: Clock, until: float, repeats: int,
             peak: float) -> tuple[list[dict], bool, str]:
    if device.type != "cuda" or not hasattr(torch, "float8_e4m3fn"):
        return [], False, "no CUDA device or no float8 dtype"
    rows: list[dict] = []
    one = torch.ones((), device=device, dtype=torch.float32)
    for m in (1024, 4096, 16384):
        for n in (1024, 4096, 8192, 14336):
            for k in (1024, 4096, 8192, 14336):
                if clock.left() < until:
                    return rows, True, ""
                x = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
                w = torch.randn(n, k, device=device).to(torch.float8_e4m3fn)
                try:
                    def fn(x: torch.Tensor = x, w: torch.Tensor = w) -> torch.Tensor:
                        return torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one,
                                                out_dtype=torch.bfloat16)

                    fn()
                    flops = 2.0 * m * n * k
                    ms, best = time_graph(fn, device, reps_for(flops, 2 * peak), repeats)
                except (RuntimeError, TypeError) as error:
                    return rows, False, f"torch._scaled_mm failed: {error}"[:300]
                rows.append({"m": m, "n": n, "k": k, "ms": round(ms, 6),
                             "min_ms": round(best, 6), "tflops": round(flops / ms / 1e9, 2)})
    return rows, False, ""


def attention_calls(sdpa_kernel: Callable, backend: object, q: torch.Tensor,
                    k: torch.Tensor, v: torch.Tensor, grad: torch.Tensor,
                    causal: bool) -> tuple[Callable[[], object], Callable[[], object]]:
    """The forward of one attention call on ``backend``, and its forward and backward."""

    def forward() -> torch.Tensor:
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def both() -> object:
        return torch.autograd.grad(forward(), (q, k, v), grad)

    return forward, both


def attention(device: torch.device, dtype: torch.dtype, clock: Clock, until: float,
              repeats: int, seqs: tuple[int, ...]) -> tuple[list[dict], bool, dict]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = {"flash": SDPBackend.FLASH_ATTENTION,
                "cudnn": SDPBackend.CUDNN_ATTENTION} if device.type == "cuda" else {
                    "math": SDPBackend.MATH}
    failures: dict[str, str] = {}
    rows: list[dict] = []
    for name, backend in backends.items():
        for d in HEAD_DIMS:
            for s in seqs:
                for b, h in BATCH_HEADS:
                    if b * s > MAX_ATTENTION_TOKENS:
                        continue
                    for causal in (True, False):
                        if clock.left() < until:
                            return rows, True, failures
                        q, k, v = (torch.randn(b, h, s, d, device=device, dtype=dtype,
                                               requires_grad=True) for _ in range(3))
                        grad = torch.randn(b, h, s, d, device=device, dtype=dtype)
                        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)

                        forward, both = attention_calls(sdpa_kernel, backend, q, k, v,
                                                        grad, causal)

                        try:
                            reps = max(3, min(50, int(2e-3 / max(flops / 5e14, 1e-6))))
                            fwd, fwd_min = time_eager(forward, device, reps, repeats)
                            tot, tot_min = time_eager(both, device, max(2, reps // 3),
                                                      repeats)
                        except RuntimeError as error:
                            failures[name] = str(error)[:300]
                            break
                        bwd = max(tot - fwd, 1e-9)
                        rows.append({"backend": name, "head_dim": d, "seq": s, "batch": b,
                                     "heads": h, "causal": causal,
                                     "fwd_ms": round(fwd, 6), "fwd_min_ms": round(fwd_min, 6),
                                     "fwd_bwd_ms": round(tot, 6),
                                     "fwd_bwd_min_ms": round(tot_min, 6),
                                     "fwd_tflops": round(flops / fwd / 1e9, 2),
                                     "bwd_tflops": round(2.5 * flops / bwd / 1e9, 2)})
                    if name in failures:
                        break
                if name in failures:
                    break
            if name in failures:
                break
    return rows, False, failures


def gemm_duty(device: torch.device, dtype: torch.dtype, clock: Clock, until: float,
              repeats: int, peak: float, layers: tuple[tuple[int, int], ...],
              tokens: tuple[int, ...]) -> tuple[list[dict], bool]:
    """The layout products inside a training-like stream, beside their back-to-back time.

    Back to back, a long run of large products holds the GPU at its power limit (the SM
    clock drops); in training they alternate with memory-bound kernels, which draw less.
    Per product: ``alone_ms`` (a graph of the product only), ``add_ms`` (an element-wise
    add sized to last about half the product) and ``mixed_ms`` (a graph alternating the
    two); ``in_mix_ms = mixed_ms - add_ms`` is the product's time in the stream.
    """
    rows: list[dict] = []
    big = 256 * 2 ** 20  # elements of the add's largest buffers (512 MiB each in bf16)
    pool = [torch.randn(big, device=device, dtype=dtype) for _ in range(3)]
    for hidden, ffn in layers:
        for tp in TP:
            for m in tokens:
                for name, n, k in (("qkv", 3 * hidden // tp, hidden),
                                   ("attn_out", hidden, hidden // tp),
                                   ("gate_up", 2 * ffn // tp, hidden),
                                   ("down", hidden, ffn // tp)):
                    if clock.left() < until:
                        return rows, True
                    x = torch.randn(m, k, device=device, dtype=dtype)
                    w = torch.randn(n, k, device=device, dtype=dtype)
                    dy = torch.randn(m, n, device=device, dtype=dtype)
                    flops = 2.0 * m * n * k
                    reps = reps_for(flops, peak)
                    for layout, fn in (("fwd_nt", lambda x=x, w=w: x @ w.t()),
                                       ("dgrad_nn", lambda dy=dy, w=w: dy @ w),
                                       ("wgrad_tn", lambda dy=dy, x=x: dy.t() @ x)):
                        alone, _ = time_graph(fn, device, reps, repeats)
                        # an add moving 6 bytes per element at about 3 TB/s lasts half as long
                        elements = int(min(big, max(2 ** 19, alone * 1e-3 / 2 * 3e12 / 6)))
                        a, b, c = (t[:elements] for t in pool)
                        add, _ = time_graph(lambda a=a, b=b, c=c: torch.add(a, b, out=c),
                                            device, reps, repeats)
                        mixed, _ = time_graph(lambda fn=fn, a=a, b=b, c=c: (
                            fn(), torch.add(a, b, out=c)), device, reps, repeats)
                        rows.append({"hidden": hidden, "ffn": ffn, "tp": tp, "gemm": name,
                                     "layout": layout, "m": m, "n": n, "k": k,
                                     "alone_ms": round(alone, 6), "add_ms": round(add, 6),
                                     "mixed_ms": round(mixed, 6),
                                     "in_mix_ms": round(mixed - add, 6),
                                     "add_elements": elements})
    return rows, False


def memory(device: torch.device, clock: Clock, until: float, repeats: int,
           sizes: tuple[int, ...]) -> tuple[list[dict], bool]:
    rows: list[dict] = []
    for size in sizes:
        if clock.left() < until:
            return rows, True
        n = size // 2
        a = torch.randn(n, device=device, dtype=torch.bfloat16)
        b = torch.randn(n, device=device, dtype=torch.bfloat16)
        c = torch.empty_like(a)
        reps = int(min(200, max(3, 2e-3 / max(size / 3e12, 1e-7))))
        for kind, fn, moved in (("copy", lambda a=a, c=c: c.copy_(a), 2 * size),
                                ("add", lambda a=a, b=b, c=c: torch.add(a, b, out=c),
                                 3 * size)):
            ms, best = time_graph(fn, device, reps, repeats)
            rows.append({"kind": kind, "bytes": size, "moved": moved, "ms": round(ms, 6),
                         "min_ms": round(best, 6), "gbs": round(moved / ms / 1e6, 1)})
    return rows, False


def launch(device: torch.device, repeats: int) -> dict:
    x = torch.zeros(16, device=device)
    eager, _ = time_eager(lambda: x.add_(1.0), device, 2000, repeats)
    graphed, _ = time_graph(lambda: x.add_(1.0), device, 2000, repeats)
    return {"kernel": "add_ on 16 floats", "eager_us": round(eager * 1e3, 3),
            "graph_us": round(graphed * 1e3, 3)}


def environment(device: torch.device) -> dict:
    env = {"torch": torch.__version__, "python": platform.python_version(),
           "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update({"gpu": props.name, "sms": props.multi_processor_count,
                    "memory_bytes": props.total_memory, "cuda": torch.version.cuda,
                    "cudnn": torch.backends.cudnn.version(),
                    "cublas_tf32": torch.backends.cuda.matmul.allow_tf32})
        try:
            env["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem,"
                 "power.limit,clocks.sm,temperature.gpu", "--format=csv"],
                capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError) as error:
            env["nvidia_smi"] = f"not read: {error}"
    else:
        env["gpu"] = f"none (CPU: {platform.processor() or platform.machine()})"
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget-s", type=float, default=300.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true",
                        help="a few tiny shapes on whatever device there is")
    parser.add_argument("--only-duty", action="store_true",
                        help="only the gemm_duty section (products in a training-like stream)")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16
    torch.manual_seed(0)
    clock = Clock(args.budget_s)
    peak = 9.89e14 if device.type == "cuda" else 1e11  # only sizes the timing rounds
    tokens, widths, seqs, sizes = TOKENS, WIDTHS, SEQS, MEMORY_BYTES
    if args.smoke:
        tokens, widths, seqs, sizes = (64, 128), (64, 96), (128,), (2 ** 16, 2 ** 18)
    result: dict = {"environment": environment(device),
                    "script": "tools/measure_kernel_rates.py", "cut_short": []}
    print(json.dumps(result["environment"]), flush=True)
    # Shares of the budget still to be left when each section starts its next shape.
    b = args.budget_s
    result["launch"] = launch(device, args.repeats)
    def keep(section: str, rows: list[dict], cut: bool) -> None:
        """Record a section and write the file so far: a crash later loses nothing."""
        result[section] = rows
        if cut:
            result["cut_short"].append(section)
        result["environment"]["seconds"] = round(time.monotonic() - clock.start, 1)
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=0, separators=(",", ":"))
            handle.write("\n")

    if args.only_duty:
        layers, layout_tokens = ((LAYERS, (2048, 8192, 32768)) if not args.smoke
                                 else (((64, 128),), (64,)))
        keep("gemm_duty", *gemm_duty(device, dtype, clock, 0.05 * b, args.repeats, peak,
                                     layers, layout_tokens))
        if device.type == "cuda":
            result["environment"]["nvidia_smi_after"] = environment(device)["nvidia_smi"]
        keep("gemm_duty", result["gemm_duty"], "gemm_duty" in result["cut_short"])
        print(f"gemm_duty: {len(result['gemm_duty'])} rows, {clock.left():.0f} s left",
              flush=True)
        return 0
    keep("gemm", *gemm_grid(device, dtype, clock, 0.55 * b, tokens, widths, args.repeats,
                            peak))
    print(f"gemm: {len(result['gemm'])} shapes, {clock.left():.0f} s left", flush=True)
    layers, layout_tokens = ((LAYERS, (2048, 8192, 32768)) if not args.smoke
                             else (((64, 128),), (64,)))
    keep("gemm_layouts", *gemm_layouts(device, dtype, clock, 0.45 * b, args.repeats, peak,
                                       layers, layout_tokens))
    print(f"gemm_layouts: {len(result['gemm_layouts'])} rows, {clock.left():.0f} s left",
          flush=True)
    rows, cut, failures = attention(device, dtype, clock, 0.2 * b, args.repeats, seqs)
    result["attention_failures"] = failures
    keep("attention", rows, cut)
    print(f"attention: {len(rows)} rows, failures {failures}, {clock.left():.0f} s left",
          flush=True)
    keep("memory", *memory(device, clock, 0.12 * b, args.repeats, sizes))
    rows, cut, why = gemm_fp8(device, clock, 0.03 * b, args.repeats, peak)
    result["gemm_fp8_note"] = why
    keep("gemm_fp8", rows, cut)
    print(f"fp8: {len(rows)} shapes {why}, {clock.left():.0f} s left", flush=True)
    if device.type == "cuda":
        result["environment"]["nvidia_smi_after"] = environment(device)["nvidia_smi"]
    keep("gemm_fp8", result["gemm_fp8"], "gemm_fp8" in result["cut_short"])
    best = max((r["tflops"] for r in result["gemm"]), default=math.nan)
    print(f"wrote {args.out}: best bf16 GEMM {best} TFLOP/s, "
          f"{result['environment']['seconds']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
