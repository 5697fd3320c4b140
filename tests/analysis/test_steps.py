"""Step breakdown: exact arithmetic on hand-built tables and agreement on real samples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_samples import HTA, PT_LEVEL1, sample

from perfkit.analysis import derive_steps, step_breakdown
from perfkit.analysis.steps import STEP_COLUMNS
from perfkit.errors import InvalidArgumentError
from perfkit.io.engines.local import load
from perfkit.profile import Cluster, Profile, ProfileMeta


def _profile(rank: int = 0, **tables: pd.DataFrame) -> Profile:
    return Profile(ProfileMeta("test", rank=rank), tables)


def _kernels(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["step", "name", "category", "start_us", "dur_us"])


def test_priority_rule_exact_parts() -> None:
    k = _kernels([
        (1, "MatMul", "compute", 0.0, 10.0),      # compute [0, 10]
        (1, "Add", "compute", 5.0, 10.0),         # compute [5, 15] -> union [0, 15]
        (1, "hcom_allReduce_1", "communication", 12.0, 18.0),  # comm [12, 30]
        (1, "Mul", "compute", 40.0, 10.0),        # compute [40, 50]
    ])
    out = step_breakdown(_profile(kernels=k))
    row = out.iloc[0]
    computing = 15.0 + 10.0
    communication = 18.0
    overlapped = 15.0 - 12.0                      # [12, 15] under computation
    not_overlapped = communication - overlapped   # [15, 30]
    span = 50.0
    free = span - (computing + not_overlapped)    # [30, 40]
    assert row["source"] == "derived"
    assert row["computing_us"] == pytest.approx(computing)
    assert row["communication_us"] == pytest.approx(communication)
    assert row["overlapped_us"] == pytest.approx(overlapped)
    assert row["comm_not_overlapped_us"] == pytest.approx(not_overlapped)
    assert row["free_us"] == pytest.approx(free)
    assert row["step_us"] == pytest.approx(span)
    assert row["computing_share"] + row["comm_not_overlapped_share"] + row["free_share"] == \
        pytest.approx(1.0)
    assert np.isnan(row["bubble_us"])  # no receive task: unknown, not zero


def test_receive_is_bubble_and_preparing_from_host_ops() -> None:
    k = _kernels([
        (3, "MatMul", "compute", 100.0, 20.0),
        (3, "hcom_receive_7", "communication", 130.0, 40.0),
    ])
    ops = pd.DataFrame({"step": [3], "name": ["aten::mm"], "start_us": [60.0],
                        "dur_us": [5.0]})
    row = step_breakdown(_profile(kernels=k, ops=ops)).iloc[0]
    assert row["bubble_us"] == pytest.approx(40.0)
    assert row["stage_us"] == pytest.approx(70.0 - 40.0)
    assert row["preparing_us"] == pytest.approx(100.0 - 60.0)


def test_the_wait_before_a_derived_step_leaves_out_the_previous_steps_tail() -> None:
    """The host starts step 2 at 20 µs while the device runs step 1 until 50 µs: the
    device waits from 50 to 55 µs only, not from 20. Step 3's host start (120 µs) comes
    after step 2's end (95 µs): it waits from there, 130 − 120. No device time counts in
    two steps: the walls of steps 2 and 3 end where their windows end and begin no
    earlier than the window before them ends."""
    k = _kernels([(1, "A", "compute", 25.0, 25.0), (2, "A", "compute", 55.0, 40.0),
                  (3, "A", "compute", 130.0, 20.0)])
    ops = pd.DataFrame({"step": [1, 2, 3], "name": "aten::mm",
                        "start_us": [0.0, 20.0, 120.0], "dur_us": 1.0})
    out = step_breakdown(_profile(kernels=k, ops=ops)).set_index("step")
    assert out["preparing_us"].tolist() == pytest.approx([25.0, 5.0, 10.0])
    assert (out["step_us"] + out["preparing_us"]).tolist() == pytest.approx(
        [50.0 - 0.0, 95.0 - 50.0, 150.0 - 120.0])


def test_steps_are_per_rank_and_step() -> None:
    a = _profile(0, kernels=_kernels([(1, "A", "compute", 0, 5), (2, "A", "compute", 10, 7)]))
    b = _profile(1, kernels=_kernels([(1, "A", "compute", 0, 3)]))
    out = step_breakdown(Cluster([a, b], ProfileMeta("cluster")))
    assert list(zip(out["rank"], out["step"], strict=True)) == [(0, 1), (0, 2), (1, 1)]
    assert list(out["computing_us"]) == [5.0, 7.0, 3.0]


def test_profiler_table_used_and_shares() -> None:
    steps = pd.DataFrame({"step": [1], "computing_us": [60.0], "communication_us": [30.0],
                          "comm_not_overlapped_us": [20.0], "overlapped_us": [10.0],
                          "free_us": [20.0], "bubble_us": [5.0], "stage_us": [95.0],
                          "preparing_us": [8.0]})
    row = step_breakdown(_profile(steps=steps)).iloc[0]
    assert row["source"] == "profiler"
    assert row["step_us"] == pytest.approx(100.0)
    assert row["computing_share"] == pytest.approx(0.6)
    assert row["preparing_share"] == pytest.approx(0.08)
    assert row["overlapped_share"] == pytest.approx(0.1)


def test_missing_parts_stay_missing() -> None:
    steps = pd.DataFrame({"step": [1], "computing_us": [60.0], "stage_us": [70.0],
                          "bubble_us": [30.0]})
    row = step_breakdown(_profile(steps=steps)).iloc[0]
    assert np.isnan(row["free_us"])
    assert row["step_us"] == pytest.approx(100.0)  # stage + bubble


def test_empty_profile_has_documented_columns() -> None:
    out = step_breakdown(_profile())
    assert out.empty and list(out.columns) == list(STEP_COLUMNS)
    assert out.attrs["notes"]


def test_bad_derive_argument() -> None:
    with pytest.raises(InvalidArgumentError):
        step_breakdown(_profile(), derive="sometimes")


@pytest.mark.shared_samples
def test_derived_matches_ascend_step_trace() -> None:
    """The priority rule reproduces torch_npu's own step_trace_time.csv on a real rank."""
    prof = load(sample(PT_LEVEL1), cache=False)
    given = step_breakdown(prof, derive="never").set_index(["rank", "step"])
    derived = step_breakdown(prof, derive="always").set_index(["rank", "step"])
    for col in ("computing_us", "comm_not_overlapped_us", "free_us", "step_us"):
        np.testing.assert_allclose(derived[col], given[col], rtol=1e-3)


@pytest.mark.shared_samples
def test_kineto_parts_sum_to_step() -> None:
    prof = load(sample(HTA), cache=False)
    out = step_breakdown(prof, derive="always")
    assert len(out) == 4
    parts = out["computing_us"] + out["comm_not_overlapped_us"] + out["free_us"]
    np.testing.assert_allclose(parts, out["step_us"])
    k = prof.kernels
    span = k.assign(end=k["start_us"] + k["dur_us"]).groupby(["rank", "step"]).agg(
        s=("start_us", "min"), e=("end", "max"))
    np.testing.assert_allclose(out["step_us"].to_numpy(), (span["e"] - span["s"]).to_numpy())


def test_derive_steps_direct_call_on_empty() -> None:
    out = derive_steps(pd.DataFrame(columns=["rank", "step", "category", "start_us", "dur_us",
                                             "name"]))
    assert out.empty


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.floats(0, 1000),
                          st.floats(0, 200)), min_size=1, max_size=40))
def test_parts_always_sum_to_the_window(rows: list[tuple[int, bool, float, float]]) -> None:
    k = pd.DataFrame({"step": [r[0] for r in rows],
                      "name": ["hcom_x" if r[1] else "MatMul" for r in rows],
                      "category": ["communication" if r[1] else "compute" for r in rows],
                      "start_us": [r[2] for r in rows], "dur_us": [r[3] for r in rows]})
    out = derive_steps(k.assign(rank=0))
    parts = out["computing_us"] + out["comm_not_overlapped_us"] + out["free_us"]
    np.testing.assert_allclose(parts, out["step_us"], atol=1e-6)
    assert (out[["computing_us", "comm_not_overlapped_us", "free_us",
                 "overlapped_us"]] >= -1e-9).all().all()
    np.testing.assert_allclose(out["overlapped_us"] + out["comm_not_overlapped_us"],
                               out["communication_us"], atol=1e-6)
