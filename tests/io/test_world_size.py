"""The world size of an Ascend export: counted from each rank's own communication groups.

torch_npu and MindSpore record, per rank, only the groups that rank belongs to
(``profiler_metadata.json`` ``parallel_group_info``), not the job's world size. Rank 0 of
dp 2 × pp 2 is in dp {0, 1} and pp {0, 2}: its groups reach rank 2 only. So the ranks of one
pipeline job disagree on the count, which must not read as separate runs, and one rank
alone knows a lower bound. The expectations are read from the metadata files with ``json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import perfkit as pk

SIMULATED = Path(__file__).resolve().parents[2] / "data" / "simulated"


def _groups(rank_dir: Path) -> dict[str, list[int]]:
    """Group name -> global ranks, as the rank's profiler_metadata.json lists them."""
    meta = json.loads((rank_dir / "profiler_metadata.json").read_text())
    return {g["group_name"]: g["global_ranks"] for g in meta["parallel_group_info"].values()}


def _rank_dirs(name: str) -> list[Path]:
    return sorted(p for p in (SIMULATED / name).iterdir() if p.name.endswith("_ascend_pt"))


@pytest.mark.parametrize("name", ["data-stall", "llama2-13b-tuned-dp8-pp2"])
def test_the_ranks_of_one_pipeline_job_are_one_run(name: str) -> None:
    reach = {max(r for ranks in _groups(d).values() for r in ranks) + 1
             for d in _rank_dirs(name)}
    assert len(reach) > 1  # the ranks' own groups disagree on how many ranks there are
    cluster = pk.load(SIMULATED / name, cache=False, progress=False)
    assert not [n for n in cluster.meta.notes if "separate runs" in n]
    assert cluster.meta.world_size == max(reach) == len(_rank_dirs(name))


def test_no_bundled_sample_reads_as_separate_runs() -> None:
    for name in pk.samples()["name"]:
        prof = pk.load(f"sample:{name}", progress=False)
        assert not [n for n in prof.meta.notes if "separate runs" in n], name


def test_one_rank_alone_knows_a_lower_bound_and_the_job_the_groups_product() -> None:
    rank_dir = _rank_dirs("data-stall")[0]
    groups = _groups(rank_dir)
    reach = max(r for ranks in groups.values() for r in ranks) + 1
    product = len(groups["dp"]) * len(groups["pp"])
    assert reach < product  # 3 of 4: the case this is about
    prof = pk.load(rank_dir, cache=False, progress=False)
    assert prof.meta.world_size == reach
    assert prof.meta.world_size_text() == f"at least {reach} (its communication groups)"
    job = pk.infer_job(prof)
    assert job.world_size == product
    assert not [p for p in job.problems() if "ranks" in p and "dp" in p]
