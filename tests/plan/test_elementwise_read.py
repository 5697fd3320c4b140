"""Eager PyTorch under autocast with fp32 weights (``Rates.elementwise_kernels="amp"``):
its memory-bound bytes counted by hand here, and the count ``plan.calibrate`` reads from a
profile's operators, checked against the recorded H100 Llama sets
(``tests/data/kineto_llama_*_h100``, PROVENANCE.md in each: ``torch.autocast`` bf16 around
a model kept in fp32, RMSNorm and rotary written in PyTorch).

On those sets, the default calibration (``plan.calibrate(profile)``: operator rates fitted
from the profile, no closing factor) with the count read from the profile gives each
layout's computing time within −2.7 … +5.3 % of the trace's (16 layouts, the calibrating
ones included); counted as fused library kernels, −24 … −43 %; as eager PyTorch with
16-bit weights and activations, −3 … −10 %. The traces' computing time is read here from
the raw JSON (:func:`raw_kineto.raw_computing_s`), not by perfkit.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

import pytest
from raw_kineto import raw_computing_s

import perfkit as pk
from perfkit import plan
from perfkit.calc.activation import ActivationModel
from perfkit.calc.elementwise import kernels_from_activations
from perfkit.calc.rates import Rates
from perfkit.calc.timing_layer import layer_costs
from perfkit.plan.assumed import assumptions
from perfkit.plan.calibrate.profile import ELEMENTWISE_READ
from perfkit.specs import Hardware, ModelSpec

DATA = Path(__file__).resolve().parents[1] / "data"
SETS = ("kineto_llama_layouts_h100", "kineto_llama_shapes_h100", "kineto_llama_tp_h100",
        "kineto_llama_wide_tp_h100")
COMPUTING = ("compute", "recompute", "optimizer")
H100 = Hardware.preset("h100")
E = 0.9  # Rates' memory_efficiency; memory_half_bytes=0: a kernel is bytes / (E · bw)
#: The layouts set's run-to-run spread of its timed steps (b's 20 steps range 101.43 to
#: 109.52 ms, 7.5 % of their median; tests/plan/test_measured_layouts.py's RATIO_TOL).
TOL = 0.08


def _costs(kind: str, b: int = 2):
    model = ModelSpec(num_layers=4, hidden_size=2048, num_attention_heads=16,
                      num_kv_heads=4, seq_length=4096, vocab_size=32000,
                      ffn_hidden_size=5632, mlp="gated", norm="rmsnorm",
                      position_embedding="rope")
    rates = Rates(memory_half_bytes=0.0, elementwise_kernels=kind)
    am = ActivationModel(flash_attention=True, dropout=False)
    return model, layer_costs(model, H100, rates, micro_batch_size=b, activation_model=am,
                              dtype="bf16")


def test_autocast_with_fp32_weights_adds_the_casts_and_the_fp32_stream_counted_by_hand():
    model, eager = _costs("eager")
    _, amp = _costs("amp")
    n, h, w = 2 * model.seq_length, model.hidden_size, model.ffn_hidden_size
    bw = E * H100.memory_bandwidth
    kv = 4 * 128
    # weights per layer: q, k, v (2048 + 2·512 columns), the output 2048², gate, up and
    # down 3 · 2048 · 5632
    weights = h * (h + 2 * kv) + h * h + 3 * h * w
    # forward, per norm on fp32: pow 4+4, mean 4, x·rstd 4+4, ·w 4+4 = 28 bytes in four
    # kernels (eager on 16-bit input: 36 in six); the norms' outputs cast for the GEMMs
    # they feed (4+2: once for q-k-v, twice for gate and up); each residual add fp32 +
    # 16-bit into fp32 (4+2+4 = 10, eager 6); every weight cast fp32 → bf16 (4+2)
    extra_fwd = 2 * (28 - 36) * n * h + 3 * 6 * n * h + 2 * (10 - 6) * n * h + 6 * weights
    assert amp.fwd - eager.fwd == pytest.approx(extra_fwd / bw, rel=1e-9)
    # kernels: 2 norms of 4 instead of 6, 3 casts, 5 weight casts (the model's q-k-v is
    # one product, as the recorded runs' fused projection)
    assert amp.kernels_fwd - eager.kernels_fwd == 2 * (4 - 6) + 3 + 5
    # backward: the two residuals' gradients cast to 16 bits for their branches (6 each,
    # eager's adds 6: the same), the three input casts' gradients back to fp32 (6 each)
    # and the gate's and up's summed in fp32 (12); per norm in fp32: through the weight 8,
    # its gradient 12 + 4, x·rstd 8, rstd's 12 + 4, mean and square 4, 8, 12, the two
    # input gradients' sum 12 = 84 in ten (eager's 84 in twelve), and its sum with the
    # stream's gradient in fp32 (12, eager's 6); every weight gradient cast to fp32 (2+4)
    eager_rest = 3 * 6 * n * h  # eager's three 6-byte residual kernels
    amp_rest = 2 * 6 * n * h + 3 * 6 * n * h + 12 * n * h + 2 * 12 * n * h
    extra_bwd = amp_rest - eager_rest + 6 * weights
    assert amp.bwd - eager.bwd == pytest.approx(extra_bwd / bw, rel=1e-9)
    # the weight-gradient casts go with the weight gradients (a frozen weight has none)
    assert amp.wgrad - eager.wgrad == pytest.approx(6 * weights / bw, rel=1e-9)
    assert amp.kernels_wgrad - eager.kernels_wgrad == 5


@pytest.mark.parametrize(("fields", "kind"), [
    ({}, "library"),
    ({"unfused_norm": True}, "eager"),
    ({"unfused_rotary": True}, "eager"),
    ({"unfused_norm": True, "input_bytes": 4.0}, "amp"),
    ({"unfused_rotary": True, "input_bytes": 4.0}, "amp"),
    ({"input_bytes": 4.0}, "library"),  # a fused norm under autocast: not counted apart
])
def test_the_count_follows_what_the_profile_s_operators_show(fields, kind):
    read, why = kernels_from_activations(ActivationModel("tensors", **fields))
    assert read == kind and why


def _computing_error(cal: plan.Calibration, folder: str, layout: str) -> float:
    rec = json.loads((DATA / folder / "environment.json").read_text())["layouts"][layout]
    model = dataclasses.replace(cal.job.model, num_layers=rec.get("layers", 8),
                                seq_length=rec.get("seq", 2048))
    parallel = dataclasses.replace(cal.job.parallel, micro_batch_size=rec["micro_batch"],
                                   recompute=rec["recompute"], tp=rec.get("tp_share", 1))
    p = plan.predict(cal, model=model, parallel=parallel,
                     global_batch_size=rec["micro_batch"], seq_length=model.seq_length)
    raw = statistics.mean(raw_computing_s(DATA / folder / f"{layout}.pt.trace.json.gz")
                          .values())
    return sum(p.parts[k] for k in COMPUTING) / raw - 1


def test_calibrate_reads_the_count_from_the_profile_and_predicts_another_layout():
    """The recorded run's operators show RMSNorm and rotary apart on an fp32 stream
    (fp32 embedding table, bf16 products): ``calibrate`` counts ``"amp"`` and says so;
    given rates, it keeps theirs. From ``a``, layout ``c`` (micro-batch 8) computes within
    the tolerance of its trace; the library count is 28 % short."""
    profile = pk.load(DATA / SETS[0] / "a.pt.trace.json.gz", cache=False, progress=False)
    cal = plan.calibrate(profile)
    assert cal.rates.elementwise_kernels == "amp"
    (note,) = [n for n in cal.notes if n.startswith(ELEMENTWISE_READ)]
    assert "fp32 residual stream" in note
    # the Planner's "What the model assumes" panel says where the count came from
    table = assumptions(cal, cal.job.parallel, cal.job.hardware).table
    (row,) = table[table["name"] == "elementwise_kernels"].to_dict("records")
    assert row["value"] == "amp" and row["origin"] == "profile"
    assert row["source"].startswith("the profile's operators: ") and "autocast" in row["source"]
    library = plan.calibrate(profile, rates=Rates())
    assert library.rates.elementwise_kernels == "library"
    assert not any(n.startswith(ELEMENTWISE_READ) for n in library.notes)
    assert abs(_computing_error(cal, SETS[0], "c")) <= TOL
    assert _computing_error(library, SETS[0], "c") < -0.2


@pytest.mark.slow  # 16 layouts, two calibrations per set: about 10 s
@pytest.mark.parametrize("folder", SETS)
def test_every_recorded_layout_computes_as_its_trace_with_the_count_read(folder):
    """Calibrated on each set's ``a`` without closing (the default), every layout's
    predicted computing time (compute, recompute, optimizer) is within :data:`TOL` of the
    trace's, and at most a fifth as far off as with the library count."""
    profile = pk.load(DATA / folder / "a.pt.trace.json.gz", cache=False, progress=False)
    read, library = plan.calibrate(profile), plan.calibrate(profile, rates=Rates())
    layouts = json.loads((DATA / folder / "environment.json").read_text())["layouts"]
    for layout in layouts:
        err, lib = _computing_error(read, folder, layout), _computing_error(library, folder,
                                                                            layout)
        assert abs(err) <= TOL, (layout, err)
        assert abs(err) <= abs(lib) / 5, (layout, err, lib)
