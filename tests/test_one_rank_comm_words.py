"""On a profile of one rank, the Communication tab and the findings speak of that rank, not
of "ranks" as if there were several; on several ranks, their words stay.

- The Communication tab's overlap table showed "exposed, median over ranks", "min", "max"
  and "most exposed rank", the same figure three times and rank 0, and the collectives
  table said "summed over ranks" with a "ranks" column of 1 (``wild/msa_kernel_details``).
- The ``data_loading`` finding said "the wait of the slowest rank of each step (...; worst:
  rank 0, ...)" on one rank (``wild/k_resnet50_nw4``); ``exposed_communication`` said
  "the least exposed of the ranks loaded" and "in total over ranks and steps".

The figures are read from the raw files here (csv, json: :mod:`raw_kineto`).
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from decimal import Decimal
from pathlib import Path

import pytest
from raw_kineto import raw_windows
from shared_samples import shared_sample
from widget_html import panel_words

import perfkit as pk
from perfkit.advisor.communication import comm_wait, exposed_comm
from perfkit.advisor.context import ASSUMPTIONS, Context
from perfkit.widgets import tab_panel

DATA = Path(__file__).resolve().parents[1] / "data"
ONE_RANK_WORDS = ("median over ranks", "most exposed rank", "summed over ranks",
                  "over ranks and steps", "slowest rank of each step", "worst: rank",
                  "the least exposed")


def _union(intervals: list[tuple[Decimal, Decimal]]) -> list[list[Decimal]]:
    out: list[list[Decimal]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _kernel_details() -> tuple[dict[str, list[float]], float, float]:
    """wild/msa_kernel_details (one rank, one step): per collective kind the durations of
    its HCCL tasks (µs), the union of the HCCL tasks and the part of it under no other
    device task (µs): the communication and the exposed communication of the step."""
    path = shared_sample("wild/msa_kernel_details") / "kernel_details.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["Step Id"] for r in rows} == {"1"}

    def span(r: dict[str, str]) -> tuple[Decimal, Decimal]:
        start = Decimal(r["Start Time(us)"])
        return start, start + Decimal(r["Duration(us)"])

    hccl = [r for r in rows if r["Accelerator Core"] == "HCCL"]
    kinds: dict[str, list[float]] = {}
    for r in hccl:  # hcom_broadcast_ -> broadcast, hcom_allReduce_ -> allreduce
        kinds.setdefault(r["Type"].removeprefix("hcom_").strip("_").lower(), []).append(
            float(r["Duration(us)"]))
    comm = _union([span(r) for r in hccl])
    compute = _union([span(r) for r in rows if r["Accelerator Core"] != "HCCL"])
    under = sum((max(Decimal(0), min(b, d) - max(a, c)) for a, b in comm for c, d in compute),
                Decimal(0))
    total = sum((b - a for a, b in comm), Decimal(0))
    return kinds, float(total), float(total - under)


def _cells_after(text: str, caption: str, n: int) -> list[str]:
    """The first ``n`` cells (header cells, then the first row's) after ``caption``."""
    assert caption in text, text[:800]
    return [c.strip() for c in text.split(caption, 1)[1].split(" | ")][:n]


@pytest.mark.shared_samples
def test_the_communication_tab_of_one_rank_shows_that_ranks_figures() -> None:
    kinds, comm_us, exposed_us = _kernel_details()
    assert kinds["broadcast"] and len(kinds["broadcast"]) == 2
    text = panel_words(tab_panel("Communication", str(shared_sample("wild/msa_kernel_details"))))
    overlap = _cells_after(
        text, "Communication hidden behind computation, rank 0 (per step: the rank's mean "
              "over its 1 step, as the findings count it)", 8)
    assert overlap[:4] == ["exposed (ms)", "all communication (ms)", "hidden (%)",
                           "exposed share of the step (%)"]
    # 345.4 ms of the 346.4 ms of HCCL tasks run under no other task: 0.29 % hidden
    assert float(overlap[4]) == pytest.approx(exposed_us / 1e3, abs=0.5)
    assert float(overlap[5]) == pytest.approx(comm_us / 1e3, abs=0.5)
    assert float(overlap[6]) == pytest.approx(100 * (1 - exposed_us / comm_us), abs=0.05)
    heads = _cells_after(text, "Collectives: time per kind, from the device's communication "
                               "tasks", 5)
    assert heads == ["collective", "calls (summed over steps)", "time (ms, summed over steps)",
                     "mean (ms, per call)", "longest (ms)"]
    row = re.search(r"\| broadcast \| (\d+) \| ([\d.,]+) \|", text)
    assert row, text[:800]
    assert int(row[1]) == len(kinds["broadcast"])
    assert float(row[2].replace(",", "")) == pytest.approx(sum(kinds["broadcast"]) / 1e3,
                                                           rel=5e-3)
    for words in ONE_RANK_WORDS:
        assert words not in text, words
    # two ranks (data/kineto-tiny-llama) keep the spread over the ranks
    comm = panel_words(tab_panel("Communication", str(DATA / "kineto-tiny-llama")))
    assert "Communication hidden behind computation, over the ranks" in comm
    for words in ("exposed, median over ranks", "most exposed rank",
                  "calls (summed over ranks and steps)", "time (ms, summed over ranks and steps)"):
        assert words in comm, words


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
@pytest.mark.shared_samples
def test_the_findings_of_one_rank_name_no_slowest_or_least_exposed_rank() -> None:
    folder = shared_sample("wild/k_resnet50_nw4")
    (trace,) = folder.glob("*.json.gz")
    windows, spans, _ = raw_windows(trace)
    start = {step: lo for lo, _hi, step in spans}
    # the device's wait before each step's first task: from the host's ProfilerStep start,
    # or from the previous step's last task where the device was still busy then
    waits = {s: float(windows[s][0] - max(start[s], windows.get(s - 1, [0, start[s]])[1]))
             for s in windows}
    assert len(waits) == 6
    longest = max(waits, key=waits.__getitem__)
    text = panel_words(tab_panel("Advice", str(folder)))
    found = re.search(r"([\d.]+) ms per step on average, the rank's wait each step "
                      r"\(longest: step (\d+), ([\d.]+) ms\)", text)
    assert found, text[:800]
    assert float(found[1]) == pytest.approx(statistics.mean(waits.values()) / 1e3, abs=0.01)
    assert int(found[2]) == longest == 5
    assert float(found[3]) == pytest.approx(waits[longest] / 1e3, abs=0.05)
    # the exposed communication of one rank (wild/msa_kernel_details)
    _kinds, _comm_us, exposed_us = _kernel_details()
    advice = panel_words(tab_panel("Advice", str(shared_sample("wild/msa_kernel_details"))))
    exposed = re.search(r"rank 0, the one rank loaded, communicates ([\d.]+) ms per step",
                        advice)
    assert exposed, advice[:800]
    assert float(exposed[1]) == pytest.approx(exposed_us / 1e3, abs=0.5)
    assert "in total over steps" in advice
    for words in ONE_RANK_WORDS:
        assert words not in text, words
        assert words not in advice, words
    _several_ranks_advice()


def _several_ranks_advice() -> None:
    """data/simulated/data-stall (4 ranks) keeps the words of several: the step's slowest
    rank, read from each rank's step_trace_time.csv (its wall: computing, exposed
    communication, free and preparing), and its preparing."""
    per: dict[int, dict[int, tuple[float, float]]] = {}
    for path in (DATA / "simulated" / "data-stall").glob(
            "*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"):
        with open(path, newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                wall = sum(float(r[k]) for k in ("Computing", "Communication(Not Overlapped)",
                                                 "Free", "Preparing"))
                per.setdefault(int(r["Step"]), {})[int(r["Device_id"])] = (
                    wall, float(r["Preparing"]))
    assert len(per) == 3 and all(len(ranks) == 4 for ranks in per.values())
    slowest = {s: max(ranks.items(), key=lambda kv: kv[1][0]) for s, ranks in per.items()}
    mean = statistics.mean(prep for _rank, (_wall, prep) in slowest.values())
    step, (rank, (_wall, worst)) = max(slowest.items(), key=lambda kv: kv[1][1][1])
    text = panel_words(tab_panel("Advice", str(DATA / "simulated" / "data-stall")))
    found = re.search(r"([\d.]+) ms per step on average, the wait of the slowest rank of each "
                      r"step \(the rank the step time counts; worst: rank (\d+), step (\d+): "
                      r"([\d.]+) ms\)", text)
    assert found, text[:800]
    assert float(found[1]) == pytest.approx(mean / 1e3, abs=0.05)
    assert (int(found[2]), int(found[3])) == (rank, step) == (1, 1)
    assert float(found[4]) == pytest.approx(worst / 1e3, abs=0.5)
    assert "in total over ranks and steps" in text


@pytest.mark.shared_samples
def test_the_wait_for_peers_of_one_rank_is_that_ranks() -> None:
    """Rank 0's folder of ``ascend/msinsight-pt-level1`` alone: its collectives wait for
    rank 1, which is not loaded. Without a data-loading finding to explain the waiting
    (the rules are run here without it), ``comm_wait`` said "the median rank spends 0 µs
    per step more ... than the least exposed one, which itself waits 5.71 ms"."""
    folder = shared_sample("ascend/msinsight-pt-level1/rank0_ascend_pt")
    out = folder / "ASCEND_PROFILER_OUTPUT"
    with (out / "step_trace_time.csv").open(newline="", encoding="utf-8") as fh:
        (step,) = list(csv.DictReader(fh))
    exposed = float(step["Communication(Not Overlapped)"]) - float(step["Bubble"])
    raw = json.loads((out / "communication.json").read_text(encoding="utf-8"))
    infos = [op["Communication Time Info"] for s in raw.values() for kind in s.values()
             for op in kind.values()]
    share = sum(i["Wait Time(ms)"] for i in infos) / sum(i["Elapse Time(ms)"] for i in infos)
    prof = pk.load(folder, progress=False)
    assert not getattr(prof, "ranks", None)  # one rank
    ctx = Context(prof, None, None, None, dict(ASSUMPTIONS))
    ctx.start("exposed_comm", ())
    ctx.record("exposed_comm", exposed_comm(ctx))
    ctx.start("comm_wait", ("slow_ranks", "pipeline", "links", "exposed_comm",
                            "data_loading"))
    (found,) = comm_wait(ctx)
    assert found.ms_per_step == pytest.approx(exposed * share / 1e3, rel=1e-3)
    assert found.title == "Rank 0 waits for its peers inside its collectives"
    assert found.evidence.startswith(
        f"rank 0, the one rank loaded, waits {pk.format.time_text(exposed * share)} per step "
        "for its peers inside the collectives"), found.evidence
    assert "median rank" not in found.evidence and "least exposed" not in found.evidence
    # several ranks (data/kineto-tiny-llama) keep the median and the least exposed rank
    (two,) = [f for f in pk.advise(pk.load(DATA / "kineto-tiny-llama", progress=False))
              if f.rule == "comm_wait"]
    assert two.title == "Ranks wait for each other inside their collectives"
    assert two.evidence.startswith("the median rank spends ")
    assert "than the least exposed one" in two.evidence


def test_the_unfused_chains_of_one_rank_are_counted_over_its_steps() -> None:
    """One rank's folder of data/simulated/llama2-7b-tp2 opened alone: its SwiGLU chains
    (each Swish kernel, then a Mul) were "over ranks and steps"; the two-rank run keeps
    those words for the chains of both."""
    tp2 = DATA / "simulated" / "llama2-7b-tp2"
    swish = {}
    for folder in sorted(tp2.glob("*_ascend_pt")):
        with (folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").open(
                newline="", encoding="utf-8") as fh:
            swish[folder] = sum(r["Type"] == "Swish" for r in csv.DictReader(fh))
    assert len(swish) == 2 and all(swish.values())
    first = min(swish)
    (one,) = [f for f in pk.advise(pk.load(first, progress=False))
              if f.rule == "unfused_operators"]
    assert f"SwiGLU (SiLU then Mul): {swish[first]} chains over steps, " in one.evidence, \
        one.evidence
    (both,) = [f for f in pk.advise(pk.load(tp2, progress=False))
               if f.rule == "unfused_operators"]
    assert (f"SwiGLU (SiLU then Mul): {sum(swish.values())} chains over ranks and steps, "
            in both.evidence), both.evidence
