"""Findings that rest on a layout value nobody read say so.

msprof-analyze's cluster output (``ascend/msinsight-cluster-output``) records its pipeline
stages (the ``stage`` rows of ``cluster_step_trace_time.csv``, read here with the csv
module) but not how many micro-batches each step ran. The schedule's own bubble,
(pp - 1) / micro-batches, then rests on an assumed count: the finding gives the bubble
worked out from it by hand, and says that the count was assumed, only when the caller says
it was (``assumed=``; the dashboard passes the job's fields of source ``"default"``).
"""

from __future__ import annotations

import csv

import pytest
from shared_samples import CLUSTER_OUTPUT, shared_sample

import perfkit as pk

pytestmark = pytest.mark.shared_samples


def _stage_rows() -> int:
    path = shared_sample(CLUSTER_OUTPUT) / "cluster_analysis_output" / \
        "cluster_step_trace_time.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        return sum(1 for row in csv.DictReader(fh) if row["Type"] == "stage")


@pytest.fixture(scope="module")
def profile():
    return pk.load(shared_sample(CLUSTER_OUTPUT), progress=False)


def _schedule(findings: list) -> pk.Finding:
    (found,) = [f for f in findings if f.rule == "schedule_bubble"]
    return found


@pytest.mark.parametrize("m", [2, 4])
def test_an_assumed_micro_batch_count_is_named_in_the_findings_resting_on_it(profile, m):
    pp = _stage_rows()
    assert pp == 2
    parallel = pk.ParallelConfig(dp=16 // pp, pp=pp, num_micro_batches=m)
    said = _schedule(pk.advise(profile, parallel=parallel, assumed=["num_micro_batches"]))
    assert f"(pp - 1) / micro-batches = {(pp - 1) / m:.2f}" in said.evidence
    assert f"(micro-batches {m} assumed: the profile does not record it;" in said.evidence
    imbalance = [f for f in pk.advise(profile, parallel=parallel,
                                      assumed=["num_micro_batches", "vpp"])
                 if f.rule == "stage_imbalance"]
    assert imbalance and f"micro-batches {m} and vpp 1 assumed" in imbalance[0].evidence


def test_a_given_micro_batch_count_is_not_called_assumed(profile):
    parallel = pk.ParallelConfig(dp=8, pp=_stage_rows(), num_micro_batches=4)
    for finding in pk.advise(profile, parallel=parallel):
        assert "assumed" not in finding.evidence, finding


def test_the_dashboard_names_the_job_panels_defaults(profile):
    from perfkit.widgets import dashboard

    board = dashboard(str(shared_sample(CLUSTER_OUTPUT)))
    job = board.job.job
    assert job.parallel.pp == _stage_rows() and job.source("num_micro_batches") == "default"
    said = _schedule(board.context.findings(board.profile))
    assert f"micro-batches {job.parallel.num_micro_batches}" in said.evidence
    assert "assumed: the profile does not record" in said.evidence
