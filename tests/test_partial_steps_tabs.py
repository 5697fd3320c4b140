"""The tabs of figures per step say which steps they cover when some hold no device task.

mindinsight-legacy's copy of ``PROF_000001_20230818142704322_COJGGGCANRMICFBC`` keeps the
step trace of 10 iterations but the timeline (``task_time_`` / ``msprof_`` files) of the
first only. The Operators tab's figures per step are iteration 1's, and the Communication
tab's exposed communication is measured in iteration 1 only: each tab says so, in the
Advice tab's basis words ("step 1, the only step with its device tasks recorded"), and the
Communication tab's exposed share is of step 1, not of the mean of the 10 steps (it read
116 %: step 1's 41.5 ms of communication over the 35.8 ms mean step). What is expected is
read with ``json`` (:mod:`raw_ascend`).
"""

from __future__ import annotations

from typing import Any

import pytest
from raw_ascend import cann_iterations, cann_tasks
from shared_samples import MINDINSIGHT, sample
from widget_html import panel_words

import perfkit.analysis as A

pytestmark = pytest.mark.shared_samples

ROOT = sample(MINDINSIGHT) / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"


def _raw() -> tuple[dict[int, tuple[float, float, float]], set[int]]:
    """The iterations (start, time, wait for data, µs) and those whose window holds a
    device task."""
    timeline = ROOT / "device_0" / "timeline"
    iterations, tasks = cann_iterations(timeline), cann_tasks(timeline)
    with_tasks = {i for e in tasks for i, (a, d, _) in iterations.items()
                  if a <= float(e["ts"]) < a + d}
    return iterations, with_tasks


@pytest.fixture(scope="module")
def board() -> Any:
    from perfkit.widgets.dashboard import Dashboard

    b = Dashboard(background_bytes=None)
    assert b.load_profile(str(ROOT)), b.error
    return b


def test_operators_tab_says_which_step_its_figures_cover(board) -> None:
    iterations, with_tasks = _raw()
    (one,) = with_tasks
    words = panel_words(board.select("Operators"))
    said = (f"Figures per step over step {one} of {len(iterations)}, the only step with its "
            "device tasks recorded.")
    assert words.count(said) == 1, words


def test_communication_tab_is_over_the_step_its_communication_is_measured_in(board) -> None:
    iterations, with_tasks = _raw()
    (one,) = with_tasks
    words = panel_words(board.select("Communication"))
    assert (f"(per step: step {one} of {len(iterations)}, the only step with its "
            "communication measured, as the findings count it)") in words, words
    # the exposed share is of that step: its Iteration Time and its wait for data
    _start, time_us, wait_us = iterations[one]
    row = A.comm_overlap(board.profile).iloc[0]
    assert int(row["steps"]) == 1
    assert float(row["step_wall_us"]) == pytest.approx(time_us + wait_us, abs=0.01)
    share = float(row["comm_exposed_us"]) / (time_us + wait_us)
    assert share < 1.0
    assert float(row["exposed_share"]) == pytest.approx(share, rel=1e-9)
    assert f"| {share * 100:.1f} |" in words
