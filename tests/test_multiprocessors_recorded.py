"""A trace's multiprocessor count wins over the datasheet's (issue 67, point 6).

Kineto records each GPU's ``deviceProperties`` (``numSms``); the attention occupancy of the
step model (:mod:`perfkit.calc.attention_occupancy`) is priced on the multiprocessors. The
trace here is one we recorded on an H100 SXM (132 SMs, read from its raw JSON below); its
damaged copy says 114, as an H100 PCIe does. The occupancy is checked against the formula
of the module docstring, computed here: ``g(T) / g(T_published)``, ``g(T) = T / (T + κ·S)``,
``T = pairs · ⌈L / 128⌉``, ``T_published = (2048 / d) · (16384 / L) · ⌈L / 128⌉``.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.analysis.efficiency.hardware import read_device
from perfkit.calc.attention_occupancy import TILE_HALF
from perfkit.calc.attention_rate import attention_efficiency
from perfkit.errors import InvalidArgumentError

TRACE = Path(__file__).resolve().parent / "data" / "kineto_llama_wide_tp_h100" / \
    "i.pt.trace.json.gz"


def _raw(path: Path) -> dict:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


def test_the_recorded_count_equal_to_the_datasheet_keeps_the_preset() -> None:
    (props,) = _raw(TRACE)["deviceProperties"][:1]
    assert props["numSms"] == 132  # an H100 SXM5, as the whitepaper says
    reading = read_device(pk.load(TRACE, cache=False))
    assert reading.hardware == pk.Hardware.preset("h100")
    assert reading.hardware.multiprocessors is None
    assert "SMs" not in reading.why


def test_a_different_count_is_used_and_said(tmp_path: Path) -> None:
    trace = _raw(TRACE)
    for props in trace["deviceProperties"]:
        props["numSms"] = 114
    copy = tmp_path / "rank0.pt.trace.json"
    copy.write_text(json.dumps(trace))
    reading = read_device(pk.load(copy, cache=False))
    assert reading.hardware.name == "h100" and reading.hardware.multiprocessors == 114
    assert "114 SMs" in reading.why and "datasheet's 132" in reading.why
    job = pk.infer_job(pk.load(copy, cache=False))
    assert job.hardware.multiprocessors == 114
    assert TRACE.stat().st_size > 0 and _raw(TRACE)["deviceProperties"][0]["numSms"] == 132


def test_hardware_checks_the_count() -> None:
    with pytest.raises(InvalidArgumentError, match="multiprocessors"):
        pk.Hardware.preset("h100", multiprocessors=0)
    assert pk.Hardware.preset("h100").replace(multiprocessors=114).multiprocessors == 114


@pytest.mark.parametrize("sms", [114, 132, 78])
def test_occupancy_on_the_given_count(sms: int) -> None:
    length, d, pairs = 4096.0, 128.0, 16.0
    curve = attention_efficiency(length, length, d, True, False, "cudnn", "h100")
    got = attention_efficiency(length, length, d, True, False, "cudnn", "h100", pairs, sms)
    kappa = TILE_HALF[("cudnn", "fwd", True)]
    per_pair = math.ceil(length / 128)
    tiles, published = pairs * per_pair, (2048 / d) * (16384 / length) * per_pair

    def g(t: float) -> float:
        return t / (t + kappa * sms)

    assert got == pytest.approx(curve * g(tiles) / g(published), rel=1e-12)
    # None: the datasheet's count for the preset's name (132 for an H100 SXM)
    by_name = attention_efficiency(length, length, d, True, False, "cudnn", "h100", pairs)
    if sms == 132:
        assert by_name == pytest.approx(got, rel=1e-12)
    else:
        assert by_name != pytest.approx(got, rel=1e-6)


def test_the_step_model_prices_attention_on_the_given_count() -> None:
    model = pk.ModelSpec.preset("llama2-7b").replace(seq_length=4096)
    parallel = pk.ParallelConfig(tp=8, micro_batch_size=1, num_micro_batches=8)
    fused = pk.calc.ActivationModel("tensors", flash_attention=True, dropout=False)
    steps = {sms: pk.plan.predict(None, model, parallel,
                                  pk.Hardware.preset("h100", multiprocessors=sms),
                                  activation_model=fused)
             for sms in (None, 132, 66)}
    assert steps[None].step_s == pytest.approx(steps[132].step_s, rel=1e-12)
    # 4 (batch, head) pairs per call: with half the multiprocessors the call fills more of
    # the device, closer to its published rate (g's ratio rises toward 1 as S falls)
    assert steps[66].step_s < steps[132].step_s
