"""``perfkit info`` on one rank of an Ascend export whose profiler records no world size:
its heading says what was loaded in words (not the class name ``Cluster``), and the world
size fact does not read "unknown" beside a job layout of 8 devices.

``ascend/msinsight-pt-level1/rank0_ascend_pt``: its ``profiler_metadata.json`` holds only
environment variables (no world size, no parallel groups), and its
``communication_matrix.json`` links local ranks 0 to 7 of one all-reduce group.
"""

from __future__ import annotations

import json
import re

import pytest
from shared_samples import PT_LEVEL1, sample

from perfkit.cli import profile_info_text

pytestmark = pytest.mark.shared_samples


def test_one_rank_without_a_recorded_world_size_agrees_with_its_job() -> None:
    rank0 = sample(PT_LEVEL1) / "rank0_ascend_pt"
    meta = json.loads((rank0 / "profiler_metadata.json").read_text(encoding="utf-8"))
    assert set(meta) == {"ENV_VARIABLES"}  # nothing about the world
    matrix = json.loads((rank0 / "ASCEND_PROFILER_OUTPUT/communication_matrix.json")
                        .read_text(encoding="utf-8"))
    local = {int(r) for group in matrix["step50"]["collective"].values()
             for link in group for r in link.split("-")}
    assert local == set(range(8))

    text = profile_info_text(rank0, n_findings=0)
    assert text.splitlines()[0] == text.splitlines()[0].replace("Cluster", "")
    assert text.startswith("Profile of one rank (perfkit ")
    world = re.search(r"^\s+world size\s+(.*)$", text, re.MULTILINE).group(1)
    assert world.startswith("not recorded by the profiler; the job counts 8 devices")
    assert re.search(r"^\s+layout\s+dp 8 .*= 8 devices", text, re.MULTILINE)


def test_two_ranks_are_headed_as_ranks_not_as_a_class() -> None:
    text = profile_info_text(sample(PT_LEVEL1), n_findings=0)
    assert text.startswith("Profile of 2 ranks (perfkit ")


def test_the_overview_gives_the_same_world_size_fact() -> None:
    import perfkit as pk
    from perfkit.widgets.overview import profile_facts

    profile = pk.load(sample(PT_LEVEL1) / "rank0_ascend_pt", progress=False)
    facts = profile_facts(profile, pk.infer_job(profile)).set_index("fact")["value"]
    assert facts["world size"].startswith("not recorded by the profiler; the job counts 8 "
                                          "devices")
