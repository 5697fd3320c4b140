"""A profile of one rank is shown as that rank, not as a spread over ranks of one value.

- The "ranks" pickers of the Overview, Operators and Memory tabs offered "all ranks (median,
  min, max)" (or "max over the ranks") on a one-rank profile (``wild/k_resnet50_nw4``, one
  trace file without a ``distributedInfo``): they now offer that rank alone, and a cleared
  pick on its chart keeps it. A profile of two ranks (the bundled gloo run, whose trace
  files record ranks 0 and 1) still offers all of them.
- The Memory tab's peaks table showed the median, min and max over ranks of one rank's
  value; it now shows the value, which is checked here against the raw trace: the trace
  (PyTorch 1.9) records only each allocation's and free's size (``Bytes``), so a device's
  allocated memory is their running sum in time order, and its peak is that sum's maximum.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest
from raw_kineto import raw_events
from shared_samples import shared_sample
from widget_html import panel_words

from perfkit.widgets import tab_panel

ROOT = Path(__file__).resolve().parents[1]
TWO_RANKS = ROOT / "data" / "kineto-tiny-llama"


def _recorded_ranks(folder: Path) -> list[int]:
    """The ranks of a folder of Kineto traces: each file's ``distributedInfo`` rank, 0 for
    a lone file that records none."""
    ranks = []
    for f in sorted(folder.glob("*.json.gz")):
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            info = json.load(fh).get("distributedInfo") or {}
        ranks.append(int(info.get("rank", 0)))
    return ranks


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
@pytest.mark.parametrize("title", ["Overview", "Operators", "Memory"])
def test_the_pickers_of_one_rank_offer_that_rank(title: str) -> None:
    folder = shared_sample("wild/k_resnet50_nw4")
    (rank,) = _recorded_ranks(folder)
    panel = tab_panel(title, str(folder))
    assert panel.rank.options == ((f"rank {rank}", rank),)
    assert panel.rank.value == rank
    if title == "Overview":  # a double click on the chart clears the pick: still the rank
        panel._on_pick([])
        assert panel.rank.value == rank
        assert f"Steps of rank {rank}:" in panel.steps_table.value


@pytest.mark.parametrize("title", ["Overview", "Memory"])
def test_the_pickers_of_two_ranks_offer_all_of_them(title: str) -> None:
    ranks = _recorded_ranks(TWO_RANKS)
    assert ranks == [0, 1]
    panel = tab_panel(title, str(TWO_RANKS))
    labels = [label for label, _value in panel.rank.options]
    assert labels[1:] == [f"rank {r}" for r in ranks]
    assert labels[0] == ("all ranks (median, min, max)" if title == "Overview"
                         else "max over the ranks")


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
@pytest.mark.shared_samples
def test_the_memory_peaks_of_one_rank_are_its_values() -> None:
    folder = shared_sample("wild/k_resnet50_nw4")
    (trace,) = folder.glob("*.json.gz")
    running: dict[tuple[int, int], float] = defaultdict(float)
    peak: dict[tuple[int, int], float] = defaultdict(float)
    samples = sorted((e for e in raw_events(trace) if e.get("name") == "[memory]"),
                     key=lambda e: e["ts"])
    for e in samples:
        device = (int(e["args"]["Device Type"]), int(e["args"]["Device Id"]))
        running[device] += float(e["args"]["Bytes"])
        peak[device] = max(peak[device], running[device])
    gpu, host = peak[(1, 0)], peak[(0, -1)]  # Device Type 1: CUDA; 0: the host
    assert gpu > 2**30 > host > 0
    text = panel_words(tab_panel("Memory", str(folder)))
    table = text[text.index("Peak memory per component"):]
    assert table.startswith("Peak memory per component, rank 0 ")
    heads = "family | component | quantity | peak (GiB) | "
    assert heads in table, table[:300]
    assert "median" not in table.split("Rank 0,")[0] and "min" not in table.split("Rank 0,")[0]
    rows = table.split(heads, 1)[1]
    for component, value in (("allocator", gpu), ("host", host)):
        row = re.search(rf"\| {component} \| allocated \| ([\d.]+) \|", rows)
        assert row, rows[:300]
        assert float(row[1]) == pytest.approx(value / 2**30, rel=5e-3), component
