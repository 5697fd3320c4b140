"""Planner speed: strategy-search throughput and pipeline-balancer solve time.

Run: python benchmarks/bench_plan.py
Prints candidates evaluated per second for a few search spaces (median of 5 runs; the
default space explores context parallelism, and expert parallelism for MoE models), all
with the one step model of ``perfkit.plan.predict``: first at a what-if's round numbers
(``search(..., efficiency=0.5, comm_efficiency=0.8)``, what the lab teaches), then with
search's default, perfkit's default rates (uncalibrated: what the Planner tab ranks with
when it has no
calibration), then with a calibration (``search(..., calibration=cal)``: the same model at
the calibrated rates, with its band), and the solve time of the balancer on an 80-layer,
pp=8, vpp=2 problem.
"""

from __future__ import annotations

import statistics
import time

import perfkit as pk
from perfkit import plan

#: The what-if's round numbers (the lab's planner; the retired first-order model's defaults).
ROUND = {"efficiency": 0.5, "comm_efficiency": 0.8}


def time_search(name: str, model: pk.ModelSpec, hw: pk.Hardware, devices: int, gbs: int,
                space: plan.SearchSpace | None = None, repeat: int = 5,
                calibration: plan.Calibration | None = None,
                terms: dict[str, float] | None = None) -> None:
    times, cpu = [], []
    rows = 0
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        frame = plan.search(model, hw, devices, gbs, space=space, include_rejected=True,
                            calibration=calibration, **(terms or {}))
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        rows = len(frame)
    best, best_cpu = statistics.median(times), statistics.median(cpu)
    label = "search+cal" if calibration is not None else \
        "search 0.5" if terms else "search    "
    # CPU time too: on a shared machine the wall clock also counts other jobs' turns
    print(f"{label} {name:<44} {rows:>9,d} candidates  {best:7.3f} s  "
          f"{rows / best:>12,.0f} candidates/s ({rows / best_cpu:,.0f} per CPU second)")


def default_rate_searches(hw: pk.Hardware, wide: plan.SearchSpace,
                          widest: plan.SearchSpace) -> None:
    """The same spaces, ranked with search's default: the step model at perfkit's default
    rates."""
    time_search("llama2-13b, 16 devices, gbs 1024", pk.ModelSpec.preset("llama2-13b"),
                pk.Hardware.preset("ascend-910b"), 16, 1024)
    gpt = pk.ModelSpec.preset("gpt3-175b")
    time_search("gpt3-175b, 3072 devices, gbs 1536, wide", gpt, hw, 3072, 1536, wide)
    time_search("gpt3-175b, 6144 devices, gbs 6144, widest", gpt, hw, 6144, 6144, widest)
    time_search("mixtral-8x7b, 64 devices, gbs 512, ep and expert_tp",
                pk.ModelSpec.preset("mixtral-8x7b"), hw, 64, 512,
                plan.SearchSpace(expert_tp=(None, 1)))


def calibrated_searches(hw: pk.Hardware, wide: plan.SearchSpace,
                        widest: plan.SearchSpace) -> None:
    """The same spaces, ranked with a calibration (a measured step of one layout)."""
    npu = pk.Hardware.preset("ascend-910b")
    llama13 = pk.ModelSpec.preset("llama2-13b")
    cal = plan.calibrate(pk.load("sample:llama2-13b-baseline-dp16"))
    time_search("llama2-13b, 16 devices, gbs 1024", llama13, npu, 16, 1024, calibration=cal)
    gpt = pk.ModelSpec.preset("gpt3-175b")
    cal = plan.calibrate(18.0, gpt, pk.ParallelConfig(dp=8, tp=8, pp=8,
                                                      num_micro_batches=64), hw)
    time_search("gpt3-175b, 3072 devices, gbs 1536, wide", gpt, hw, 3072, 1536, wide,
                calibration=cal)
    time_search("gpt3-175b, 6144 devices, gbs 6144, widest", gpt, hw, 6144, 6144, widest,
                calibration=cal)
    moe = plan.SearchSpace(expert_tp=(None, 1))
    mixtral = pk.ModelSpec.preset("mixtral-8x7b")
    cal = plan.calibrate(8.0, mixtral, pk.ParallelConfig(dp=8, tp=2, ep=4,
                                                         num_micro_batches=16), hw)
    time_search("mixtral-8x7b, 64 devices, gbs 512, ep and expert_tp", mixtral, hw, 64, 512,
                moe, calibration=cal)


def main() -> None:
    hw = pk.Hardware.preset("h100")
    wide = plan.SearchSpace(vpp=(1, 2, 3, 4, 6, 8), micro_batch_size=(1, 2, 4, 8, 16),
                            full_layer_fractions=(0.125, 0.25, 0.375, 0.5, 0.625, 0.75,
                                                  0.875))
    time_search("llama2-13b, 16 devices, gbs 1024", pk.ModelSpec.preset("llama2-13b"),
                pk.Hardware.preset("ascend-910b"), 16, 1024, terms=ROUND)
    time_search("llama3-70b, 1024 devices, gbs 1024", pk.ModelSpec.preset("llama3-70b"),
                hw, 1024, 1024, terms=ROUND)
    time_search("llama3-405b, 16384 devices, gbs 2048, wide",
                pk.ModelSpec.preset("llama3-405b"), hw, 16384, 2048, wide, terms=ROUND)
    time_search("gpt3-175b, 3072 devices, gbs 1536, wide", pk.ModelSpec.preset("gpt3-175b"),
                hw, 3072, 1536, wide, terms=ROUND)
    widest = plan.SearchSpace(vpp=(1, 2, 3, 4, 6, 8, 12),
                              micro_batch_size=(1, 2, 3, 4, 6, 8, 12, 16, 24, 32),
                              full_layer_fractions=tuple(i / 16 for i in range(1, 16)),
                              max_tp=64)
    time_search("gpt3-175b, 6144 devices, gbs 6144, widest",
                pk.ModelSpec.preset("gpt3-175b"), hw, 6144, 6144, widest, terms=ROUND)
    moe = plan.SearchSpace(expert_tp=(None, 1))
    time_search("mixtral-8x7b, 64 devices, gbs 512, ep and expert_tp",
                pk.ModelSpec.preset("mixtral-8x7b"), hw, 64, 512, moe, terms=ROUND)
    time_search("deepseek-v3 (64 layers), 2048 devices, gbs 4096",
                pk.ModelSpec.preset("deepseek-v3", num_layers=64), hw, 2048, 4096, moe,
                terms=ROUND)
    default_rate_searches(hw, wide, widest)
    calibrated_searches(hw, wide, widest)

    model = pk.ModelSpec.preset("llama2-70b")
    par = pk.ParallelConfig(tp=8, pp=8, vpp=2, num_micro_batches=16, sequence_parallel=True)
    layers = plan.layers_from_model(model, par, pk.Hardware.preset("ascend-910b"))
    for limit_gb in (60, 50, 45):
        start = time.perf_counter()
        result = plan.balance_pipeline(layers, 8, 2, 16, memory_limit=limit_gb * 1e9 / 2**20)
        elapsed = time.perf_counter() - start
        rec = {k: int(v.sum()) for k, v in result.recompute.items()}
        print(f"balance llama2-70b 80 layers pp=8 vpp=2 m=16, {limit_gb} GB limit: "
              f"{elapsed:6.2f} s; recompute {rec}; time {result.pipeline_time:.0f} vs "
              f"ideal {result.ideal_time:.0f} ms")


if __name__ == "__main__":
    main()
