"""A lazy (Dask) cluster reads the element size its reductions move, as the eager one does,
so that calibrate() on it reduces the gradients at the profile's size, not the scheme's.

The expectation comes from the raw files, read here with sqlite3: torch_npu's DB export gives
each HCCL collective (``COMMUNICATION_OP``) its element ``count`` and ``dataType``.
"""

from __future__ import annotations

from typing import Any

import pytest
from raw_ascend import HCCL_SIZES, hccl_reductions
from shared_samples import PT_DB_LEVEL1, shared_sample

import perfkit as pk
from perfkit import plan
from perfkit.analysis.reduced_dtype import reduced_gradient_bytes
from perfkit.calc.memory import scheme_gradient_bytes

pytestmark = pytest.mark.shared_samples

def _raw_size(root: Any) -> int:
    """Element size of the HCCL type the reductions of every rank's DB move most bytes in."""
    moved, _ = hccl_reductions(root)
    return HCCL_SIZES[max(moved, key=moved.get).lower()]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_eager_and_lazy_calibrations_read_the_same_gradient_size(dask_client: Any) -> None:
    root = shared_sample(PT_DB_LEVEL1)
    size = _raw_size(root)
    eager = pk.load(root, cache=False, progress=False)
    lazy = pk.load(root, engine="dask", client=dask_client, progress=False)
    assert lazy.lazy
    read = reduced_gradient_bytes(lazy)
    assert read is not None and read.element_bytes == size
    assert read == reduced_gradient_bytes(eager)
    assert pk.infer_job(lazy).gradient_bytes == pk.infer_job(eager).gradient_bytes == size
    # a small dense model on the 910B under the MindSpore scheme, whose own guess (fp16
    # gradients) is not the profile's fp32: the reading must win on both engines
    model = pk.ModelSpec(num_layers=2, hidden_size=512, num_attention_heads=8,
                         seq_length=256, vocab_size=1000)
    par = pk.ParallelConfig(dp=2)
    assert scheme_gradient_bytes("mindspore", None) != size
    got = [plan.calibrate(p, model, par, "ascend-910b", static_scheme="mindspore")
           for p in (eager, lazy)]
    assert [c.rates.gradient_bytes for c in got] == [size, size]
    assert dict((t, v) for t, v, _ in got[1].terms)["gradient_bytes"] == size
