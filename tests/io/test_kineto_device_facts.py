"""Device memory recorded in a Kineto trace wins over its preset (issue 67, point 6).

``deviceProperties[].totalGlobalMem`` is read from the raw files here with ``json``; the
preset's memory comes from :meth:`perfkit.Hardware.preset`, the tolerance (10 %) from
:data:`perfkit.analysis.efficiency.hardware.MEMORY_TOLERANCE`'s documented reason (a
vendor's "80 GB" is 80 GiB).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from shared_samples import KINETO_TRACES, sample

import perfkit as pk
from perfkit.analysis.efficiency.hardware import read_device

WITH_PROPS = ["ds_train", "tl_ddp_resnet18_mi300", "tl_qwen_h100", "tl_b200_eager",
              "tl_timesformer_h100"]


def _props(path: Path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)["deviceProperties"]


@pytest.mark.shared_samples
@pytest.mark.parametrize("name", WITH_PROPS)
def test_recorded_memory_is_read_and_near_presets_kept(name: str) -> None:
    path = sample(KINETO_TRACES[name])
    raw = _props(path)[0]
    p = pk.load(path)
    facts = p.meta.extra["device_facts"]
    assert facts[0]["memory_bytes"] == raw["totalGlobalMem"]
    assert facts[0]["sm_count"] == raw["numSms"]
    reading = read_device(p)
    assert reading.hardware is not None
    preset = pk.Hardware.preset(reading.hardware.name)
    if abs(raw["totalGlobalMem"] - preset.memory_bytes) > 0.10 * preset.memory_bytes:
        assert reading.hardware.memory_bytes == raw["totalGlobalMem"]
        assert "totalGlobalMem" in reading.why
    else:
        assert reading.hardware.memory_bytes == preset.memory_bytes


def test_gh200_memory_wins_over_the_h200_preset(tmp_path: Path) -> None:
    # a GH200 96 GB reports 95 GiB; its name matches the H200 preset's (141 GB)
    mem = 102_005_473_280
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 5,
           "args": {"correlation": 1, "device": 0, "stream": 7}}]
    path = tmp_path / "gh200.json"
    path.write_text(json.dumps({"traceEvents": ev, "deviceProperties": [
        {"id": 0, "name": "NVIDIA GH200 480GB", "totalGlobalMem": mem, "numSms": 132}]}))
    p = pk.load(path)
    reading = read_device(p)
    assert reading.hardware.memory_bytes == mem
    assert reading.hardware.memory_bytes < 0.9 * pk.Hardware.preset("h200").memory_bytes
    assert "95.0 GiB" in reading.why
    # 132 SMs, as the H200's datasheet (the GH100 configuration): nothing to say or change
    assert "SMs" not in reading.why and reading.hardware.multiprocessors is None
    assert pk.infer_job(p).hardware.memory_bytes == mem
