"""The journal's step is the job's: the device span and the wait before the first device
task, so the parts of a run add up to the step its metrics give and the shares to 100 %
(the Overview's and notebook 00's basis); a journal written before, which kept shares of
the device span alone, still opens and reads with its shares adding up to 100 %.

Figures are checked against the raw Kineto trace read independently
(:mod:`raw_kineto`) and against hand arithmetic on a breakdown written the old way.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from raw_kineto import raw_device_steps, raw_walls
from shared_samples import KINETO_TRACES, sample

from perfkit.journal import Journal
from perfkit.journal.text import comparison_text

SPLIT = ("computing_us", "comm_not_overlapped_us", "free_us", "preparing_us")


@pytest.fixture(scope="module")
def resnet(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """k_resnet50_nw0 (one rank, a long data wait before each step) in a fresh journal."""
    trace = sample(KINETO_TRACES["k_resnet50_nw0"])
    journal = Journal(tmp_path_factory.mktemp("journal") / "j.sqlite")
    journal.add(str(trace.parent), label="nw0")
    return {"trace": trace, "journal": journal}


@pytest.mark.shared_samples
def test_the_parts_add_up_to_the_job_s_step_of_the_raw_trace(resnet: dict) -> None:
    walls = raw_walls(resnet["trace"])  # step -> device span + idle tail + wait (µs)
    spans, on_device = raw_device_steps(resnet["trace"])
    assert on_device
    ordered = sorted(walls.values())
    n = len(ordered)
    step = float(ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2)
    waited = float(sum(walls[s] - spans[s] for s in walls) / sum(walls.values()))
    record = resnet["journal"].record("nw0")
    bd = record.breakdown.set_index("part")
    assert bd.loc["wall_us", "us"] == pytest.approx(step, rel=1e-6)
    assert bd.loc["preparing_us", "share"] == pytest.approx(waited, rel=1e-6)
    assert bd.loc["preparing_us", "us"] == pytest.approx(waited * step, rel=1e-6)
    assert bd.loc["step_us", "us"] == pytest.approx((1 - waited) * step, rel=1e-6)
    assert waited > 0.2  # the case in point: a wait of about a third of the step
    assert sum(bd.loc[p, "us"] for p in SPLIT) == pytest.approx(step, rel=1e-9)
    # the same step as the run's metrics (the job's step time)
    metrics = record.metrics.set_index("key")
    assert metrics.loc["step_time_s", "value"] * 1e6 == pytest.approx(step, rel=1e-6)


@pytest.mark.shared_samples
def test_the_shares_add_up_to_100_percent(resnet: dict) -> None:
    journal = resnet["journal"]
    cmp = journal.compare("nw0", "nw0")
    shown = cmp.breakdown.set_index("part").loc[list(SPLIT)]
    # rounded to 0.1 % and still adding up to 100.0 %
    assert round(1000 * shown["base_share"].sum()) == 1000
    assert all(abs(1000 * x - round(1000 * x)) < 1e-6 for x in shown["base_share"])
    span = cmp.breakdown.set_index("part").loc["step_us", "base_share"]
    assert round(1000 * (span + shown.loc["preparing_us", "base_share"])) == 1000
    text = comparison_text(cmp)
    labels = ("computing ", "communication (not overlapped) ", "free ",
              "before the first device task (")
    shown_text = [float(re.search(r"(\d+\.\d) %", line).group(1))
                  for line in text.splitlines() for label in labels
                  if line.strip().startswith(label)]
    assert len(shown_text) == 4 and round(sum(shown_text), 1) == 100.0, shown_text
    bd = journal.record("nw0").breakdown.set_index("part")
    share = bd.loc["preparing_us", "us"] / bd.loc["wall_us", "us"]
    assert abs(shown_text[-1] - 100 * share) <= 0.1 + 1e-9  # rounded by one unit at most
    runs = journal.runs()
    total = runs[[p.removesuffix("_us") + "_share" for p in SPLIT]].sum(axis=1)
    assert total.iloc[0] == pytest.approx(1.0, abs=1e-9)


def _old_journal(path: Path, source: Journal) -> None:
    """``source``'s file rewritten as perfkit wrote it before the journal kept the job's
    step: no ``wall_us`` row, and every share of the device span ``step_us``, with the
    parts of a hand-made breakdown (device span 100 ms, wait 50 ms)."""
    path.write_bytes(Path(source.path).read_bytes())
    old = {"step_us": 100_000.0, "computing_us": 80_000.0, "comm_not_overlapped_us": 5_000.0,
           "overlapped_us": 2_000.0, "free_us": 15_000.0, "preparing_us": 50_000.0}
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM breakdown")
        conn.executemany("INSERT INTO breakdown VALUES (1, ?, ?, ?, ?)",
                         [(i, part, us, us / old["step_us"])
                          for i, (part, us) in enumerate(old.items(), 1)])
    conn.close()


@pytest.mark.shared_samples
def test_an_older_journal_still_opens_and_its_shares_add_up(resnet: dict,
                                                            tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _old_journal(path, resnet["journal"])
    journal = Journal(path)
    bd = journal.record("nw0").breakdown.set_index("part")
    step = 80_000 + 5_000 + 15_000 + 50_000  # its parts: device span and the wait
    assert bd.loc["wall_us", "us"] == step
    assert bd.loc["preparing_us", "share"] == pytest.approx(50_000 / step)
    assert bd.loc["computing_us", "share"] == pytest.approx(80_000 / step)
    runs = journal.runs()
    assert runs.loc[0, "preparing_share"] == pytest.approx(1 / 3)
    assert runs.loc[0, "free_share"] == pytest.approx(15_000 / step)
    text = comparison_text(journal.compare("nw0", "nw0"))
    assert "33.3 %" in next(line for line in text.splitlines()
                            if "before the first device task (" in line)
    assert "recorded before the journal kept the job's step" in text


@pytest.mark.shared_samples
def test_a_run_of_uneven_steps_says_its_parts_are_shares_of_the_median(
        tmp_path: Path) -> None:
    # k_resnet50_nw4: computing is about 102 ms in every step, but two of its six steps are
    # long (data waits), so its share of all the time × the median step reads 92 ms; a
    # note says why (perfkit compare gives each part's median: 102 ms)
    trace = sample(KINETO_TRACES["k_resnet50_nw4"])
    walls = raw_walls(trace)
    mean = float(sum(walls.values())) / len(walls)
    journal = Journal(tmp_path / "j.sqlite")
    journal.add(str(trace.parent), label="nw4")
    bd = journal.record("nw4").breakdown.set_index("part")
    assert bd.loc["mean_wall_us", "us"] == pytest.approx(mean, rel=1e-6)
    assert mean / bd.loc["wall_us", "us"] > 1.05
    notes = journal.compare("nw4", "nw4").breakdown.attrs["notes"]
    assert any(n.startswith("Run 'nw4': its steps differ (median ") and "reads smaller" in n
               for n in notes)


@pytest.mark.shared_samples
def test_a_run_of_even_steps_has_no_such_note(resnet: dict) -> None:
    record = resnet["journal"].record("nw0")
    bd = record.breakdown.set_index("part")
    assert abs(bd.loc["mean_wall_us", "us"] / bd.loc["wall_us", "us"] - 1) <= 0.05
    notes = resnet["journal"].compare("nw0", "nw0").breakdown.attrs["notes"]
    assert not any("its steps differ" in n for n in notes)
