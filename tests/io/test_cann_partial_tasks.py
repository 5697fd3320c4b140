"""Raw CANN output whose timeline holds the device tasks of some iterations only.

mindinsight-legacy's copy of ``PROF_000001_20230818142704322_COJGGGCANRMICFBC`` keeps the
step trace of 10 iterations but the ``task_time_`` / ``msprof_`` files of the first only:
its 490 device tasks (2 of them on the AI CPU) are iteration 1's. A figure per step of the
tasks is then over iteration 1, not the 10: the AI CPU finding once read 104 µs per step
(1,039.5 µs over 10 steps) where the step that ran them spent 1,039.5 µs. Everything
expected is read here with ``json`` (:mod:`raw_ascend`), never through perfkit.
"""

from __future__ import annotations

import pytest
from raw_ascend import cann_iterations, cann_tasks
from shared_samples import MINDINSIGHT, sample, shared_sample

import perfkit as pk
import perfkit.analysis as A

pytestmark = pytest.mark.shared_samples

ROOT = sample(MINDINSIGHT) / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"


def _raw() -> tuple[dict[int, tuple[float, float, float]], list[dict], set[int]]:
    """The iterations, the device tasks and the iterations whose window holds a task."""
    timeline = ROOT / "device_0" / "timeline"
    iterations, tasks = cann_iterations(timeline), cann_tasks(timeline)
    with_tasks = {i for e in tasks for i, (a, d, _) in iterations.items()
                  if a <= float(e["ts"]) < a + d}
    return iterations, tasks, with_tasks


@pytest.fixture(scope="module")
def legacy() -> pk.Profile:
    return pk.load(ROOT, cache=False, progress=False)


def test_the_steps_say_which_hold_their_device_tasks(legacy) -> None:
    iterations, tasks, with_tasks = _raw()
    assert sorted(iterations) == list(range(1, 11)) and with_tasks == {1} and len(tasks) == 490
    steps = legacy.steps.set_index("step")
    assert steps["tasks_recorded"].tolist() == [i in with_tasks for i in sorted(iterations)]
    said = [n for n in legacy.meta.notes if "steps.tasks_recorded" in n]
    assert len(said) == 1 and "iteration 1 of 10" in said[0] and "iterations 2–10" in said[0]


def test_ai_cpu_time_per_step_is_over_the_step_that_ran_it(legacy) -> None:
    iterations, tasks, with_tasks = _raw()
    cpu = [float(e["dur"]) for e in tasks if e["args"]["Task Type"] == "AI_CPU"]
    per_step = sum(cpu) / len(with_tasks)  # 1,039.5 µs, the 2 tasks of iteration 1
    found = next(f for f in pk.advise(legacy) if f.rule == "ai_cpu")
    assert found.ms_per_step * 1e3 == pytest.approx(per_step, abs=0.01)
    # its share is of the step that ran them: iteration 1 and its wait for data
    (one,) = with_tasks
    step = iterations[one][1] + iterations[one][2]
    assert found.step_ms * 1e3 == pytest.approx(step, abs=0.01)
    assert found.score == pytest.approx(per_step / step, rel=1e-6)
    assert "step 1, the only step with its device tasks recorded" in found.step_basis
    # the Operators table: the AI CPU type's time per step, over the same step
    ai = A.ai_cpu_operators(legacy)
    assert float(ai["per_step_us"].sum()) == pytest.approx(per_step, abs=0.01)
    assert float(ai["calls_per_step"].sum()) == pytest.approx(len(cpu) / len(with_tasks))


def test_a_prof_folder_with_every_iteration_marks_no_step() -> None:
    """``wild/mi_prof`` keeps the timeline of all 10 iterations: no step is marked."""
    root = shared_sample("wild/mi_prof")
    c = pk.load(root, cache=False, progress=False)
    for rank in c.ranks:
        assert "tasks_recorded" not in c[rank].steps.columns
