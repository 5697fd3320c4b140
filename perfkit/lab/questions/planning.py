"""The questions of planning: the planner's layout and its predicted step."""

from __future__ import annotations

from ...format import sig
from ..data import StudentData, layout_label
from .registry import GIB, Question, Solution, _shuffled, question

__all__ = ["PlannerLayout", "PlannerStep"]


@question
class PlannerLayout(Question):
    id = "planner_layout"
    title = "The planner's layout"
    stage = "planning"
    kind = "choice"
    guide = "02_parallel_strategy"
    evidence = ("brief", "planner")
    hint = ("Run the planner (perfkit.plan.search) with the job of the brief: the model, "
            "the devices, the global batch, the search space given and your job's "
            "measured matrix efficiency (not the default).")

    def solve(self, data: StudentData) -> Solution:
        plan = data.plan
        labels = [layout_label(r) for _, r in plan.head(4).iterrows()]
        top = plan.iloc[0]
        job = data.setup.planner
        return Solution(
            prompt=f"Your team will train the full {job.preset} on {job.num_devices} "
                   f"devices with a global batch of {job.global_batch_size} sequences. "
                   "Which layout does the planner recommend?",
            answer=labels[0], options=_shuffled(labels, data.setup, 11),
            derivation=f"perfkit.plan.search(efficiency={job.efficiency}, restricted space) "
                       f"rank 1: {labels[0]}, step {sig(float(top['step_s']), 4)} s",
            explanation=f"{labels[0]}: {sig(float(top['step_s']), 3)} s per step, "
                        f"{sig(float(top['memory_bytes']) / GIB, 3)} GiB per device. "
                        "It is the fastest layout that fits.",
            settings=("planner",))


@question
class PlannerStep(Question):
    id = "planner_step"
    title = "The planner's predicted step"
    stage = "planning"
    unit = "s"
    rel_tol = 0.02
    guide = "02_parallel_strategy"
    evidence = ("brief", "planner")
    hint = ("Read the predicted step of the planner's first row; it comes from the step "
            "model at the efficiency you give it, so use your job's.")

    def solve(self, data: StudentData) -> Solution:
        top = data.plan.iloc[0]
        value = float(top["step_s"])
        return Solution(
            prompt="What step time, in seconds, does the planner predict for the layout it "
                   "recommends?",
            answer=value, options=None,
            derivation=f"perfkit.plan.search rank 1 step_s = {sig(value, 4)} s (compute "
                       f"{sig(float(top['compute_s']), 4)} + bubble "
                       f"{sig(float(top['bubble_s']), 4)} + exposed comm "
                       f"{sig(float(top['exposed_comm_s']), 4)})",
            explanation=f"{sig(value, 3)} s: compute {sig(float(top['compute_s']), 3)} s, "
                        f"bubble {sig(float(top['bubble_s']), 3)} s, exposed communication "
                        f"{sig(float(top['exposed_comm_s']), 3)} s.",
            settings=("planner",))
