"""What a GPU draws, and at what clock, while it runs each kind of training kernel.

A power limit below the one a device was rated at slows a kernel only if the kernel
would have drawn more than that limit. This script runs, one after the other and each for
``--seconds``, the kernel kinds a training step is made of (FlashAttention-2's forward and
backward at 32k by 16k tokens, as a context-parallel ring calls it; a bf16 GEMM of
8192³; an FP8 ``torch._scaled_mm`` of the same size; a 1 GiB device copy), while
``nvidia-smi`` samples the board's power draw and SM clock every 100 ms. Per kind it
records the samples' median and 90th percentile and the kernel's throughput over the
same window. It changes no setting of the device.

Run on a machine with a CUDA GPU and PyTorch, from the repository's root::

    python tools/measure_power_draw.py --out power_draw.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure_kernel_rates import environment  # noqa: E402


def workloads(device: torch.device) -> dict:
    """Per kind: ``(one call, FLOPs or bytes per call, unit)``."""
    heads, d, lq, lkv = 32, 128, 32768, 16384
    q = torch.randn(1, heads, lq, d, device=device, dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(1, heads, lkv, d, device=device, dtype=torch.bfloat16,
                        requires_grad=True) for _ in range(2))
    grad = torch.randn_like(q)

    def attention() -> None:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            out = F.scaled_dot_product_attention(q, k, v)
        torch.autograd.grad(out, (q, k, v), grad)

    n = 8192
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=device)
    src = torch.empty(2 ** 30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return {
        "flash2_fwd_bwd_32k_x_16k": (attention, 3.5 * 4.0 * lq * lkv * heads * d, "flop"),
        "gemm_bf16_8192": (lambda: a @ b, 2.0 * n ** 3, "flop"),
        "gemm_fp8_8192": (lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                   out_dtype=torch.bfloat16),
                          2.0 * n ** 3, "flop"),
        "copy_1gib": (lambda: dst.copy_(src), 2.0 * 2 ** 30, "byte"),
    }


def sampled(seconds: float, call, device: torch.device) -> tuple[list[tuple], int, float]:
    """Run ``call`` for ``seconds`` while nvidia-smi samples power and clock."""
    smi = subprocess.Popen(
        ["nvidia-smi", "--query-gpu=power.draw,clocks.sm,temperature.gpu",
         "--format=csv,noheader,nounits", "-lms", "100"],
        stdout=subprocess.PIPE, text=True)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(4):
            call()
        calls += 4
        torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    smi.terminate()
    out, _ = smi.communicate(timeout=10)
    rows = []
    for line in out.splitlines():
        try:
            rows.append(tuple(float(x) for x in line.split(",")))
        except ValueError:
            continue
    return rows, calls, elapsed


def summary(values: list[float]) -> dict:
    values = sorted(values)
    return {"median": statistics.median(values),
            "p90": values[int(0.9 * (len(values) - 1))], "n": len(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    device = torch.device("cuda")
    result: dict = {"environment": environment(device), "script": "tools/measure_power_draw.py",
                    "seconds": args.seconds, "kinds": {}, "failures": {}}
    idle, _, _ = sampled(1.0, lambda: time.sleep(0.05), device)
    result["idle"] = {"power_w": summary([r[0] for r in idle])} if idle else {}
    for name, (call, work, unit) in workloads(device).items():
        try:
            for _ in range(3):
                call()
            torch.cuda.synchronize(device)
            rows, calls, elapsed = sampled(args.seconds, call, device)
            steady = rows[len(rows) // 5:]  # the first fifth: clocks still settling
            result["kinds"][name] = {
                "per_second": work * calls / elapsed, "unit": unit, "calls": calls,
                "power_w": summary([r[0] for r in steady]),
                "sm_clock_mhz": summary([r[1] for r in steady]),
                "temperature_c": summary([r[2] for r in steady])}
            print(name, json.dumps(result["kinds"][name]), flush=True)
        except (RuntimeError, subprocess.SubprocessError, IndexError) as error:
            result["failures"][name] = str(error)[:300]
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {len(result['kinds'])} kinds, {len(result['failures'])} failures")
    return 0 if len(result["kinds"]) == 4 else 1


if __name__ == "__main__":
    sys.exit(main())
