"""The questions of the operators: the top operator, what bounds it, its intensity."""

from __future__ import annotations

from typing import Any

from ...format import sig
from ..data import StudentData, operator_label
from .registry import Question, Solution, _shuffled, question

__all__ = ["TopOperator", "OperatorBound", "OperatorIntensity"]


@question
class TopOperator(Question):
    id = "top_operator"
    title = "The costliest operator"
    stage = "operators"
    kind = "choice"
    guide = "03_operators"
    evidence = ("job_operators",)
    hint = ("Sum the device time of each kernel (name and input shapes) over the whole "
            "profile, every rank and pass, and take the largest total, not the longest "
            "single call.")

    def solve(self, data: StudentData) -> Solution:
        ops = data.operators
        labels = [operator_label(r) for _, r in ops.head(4).iterrows()]
        top = ops.iloc[0]
        return Solution(
            prompt="Which compute operator (kernel and input shapes; communication aside) "
                   "takes the most device time in your job, summed over all its calls and "
                   "ranks?",
            answer=labels[0], options=_shuffled(labels, data.setup, 7),
            derivation=f"perfkit.analysis.operator_efficiency, largest total_us: "
                       f"{labels[0]}: {int(top['count'])} calls, "
                       f"{sig(float(top['total_us']) / 1e3, 4)} ms",
            explanation=f"{int(top['count'])} calls add up to "
                        f"{sig(float(top['total_us']) / 1e3, 4)} ms: the matrix products of the "
                        "MLP dominate a dense decoder layer.",
            settings=("job",),
            facts={"operator": str(top["name"]), "input_shapes": str(top["input_shapes"])})


def _picked_operator(data: StudentData) -> Any:
    """The operator the bound question asks about: a matrix product or an element-wise
    kernel (by the parity of the student's pick), among the twelve costliest."""
    ops = data.operators.head(12)
    known = ops[ops["bound"].isin(["compute", "memory"])]
    kind = "gemm" if data.setup.pick % 2 == 0 else "elementwise"
    pool = known[known["kind"] == kind]
    if pool.empty:
        pool = known
    return pool.iloc[(data.setup.pick // 2) % len(pool)]


@question
class OperatorBound(Question):
    id = "operator_bound"
    title = "Compute- or memory-bound?"
    stage = "operators"
    kind = "choice"
    guide = "03_operators"
    evidence = ("brief", "job_operators")
    hint = ("Arithmetic intensity = FLOPs ÷ bytes moved (inputs and output, 2 bytes per "
            "bf16 element). Compare it with the device's ridge point, peak FLOP/s ÷ memory "
            "bandwidth: above it the kernel is compute-bound, below it memory-bound.")

    def solve(self, data: StudentData) -> Solution:
        row = _picked_operator(data)
        ridge = data.hardware.peak() / data.hardware.memory_bandwidth
        label = operator_label(row)
        answer = f"{row['bound']}-bound"
        return Solution(
            prompt=f"By the roofline of your device, is {label} compute-bound or "
                   "memory-bound?",
            answer=answer, options=["compute-bound", "memory-bound"],
            derivation=f"perfkit.analysis.operator_efficiency: {sig(float(row['flops']), 4)} "
                       f"FLOP / {sig(float(row['bytes']), 4)} B = "
                       f"{sig(float(row['intensity']), 4)} FLOP/B against a ridge point of "
                       f"{sig(ridge, 4)} FLOP/B → {answer}",
            explanation=f"{sig(float(row['intensity']), 3)} FLOP per byte is "
                        f"{'above' if row['bound'] == 'compute' else 'below'} the ridge "
                        f"point ({sig(ridge, 3)} FLOP/B): "
                        + ("faster arithmetic, not memory, would speed it up."
                           if row["bound"] == "compute" else
                           "it waits on memory; fusing it with its neighbours saves the "
                           "round trips."),
            settings=("job",),
            facts={"operator": str(row["name"]), "input_shapes": str(row["input_shapes"]),
                   "kind": str(row["kind"])})


@question
class OperatorIntensity(Question):
    id = "operator_intensity"
    title = "Arithmetic intensity"
    stage = "operators"
    unit = "FLOP/byte"
    rel_tol = 0.03
    levels = ("advanced",)
    guide = "03_operators"
    evidence = ("job_operators",)
    hint = ("For a matrix product of (m × k) by (k × n): 2·m·k·n FLOPs over "
            "2·(m·k + k·n + m·n) bytes in bf16.")

    def solve(self, data: StudentData) -> Solution:
        ops = data.operators
        top = ops[ops["kind"] == "gemm"].iloc[0]
        label = operator_label(top)
        value = float(top["intensity"])
        return Solution(
            prompt=f"The costliest matrix product of your job is {label}. What is its "
                   "arithmetic intensity, in FLOP per byte?",
            answer=value, options=None,
            derivation=f"perfkit.analysis.operator_efficiency: {sig(float(top['flops']), 4)} "
                       f"FLOP / {sig(float(top['bytes']), 4)} B = {sig(value, 4)}",
            explanation=f"{sig(value, 3)} FLOP/B: each byte fetched feeds many "
                        "multiply-adds, which is why large matrix products run near peak.",
            settings=("job",),
            facts={"operator": str(top["name"]), "input_shapes": str(top["input_shapes"])})
