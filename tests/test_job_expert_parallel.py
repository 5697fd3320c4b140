"""An expert-parallel run whose groups do not give ep's size says so (a job problem).

The raw trace is read here on its own (json) for the kernels that show it."""

from __future__ import annotations

import json

import pytest
from shared_samples import sample

import perfkit as pk


def _kernel_names(path) -> set[str]:
    with open(path, encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    return {e["name"] for e in events if e.get("cat") == "kernel"}


@pytest.mark.shared_samples
def test_expert_dispatch_kernels_flag_an_unread_ep() -> None:
    """A walk: the DeepSeek trace read as plain dp 64 (no group names ep), its DeepEP
    dispatch and combine kernels (counted here in the raw trace) notwithstanding; plan
    then priced 35 s of dp traffic. The job now says ep is unread."""
    names = _kernel_names(sample("wild/ds_train") / "train.json")
    assert any("deep_ep" in n or "dispatch" in n for n in names)
    job = pk.infer_job(pk.load(sample("wild/ds_train"), progress=False))
    assert job.parallel.ep == 1 and job.source("ep") == "default"
    (said,) = [p for p in job.problems() if "dispatch tokens to experts" in p]
    assert said.startswith("the run's deepep kernels dispatch tokens to experts")
    assert not [p for p in pk.infer_job(pk.load(sample("wild/tl_qwen_h100"),
                                                  progress=False)).problems()
                if "experts" in p]
