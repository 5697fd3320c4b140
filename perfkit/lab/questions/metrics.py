"""The questions of the metrics: throughput, MFU, HFU, and the pipeline bubble."""

from __future__ import annotations

from ..._stats import median
from ...calc import bubble_fraction, flops_per_token, hfu, mfu
from ...format import sig
from ..data import StudentData
from .registry import Question, Solution, _job_line, question
from .tolerance import bubble_tolerance

__all__ = ["Throughput", "MFU", "HFU", "Bubble"]


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
    hint = ("Take the step time as the slowest rank's step (step_ms: Computing + "
            "Communication (Not Overlapped) + Free + Preparing in step_trace_time.csv, the "
            "device's span and its wait before it), then tokens per step = global "
            "batch × sequence length, divided by the step time and by every device of the "
            "job (not only the data-parallel ones).")

    def solve(self, data: StudentData) -> Solution:
        tps, step = data.tokens_per_s_per_device, data.step_s
        f = data.facts
        return Solution(
            prompt=f"Your job runs on {_job_line(data)}. How many tokens per second does "
                   "each device process?",
            answer=tps, options=None,
            derivation=f"step = slowest rank's step_us + preparing_us = "
                       f"{sig(step * 1e3, 4)} ms "
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
        """The MFU of the student's step, a training step (the lab's simulated job runs
        forward, backward and optimizer): ``flops_per_token`` counts forward and backward
        (``3 ×`` the forward pass, :func:`perfkit.flops_per_token`), not an inference
        step's forward pass (:mod:`perfkit.job.inference_mfu`)."""
        f = data.facts
        per_token = flops_per_token(f.model)
        value = 100 * mfu(f.model, data.tokens_per_s_per_device, f.hardware)
        peak = f.hardware.peak()
        return Solution(
            prompt="What is the MFU (model FLOPs utilisation) of your job's training step, "
                   "in %?",
            answer=value, options=None,
            derivation=f"{sig(per_token / 1e9, 4)} GFLOP/token (a training step: forward "
                       f"and backward, 3 × the forward pass) × "
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
        ratio = median(ev["ratio"]) if not ev.empty else float("nan")
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
    #: The figures are exact (pp, m, v): each student's tolerance is the rounding of an
    #: answer to one decimal (:func:`bubble_tolerance`); this is the question's, where it
    #: cannot.
    abs_tol = 0.5
    tolerance_words = "0.05 point: the rounding of an answer to one decimal"
    guide = "02_parallel_strategy"
    evidence = ("brief",)
    hint = ("While the pipeline fills and drains, each stage idles for (pp − 1) "
            "micro-batch slots; relative to the ideal compute time of m micro-batches that "
            "is (pp − 1) / m, and interleaving v virtual stages divides it by v.")

    def solve(self, data: StudentData) -> Solution:
        """The bubble over the ideal compute time, (pp − 1) / (v·m), in %
        (:func:`perfkit.bubble_fraction`).

        The tolerance is the rounding of an answer to one decimal (:func:`bubble_tolerance`),
        so that the likely wrong quantity, the bubble over the whole time (ideal + bubble,
        (pp − 1) / (v·m + pp − 1)), is marked wrong wherever it lies further than that;
        ``facts`` gives it and says which (``told_apart``), and so does the derivation."""
        p = data.setup.pipeline
        value = 100 * bubble_fraction(p.pp, p.num_micro_batches, p.vpp)
        slots = p.vpp * p.num_micro_batches
        of_all = 100 * (p.pp - 1) / (slots + p.pp - 1)
        tol = bubble_tolerance()
        apart = abs(of_all - value) > tol
        verdict = ("the same as the answer here" if of_all == value else
                   "the checker marks it wrong" if apart else
                   "too close to the answer to tell apart, so the checker cannot mark it "
                   "wrong")
        inter = f", {p.vpp} virtual stages per device (interleaved)" if p.vpp > 1 else ""
        formula = f"({p.pp} − 1) / ({p.vpp} × {p.num_micro_batches})" if p.vpp > 1 \
            else f"({p.pp} − 1) / {p.num_micro_batches}"
        return Solution(
            prompt=f"A layout with {p.pp} pipeline stages and {p.num_micro_batches} "
                   f"micro-batches per step{inter}: how large is the bubble, in % of the "
                   "ideal compute time?",
            answer=value, options=None,
            derivation=f"perfkit.bubble_fraction({p.pp}, {p.num_micro_batches}, {p.vpp}) = "
                       f"{formula} = {sig(value, 4)} % ± {sig(tol, 2)} point (an answer to "
                       f"one decimal). The bubble over the whole time, ({p.pp} − 1) / "
                       f"({slots} + {p.pp} − 1), is {sig(of_all, 4)} %: {verdict}.",
            explanation=f"{formula} = {sig(value, 3)} %. More micro-batches, or more virtual "
                        "stages, shrink it; more stages grow it.",
            settings=("pipeline",),
            facts={"bubble_pct": value, "of_all_time_pct": of_all, "told_apart": apart},
            rel_tol=0.0, abs_tol=tol)
