"""A context-parallel rank's attention, as perfkit prices it, against one measured on an
H100 (tests/data/kernel_rates_h100/ring_attention.json.gz: ``tools/measure_ring_attention.py``
emulating PyTorch's load-balanced ring for Llama 3.1 8B's attention, 32k tokens per rank,
cp 1-8; PROVENANCE.md there).

FLOPs are counted here by hand as the FlashAttention papers count them: ``4·L_q·L_kv·h·d``
forward, halved with the causal mask, the backward 2.5 times the forward; a rank of a
causal ring of ``S`` tokens over ``cp`` ranks does ``1/cp`` of the whole sequence's causal
work. Kernel times are the file's device times by kind (flash forward, flash backward, the
rest), read by the profiler, not the host's.
"""

from __future__ import annotations

import gzip
import json

import pytest

from perfkit.calc import timing_kernels
from perfkit.calc.attention_rate import attention_efficiency, call_lengths, ring_bookkeeping
from perfkit.specs import ModelSpec
from tests.kernel_rates import DATA, runs

PEAK = 989.5e12  # H100 SXM dense BF16, the curves' reference


def _file() -> dict:
    return json.loads(gzip.open(DATA / "ring_attention.json.gz").read())


def _add_bandwidth() -> float:
    """The same H100 model's element-wise add at 1 GiB (run1's ``memory`` rows): bytes
    moved (two read, one written) per second."""
    row = next(r for r in runs()[0]["memory"] if r["kind"] == "add" and r["bytes"] == 2 ** 30)
    return 3.0 * row["bytes"] / (row["ms"] * 1e-3)


def test_the_file_is_an_h100_run_whose_ring_computes_attention():
    data = _file()
    assert data["environment"]["gpu"] == "NVIDIA H100 80GB HBM3"
    assert data["failures"] == {} and data["cut_short"] == []
    # the emulated ring's output and gradients equal plain causal attention's
    assert data["ring_check_relative_error"] < 0.01
    assert sorted({(r["seq"], r["cp"]) for r in data["ring"]}) == [
        (32768, 1), (65536, 2), (131072, 4), (262144, 8)]


@pytest.mark.parametrize("pass_", ["fwd", "bwd"])
def test_flash_calls_up_to_32k_run_at_the_published_curve(pass_):
    """FlashAttention-2's curve, read from the FlashAttention-3 paper's bars up to 16k,
    holds on calls of 4k-32k tokens and on the ring's unequal calls (32k by 16k)."""
    checked = 0
    for c in _file()["calls"]:
        if c["backend"] != "flash":
            continue
        flops = 4.0 * c["seq_q"] * c["seq_kv"] * 32 * 128 * (0.5 if c["causal"] else 1.0)
        assert c["fwd_flops"] == flops
        fwd_ms = c["fwd_kernels"]["flash_fwd_ms"]
        ms = fwd_ms if pass_ == "fwd" else c["fwd_bwd_kernels"]["flash_bwd_ms"]
        work = flops if pass_ == "fwd" else 2.5 * flops
        measured = work / (ms * 1e-3) / PEAK
        priced = attention_efficiency(c["seq_q"], c["seq_kv"], 128, c["causal"],
                                      pass_ == "bwd", "flash2", "h100", pairs=32)
        assert priced / measured == pytest.approx(1.0, abs=0.12), c
        checked += 1
    assert checked == 10


def test_a_ring_rank_attention_is_priced_within_fifteen_percent():
    """Per rank: the ring's calls (perfkit's ``call_lengths``) at the curve's efficiency
    against the rank's measured flash kernels, forward and backward. The model is up to
    13 % fast (the measured kernels sit under the curve at 32k; one profiled pass per
    rank, so one rank's pass can be a few per cent off its twin), never over 3 % slow."""
    for r in _file()["ring"]:
        s, cp = r["seq"], r["cp"]
        rank_flops = 4.0 * s * s * 32 * 128 / 2.0 / cp
        assert r["fwd_flops"] == rank_flops
        fwd = bwd = 0.0
        for share, lq, lkv, causal in call_lengths(s, cp, True):
            fwd += share * rank_flops / (PEAK * attention_efficiency(
                lq, lkv, 128, causal, False, "flash2", "h100", pairs=32))
            bwd += share * 2.5 * rank_flops / (PEAK * attention_efficiency(
                lq, lkv, 128, causal, True, "flash2", "h100", pairs=32))
        measured_fwd = r["fwd_kernels"]["flash_fwd_ms"] * 1e-3
        measured_bwd = r["fwd_bwd_kernels"]["flash_bwd_ms"] * 1e-3
        assert 0.85 < fwd / measured_fwd < 1.03, r
        assert 0.85 < bwd / measured_bwd < 1.03, r


def _last_ranks() -> list[dict]:
    return [r for r in _file()["ring"] if r["cp"] > 1 and r["rank"] == r["cp"] - 1]


def test_the_ring_merges_move_the_bytes_perfkit_counts():
    """The ring's float32 merges (the forward's kernels that are not flash), on the rank
    perfkit counts (the last), at 0.75-1.0 of the device's measured element-wise add
    bandwidth: the count neither misses much nor counts bytes the device did not move."""
    bandwidth = _add_bandwidth()
    assert 2.9e12 < bandwidth < 3.2e12
    for r in _last_ranks():
        elements = r["local_tokens"] * 32 * 128
        forward, _ = ring_bookkeeping(elements, elements, r["cp"])
        nbytes = sum(b * k for b, k in forward)
        assert nbytes == (2 * 6 + (r["cp"] - 1) * 38) * elements
        implied = nbytes / (r["fwd_kernels"]["other_ms"] * 1e-3)
        assert 0.75 < implied / bandwidth <= 1.0, r


def test_the_ring_backward_counts_no_more_than_it_moved():
    """The backward's accumulations, strided half blocks added into float32, run slower
    than a plain add: the counted bytes take 35-70 % of the add bandwidth over the measured
    time (the emulation also zeroes its accumulators, which the count leaves out)."""
    bandwidth = _add_bandwidth()
    for r in _last_ranks():
        elements = r["local_tokens"] * 32 * 128
        _, backward = ring_bookkeeping(elements, elements, r["cp"])
        nbytes = sum(b * k for b, k in backward)
        assert nbytes == (12 + 10 * (r["cp"] - 1)) * elements \
            + (24 + 10 * (r["cp"] - 1)) * elements
        ms = r["fwd_bwd_kernels"]["other_ms"] - r["fwd_kernels"]["other_ms"]
        assert 0.35 < nbytes / (ms * 1e-3) / bandwidth < 0.7, r


def test_the_step_model_prices_the_bookkeeping_only_under_context_parallelism():
    model = ModelSpec.preset("llama3-8b")
    per_cp = {}
    for cp in (1, 4):
        fwd, bwd = timing_kernels._layer_ops(model, 1, 1, False, cp, 1, 1, True, False, 2.0,
                                             False)
        core_vec = [o for o in fwd + bwd if o.kind == "vec" and o.tag == "core"]
        per_cp[cp] = sum(o.nbytes * o.calls for o in core_vec)
    q = model.seq_length / 4 * model.num_attention_heads * 128
    kv = model.seq_length / 4 * model.num_kv_heads * 128
    assert per_cp[1] == 0.0
    assert per_cp[4] == pytest.approx((12 + 3 * 38) * q + (12 + 3 * 10) * q
                                      + (24 + 3 * 10) * kv)
