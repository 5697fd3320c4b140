"""The job's counts per step (micro-batches, layers, recompute) are read from steps whose
device tasks were recorded in full, never from a fragment of a step; the shapes of the
kernels a fragment holds are still read."""

from __future__ import annotations

import pandas as pd
import pytest
from raw_ascend import csv_rows, union_us
from shared_samples import PT_GPT3_OLD, sample

import perfkit as pk

OLD = sample(PT_GPT3_OLD)
_COUNTED = ("num_micro_batches", "num_layers", "recompute_layers")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def _raw(rank: int) -> tuple[float, float, list[dict[str, str]]]:
    """Step 2 of ``rank`` in the raw files: the time its tasks in kernel_details.csv cover,
    its busy time in step_trace_time.csv (Computing + Communication(Not Overlapped)), and
    its FlashAttentionScore rows whose Input Shapes are shapes."""
    out = OLD / f"test_rank_{rank}" / "ASCEND_PROFILER_OUTPUT"
    tasks = [r for r in csv_rows(out / "kernel_details.csv") if r["Step Id"] == "2"]
    (step,) = csv_rows(out / "step_trace_time.csv")
    assert step["Step"] == "2"
    covered = union_us((float(r["Start Time(us)"]),
                        float(r["Start Time(us)"]) + float(r["Duration(us)"])) for r in tasks)
    busy = float(step["Computing"]) + float(step["Communication(Not Overlapped)"])
    attention = [r for r in tasks if r["Type"] == "FlashAttentionScore"
                 and r["Input Shapes"].strip('"')[:1].isdigit()]
    return covered, busy, attention


@pytest.mark.shared_samples
def test_a_cut_step_gives_no_count_per_step_but_its_shapes():
    raw = [_raw(r) for r in (0, 1)]
    for covered, busy, _ in raw:  # the only step, cut short on both ranks
        assert covered < 0.5 * busy
    # the fragment holds 3 attention kernels on rank 0: read as 3 layers per micro-batch
    # before, when a GPT-3 step of 221.8 ms runs many more
    assert len(raw[0][2]) == 3
    job = pk.infer_job(pk.load(OLD, cache=False, progress=False))
    ev = job.evidence.set_index("field")
    for name in _COUNTED:
        # not read: unknown, or a stated default (ParallelConfig's one micro-batch)
        assert ev.loc[name, "value"] is None or ev.loc[name, "source"] == "default", name
        detail = ev.loc[name, "detail"]
        assert "recorded in full" in detail and "ranks 0 and 1" in detail, name
        assert "no step of 1" in detail, name
    # the shapes the fragment's kernels carry are still read: query (s, b, h) with the
    # mask (1, 1, s, s) of the raw Input Shapes
    query, _k, _v, _, _, _, mask = raw[0][2][0]["Input Shapes"].strip('"').split(";")
    s = int(mask.split(",")[-1])
    dims = [int(x) for x in query.split(",")]
    assert dims[0] == s
    assert ev.loc["seq_length", "value"] == str(s) == "8192"  # the evidence in words
    assert ev.loc["micro_batch_size", "value"] == str(dims[1]) == "2"


def test_the_step_read_is_one_recorded_in_full_where_the_rank_has_one():
    from perfkit.analysis.shapes.operators import _one_step

    # rank 0: step 1 recorded in full (2 records), step 2 cut (3 records, the most);
    # rank 1: only step 1, cut (1 record): the most records of each rank's full steps,
    # else of its cut ones
    recs = pd.DataFrame({"rank": [0, 0, 0, 0, 0, 1], "step": [1, 1, 2, 2, 2, 1]})
    cut = pd.Series([False, False, True, True, True, True])
    kept = _one_step(recs, cut)
    assert sorted(set(zip(kept["rank"], kept["step"], strict=True))) == [(0, 1), (1, 1)]
    assert len(kept) == 3  # rank 0's 2 records of step 1 and rank 1's one
    # without the marks, the step with the most records: rank 0's cut step 2
    assert sorted(set(zip(_one_step(recs)["rank"], _one_step(recs)["step"],
                          strict=True))) == [(0, 2), (1, 1)]
