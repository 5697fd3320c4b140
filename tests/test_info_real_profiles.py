"""``perfkit info`` on the real profiles of ``shared/samples``: where the step goes is said
on a basis that is true, and a profile without a computing / communication / free split
says what it gives instead, never dashes that "add up to 100 %" over "0 ranks × 0 steps"."""

from __future__ import annotations

import csv
import re

import pytest
from shared_samples import sample, shared_sample

from perfkit.cli import profile_info_text

pytestmark = pytest.mark.shared_samples

MI_RUN1 = sample("wild/mi_run1")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_legacy_mindspore_steps_are_split_by_their_step_trace_phases() -> None:
    # step_trace_raw_1_detail_time.csv read with csv: each numbered step's phases (in
    # 10 ns ticks), summed over the steps; the last row ("-") is MindInsight's mean
    with open(MI_RUN1 / "profiler" / "step_trace_raw_1_detail_time.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["step_num"].isdigit()]
    sums = {c: sum(int(r[c]) for r in rows) for c in ("iteration_interval", "fp_and_bp",
                                                       "tail")}
    total = sum(sums.values())
    assert total == sum(int(r["total"]) for r in rows)  # the phases are the step
    text = _one_line(profile_info_text(str(MI_RUN1), n_findings=0))
    assert "0 ranks" not in text and "0 steps" not in text
    said = re.search(r"where the step goes: (.*?) \(shares of the step time summed over "
                     r"(\d+) rank × (\d+) steps; they add up to 100 %\)", text)
    assert said, text
    assert (int(said.group(2)), int(said.group(3))) == (1, len(rows))
    shares = dict(re.findall(r"(step interval \(waiting for data\)|forward and backward|"
                             r"step tail \(gradients, update\)) ([\d.]+) %", said.group(1)))
    assert float(shares["step interval (waiting for data)"]) == pytest.approx(
        100 * sums["iteration_interval"] / total, abs=0.05)
    assert float(shares["forward and backward"]) == pytest.approx(
        100 * sums["fp_and_bp"] / total, abs=0.05)
    assert float(shares["step tail (gradients, update)"]) == pytest.approx(
        100 * sums["tail"] / total, abs=0.05)
    # each step's row: its step time and phase shares, not dashes
    first = rows[0]
    row = re.search(r" 1 1 ([\d.]+) ([\d.]+) % ([\d.]+) % ([\d.]+) %", text)
    assert row, text
    assert float(row.group(1)) == pytest.approx(int(first["total"]) / 1e5, rel=5e-3)
    assert float(row.group(3)) == pytest.approx(
        100 * int(first["fp_and_bp"]) / int(first["total"]), abs=0.05)


@pytest.mark.shared_samples
def test_a_model_read_in_part_is_not_then_called_unknown(capsys) -> None:
    # tl_b200_eager: layers, hidden size, heads and vocabulary read, the FFN not
    from perfkit import cli

    trace = shared_sample("wild/tl_b200_eager")
    assert cli.main(["info", str(trace), "--findings", "0"]) == 0
    out = capsys.readouterr().out
    assert "model          read in part: 36 layers" in out
    assert "the whole model is not known" in out and "the model is not known" not in out
