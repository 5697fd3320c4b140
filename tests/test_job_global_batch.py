"""The global batch's reason names exactly the factors that are not known.

The global batch is dp × micro-batch size × micro-batches per step. Before, a job with any
factor unknown said it "needs dp, the micro-batch size and the micro-batches per step",
all three, even where dp and the micro-batch size were read.
"""

from __future__ import annotations

import pytest
from raw_ascend import csv_rows
from shared_samples import PT_GPT3_OLD, sample

import perfkit as pk
from perfkit.job.fields import Readings
from perfkit.job.global_batch import read_global_batch

OLD = sample(PT_GPT3_OLD)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.shared_samples
def test_only_the_micro_batches_are_named_where_only_they_are_unknown():
    # the raw FlashAttentionScore query of rank 0 is (s, b, h): b = 2 sequences per
    # micro-batch; its one step was cut short, so its micro-batches are not counted
    rows = csv_rows(OLD / "test_rank_0" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    query = next(r["Input Shapes"].strip('"').split(";")[0] for r in rows
                 if r["Type"] == "FlashAttentionScore"
                 and r["Input Shapes"].strip('"')[:1].isdigit())
    b = int(query.split(",")[1])
    job = pk.infer_job(pk.load(OLD, cache=False, progress=False))
    assert job.value("micro_batch_size") == b == 2
    assert job.source("dp") == "default" and job.parallel.dp >= 1  # assumed, but known
    said = job.detail("global_batch_size")
    assert job.global_batch_size is None
    assert "the micro-batches per step are not known" in said
    # the micro-batches' own reason follows: a fragment of a step is not counted
    assert "recorded in full" in said
    assert "dp is not known" not in said and "micro-batch size is not known" not in said


@pytest.mark.parametrize("known, unknown", [
    ({"dp": 4, "num_micro_batches": 8}, ["the micro-batch size is"]),
    ({"micro_batch_size": 2}, ["dp is", "the micro-batches per step are"]),
    ({"dp": 4}, ["the micro-batch size is", "the micro-batches per step are"]),
])
def test_the_reason_names_each_unknown_factor_with_its_own_reason(known, unknown):
    out = Readings()
    for name in ("dp", "micro_batch_size", "num_micro_batches"):
        out.put(name, known.get(name), f"why {name}")
    read_global_batch(out)
    value = out["global_batch_size"]
    assert value.value is None
    for words in unknown:
        assert f"{words} not known" in value.detail
    named = sum(w in value.detail for w in ("dp is", "micro-batch size is",
                                            "micro-batches per step are"))
    assert named == len(unknown)
    for name in ("dp", "micro_batch_size", "num_micro_batches"):
        assert (f"why {name}" in value.detail) == (name not in known)


def test_the_product_where_all_three_are_known():
    out = Readings()
    for name, v in (("dp", 4), ("micro_batch_size", 2), ("num_micro_batches", 8)):
        out.put(name, v, "read")
    read_global_batch(out)
    assert out["global_batch_size"].value == 4 * 2 * 8
    assert out["global_batch_size"].detail.endswith("= 4 × 2 × 8")


def test_factors_unknown_for_one_reason_are_named_together():
    out = Readings()
    out.put("dp", 4, "read")
    for name in ("micro_batch_size", "num_micro_batches"):
        out.put(name, None, "no operator input shapes")
    read_global_batch(out)
    assert out["global_batch_size"].detail.endswith(
        ": the micro-batch size and the micro-batches per step are not known (no operator "
        "input shapes)")
