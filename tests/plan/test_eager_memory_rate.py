"""The eager PyTorch presets' memory-bound rate, and a calibration keeping its own.

``Behaviour.preset("fsdp")`` and ``"ddp"`` price memory-bound kernels at 0.63 of the HBM
bandwidth with no fixed bytes per call: the value the project's recorded H100 profiles of
an eager PyTorch Llama give when calibrated kernel kind by kind. The last test reads one
such recording (``tests/data/kineto_llama_layouts_h100/a.pt.trace.json.gz``, PROVENANCE.md
there) and calibrates it again; the others check the arithmetic of the override, by hand
(the optimizer step: 24 bytes per parameter the device updates at that share of the H100's
3.35 TB/s, datasheet), and that ``predict(cal, behaviour=...)`` keeps a calibration's fit.
The presets' gradient accumulation, which the optimizer part also carries
(``tests/test_grad_accumulation.py``), is set to ``"fused"`` here to leave the update alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import perfkit as pk
from perfkit import plan
from perfkit.calc.behaviour import EAGER_MEMORY_EFFICIENCY, Behaviour
from perfkit.calc.memory import stage_parameters

DATA = Path(__file__).resolve().parents[1] / "data"
MODEL = pk.ModelSpec.preset("llama2-7b")
PAR = pk.ParallelConfig(dp=8, num_micro_batches=4, optimizer_shard=8)


def _update_only(name: str) -> Behaviour:
    """The preset with its micro-batches' gradients added up in the GEMMs (no pass apart)."""
    return Behaviour.preset(name, grad_accumulation="fused")


@pytest.mark.parametrize("name", ["fsdp", "ddp"])
def test_eager_presets_run_the_optimizer_at_the_measured_share(name: str) -> None:
    b = Behaviour.preset(name)
    assert (b.memory_efficiency, b.memory_half_bytes) == (EAGER_MEMORY_EFFICIENCY, 0.0)
    p = plan.predict(None, MODEL, PAR, "h100", behaviour=_update_only(name))
    updated = max(s["total"] for s in stage_parameters(MODEL, PAR)) / 8
    assert p.parts["optimizer"] == pytest.approx(updated * 24 / (0.63 * 3.35e12), rel=1e-9)


@pytest.mark.parametrize("name", ["megatron", "nemo", "deepspeed", "mindspore"])
def test_fused_kernel_presets_keep_the_default(name: str) -> None:
    assert "memory_efficiency" not in Behaviour.preset(name).overrides()


def test_a_calibration_keeps_its_own_memory_rate() -> None:
    cal = plan.calibrate(4.0, MODEL, PAR, "h100")
    kept = plan.predict(cal, behaviour=_update_only("fsdp"))
    assert kept.parts["optimizer"] == pytest.approx(plan.predict(cal).parts["optimizer"])
    box = plan.predict(None, MODEL, PAR, "h100", behaviour=_update_only("fsdp"))
    assert box.parts["optimizer"] != pytest.approx(kept.parts["optimizer"])


def test_the_preset_is_what_the_recorded_h100_profile_measures() -> None:
    profile = pk.load(DATA / "kineto_llama_layouts_h100" / "a.pt.trace.json.gz",
                      cache=False, progress=False)
    cal = plan.calibrate(profile, close=True, closing="kernels")
    assert cal.rates.memory_efficiency == pytest.approx(EAGER_MEMORY_EFFICIENCY, abs=0.01)
    assert cal.rates.memory_half_bytes == 0.0
