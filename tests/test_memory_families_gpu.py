"""The Memory tab offers CANN's runtime (HCCL) only on an NPU: a GPU trace's collective
library is NCCL, and its memory records name no CANN module.

``wild/k_resnet50_nw0``: a PyTorch 1.9 trace on a V100 (``"Tesla V100"`` in its device
properties); ``ascend/msinsight-pt-level1``: a torch_npu export whose
``npu_module_mem.csv`` names CANN modules (``HCCL`` among them).
"""

from __future__ import annotations

import csv
import gzip
import json

import pytest
from shared_samples import KINETO_TRACES, PT_LEVEL1, sample

from perfkit.widgets import dashboard

pytestmark = pytest.mark.shared_samples


def _families(path) -> list[str]:
    board = dashboard(str(path), background_bytes=None)
    board.select("Memory")
    return [str(o if isinstance(o, str) else o[1]) for o in board.panels["Memory"].family.options]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_a_gpu_trace_is_offered_no_hccl() -> None:
    with gzip.open(sample(KINETO_TRACES["k_resnet50_nw0"]), "rt", encoding="utf-8") as fh:
        trace = json.load(fh)
    assert any("V100" in str(d.get("name")) for d in trace.get("deviceProperties", []))
    offered = _families(sample(KINETO_TRACES["k_resnet50_nw0"]))
    assert offered and not any("HCCL" in f or "runtime" in f for f in offered), offered


def test_an_npu_export_keeps_its_cann_runtime() -> None:
    mem = sample(PT_LEVEL1) / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/npu_module_mem.csv"
    with mem.open(newline="", encoding="utf-8") as fh:
        modules = {r["Component"] for r in csv.DictReader(fh)}
    assert "HCCL" in modules
    assert "runtime / HCCL" in _families(sample(PT_LEVEL1))
