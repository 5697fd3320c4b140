"""Throughput, linearity and pipeline bubble."""

import numpy as np
import pytest

import perfkit as pk


def test_tokens_per_second_definitions():
    # 16 devices, dp=8, global batch 128 sequences of 4096 tokens, 10 s per step.
    gbs, s, t = 128, 4096, 10.0
    assert pk.samples_per_second(gbs, t) == 12.8
    assert pk.tokens_per_second(gbs, s, t) == gbs * s / t
    assert pk.tokens_per_second_per_device(gbs, s, t, 16) == gbs * s / t / 16
    # The seed's tokens/s/p divides by the data-parallel size only: twice as large here.
    assert pk.tokens_per_second_per_p(gbs, s, t, p=8) == 2 * pk.tokens_per_second_per_device(
        gbs, s, t, 16)
    assert pk.step_time_from_tokens_per_second(gbs, s, gbs * s / t / 16, 16) == \
        pytest.approx(t)


def test_linearity():
    # PaLM: two pods (2x chips) gave 1.95x throughput -> 0.975
    assert pk.linearity(1.95, 1.0, 2, 1) == pytest.approx(0.975)
    # Seed definition: cluster throughput / (single-device throughput x devices)
    assert pk.linearity(7000.0, 1000.0, 8) == pytest.approx(7000 / (1000 * 8))
    # MT-NLG per-GPU 126 -> 113 TFLOP/s from 2240 to 3360 GPUs: 0.897
    assert pk.linearity(113, 126, 3360, 2240, throughput="per_device") == \
        pytest.approx(113 / 126)


@pytest.mark.parametrize("p,v,m,expected", [
    (16, 1, 16, 0.9375), (4, 1, 16, 0.1875), (4, 2, 8, 0.1875), (8, 3, 16, 0.1458),
    (15, 2, 16, 0.4375),
])
def test_bubble_fraction_sapp_ideal_values(p, v, m, expected):
    assert pk.bubble_fraction(p, m, v) == pytest.approx(expected, abs=5e-5)


def test_bubble_idle_share_relation():
    p, m, v = 4, 8, 2
    f = (p - 1) / (v * m)
    iteration = v * m + p - 1  # chunk-times in one iteration
    assert pk.bubble_idle_share(p, m, v) == pytest.approx((p - 1) / iteration)
    assert pk.bubble_idle_share(p, m, v) == pytest.approx(f / (1 + f))
    assert pk.bubble_fraction(1, 5) == 0.0


def test_in_flight_rules():
    got = pk.in_flight_micro_batches(4, 16, vpp=1)
    assert got.tolist() == [[4, 3, 2, 1]]
    inter = pk.in_flight_micro_batches(4, 16, vpp=3)
    s = np.arange(4)
    assert inter[0].tolist() == (4 + np.maximum(0, 4 - 2 * s - 1)).tolist()
    assert inter[1].tolist() == [4, 4, 4, 4]
    assert inter[2].tolist() == (4 + np.minimum(0, 4 - 2 * s - 1)).tolist()
    assert pk.in_flight_micro_batches(4, 2, vpp=1).tolist() == [[2, 2, 2, 1]]
    less = pk.in_flight_micro_batches(4, 16, vpp=2, less_memory=True)
    assert less.tolist() == [[4, 4, 4, 4], [4, 3, 2, 1]]
    # Stage 0 average over chunks = Megatron's p(1 + (p-1)/(pv)) when m >= 2p - 1
    p, v = 8, 3
    assert pk.in_flight_micro_batches(p, 2 * p, v)[:, 0].sum() / v == \
        pytest.approx(p * pk.interleave_memory_penalty(p, v))


@pytest.mark.parametrize("call,param", [
    (lambda: pk.bubble_fraction(0, 4), "pp"),
    (lambda: pk.bubble_fraction(4, 0), "num_micro_batches"),
    (lambda: pk.bubble_fraction(1, 4, vpp=2), "vpp"),
    (lambda: pk.bubble_fraction(2.5, 4), "pp"),
    (lambda: pk.tokens_per_second_per_device(128, 4096, 0, 8), "step_time_s"),
    (lambda: pk.tokens_per_second_per_device(128, 4096, 1, -8), "num_devices"),
    (lambda: pk.linearity(1, 1, 0), "n_devices"),
    (lambda: pk.linearity(1, 1, 2, throughput="mean"), "throughput"),
    (lambda: pk.samples_per_second(float("nan"), 1), "global_batch_size"),
])
def test_bad_input(call, param):
    with pytest.raises(pk.InvalidArgumentError) as err:
        call()
    assert err.value.parameter == param
    assert param in str(err.value)
