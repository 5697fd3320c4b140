"""The questions of a lab pack: one small class each, in the order of the tuning cycle.

A question is registered with :func:`question` and answers three things:

* :meth:`Question.solve` — from a student's own data (:class:`~perfkit.lab.data.
  StudentData`: their profiles read with :func:`perfkit.load` and perfkit's analyses, their
  IR dump, the calculators, the planner) it returns a :class:`Solution`: the prompt, the
  expected answer, the choices, how the answer was derived (for the instructor) and the
  explanation the student sees after a right answer;
* :attr:`Question.hint` — what the student sees after a wrong try: where to look and
  which rule to apply, never the answer;
* :meth:`Question.truth` — for the choices the simulator's inputs decide (the planted
  fault, the slow rank or link, wait or transit), what those inputs say.
  :func:`perfkit.lab.make` requires the data's answer to agree, and draws again when the
  symptom is not clear enough to ask about.

Numbers are checked within ``rel_tol`` / ``abs_tol`` (:func:`math.isclose`); a choice
exactly (case and spaces aside); several choices as a set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..calc import (
    activation_memory,
    bubble_fraction,
    flops_per_token,
    hfu,
    mfu,
    static_memory,
)
from ..errors import InvalidArgumentError
from ..format import sig
from .data import StudentData, layout_label, operator_label
from .scenario import LEVELS, MEMORY_RESERVE, Setup

__all__ = ["Solution", "Question", "QUESTIONS", "question", "questions_for", "KINDS",
           "STAGES", "FAULT_WORDS", "NONE_TAKES_EFFECT"]

#: Answer kinds: a number, one choice, several choices.
KINDS = ("number", "choice", "choices")
#: Steps of the tuning cycle, in order (a question belongs to one).
STAGES = ("metrics", "parallel strategy", "operators", "communication", "cluster",
          "diagnosis", "memory", "recompute", "planning")
#: The planted problems in the words of the fault question.
FAULT_WORDS = {
    "DataLoadingStall": "data-loading stall",
    "UnfusedOperators": "unfused operators",
    "MemoryPressure": "memory pressure",
    "UnbalancedStage": "unbalanced pipeline stage",
    "FullRecompute": "full recompute where selective was configured",
    "NoOverlap": "gradient communication not overlapped",
    "HostBound": "host-bound kernel launch",
    "SlowRank": "a slow rank",
    "SlowLink": "a slow link",
}
#: The choice of the recompute question when no configured pattern takes effect.
NONE_TAKES_EFFECT = "none of them"
GIB = 2**30


@dataclass(frozen=True)
class Solution:
    """One question solved for one student.

    Attributes
    ----------
    prompt : str
        The question as the student reads it.
    answer : float, str or list of str
        The expected answer.
    options : list of str, optional
        The choices (None for a number).
    derivation : str
        How the answer was derived, with the figures read (for the instructor).
    explanation : str
        Shown to the student after a right answer.
    settings : tuple of str
        The parts of the student's settings (key.json) the answer comes from.
    facts : dict
        Figures a re-derivation needs beyond the settings (e.g. the operator asked about).
    """

    prompt: str
    answer: Any
    options: list[str] | None
    derivation: str
    explanation: str
    settings: tuple[str, ...]
    facts: dict[str, Any] = field(default_factory=dict)


class Question:
    """Base class of the questions (see the module docstring)."""

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    stage: ClassVar[str] = ""
    kind: ClassVar[str] = "number"
    unit: ClassVar[str] = ""
    rel_tol: ClassVar[float] = 0.0
    abs_tol: ClassVar[float] = 0.0
    levels: ClassVar[tuple[str, ...]] = LEVELS
    hint: ClassVar[str] = ""
    #: The guided notebook that teaches what the question asks.
    guide: ClassVar[str] = ""
    #: The views of the student app that hold what the question needs.
    evidence: ClassVar[tuple[str, ...]] = ()

    def solve(self, data: StudentData) -> Solution:
        """The question for this student, answered from their data."""
        raise NotImplementedError

    def truth(self, setup: Setup) -> Any:
        """What the simulator's inputs say the answer is, where they decide it; else None."""
        return None

    def meta(self) -> dict[str, Any]:
        """The question's fixed description (key.json's ``questions``)."""
        return {"id": self.id, "title": self.title, "stage": self.stage, "kind": self.kind,
                "unit": self.unit, "rel_tol": self.rel_tol, "abs_tol": self.abs_tol,
                "levels": list(self.levels), "guide": self.guide,
                "evidence": list(self.evidence)}


#: Every question, by id, in the order of the tuning cycle.
QUESTIONS: dict[str, Question] = {}


def question(cls: type[Question]) -> type[Question]:
    """Register a question class (decorator); the order of registration is the order asked."""
    if not cls.id or cls.id in QUESTIONS:
        raise InvalidArgumentError("id", "a question needs a new, non-empty id", cls.id)
    if cls.kind not in KINDS or cls.stage not in STAGES:
        raise InvalidArgumentError(cls.id, f"kind must be in {KINDS} and stage in {STAGES}",
                                   (cls.kind, cls.stage))
    QUESTIONS[cls.id] = cls()
    return cls


def questions_for(level: str) -> list[Question]:
    """The questions of a pack of that level, in order."""
    if level not in LEVELS:
        raise InvalidArgumentError("level", f"must be one of {LEVELS}", level)
    return [q for q in QUESTIONS.values() if level in q.levels]


# ---- helpers ---------------------------------------------------------------------------

def _shuffled(options: list[str], setup: Setup, salt: int) -> list[str]:
    """The options in an order drawn from the student's setup (stable for a pack)."""
    order = np.random.default_rng([setup.pick, salt]).permutation(len(options))
    return [options[int(i)] for i in order]


def _job_line(data: StudentData) -> str:
    f = data.facts
    p = f.parallel
    return (f"{f.devices} devices (dp {p.dp} × tp {p.tp} × pp {p.pp}), global batch "
            f"{f.global_batch_size} sequences of {f.seq_length} tokens")


# ---- metrics ---------------------------------------------------------------------------

@question
class Throughput(Question):
    id = "throughput"
    title = "Throughput of your job"
    stage = "metrics"
    unit = "tokens/s per device"
    rel_tol = 0.03
    guide = "01_metrics"
    evidence = ("brief", "job_steps")
    hint = ("Take the step time as the slowest rank's step (Computing + Communication "
            "(Not Overlapped) + Free in step_trace_time.csv), then tokens per step = global "
            "batch × sequence length, divided by the step time and by every device of the "
            "job (not only the data-parallel ones).")

    def solve(self, data: StudentData) -> Solution:
        tps, step = data.tokens_per_s_per_device, data.step_s
        f = data.facts
        return Solution(
            prompt=f"Your job runs on {_job_line(data)}. How many tokens per second does "
                   "each device process?",
            answer=tps, options=None,
            derivation=f"step = slowest rank's step_us = {sig(step * 1e3, 4)} ms "
                       f"(perfkit.analysis.measured_step_s); {f.global_batch_size} × "
                       f"{f.seq_length} / ({sig(step, 4)} s × {f.devices}) = {sig(tps, 4)}",
            explanation=f"{f.global_batch_size} × {f.seq_length} tokens in {sig(step, 4)} s "
                        f"on {f.devices} devices: {sig(tps, 4)} tokens/s per device. Divide by "
                        "every device, so that jobs of different layouts compare.",
            settings=("job",))


@question
class MFU(Question):
    id = "mfu"
    title = "MFU of your job"
    stage = "metrics"
    unit = "%"
    rel_tol = 0.03
    guide = "01_metrics"
    evidence = ("brief", "job_steps")
    hint = ("MFU = model FLOPs per token × tokens/s per device ÷ the device's peak FLOP/s. "
            "The brief gives the model's FLOPs per token (forward + backward, every matrix "
            "product including the attention scores, no recompute) and the peak.")

    def solve(self, data: StudentData) -> Solution:
        f = data.facts
        per_token = flops_per_token(f.model)
        value = 100 * mfu(f.model, data.tokens_per_s_per_device, f.hardware)
        peak = f.hardware.peak()
        return Solution(
            prompt="What is the MFU (model FLOPs utilisation) of your job, in %?",
            answer=value, options=None,
            derivation=f"{sig(per_token / 1e9, 4)} GFLOP/token × "
                       f"{sig(data.tokens_per_s_per_device, 4)} tokens/s / "
                       f"{sig(peak / 1e12, 4)} TFLOP/s = {sig(value, 4)} % "
                       "(perfkit.mfu, exact GEMMs, non-causal attention)",
            explanation=f"{sig(per_token / 1e9, 4)} GFLOP per token at "
                        f"{sig(data.tokens_per_s_per_device, 4)} tokens/s is "
                        f"{sig(per_token * data.tokens_per_s_per_device / 1e12, 4)} TFLOP/s of "
                        f"useful work against a peak of {sig(peak / 1e12, 4)}: {sig(value, 3)} %.",
            settings=("job",))


@question
class HFU(Question):
    id = "hfu"
    title = "HFU of your job"
    stage = "metrics"
    unit = "%"
    rel_tol = 0.03
    levels = ("advanced",)
    guide = "01_metrics"
    evidence = ("brief", "job_steps", "job_operators")
    hint = ("HFU counts what the hardware really computed: the model FLOPs plus every "
            "forward pass run again for recompute. Find out from the operators whether the "
            "forward pass of each layer runs twice (full recompute). SiLU/Mul selective "
            "recompute adds no matrix FLOPs worth counting.")

    def solve(self, data: StudentData) -> Solution:
        f = data.facts
        observed = data.observed_recompute
        value = 100 * hfu(f.model, data.tokens_per_s_per_device, f.hardware,
                          recompute="full" if observed == "full" else "none")
        ev = data.recompute_evidence
        ratio = float(ev["ratio"].median()) if not ev.empty else float("nan")
        return Solution(
            prompt="What is the HFU (hardware FLOPs utilisation, recompute included) of "
                   "your job, in %?",
            answer=value, options=None,
            derivation=f"forward/backward attention tasks = {sig(ratio, 3)} "
                       f"(perfkit.analysis.recompute_evidence) → recompute observed: "
                       f"{observed}; perfkit.hfu(recompute="
                       f"{'full' if observed == 'full' else 'none'}) = {sig(value, 4)} %",
            explanation=("Every layer's forward runs twice (full recompute): the hardware "
                         "does a third more work than the model needs, so HFU is above MFU."
                         if observed == "full" else
                         "Each forward runs once: no layer is fully recomputed, so HFU "
                         "equals MFU (SiLU/Mul recompute is element-wise work)."),
            settings=("job",), facts={"recompute_observed": observed})


# ---- parallel strategy -------------------------------------------------------------------

@question
class Bubble(Question):
    id = "bubble"
    title = "Pipeline bubble"
    stage = "parallel strategy"
    unit = "%"
    abs_tol = 0.5
    guide = "02_parallel_strategy"
    evidence = ("brief",)
    hint = ("While the pipeline fills and drains, each stage idles for (pp − 1) "
            "micro-batch slots; relative to the ideal compute time of m micro-batches that "
            "is (pp − 1) / m, and interleaving v virtual stages divides it by v.")

    def solve(self, data: StudentData) -> Solution:
        p = data.setup.pipeline
        value = 100 * bubble_fraction(p.pp, p.num_micro_batches, p.vpp)
        inter = f", {p.vpp} virtual stages per device (interleaved)" if p.vpp > 1 else ""
        formula = f"({p.pp} − 1) / ({p.vpp} × {p.num_micro_batches})" if p.vpp > 1 \
            else f"({p.pp} − 1) / {p.num_micro_batches}"
        return Solution(
            prompt=f"A layout with {p.pp} pipeline stages and {p.num_micro_batches} "
                   f"micro-batches per step{inter}: how large is the bubble, in % of the "
                   "ideal compute time?",
            answer=value, options=None,
            derivation=f"perfkit.bubble_fraction({p.pp}, {p.num_micro_batches}, {p.vpp}) = "
                       f"{formula} = {sig(value, 4)} %",
            explanation=f"{formula} = {sig(value, 3)} %. More micro-batches, or more virtual "
                        "stages, shrink it; more stages grow it.",
            settings=("pipeline",))


# ---- operators ------------------------------------------------------------------------

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


# ---- communication ---------------------------------------------------------------------

@question
class ExposedComm(Question):
    id = "exposed_comm"
    title = "Exposed communication"
    stage = "communication"
    unit = "%"
    rel_tol = 0.05
    abs_tol = 0.3
    guide = "04_communication"
    evidence = ("job_steps",)
    hint = ("Exposed communication is the part no computation hides: Communication (Not "
            "Overlapped). Divide it by the step (Computing + Communication (Not Overlapped) "
            "+ Free). On a pipeline stage it includes the time spent waiting in receives.")

    def solve(self, data: StudentData) -> Solution:
        steps = data.job_steps
        row = steps[steps["rank"] == 0].iloc[0]
        value = 100 * float(row["comm_not_overlapped_us"]) / float(row["step_us"])
        return Solution(
            prompt="On rank 0, what share of the step is communication that no computation "
                   "hides (Communication (Not Overlapped)), in %?",
            answer=value, options=None,
            derivation=f"perfkit.analysis.step_breakdown, rank 0: "
                       f"{sig(float(row['comm_not_overlapped_us']) / 1e3, 4)} ms / "
                       f"{sig(float(row['step_us']) / 1e3, 4)} ms = {sig(value, 4)} %",
            explanation=f"{sig(float(row['comm_not_overlapped_us']) / 1e3, 3)} ms of "
                        f"{sig(float(row['step_us']) / 1e3, 3)} ms: the step waits that long "
                        "on communication. Overlapped communication costs nothing; only this "
                        "part is worth attacking.",
            settings=("job",))


@question
class WaitOrTransit(Question):
    id = "wait_or_transit"
    title = "Wait or transit?"
    stage = "communication"
    kind = "choice"
    guide = "04_communication"
    evidence = ("cluster_comm",)
    hint = ("Split each collective's time into transit (moving data) and wait (the "
            "operator started but a peer had not arrived). A late peer shows as wait on "
            "everyone else; a slow link as long transit on the ranks it joins.")
    options = ("wait: a peer arrives late", "transit: the data moves slowly")

    def solve(self, data: StudentData) -> Solution:
        c = data.collective
        wait, transit = float(c["wait_share"]), float(c["transit_share"])
        answer = self.options[0] if wait > transit else self.options[1]
        return Solution(
            prompt="In your cluster profile the gradient all-reduce takes longer than it "
                   "should. Where does its time go?",
            answer=answer, options=list(self.options),
            derivation=f"perfkit.analysis.comm_summary, {c['op_type']} of the data-parallel "
                       f"group: wait {sig(100 * wait, 3)} %, transit {sig(100 * transit, 3)} % "
                       "of its time",
            explanation=f"Wait is {sig(100 * wait, 3)} % and transit {sig(100 * transit, 3)} % "
                        "of the collective's time. "
                        + ("The ranks sit in the collective until a late peer joins: look "
                           "for the rank that computes longest." if wait > transit else
                           "The data itself moves slowly: look for the link with the lowest "
                           "bandwidth."),
            settings=("cluster",))

    def truth(self, setup: Setup) -> Any:
        kind = type(setup.cluster.faults[0]).__name__
        return self.options[0] if kind == "SlowRank" else self.options[1]


@question
class WaitShare(Question):
    id = "wait_share"
    title = "Share of wait"
    stage = "communication"
    unit = "%"
    abs_tol = 1.0
    levels = ("advanced",)
    guide = "04_communication"
    evidence = ("cluster_comm",)
    hint = ("Add up the wait time of the all-reduce over every rank and divide by its "
            "total elapsed time over every rank.")

    def solve(self, data: StudentData) -> Solution:
        c = data.collective
        value = 100 * float(c["wait_share"])
        return Solution(
            prompt="In your cluster profile, what share of the gradient all-reduce's time "
                   "(all ranks together) is wait, in %?",
            answer=value, options=None,
            derivation=f"perfkit.analysis.comm_summary: wait {sig(float(c['wait_us']) / 1e3, 4)}"
                       f" ms of {sig(float(c['total_us']) / 1e3, 4)} ms = {sig(value, 4)} %",
            explanation=f"{sig(value, 3)} % of the collective is spent waiting for peers.",
            settings=("cluster",))


# ---- the cluster and the planted problem -----------------------------------------------

def _component_options() -> list[str]:
    ranks = [f"rank {r}" for r in range(4)]
    links = [f"link {a}-{b}" for a in range(4) for b in range(a + 1, 4)]
    return ranks + links


@question
class SlowComponent(Question):
    id = "slow_component"
    title = "Which rank or link is slow?"
    stage = "cluster"
    kind = "choice"
    guide = "07_cluster"
    evidence = ("cluster_steps", "cluster_comm")
    hint = ("Compare the ranks with each other: a slow rank computes longer than its peers "
            "(and communicates less, since it never waits); a slow link shows a bandwidth "
            "far below the group's other links in the communication matrix.")

    def solve(self, data: StudentData) -> Solution:
        found = data.slow_components()
        answer = found[0] if len(found) == 1 else ", ".join(found) or "none"
        sr = data.slow_ranks
        detail = ""
        if answer.startswith("rank"):
            r = int(answer.split()[1])
            row = sr[(sr["rank"] == r) & (sr["metric"] == "computing_us")].iloc[0]
            detail = (f"perfkit.analysis.slow_ranks: rank {r} computes "
                      f"{sig(float(row['excess_pct']), 3)} % longer than its peers' median")
            explanation = (f"Rank {r} computes {sig(float(row['excess_pct']), 3)} % longer than "
                           "the others, who then wait for it in every collective.")
        elif answer.startswith("link"):
            sl = data.slow_links
            row = sl[sl["slow"].fillna(False)].iloc[0]
            detail = (f"perfkit.analysis.slow_links: {int(row['src_rank'])}→"
                      f"{int(row['dst_rank'])} at {sig(float(row['bandwidth_gbps']), 3)} GB/s, "
                      f"{sig(100 * float(row['ratio_to_median']), 3)} % of the median link")
            explanation = (f"The {answer} delivers {sig(float(row['bandwidth_gbps']), 3)} GB/s, "
                           f"{sig(100 * float(row['ratio_to_median']), 3)} % of the others: every "
                           "ring collective moves at the pace of its slowest link.")
        else:
            explanation = ""
        return Solution(
            prompt="Your four-rank cluster profile (data parallel 4) has one slow rank or "
                   "one slow link. Which?",
            answer=answer, options=_component_options(), derivation=detail,
            explanation=explanation, settings=("cluster",))

    def truth(self, setup: Setup) -> Any:
        fault = setup.cluster.faults[0]
        if type(fault).__name__ == "SlowRank":
            return f"rank {fault.rank}"
        a, b = sorted((fault.src, fault.dst))
        return f"link {a}-{b}"


@question
class PlantedFault(Question):
    id = "fault"
    title = "What is wrong with your job?"
    stage = "diagnosis"
    kind = "choice"
    guide = "00_start_here"
    evidence = ("job_steps", "job_operators", "job_memory")
    hint = ("Walk the cycle: the interval before each step (data loading), then "
            "computation (operators: repeated forwards, chains of small kernels), then "
            "communication (how much is hidden), then memory (how close to the limit), and "
            "for a pipeline how busy each stage is. The planted problem stands far out of "
            "its normal range.")

    def solve(self, data: StudentData) -> Solution:
        found = data.job_symptoms()
        words = [FAULT_WORDS[k] for k in found]
        answer = words[0] if len(words) == 1 else ", ".join(words) or "none"
        return Solution(
            prompt="One problem was planted in your job's profile. Which?",
            answer=answer, options=list(FAULT_WORDS.values()),
            derivation="symptoms found (perfkit.lab.data.StudentData.job_symptoms: "
                       "data_loading, unfused_patterns, memory_peaks, step_breakdown per "
                       f"stage, recompute_evidence, comm_overlap): {', '.join(found) or 'none'}",
            explanation=_FAULT_EXPLANATIONS.get(found[0], "") if len(found) == 1 else "",
            settings=("job",))

    def truth(self, setup: Setup) -> Any:
        return FAULT_WORDS[type(setup.job.faults[0]).__name__]


_FAULT_EXPLANATIONS = {
    "DataLoadingStall": "The device idles before the first kernel of the step (Preparing): "
                        "the host is waiting for data. More loader workers, prefetching or "
                        "a faster dataset format fix it.",
    "UnfusedOperators": "Norms or rotary embeddings run as chains of small vector kernels, "
                        "each reading and writing the whole tensor: use the fused kernels.",
    "MemoryPressure": "The allocator holds nearly all device memory and stalls to free "
                      "cached blocks: recompute a little more, shard the optimizer, or use "
                      "a smaller micro-batch.",
    "UnbalancedStage": "The first stage computes much longer than the others, which wait "
                       "in their receives: move layers off it.",
    "FullRecompute": "Every forward runs twice although selective recompute was configured "
                     "and memory is far from full: recompute only what memory needs.",
    "NoOverlap": "The gradient reduction starts only after the whole backward pass, so "
                 "none of it is hidden: overlap it bucket by bucket.",
}


# ---- memory --------------------------------------------------------------------------------

def _layout_memory(data: StudentData) -> tuple[float, float, float]:
    lay = data.setup.layout
    model = lay.model
    static = static_memory(model, lay.parallel, scheme="mindspore").total_bytes
    act = activation_memory(model, lay.parallel).total_bytes
    limit = data.hardware.memory_bytes * (1 - MEMORY_RESERVE)
    return static, act, limit


def _layout_text(data: StudentData) -> str:
    lay = data.setup.layout
    p = lay.parallel
    extras = [f"optimizer sharded over {p.optimizer_shard}" if p.optimizer_shard > 1
              else "optimizer not sharded",
              "no recompute" if p.recompute == "none" else f"{p.recompute} recompute"]
    if p.sequence_parallel:
        extras.append("sequence parallel")
    return (f"the full {lay.preset} ({lay.model.num_layers} layers, sequence "
            f"{lay.model.seq_length}) with dp {p.dp} × tp {p.tp} × pp {p.pp}, micro-batch "
            f"size {p.micro_batch_size}, {p.num_micro_batches} micro-batches, "
            + ", ".join(extras))


@question
class MemoryNeed(Question):
    id = "memory_need"
    title = "Memory of a layout"
    stage = "memory"
    unit = "GiB"
    rel_tol = 0.03
    guide = "05_memory"
    evidence = ("brief", "calculator")
    hint = ("Static memory (MindSpore's accounting): 10 bytes per parameter on the device "
            "(fp16 weights, fp32 Adam moments) divided by the optimizer shard, plus 2 bytes "
            "of fp16 gradient when accumulating micro-batches or pipelining. Activations: "
            "the seed's per-layer table times the layers and micro-batches in flight on the "
            "busiest stage (the first).")

    def solve(self, data: StudentData) -> Solution:
        static, act, _ = _layout_memory(data)
        value = (static + act) / GIB
        return Solution(
            prompt=f"How much device memory does {_layout_text(data)} need per device: "
                   "model states plus activations, in GiB?",
            answer=value, options=None,
            derivation=f"perfkit.static_memory(scheme='mindspore') = "
                       f"{sig(static / GIB, 4)} GiB + perfkit.activation_memory = "
                       f"{sig(act / GIB, 4)} GiB = {sig(value, 4)} GiB",
            explanation=f"{sig(static / GIB, 3)} GiB of weights, gradients and optimizer "
                        f"state plus {sig(act / GIB, 3)} GiB of activations.",
            settings=("layout",))


@question
class MemoryFit(Question):
    id = "memory_fit"
    title = "Does the layout fit?"
    stage = "memory"
    kind = "choice"
    guide = "05_memory"
    evidence = ("brief", "calculator")
    hint = ("Compare what the layout needs per device with the usable memory: the "
            "device's memory less 10 % kept for workspace and fragmentation.")
    options = ("fits", "does not fit")

    def solve(self, data: StudentData) -> Solution:
        static, act, limit = _layout_memory(data)
        fits = static + act <= limit
        answer = self.options[0] if fits else self.options[1]
        return Solution(
            prompt=f"Does {_layout_text(data)} fit in the memory of your device "
                   f"({sig(data.hardware.memory_bytes / GIB, 3)} GiB, of which 90 % usable)?",
            answer=answer, options=list(self.options),
            derivation=f"{sig((static + act) / GIB, 4)} GiB needed vs {sig(limit / GIB, 4)} GiB "
                       "usable (device memory × 0.9)",
            explanation=f"{sig((static + act) / GIB, 3)} GiB against {sig(limit / GIB, 3)} GiB "
                        "usable. "
                        + ("" if fits else "Shard the optimizer, recompute more, or split "
                           "the model further (tp, pp)."),
            settings=("layout",))


# ---- recompute -----------------------------------------------------------------------------

@question
class RecomputeEffective(Question):
    id = "recompute_effective"
    title = "Which recompute patterns take effect?"
    stage = "recompute"
    kind = "choices"
    guide = "06_recompute"
    evidence = ("ir",)
    hint = ("A pattern takes effect only when the compiler really cloned an operator it "
            "selects into the backward graph (the clone carries duplicated: Bool(1)). "
            "Being configured, or even marked recompute: Bool(1), is not enough.")

    def solve(self, data: StudentData) -> Solution:
        pats = data.recompute_check.patterns
        configured = [str(p) for p in pats["pattern"]]
        taken = [str(p) for p, d in zip(pats["pattern"], pats["duplicated"], strict=True)
                 if d > 0]
        answer = taken or [NONE_TAKES_EFFECT]
        table = "; ".join(f"{p}: matched {int(m)}, marked {int(k)}, duplicated {int(d)}"
                          for p, m, k, d in zip(pats["pattern"], pats["matched"],
                                                pats["marked"], pats["duplicated"],
                                                strict=True))
        return Solution(
            prompt="Your configuration (ir/recompute.yaml) selects these patterns for "
                   "recompute. In your IR dump (ir/recompute_validate.ir.gz), which of them "
                   "take effect?",
            answer=answer, options=configured + [NONE_TAKES_EFFECT],
            derivation=f"perfkit.analysis.recompute_check: {table}",
            explanation=("Only " + ", ".join(taken) + " produced clones in the backward "
                         "graph." if taken else "None of them produced a clone in the "
                         "backward graph."),
            settings=("recompute",))


@question
class RecomputeMul(Question):
    id = "recompute_mul"
    title = "Is the MLP's Mul recomputed?"
    stage = "recompute"
    kind = "choice"
    guide = "06_recompute"
    evidence = ("ir",)
    hint = ("Follow the Mul of layer 1's MLP through the dump: is it marked for recompute, "
            "and does a clone of it appear in the backward graph? If it is marked but not "
            "cloned, look at its neighbours.")
    options = ("yes: it is cloned into the backward graph",
               "no: it is marked, but the Reshape next to it is not recomputed, so the "
               "compiler drops the clone",
               "no: it is not even marked; the configuration never reached the graph")

    def solve(self, data: StudentData) -> Solution:
        check = data.recompute_check
        m = check.matches
        mul = m[(m["op"] == "Mul") & (m["path"].astype(str).str.endswith(".mul"))
                & m["configured"].astype(bool)]
        if mul["duplicated"].astype(bool).any():
            answer = self.options[0]
        elif mul["marked"].astype(bool).any():
            answer = self.options[1]
        else:
            answer = self.options[2]
        return Solution(
            prompt="Look at the Mul of the MLP (it multiplies the SiLU branch by the up "
                   "projection) in layer 1, the layer that is not fully recomputed. Is it "
                   "recomputed?",
            answer=answer, options=list(self.options),
            derivation=f"perfkit.analysis.recompute_check matches of the Mul: "
                       f"marked {int(mul['marked'].astype(bool).sum())}, duplicated "
                       f"{int(mul['duplicated'].astype(bool).sum())} (of {len(mul)})",
            explanation={
                self.options[0]: "The Mul and the Reshapes around it are all selected, so "
                                 "the compiler can drop their forward outputs and clone "
                                 "them in the backward pass.",
                self.options[1]: "Recomputing the Mul alone saves nothing while its "
                                 "Reshape neighbours keep their outputs: add the Reshapes "
                                 "to the patterns.",
                self.options[2]: "No node carries the recompute mark: check that the "
                                 "recompute configuration is passed to the model at all.",
            }[answer],
            settings=("recompute",))


# ---- planning ------------------------------------------------------------------------------

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
