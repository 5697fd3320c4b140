"""The questions of planning: the planner's layout and its predicted step."""

from __future__ import annotations

from ...format import sig
from ..data import StudentData, layout_label
from ..evidence import PLANNER_ROWS, planner_compute_s
from .registry import GIB, Question, Solution, _shuffled, question
from .tolerance import SHOWN_DIGITS, step_tolerance

__all__ = ["PlannerLayout", "PlannerStep"]


@question
class PlannerLayout(Question):
    id = "planner_layout"
    title = "The planner's layout"
    stage = "planning"
    kind = "choice"
    guide = "02_parallel_strategy"
    evidence = ("brief", "planner")
    hint = ("Run the planner (perfkit.plan.search with efficiency= and "
            "comm_efficiency=0.8) with the job of the brief: the model, the devices, the "
            "global batch, the search space given and your job's measured matrix efficiency "
            "(not the default).")

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
            derivation=f"perfkit.plan.search(efficiency={job.efficiency}, "
                       "comm_efficiency=0.8, restricted space) "
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
    #: Each student's tolerance comes from the rounding of the planner's table
    #: (:func:`step_tolerance`); this is the question's, where it cannot.
    rel_tol = 0.02
    tolerance_words = ("each student's own: half a unit of the last digit of the step to 3 "
                       "significant digits, in the planner table's unit or in seconds")
    guide = "02_parallel_strategy"
    evidence = ("brief", "planner")
    hint = ("Read the predicted step of the planner's first row; the planner prices every "
            "matrix product at the efficiency you give it, so use your job's.")

    def solve(self, data: StudentData) -> Solution:
        """Rank 1's ``step_s``: compute + bubble + exposed communication.

        The tolerance is the student's own (:func:`step_tolerance`): the rounding of the
        step as the planner's table shows it, or to 3 significant digits in seconds. The
        likely wrong quantities, the step with a term left out (compute alone, compute +
        bubble, compute + exposed communication), are marked wrong wherever they lie
        further than that from the answer; ``facts`` gives them and says whether every one
        that differs from the answer can be told apart (``told_apart``), and so does the
        derivation."""
        top = data.plan.iloc[0]
        value = float(top["step_s"])
        compute, bubble = float(planner_compute_s(data.plan).iloc[0]), float(top["bubble_s"])
        exposed = float(top["exposed_comm_s"])
        tol = step_tolerance(value, [float(v) for v in data.plan.head(PLANNER_ROWS)["step_s"]])
        wrong = {"compute alone": compute, "compute + bubble (communication left out)":
                 compute + bubble, "compute + exposed communication (bubble left out)":
                 compute + exposed}
        differ = {name for name, v in wrong.items() if abs(v - value) > 1e-9 * value}
        apart = all(abs(wrong[name] - value) > tol for name in differ)
        verdicts = "; ".join(
            f"{name} is {sig(v, 4)} s: " + (
                "the same as the answer here" if name not in differ else
                "the checker marks it wrong" if abs(v - value) > tol else
                "too close to the answer to tell apart, so the checker cannot mark it wrong")
            for name, v in wrong.items())
        return Solution(
            prompt="What step time, in seconds, does the planner predict for the layout it "
                   "recommends?",
            answer=value, options=None,
            derivation=f"perfkit.plan.search(efficiency={data.setup.planner.efficiency}, "
                       f"comm_efficiency=0.8) rank 1 step_s = {sig(value, 4)} s (compute "
                       f"{sig(compute, 4)} + bubble {sig(bubble, 4)} + exposed comm "
                       f"{sig(exposed, 4)}) ± {sig(tol, 2)} s (the table's {SHOWN_DIGITS} "
                       f"significant digits). {verdicts[0].upper()}{verdicts[1:]}.",
            explanation=f"{sig(value, 3)} s: compute {sig(compute, 3)} s (recompute and the "
                        "optimizer included), "
                        f"bubble {sig(bubble, 3)} s, exposed communication "
                        f"{sig(exposed, 3)} s.",
            settings=("planner",),
            facts={"compute_s": compute, "compute_bubble_s": compute + bubble,
                   "compute_exposed_comm_s": compute + exposed, "told_apart": apart},
            rel_tol=0.0, abs_tol=tol)
