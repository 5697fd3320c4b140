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
from raw_mindspore import legacy_cluster
from shared_samples import shared_sample
from widget_html import panel_words

import perfkit
from perfkit.format import time_text
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
