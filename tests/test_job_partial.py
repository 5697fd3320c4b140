"""A partial model is kept: fields read stay, FLOPs need no head count, missing fields named;
and infer_job never crashes on empty or all-NA tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit.calc.flops import forward_flops
from perfkit.profile import Profile, ProfileMeta

HW = pk.Hardware.preset("ascend-910b")


@pytest.fixture(scope="module")
def bsh_job(tmp_path_factory: pytest.TempPathFactory):
    """A simulated GPT whose attention is BSH (b, s, a·d) without rotary kernels: the
    shapes show the widths but not how they split into heads."""
    model = pk.ModelSpec(num_layers=2, hidden_size=128, num_attention_heads=4, seq_length=64,
                         vocab_size=400, ffn_hidden_size=512, mlp="gpt")
    out = pk.simulate(model, pk.ParallelConfig(), HW, steps=1,
                      out=tmp_path_factory.mktemp("bsh") / "gpt", aic_metrics=None,
                      trace_kernels=False)
    return model, pk.infer_job(pk.load(out, cache=False))


def test_the_fields_that_were_read_are_kept(bsh_job) -> None:
    model, job = bsh_job
    assert job.model is None
    have = job.partial_model()
    assert {k: have[k] for k in ("num_layers", "hidden_size", "ffn_hidden_size",
                                 "vocab_size", "mlp", "seq_length")} == \
        {"num_layers": 2, "hidden_size": 128, "ffn_hidden_size": 512, "vocab_size": 400,
         "mlp": "gpt", "seq_length": 64}
    # the projection widths: a·d = 4·32 and g·d, though a and d are unknown
    assert have["attention_width"] == 128 and have["kv_width"] == 128
    assert "num_attention_heads" not in have


def test_the_missing_fields_are_named(bsh_job) -> None:
    _, job = bsh_job
    assert set(job.missing_model_fields()) == {"num_attention_heads", "num_kv_heads"}
    text = " ".join(job.missing())
    assert "attention heads" in text and "kept:" in text and "hidden_size 128" in text


def test_flops_need_no_head_count(bsh_job) -> None:
    model, job = bsh_job
    for causal in (False, True):
        # the full model's count (it knows its 4 heads), written out independently too
        want = forward_flops(model, 1.0, causal=causal)
        h, s, f, v, layers = 128, 64, 512, 400, 2
        by_hand = layers * (2 * h * 3 * h + 4 * s * h * (0.5 if causal else 1)
                            + 2 * h * h + 2 * 2 * h * f) + 2 * h * v
        assert want == by_hand
        assert job.forward_flops_per_token(causal=causal) == pytest.approx(want, rel=1e-12)
    # completed by the user, the job's model gives the same count
    done = job.with_overrides(num_attention_heads=4, num_kv_heads=4,
                              position_embedding="learned")
    assert done.forward_flops_per_token() == job.forward_flops_per_token()


def _profile(tables: dict[str, pd.DataFrame], device: str | None = "gpu") -> Profile:
    return Profile(ProfileMeta("test", rank=0, device_type=device), tables)


def test_infer_job_on_an_empty_profile_does_not_crash() -> None:
    job = pk.infer_job(_profile({}))
    assert job.model is None and job.step_time_s is None and job.peak_memory_bytes is None
    assert job.missing()


def test_infer_job_with_all_na_memory_samples_does_not_crash() -> None:
    """pandas 3 refuses idxmax of an all-NA group: a component whose samples carry no
    figure must not stop the job (nor the memory peaks)."""
    mem = pd.DataFrame({
        "rank": [0, 0, 0, 0], "component": ["PTA", "PTA", "HOST", "HOST"],
        "ts_us": [0.0, 1.0, 0.0, 1.0],
        "allocated_bytes": [10.0, 30.0, np.nan, np.nan],
        "reserved_bytes": [np.nan, np.nan, np.nan, np.nan],
        "active_bytes": [np.nan] * 4})
    prof = _profile({"memory": mem})
    peaks = pk.analysis.memory_peaks(prof).set_index("component")
    assert peaks.loc["PTA", "peak_allocated_bytes"] == 30.0
    assert peaks.loc["PTA", "peak_ts_us"] == 1.0
    assert pd.isna(peaks.loc["HOST", "peak_ts_us"])
    job = pk.infer_job(prof)  # no crash
    assert job.evidence["field"].tolist()


def test_infer_job_on_a_trace_that_loads_no_kernels(tmp_path: Path) -> None:
    """A GPU trace whose events give no device task (the state of the PyTorch 1.9
    traces before the loader reads their old categories): a job, not an exception."""
    import gzip
    import json

    trace = {"deviceProperties": [{"id": 0, "name": "Tesla V100-DGXS-32GB"}],
             "traceEvents": [{"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 1,
                              "tid": 1, "ts": 0, "dur": 5}]}
    path = tmp_path / "worker0.pt.trace.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump(trace, fh)
    job = pk.infer_job(pk.load(path, cache=False))
    assert job.model is None


def test_a_profile_without_step_numbers_says_so_not_over_0_steps() -> None:
    k = pd.DataFrame({"name": ["a", "b"], "category": ["compute", "compute"],
                      "start_us": [0.0, 10.0], "dur_us": [5.0, 5.0], "stream": [7, 7],
                      "step": [np.nan, np.nan]})
    job = pk.infer_job(_profile({"kernels": k}))
    detail = job.detail("step_time_s")
    assert job.step_time_s == pytest.approx(15e-6)  # first start to last end, by hand
    assert "0 step" not in detail and "without step numbers" in detail
    assert "nan" not in " ".join(job.evidence["detail"].dropna()).lower().split()
