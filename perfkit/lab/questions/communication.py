"""The questions of communication: exposed time (or, on a pipeline, the bubble), waiting or
transit, the wait's share."""

from __future__ import annotations

from typing import Any

from ... import analysis as A
from ...format import sig, time_text
from ..data import StudentData
from ..scenario import Setup
from .registry import Question, Solution, question
from .tolerance import SAME_US, SHOWN_DIGITS, share_tolerance

__all__ = ["ExposedComm", "StepBubble", "WaitOrTransit", "WaitShare"]


@question
class ExposedComm(Question):
    id = "exposed_comm"
    title = "Exposed communication"
    stage = "communication"
    unit = "%"
    #: Each student's tolerance comes from the rounding of their own figures
    #: (:func:`share_tolerance`); these are the question's, where it cannot.
    rel_tol = 0.0
    abs_tol = 0.3
    tolerance_words = ("each student's own: the rounding of the two figures (3 significant "
                       "digits) and 0.05 point")
    guide = "04_communication"
    evidence = ("job_steps",)
    asked_of = "jobs with data or tensor parallelism"
    hint = ("Exposed communication is the part no computation hides: Communication (Not "
            "Overlapped), less the pipeline bubble (Bubble: the time a pipeline stage waits "
            "in receives for another stage, counted apart): exposed_comm_ms. Divide it by "
            "the step, the Overview's step time: step_ms, Computing + Communication (Not "
            "Overlapped) + Free + Preparing (the device's span and its wait before it).")

    def asks(self, setup: Setup) -> bool:
        """Asked where the job has collectives besides the pipeline's sends and receives:
        on a pipeline alone rank 0's exposed communication is a few µs, and its
        Communication (Not Overlapped) is the bubble (:class:`StepBubble`)."""
        p = setup.job.parallel
        return p.world_size > p.pp

    def solve(self, data: StudentData) -> Solution:
        """Rank 0's first step: exposed communication
        (:func:`~perfkit.analysis.exposed_comm_us`: not overlapped less the bubble) over
        the step's wall time (:func:`~perfkit.analysis.step_wall_us`: the device span and
        the wait before it, the step time of the Overview and of measured_step_s), in %:
        the share the Overview's split and the Communication tab show for the rank.

        The tolerance is the student's own (:func:`share_tolerance`): the rounding of the
        two figures the step table shows and of an answer to one decimal. The likely wrong
        quantities, Communication (Not Overlapped) with the bubble left in and all the
        communication (not overlapped + overlapped), each over the step, are marked wrong
        wherever they lie further than that from the answer; ``facts`` gives both shares
        and says whether every one that differs from the answer can be told apart
        (``told_apart``), and so does the derivation."""
        steps = data.job_steps
        row = steps[steps["rank"] == 0].iloc[[0]]
        exposed = float(A.exposed_comm_us(row).iloc[0])
        wall = float(A.step_wall_us(row).iloc[0])
        bubble = float(row["bubble_us"].fillna(0.0).iloc[0]) if "bubble_us" in row else 0.0
        cno = float(row["comm_not_overlapped_us"].iloc[0])
        overlapped = float(row["overlapped_us"].fillna(0.0).iloc[0]) \
            if "overlapped_us" in row else 0.0
        value = 100 * exposed / wall
        tol = share_tolerance(exposed, wall)
        wrong = {"Communication (Not Overlapped), the bubble left in": (cno, cno - exposed),
                 "all the communication, not overlapped and overlapped":
                     (cno + overlapped, cno + overlapped - exposed)}
        shares = {name: 100 * us / wall for name, (us, _) in wrong.items()}
        # a quantity within the profiler's nanosecond of the answer is the answer
        differ = {name for name, (_, gap) in wrong.items() if abs(gap) > SAME_US}
        apart = all(abs(shares[name] - value) > tol for name in differ)
        verdicts = "; ".join(
            f"{name} is {sig(shares[name], 4)} %: " + (
                "the same as the answer here" if name not in differ else
                "the checker marks it wrong" if abs(shares[name] - value) > tol else
                "too close to the answer to tell apart, so the checker cannot mark it wrong")
            for name in wrong)
        ms = {k: sig(v / 1e3, 4) for k, v in (
            ("cno", cno), ("bubble", bubble), ("exposed", exposed), ("wall", wall))}
        return Solution(
            prompt="On rank 0, what share of the step is communication that no computation "
                   "hides (Communication (Not Overlapped), the pipeline bubble left out), "
                   "in %?",
            answer=value, options=None,
            derivation=f"perfkit.analysis.step_breakdown, rank 0: exposed communication "
                       f"{ms['exposed']} ms (not overlapped {ms['cno']} ms − bubble "
                       f"{ms['bubble']} ms, analysis.exposed_comm_us) / step {ms['wall']} ms "
                       "(computing + not overlapped + free + preparing, "
                       f"analysis.step_wall_us) = {sig(value, 4)} % ± {sig(tol, 2)} point "
                       f"(the table's {SHOWN_DIGITS} significant digits and an answer to one "
                       f"decimal). Over the same step, {verdicts}.",
            explanation=f"{sig(exposed / 1e3, 3)} ms of the {sig(wall / 1e3, 3)} ms step: the "
                        "step waits that long on communication. Overlapped communication "
                        "costs nothing; only this part is worth attacking (the pipeline "
                        "bubble is a stage waiting for another, counted apart).",
            settings=("job",),
            facts={"exposed_pct": value,
                   "not_overlapped_pct": shares[next(iter(wrong))],
                   "communication_pct": shares[list(wrong)[1]],
                   "told_apart": apart},
            rel_tol=0.0, abs_tol=tol)


@question
class StepBubble(Question):
    id = "step_bubble"
    title = "The bubble in your step"
    stage = "communication"
    unit = "%"
    #: Each student's tolerance comes from the rounding of their own figures
    #: (:func:`share_tolerance`); these are the question's, where it cannot.
    rel_tol = 0.0
    abs_tol = 0.3
    tolerance_words = ("each student's own: the rounding of the two figures (3 significant "
                       "digits) and 0.05 point")
    guide = "04_communication"
    evidence = ("job_steps",)
    asked_of = "jobs with a pipeline"
    hint = ("A pipeline stage that waits for another stage's activations or gradients "
            "waits inside a receive, so step_trace_time.csv counts that wait as "
            "Communication (Not Overlapped) although no data is late on a link. Its Bubble "
            "column is that wait: bubble_ms in the step table. Divide it by the step, the "
            "Overview's step time: step_ms, Computing + Communication (Not Overlapped) + "
            "Free + Preparing.")

    def asks(self, setup: Setup) -> bool:
        """Asked where the job is a pipeline (more than one stage)."""
        return setup.job.parallel.pp > 1

    def solve(self, data: StudentData) -> Solution:
        """Rank 0's first step: the bubble (``bubble_us``, the receive wait of the
        stage) over the step's wall time (:func:`~perfkit.analysis.step_wall_us`), in %:
        the ``bubble_share`` the Communication tab shows for the rank, and rank 0's
        bubble on the Overview's chart.

        The tolerance is the student's own (:func:`share_tolerance`): the rounding of the
        two figures the step table shows and of an answer to one decimal. The wrong
        quantity, Communication (Not Overlapped) over the step, is then marked wrong
        wherever it lies further than that from the bubble's share. On a pipeline alone
        the two differ by a few µs of exposed communication and cannot be told apart;
        ``facts`` says which (``told_apart``) with both shares, and so does the
        derivation."""
        steps = data.job_steps
        row = steps[steps["rank"] == 0].iloc[[0]]
        bubble = float(row["bubble_us"].iloc[0])
        cno = float(row["comm_not_overlapped_us"].iloc[0])
        wall = float(A.step_wall_us(row).iloc[0])
        value = 100 * bubble / wall
        ms = {k: sig(v / 1e3, 4) for k, v in (("bubble", bubble), ("cno", cno),
                                               ("wall", wall))}
        rest = time_text(max(cno - bubble, 0.0))
        tol = share_tolerance(bubble, wall)
        cno_share = 100 * cno / wall
        apart = abs(cno_share - value) > tol
        verdict = ("the checker marks it wrong" if apart else
                   "too close to the bubble's share to tell apart, so the checker cannot "
                   "mark it wrong")
        return Solution(
            prompt=f"Your job is a pipeline of {data.facts.parallel.pp} stages. On rank 0, "
                   "what share of the step does the stage spend waiting for another stage "
                   "(the pipeline bubble), in %?",
            answer=value, options=None,
            derivation=f"perfkit.analysis.step_breakdown, rank 0: bubble {ms['bubble']} ms "
                       f"(of the {ms['cno']} ms of Communication (Not Overlapped)) / step "
                       f"{ms['wall']} ms (computing + not overlapped + free + preparing, "
                       f"analysis.step_wall_us) = {sig(value, 4)} % ± {sig(tol, 2)} "
                       f"point (the table's {SHOWN_DIGITS} significant digits and an answer "
                       f"to one decimal). Communication (Not Overlapped) over the step is "
                       f"{sig(cno_share, 4)} %: {verdict}.",
            explanation=f"Rank 0 waits {ms['bubble']} ms of its {ms['wall']} ms step for another "
                        f"stage. The profiler files that wait under Communication (Not "
                        f"Overlapped), {ms['cno']} ms, of which only {rest} is "
                        "communication: faster links would not shorten it. More "
                        "micro-batches, interleaved stages or better balanced stages do.",
            settings=("job",),
            facts={"bubble_pct": value, "not_overlapped_pct": cno_share,
                   "told_apart": apart},
            rel_tol=0.0, abs_tol=tol)


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
