"""The device's idle time on a profile of step figures only (msprof-analyze's cluster
output): said, against the raw ``cluster_step_trace_time.csv`` read with ``csv``."""

from __future__ import annotations

import csv
from statistics import mean, median

import pytest
from shared_samples import sample

import perfkit as pk

pytestmark = pytest.mark.shared_samples

CLUSTER8 = sample("ascend/msprof-analyze-tests/cluster_analysis_output")


def _free_by_rank() -> dict[int, float]:
    with open(CLUSTER8 / "cluster_step_trace_time.csv", newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["Type"] == "rank"]
    by_rank: dict[int, list[float]] = {}
    for r in rows:
        by_rank.setdefault(int(r["Index"]), []).append(float(r["Free"]))
    return {k: mean(v) for k, v in by_rank.items()}


def test_idle_time_without_device_tasks_is_a_finding() -> None:
    free = _free_by_rank()
    assert len(free) == 8
    found = {f.rule: f for f in pk.advise(pk.load(CLUSTER8))}
    f = found["device_idle"]
    assert f.ms_per_step == pytest.approx(median(free.values()) / 1e3, rel=1e-9)
    most = max(free, key=free.get)
    least = min(free, key=free.get)
    assert f"rank {most} idles most" in f.evidence and f"rank {least} least" in f.evidence
    assert "records no device task" in f.evidence


def test_a_profile_with_its_tasks_leaves_idle_time_to_the_gap_rules() -> None:
    rules = {f.rule for f in pk.advise(pk.load(sample("ascend/msinsight-pt-level1")))}
    assert "device_idle" not in rules
