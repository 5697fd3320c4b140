"""The communication inside a step tail (perfkit.advisor.step_tail.tail_comm_us), against
hand arithmetic on a made-up step trace: only what lies in the tail counts, overlaps once."""

from __future__ import annotations

import math

import pandas as pd

from perfkit.advisor.step_tail import tail_comm_us


def test_the_union_inside_the_tail_only() -> None:
    # step 1 runs 0-100 µs, its tail the last 40 (60-100); step 2 runs 100-200, tail 150-200
    steps = pd.DataFrame({"rank": [0, 0], "step": [1, 2], "step_start_us": [0.0, 100.0],
                          "total_us": [100.0, 100.0], "tail_us": [40.0, 50.0]})
    ops = pd.DataFrame({
        "rank": [0, 0, 0, 0, 0],
        "step": [1, 1, 1, 1, 2],
        # before the tail (ends at 55), across its start (50-70), overlapping (65-80),
        # beyond its end (95-120); step 2: inside (160-170)
        "start_us": [10.0, 50.0, 65.0, 95.0, 160.0],
        "elapse_us": [45.0, 20.0, 15.0, 25.0, 10.0]})
    got = tail_comm_us(steps, ops)
    # step 1: [60, 80] from the two that overlap, [95, 100] of the last: 20 + 5
    assert got.tolist() == [25.0, 10.0]


def test_unknown_windows_and_no_operators() -> None:
    steps = pd.DataFrame({"rank": [0, 0], "step": [1, 2], "step_start_us": [0.0, math.nan],
                          "total_us": [100.0, 100.0], "tail_us": [40.0, 50.0]})
    ops = pd.DataFrame({"rank": [0], "step": [3], "start_us": [250.0], "elapse_us": [5.0]})
    got = tail_comm_us(steps, ops)
    assert got.iloc[0] == 0.0 and math.isnan(got.iloc[1])  # none in step 1; 2 unknown
    assert tail_comm_us(steps, ops.iloc[0:0]).isna().all()
