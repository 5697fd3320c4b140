"""notebooks/02_parallel_strategy plans on the profile's own device.

Its ``HARDWARE`` parameter defaulted to ``"ascend-910b"`` whatever the profile: on the
bundled H100 trace (``tests/data/kineto_llama_h100``) it planned memory and layouts for an
Ascend 910B, and ranked them with a calibration fitted on the H100's kernels. The default
is now None: the device the profile names (:func:`perfkit.widgets.job_device`, as
``04_communication`` does), ``"ascend-910b"`` only where the profile names none, a preset
where the reader gives one.

The notebook's cells run here as stored (the parameters, then the set-up cell), with the
parameters a reader or ``perfkit report`` would inject; the device the trace names is read
from its raw ``deviceProperties``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

import perfkit as pk
from perfkit.errors import PerfkitError
from perfkit.widgets import job_device

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "02_parallel_strategy.ipynb"
H100_TRACE = ROOT / "tests" / "data" / "kineto_llama_h100"
CPU_MINDSPORE = ROOT / "data" / "mindspore-cpu-tiny-llama"


def _set_up(**parameters: Any) -> dict[str, Any]:
    """The namespace after the parameters cell (overridden by ``parameters``, as an
    injected cell does) and the set-up cell that picks the device."""
    cells = ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"]]
    ns: dict[str, Any] = {"display": lambda *_: None}
    exec(cells[0], ns)  # the parameters
    assert ns["HARDWARE"] is None  # the default: the profile's own device
    ns.update(parameters)
    (setup,) = [c for c in cells if "job_device(" in c]
    exec(setup, ns)
    return ns


def test_a_gpu_profile_is_planned_on_its_own_gpu(capsys: pytest.CaptureFixture) -> None:
    (trace,) = sorted(H100_TRACE.glob("rank0*.json.gz"))
    with gzip.open(trace, "rt", encoding="utf-8") as fh:
        (name,) = {d["name"] for d in json.load(fh)["deviceProperties"]}
    assert "H100" in name and "80GB" in name
    ns = _set_up(PROFILE=str(H100_TRACE))
    assert ns["hardware"].name == "h100"
    assert ns["hardware"].memory_bytes == pytest.approx(80e9, rel=0.1)  # an 80 GB card
    assert "Nominal figures for the profile's own device, h100." in capsys.readouterr().out
    assert ns["device"].preset == "h100"  # what the calculator at the end starts from


def test_a_profile_without_a_device_falls_back_to_the_former_default(
        capsys: pytest.CaptureFixture) -> None:
    assert pk.infer_job(pk.load(str(CPU_MINDSPORE), progress=False)).hardware is None
    ns = _set_up(PROFILE=str(CPU_MINDSPORE))
    assert ns["hardware"].name == "ascend-910b"
    said = capsys.readouterr().out
    assert "does not name its device: figures for the preset ascend-910b, the default" in said


def test_a_preset_given_wins_and_the_sentence_names_the_profiles_device(
        capsys: pytest.CaptureFixture) -> None:
    ns = _set_up(PROFILE=str(H100_TRACE), HARDWARE="a100")
    assert ns["hardware"].name == "a100"
    assert "not for the profile's own device, h100" in capsys.readouterr().out


def test_an_unknown_fallback_is_refused() -> None:
    job = pk.infer_job(pk.load(str(CPU_MINDSPORE), progress=False))
    with pytest.raises(PerfkitError, match="ascend-910b"):  # the message lists the presets
        job_device(job, fallback="no-such-device")
    # without a fallback a profile without a device still gets none
    assert job_device(job).hardware is None


def _raw_device_memory() -> float:
    """``totalGlobalMem`` of the H100 trace's ``deviceProperties`` (bytes)."""
    (trace,) = sorted(H100_TRACE.glob("rank0*.json.gz"))
    with gzip.open(trace, "rt", encoding="utf-8") as fh:
        (mem,) = {d["totalGlobalMem"] for d in json.load(fh)["deviceProperties"]}
    return float(mem)


def test_the_memory_limit_is_the_chosen_devices_less_the_planners_reserve(
        capsys: pytest.CaptureFixture) -> None:
    """MEMORY_LIMIT_GIB was 57.2 (an Ascend 910B's max_device_memory) on every device; its
    default is now the chosen device's memory less the reserve plan.search and
    plan.predict (the Planner) leave by default, and the notebook says which."""
    import inspect

    reserves = {inspect.signature(f).parameters["memory_reserve"].default
                for f in (pk.plan.search, pk.plan.predict)}
    (reserve,) = reserves  # one reserve for both
    ns = _set_up(PROFILE=str(H100_TRACE))
    assert ns["MEMORY_LIMIT_GIB"] is None
    hw = ns["hardware"]
    # the H100 preset's 80 GiB is the card the trace reports (79.2 GiB usable to CUDA)
    assert hw.memory_bytes == pytest.approx(_raw_device_memory(), rel=0.02)
    assert ns["limit_bytes"] == pytest.approx(hw.memory_bytes * (1 - reserve))
    assert ns["limit_bytes"] == pytest.approx(80 * 2**30 * 0.9)
    said = capsys.readouterr().out
    assert "Memory limit 72.0 GiB per device: the h100's 80.0 GiB less perfkit's 10 % " \
           "reserve" in said


def test_a_memory_limit_given_wins_and_is_said(capsys: pytest.CaptureFixture) -> None:
    ns = _set_up(PROFILE=str(CPU_MINDSPORE), MEMORY_LIMIT_GIB=57.2)
    assert ns["hardware"].name == "ascend-910b"
    assert ns["limit_bytes"] == 57.2 * 2**30
    assert "Memory limit 57.2 GiB per device (MEMORY_LIMIT_GIB), of the ascend-910b's " \
           "64.0 GiB." in capsys.readouterr().out


def test_a_memory_limit_that_is_not_positive_is_refused() -> None:
    from perfkit.widgets import memory_limit

    hw = pk.Hardware.preset("h100")
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(PerfkitError, match="gib"):
            memory_limit(hw, bad)
    with pytest.raises(PerfkitError, match="memory_reserve"):
        memory_limit(hw, memory_reserve=1.5)
    # more than the card has is allowed (a reader's figure) but said
    assert "more than the device has" in memory_limit(hw, 100.0).sentence
