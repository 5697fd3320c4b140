"""The questions of the cluster and the planted problem: the slow component, the fault."""

from __future__ import annotations

from typing import Any

from ...format import sig
from ..data import StudentData
from ..scenario import Setup
from .registry import FAULT_WORDS, Question, Solution, question

__all__ = ["SlowComponent", "PlantedFault"]


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
