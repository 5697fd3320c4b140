"""A communication group of every rank whose kind the profile does not name may be the
tp group (tp = world) as well as the data-parallel one: tp = 1 is then assumed, not read."""

from __future__ import annotations

import json

import pytest
from shared_samples import PT_LEVEL1, sample

import perfkit as pk

pytestmark = pytest.mark.shared_samples
LEVEL1 = sample(PT_LEVEL1)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def _raw_groups() -> dict[str, set[int]]:
    """Each group of the communication_matrix.json files (the number after ``@`` in an
    operator's key) and the local ranks its links ("0-7") join."""
    groups: dict[str, set[int]] = {}
    for path in sorted(LEVEL1.glob("*/ASCEND_PROFILER_OUTPUT/communication_matrix.json")):
        for step in json.loads(path.read_text()).values():
            for kind in ("p2p", "collective"):
                for op, links in step.get(kind, {}).items():
                    ranks = groups.setdefault(op.rsplit("@", 1)[1], set())
                    for link in links:
                        ranks.update(int(r) for r in link.split("-"))
    return groups


def test_an_unnamed_group_of_every_rank_leaves_tp_assumed():
    groups = _raw_groups()
    # the raw files: one group, a number with no kind in it, joining local ranks 0..7
    assert len(groups) == 1
    (name, ranks), = groups.items()
    assert name.isdigit() and ranks == set(range(8))
    job = pk.infer_job(pk.load(LEVEL1, cache=False, progress=False))
    assert job.value("world_size") == len(ranks)
    for kind in ("tp", "pp", "cp", "ep"):
        assert job.value(kind) == 1 and job.source(kind) == "default", kind
        said = job.detail(kind)
        assert "1 assumed" in said and f"may be the {kind} group" in said, said
        assert f"all {len(ranks)} ranks" in said and "1 communication group " in said
        assert "includes" in said  # one group: the verb agrees
    # dp = world / tp rests on that assumption, and says so
    assert job.value("dp") == len(ranks) and job.source("dp") == "default"
    assert "assumed" in job.detail("dp") and "may be one" in job.detail("dp")
