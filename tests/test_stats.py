"""The median of a column where every value may be missing (perfkit._stats.median).

With pandas 2.x (2.3.3, perfkit's lowest supported version, as 2.2 before it),
``Series.median`` of a column with no value makes numpy warn "Mean of empty slice". The
journal and the step comparison showed that warning for any profile that lacks a step
part. The oldest CI job runs these checks on pandas 2.3.3, where they fail without the
helper.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfkit._stats import median
from perfkit.analysis import compare_steps
from perfkit.journal.record import measure_run
from perfkit.profile import Profile, ProfileMeta

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("values", "expected"), [
    ([3.0, 1.0, np.nan, 2.0], 2.0),           # the middle of 1, 2, 3
    ([4.0, 1.0, 3.0, 2.0], 2.5),              # the mean of the two middle ones, 2 and 3
    (pd.array([5.0, None, 7.0], dtype="Float64"), 6.0),
    ([np.nan, np.nan], math.nan),
    ([], math.nan),
    (pd.array([None, None], dtype="Float64"), math.nan),
])
def test_median_leaves_missing_values_out_and_warns_of_nothing(values, expected) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = median(pd.Series(values, dtype="float64" if isinstance(values, list) else None))
    assert isinstance(got, float)
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_step_comparison_with_a_part_no_step_has_warns_of_nothing() -> None:
    def prof(free: float) -> Profile:
        steps = pd.DataFrame({"step": [1, 2], "computing_us": 100.0, "free_us": free,
                              "bubble_us": np.nan})
        return Profile(ProfileMeta("test", rank=0), {"steps": steps})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = compare_steps(prof(40.0), prof(10.0)).set_index("part")
    assert out.loc["free_us", "delta_us"] == pytest.approx(-30.0)  # 10 - 40
    assert pd.isna(out.loc["bubble_us", "base_us"])


def test_a_run_without_some_step_parts_is_measured_without_warnings() -> None:
    # the bundled CPU Kineto trace: no communication, no bubble
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        run = measure_run(ROOT / "data" / "kineto-tiny-llama" / "rank0.pt.trace.json.gz")
    parts = set(run.breakdown["part"]) if "part" in run.breakdown.columns else set()
    assert "computing_us" in parts and "bubble_us" not in parts
