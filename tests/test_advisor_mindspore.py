"""The advisor on real MindSpore profiles, against the raw files read with json / csv.

- ``wild/mi_run1``: the step trace covers 322 steps, the timeline's device operators only
  steps 1-14; the gaps between the step trace's all-reduce phases of the other steps were
  once the top finding, "the device idles in long gaps" (68 ms a step).
"""

from __future__ import annotations

import statistics

import pytest
from raw_mindspore import mi_run1, union_gaps
from shared_samples import shared_sample

import perfkit as pk

pytestmark = pytest.mark.shared_samples


def test_gaps_of_steps_without_recorded_tasks_are_no_finding(tmp_path, monkeypatch) -> None:
    """mi_run1: no long-gap finding (steps 1-14 have no gap of a millisecond between their
    events); the short gaps are those of steps 1-14 alone, their mean per step, and the
    evidence names the steps."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = shared_sample("wild/mi_run1")
    raw = mi_run1(folder)
    events = raw["tasks"] + raw["phases"]
    gaps = {s: union_gaps(events, *raw["windows"][s]) for s in raw["recorded"]}
    assert not any(g >= 1000 for gs in gaps.values() for g in gs)
    short = statistics.mean(sum(g for g in gs if g < 1000) for gs in gaps.values())
    found = {f.rule: f for f in pk.advise(pk.load(folder, progress=False))}
    assert "host_stalls" not in found and "memory_stalls" not in found
    hb = found["host_bound"]
    assert hb.ms_per_step == pytest.approx(short / 1e3, rel=1e-6)
    assert "counted over the steps whose device tasks were recorded: steps 1–14 of 322" \
        in hb.evidence

