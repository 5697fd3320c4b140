"""A job whose type has no peak on its device: the figures say why, naming the device.

No FP32 peak is published for the Ascend NPUs (the presets say what was searched), so an
fp32 job on a 910B gets MFU refused with that reason and the device named; a device that
simply lists other types (the V100 has no bf16) says which it lists.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import perfkit as pk
from perfkit.widgets.summary import job_figures

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def job() -> pk.Job:
    profile = pk.load(DATA / "kineto-tiny-llama", progress=False)
    return pk.infer_job(profile).with_overrides(model=pk.ModelSpec.preset("llama2-7b"),
                                                step_time_s=2.0)


@pytest.mark.parametrize("device", ["ascend-910a", "ascend-910b", "ascend-910b2"])
def test_an_fp32_job_on_ascend_says_no_fp32_peak_is_published(job, device) -> None:
    fp32 = job.with_overrides(hardware=device, dtype="fp32")
    assert not fp32.missing() and "fp32" not in fp32.hardware.peak_flops
    frame = job_figures(fp32)
    assert list(frame["value"]) == ["not computed"]
    why = frame["how it is counted"].iloc[0]
    assert f"no fp32 peak is published for {device}" in why
    assert "Huawei publishes no FP32 peak" in why
    assert f"Hardware.preset('{device}').replace(peak_flops=" in why


def test_a_device_listing_other_types_names_them(job) -> None:
    why = job_figures(job.with_overrides(hardware="v100", dtype="bf16"))[
        "how it is counted"].iloc[0]
    assert "v100 lists no bf16 peak, only fp16, fp32" in why
    assert "published" not in why


def test_the_journal_says_why_no_fp32_mfu_on_ascend(job) -> None:
    """The journal's MFU and HFU rows of an fp32 job on a 910B give the same reason,
    with the device named, as the job's figures."""
    from perfkit.journal.record.metrics import run_metrics

    fp32 = job.with_overrides(hardware="ascend-910b", dtype="fp32")
    rows = run_metrics(fp32).set_index("key")
    for key in ("mfu", "hfu"):
        assert pd.isna(rows.at[key, "value"])
        said = str(rows.at[key, "note"])
        assert "no fp32 peak is published for ascend-910b" in said, said
