"""The size curve's ceiling per device: its best measured matmul's share of the peak.

The figures are stas00/ml-engineering's "Maximum Achievable Matmul FLOPS comparison table"
(compute/accelerator/README.md): MAMF TFLOP/s over the table's "Theory" column, typed in
here from the table, not read from perfkit.
"""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit.calc.gemm_ceiling import GEMM_EFFICIENCY_DEFAULT, ceiling_source, size_curve_e_max
from perfkit.calc.rates import Rates
from perfkit.calc.timing import layer_costs
from perfkit.calc.timing_kernels import gemm_seconds
from perfkit.errors import PerfkitError

#: (hardware name, dtype, MAMF TFLOP/s, the table's peak)
PUBLISHED = [
    ("a100", "bf16", 271.2, 312),          # NVIDIA A100 SXM
    ("a100-40gb", "fp16", 271.2, 312),     # the same chip, FP16 on the same tensor cores
    ("a800", "bf16", 271.2, 312),
    ("a100-pcie-40gb", "bf16", 252.9, 312),  # NVIDIA A100 PCIe (a custom part's name)
    ("h100", "bf16", 794.5, 989),
    ("h800", "bf16", 794.5, 989),
    ("h100", "fp8", 1402.6, 1979),
    ("h200", "bf16", 794.5, 989),          # "H200 is the same"
    ("h200", "fp8", 1453.4, 1979),
    ("gh200-144gb", "bf16", 828.6, 989),
    ("b200", "bf16", 1745.0, 2250),
    ("b200", "fp8", 3432.5, 4500),
    ("mi300x", "bf16", 668.4, 1300),
    ("mi325x", "bf16", 784.9, 1300),
]


@pytest.mark.parametrize("name,dtype,mamf,theory", PUBLISHED,
                         ids=[f"{n}-{d}" for n, d, _, _ in PUBLISHED])
def test_a_published_device_tops_out_at_its_best_measured_matmul(name, dtype, mamf, theory):
    assert size_curve_e_max(name, dtype) == pytest.approx(mamf / theory, abs=5e-4)
    assert f"{mamf:g} of {theory:g} TFLOP/s" in ceiling_source(name, dtype)


@pytest.mark.parametrize("name,dtype", [
    ("h100-pcie", "bf16"), ("h20", "bf16"), ("l40s", "bf16"), ("mi250x", "bf16"),
    ("v100", "fp16"), ("ascend-910b", "bf16"), ("a100", "fp32"), ("a100", "tf32"),
    ("mi300x", "fp8"), ("my-own-accelerator", None), (None, None)])
def test_a_device_without_a_published_figure_keeps_calculons_ceiling(name, dtype):
    """No row for the part (or its type: the table measures BF16 and FP8 inputs, and has
    no MI300X FP8 figure): the top of Calculon's A100 table, 0.95."""
    assert size_curve_e_max(name, dtype) == GEMM_EFFICIENCY_DEFAULT == 0.95
    assert "Calculon" in ceiling_source(name, dtype)


def test_rates_take_the_devices_ceiling_only_where_none_is_set():
    assert Rates().gemm_efficiency is None
    assert Rates().resolved("a100").gemm_efficiency == pytest.approx(271.2 / 312, abs=5e-4)
    assert Rates().resolved("h100", "fp8").gemm_efficiency == pytest.approx(1402.6 / 1979,
                                                                             abs=5e-4)
    own = Rates(gemm_efficiency=0.7)
    assert own.resolved("a100") is own  # a calibration's or a user's value stays
    with pytest.raises(PerfkitError, match="resolved"):
        Rates().scaled(0.9)  # a factor over an unknown device's default means nothing
    assert Rates().resolved("a100").scaled(0.5).gemm_efficiency == pytest.approx(
        0.5 * 271.2 / 312, abs=5e-4)


def test_the_best_shape_prices_at_the_published_rate_and_no_faster():
    """The A100 SXM's best shape, 1024 x 10240 x 5120, on the size curve with its bytes
    left out: ``F / ((F + F½)/(e·peak))`` with ``e = 271.2/312`` and ``F½ = 0.58 GFLOP``,
    i.e. 0.5 % under the 271.2 TFLOP/s measured, never above it."""
    a100 = pk.Hardware.preset("a100")
    flops = 2.0 * 1024 * 10240 * 5120
    seconds = gemm_seconds(flops, 0.0, a100.peak("bf16"), a100.memory_bandwidth,
                           Rates().resolved("a100"))
    expected = (flops + 0.58e9) / (round(271.2 / 312, 3) * 312e12)
    assert seconds == pytest.approx(expected, rel=1e-12)
    assert flops / seconds / 1e12 == pytest.approx(271.2, rel=0.01)
    assert flops / seconds / 1e12 < 271.2


def test_an_a100_layer_prices_its_gemms_at_the_ceiling_out_of_the_box():
    """Default rates on an A100 price as the rates with ``gemm_efficiency=0.869`` set, and
    the layer's GEMMs take 0.95/0.869 of what the former 0.95 gave (memory so fast that
    only the GEMMs take time; unfused attention's batched GEMMs included)."""
    model = pk.ModelSpec.preset("llama2-7b")
    fast = pk.Hardware.preset("a100").replace(memory_bandwidth=1e30)
    kw = {"tp": 1, "activation_model": pk.ActivationModel(), "dtype": "bf16"}
    out_of_box = layer_costs(model, fast, Rates(), **kw)
    at_ceiling = layer_costs(model, fast, Rates(gemm_efficiency=0.869), **kw)
    former = layer_costs(model, fast, Rates(gemm_efficiency=0.95), **kw)
    assert out_of_box == at_ceiling
    # each call (F + F½)/(e·peak): the whole layer scales by 0.95/0.869, bytes aside
    assert out_of_box.fwd == pytest.approx(former.fwd * 0.95 / 0.869, rel=1e-6)
