"""The legacy MindInsight cluster (``ascend/mindinsight-legacy/cluster_propose``: 4 ranks ×
5 steps, CSV files) and the raw CANN copies say each figure on one basis, once.

- The Communication tab's bubble note said "all 1 rank wait" on a profile of one rank; its
  Collectives table said "calls (summed over ranks)" of calls counted over ranks and steps.

The figures are read here from the CSV files (``raw_mindspore.legacy_cluster``).
"""

from __future__ import annotations

import re
import statistics

import pytest
from raw_mindspore import legacy_cluster, mi_prof
from shared_samples import shared_sample
from widget_html import panel_words

import perfkit
from perfkit.cli import profile_info_text
from perfkit.format import share_text, time_text
from perfkit.widgets import tab_panel

pytestmark = pytest.mark.shared_samples

LEGACY = "ascend/mindinsight-legacy/cluster_propose"


def test_the_bubble_note_of_one_rank_names_that_rank() -> None:
    folder = shared_sample(LEGACY)
    raw = legacy_cluster(folder)[3]
    # the bubble per step: the mean over the rank's steps of its receive_alone_time (ms)
    bubble_ms = statistics.fmean(r["receive_alone_time"] for r in raw)
    assert bubble_ms == pytest.approx(442.6, abs=0.1)
    words = panel_words(tab_panel("Communication", perfkit.load(folder, ranks=[3])))
    said = f"rank 3 waits in pipeline receives (up to {time_text(bubble_ms * 1e3)} per step)"
    assert said in words, words[:2000]
    assert "all 1 rank" not in words


def test_the_collectives_calls_are_summed_over_ranks_and_steps() -> None:
    folder = shared_sample(LEGACY)
    words = panel_words(tab_panel("Communication", str(folder)))
    heads = re.findall(r"calls \(([^)]*)\)", words)
    # 4 ranks × 5 steps of hccl_raw_{rank}.csv: each call counted once per rank and step
    assert heads == ["summed over ranks and steps"], heads
    assert "summed over ranks)" not in words


def _opened_notes(words: str) -> list[str]:
    """The notes of the Overview's "What was opened" table (its rows "note | ... |")."""
    return re.findall(r"\bnote \| (.*?) \|", words)


def test_a_note_each_rank_makes_of_its_own_file_is_said_once() -> None:
    folder = shared_sample(LEGACY)
    files = sorted(f.name for f in folder.glob("ascend_cluster_analyse_*.csv"))
    ranks = sorted(legacy_cluster(folder))
    assert ranks == [0, 1, 2, 3] and len(files) == 4
    notes = _opened_notes(panel_words(tab_panel("Overview", str(folder))))
    about = [n for n in notes if "ascend_cluster_analyse" in n]
    # two notes per file (its mean row left out, its computation_time read), each said once
    assert len(about) == 2, about
    for n in about:
        assert n.startswith("Ranks 0, 1, 2 and 3"), n
        assert "ascend_cluster_analyse_pipeline-parallel_2_4_{rank}.csv" in n, n
    assert not any(name in n for n in notes for name in files)


def _pct(cell: str) -> float:
    return float(cell.strip().removesuffix("%").strip())


def test_each_steps_split_adds_up_to_100_percent_as_printed() -> None:
    """Largest-remainder rounding moves a share by less than 0.1 %. The files' parts of a
    step (computation_time + communication_alone_time) are not the step trace's total
    (0.06 % above it in step 1, up to 0.9 % below after): shares of the total added up to
    99.0 % to 100.06 %. They are shares of the parts' sum and the step interval before
    them (the wait column), which MindSpore's step leaves out."""
    folder = shared_sample(LEGACY)
    raw = legacy_cluster(folder)
    text = profile_info_text(str(folder), n_findings=0)
    rows = re.findall(r"^ +(\d) +(\d) +[\d,.]+ +([\d.]+ %) +([\d.]+ %) +([\d.]+ %) +"
                      r"([\d.]+ %)$", text, flags=re.M)
    assert len(rows) == 5, text
    for step, rank, *shown in rows:
        assert sum(_pct(c) for c in shown) == pytest.approx(100.0, abs=1e-9), (step, shown)
        # the slowest rank is the one of the longest step trace total
        r = raw[int(rank)][int(step) - 1]
        assert r["total_ms"] == max(raw[k][int(step) - 1]["total_ms"] for k in raw)
        whole = r["computation_time"] + r["communication_alone_time"] + r["interval_ms"]
        expected = [r["computation_time"] / whole,
                    (r["communication_alone_time"] - r["receive_alone_time"]) / whole,
                    r["receive_alone_time"] / whole, r["interval_ms"] / whole]
        for cell, share in zip(shown, expected, strict=True):
            assert _pct(cell) == pytest.approx(100 * share, abs=0.1001), (step, cell, share)


def test_the_steps_table_split_over_the_ranks_adds_up_to_100_percent() -> None:
    folder = shared_sample(LEGACY)
    raw = legacy_cluster(folder)
    words = panel_words(tab_panel("Overview", str(folder)))
    table = words.split("Steps: each step's time over the ranks", 1)[1]
    caption, body = table.split(" | ", 1)[0], table
    assert "parts over the ranks," in caption, caption
    for step in range(1, 6):
        # step | median, fastest, slowest step (ms, whole numbers) | slowest rank | shares
        cells = re.search(rf"\| {step} \| ([\d,]+ \| ){{3}}\d \| ([\d.]+) \| ([\d.]+) \| "
                          r"([\d.]+) \| ([\d.]+) \|", body)
        assert cells, body[:1500]
        shown = [float(c) for c in cells.groups()[1:]]
        assert sum(shown) == pytest.approx(100.0, abs=1e-9), (step, shown)
        rows = [raw[k][step - 1] for k in raw]
        # MindSpore's step and the step interval before it, which it leaves out
        whole = sum(r["computation_time"] + r["communication_alone_time"] + r["interval_ms"]
                    for r in rows)
        expected = [sum(r["computation_time"] for r in rows) / whole,
                    sum(r["collective_communication_alone_time"] for r in rows) / whole,
                    sum(r["receive_alone_time"] for r in rows) / whole,
                    sum(r["interval_ms"] for r in rows) / whole]
        for cell, share in zip(shown, expected, strict=True):
            assert cell == pytest.approx(100 * share, abs=0.1001), (step, cell, share)


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_the_computing_or_idle_part_is_explained_once_and_its_header_is_short() -> None:
    folder = shared_sample(LEGACY)
    words = panel_words(tab_panel("Overview", str(folder)))
    assert words.count("only together") == 1, words
    heads = re.findall(r"\| (computing or device idle[^|]*) \|", words)
    assert heads and all(len(h) <= len("computing or device idle (%)") for h in heads), heads
    assert "tell them apart" not in words
    text = " ".join(profile_info_text(str(folder), n_findings=0).split())
    assert text.count("only together") == 1 and "tell them apart" not in text


def test_a_time_measured_in_one_step_is_a_share_of_that_step() -> None:
    """Raw CANN output whose msprof_ file covers iteration 1 of 10: its exposed
    communication (41.5 ms, iteration 1's) was "100.0 % of 35.8 ms", the mean over the 10
    iterations (the share, 116 %, cut at 100 %). It is a share of iteration 1."""
    root = shared_sample("ascend/mindinsight-legacy")
    (rank,) = mi_prof(root).values()
    assert sorted(rank["tracks"]) == [1]  # Overlap Analysis of iteration 1 alone
    exposed = rank["tracks"][1]["Communication(Not Overlapped)"]
    step = rank["iters"][1]["dur"] + rank["bounds"].get(1, 0.0)  # µs, its wait before
    said = (f"{time_text(exposed)} per step ({share_text(exposed / step)} of "
            f"{time_text(step)}, step 1, the only step with its communication measured)")
    assert said == ("41.5 ms per step (87.3 % of 47.6 ms, step 1, the only step with its "
                    "communication measured)")
    (folder,) = root.glob("PROF_*")
    text = " ".join(profile_info_text(str(folder), n_findings=4).split())
    assert said in text, text
    assert "100.0 %" not in text.split("Top findings", 1)[1]
    # the Advice tab's table, under its note on the other findings' 10-step mean
    words = panel_words(tab_panel("Advice", str(folder)))
    assert said.replace(" per step (", " (") in words, words[:3000]


def test_the_findings_name_the_warm_up_step_that_makes_their_mean_step() -> None:
    folder = shared_sample(LEGACY)
    raw = legacy_cluster(folder)
    slowest = [max(raw[k][i]["total_ms"] for k in raw) for i in range(5)]
    mean, middle = statistics.fmean(slowest), statistics.median(slowest)
    assert slowest[0] > 2 * middle and all(s < 2 * middle for s in slowest[1:])
    said = (f"the step time shown, {time_text(middle * 1e3)}, is the median over the steps; "
            f"step 1 takes {time_text(slowest[0] * 1e3)} ({slowest[0] / middle:.0f} times "
            "the median: a warm-up), which counts in the mean, not in the median")
    words = panel_words(tab_panel("Overview", str(folder)))
    assert f"Shares of {time_text(mean * 1e3)}, the mean over steps" in words
    assert said in words, words[:3000]
    text = " ".join(profile_info_text(str(folder), n_findings=2).split())
    assert said in text, text


def test_the_split_leaves_out_the_warm_up_as_the_step_time_does() -> None:
    """A walk: the Overview's step time is the median (179 ms) while its split summed the
    2.38 s first step in, a pipeline bubble of 61 % of the step. The warm-up step is now
    left out of the split, and the split says so: its bubble share is the CSV files'
    receive_alone_time over computation_time + communication_alone_time + the step trace's
    interval, summed over the ranks' steps 2-5."""
    from perfkit.widgets.headline import step_split

    folder = shared_sample(LEGACY)
    raw = legacy_cluster(folder)
    later = [r for rows in raw.values() for r in rows[1:]]
    bubble = sum(r["receive_alone_time"] for r in later) / sum(
        r["computation_time"] + r["communication_alone_time"] + r["interval_ms"]
        for r in later)
    split = step_split(perfkit.analysis.step_breakdown(perfkit.load(folder)))
    assert split.set_index("part").loc["bubble_us", "share"] == pytest.approx(bubble)
    assert split.attrs["steps"] == 4 and split.attrs["left_out"].startswith(
        "step 1 (2.38 s, 13 times the median step: a warm-up) left out")
    assert "step 1 (2.38 s" in profile_info_text(folder)
