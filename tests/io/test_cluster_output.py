"""msprof-analyze cluster_analysis_output/ (real 16-rank output)."""

from __future__ import annotations

import csv
import json

import pytest
from shared_samples import CLUSTER_OUTPUT, sample

import perfkit.io.engines.local as detect
from perfkit.errors import ProfileError
from perfkit.profile import Cluster

pytestmark = pytest.mark.shared_samples  # every test reads the real cluster output
DATA = sample(CLUSTER_OUTPUT)


def test_steps_per_rank():
    c = detect.load(DATA, cache=False)
    assert isinstance(c, Cluster)
    assert c.ranks == list(range(16))
    with open(DATA / "cluster_analysis_output" / "cluster_step_trace_time.csv") as fh:
        rows = list(csv.DictReader(fh))
    ranks = [r for r in rows if r["Type"] == "rank"]
    s = c.steps.sort_values("rank")
    assert s["computing_us"].tolist() == pytest.approx(
        [float(r["Computing"]) for r in sorted(ranks, key=lambda r: int(r["Index"]))])
    assert len(c.meta.extra["stage_steps"]) == sum(r["Type"] == "stage" for r in rows)
    groups = json.loads((DATA / "cluster_analysis_output" / "communication_group.json")
                        .read_text())
    assert c.meta.extra["communication_group"]["p2p"] == groups["p2p"]
    assert c.kernels.empty


def test_matrix_uses_global_ranks():
    c = detect.load(DATA / "cluster_analysis_output", cache=False)
    mx = c.comm_matrix
    assert mx["src_rank"].notna().all()
    assert (mx["rank"] == mx["src_rank"]).all()


def test_subset_and_missing_rank():
    c = detect.load(DATA, ranks=[3, 4], cache=False)
    assert c.ranks == [3, 4]
    with pytest.raises(ProfileError, match="rank"):
        detect.load(DATA, ranks=[99], cache=False)
