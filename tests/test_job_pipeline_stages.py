"""pp from msprof-analyze's pipeline ``stage`` rows (``cluster_step_trace_time.csv``).

msprof-analyze writes one row of ``Type`` ``stage`` per pipeline stage, its ``Index`` the
stage's ranks (its docs: "stage represents a rank group (PP parallel stage)"). The real
16-rank cluster output has two, ranks 0-7 and 8-15, and a Bubble (receive wait) on ranks
8-15 only. Every expected number here comes from the csv read with the csv module and
from arithmetic on it, not from perfkit.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from shared_samples import CLUSTER_OUTPUT, sample, writable_copy

import perfkit as pk
from perfkit.analysis.cluster import stage_of_ranks
from perfkit.job.layout import PIPELINE_STAGES

pytestmark = pytest.mark.shared_samples
CSV = Path("cluster_analysis_output") / "cluster_step_trace_time.csv"


def _rows(folder: Path) -> list[dict[str, str]]:
    with open(folder / CSV, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def raw() -> dict:
    rows = _rows(sample(CLUSTER_OUTPUT))
    stages = sorted({tuple(sorted(int(n) for n in re.findall(r"\d+", r["Index"])))
                     for r in rows if r["Type"] == "stage"})
    ranks = sorted({int(r["Index"]) for r in rows if r["Type"] == "rank"})
    bubble = {int(r["Index"]): float(r["Bubble"]) for r in rows if r["Type"] == "rank"}
    return {"stages": stages, "ranks": ranks, "bubble": bubble}


@pytest.fixture(scope="module")
def job() -> pk.Job:
    return pk.infer_job(pk.load(sample(CLUSTER_OUTPUT)))


def test_pp_and_stages_are_the_stage_rows(raw: dict, job: pk.Job) -> None:
    stages, ranks = raw["stages"], raw["ranks"]
    # the stage rows split the ranks into disjoint stages of one size (checked by hand)
    assert len(stages) >= 2 and sorted(r for st in stages for r in st) == ranks
    assert len({len(st) for st in stages}) == 1
    assert (job.parallel.pp, job.source("pp")) == (len(stages), "profile")
    assert job.pp_unread is None
    assert job.observed[PIPELINE_STAGES][0] == tuple(stages)
    detail = job.detail("pp")
    assert "cluster_step_trace_time.csv" in detail and "Type stage" in detail
    for st in stages:
        assert f"{st[0]}..{st[-1]}" in detail
    # dp = world / (tp · pp): tp is assumed 1 (no group recorded), so dp is assumed too
    world = len(ranks)
    assert job.world_size == world
    assert job.parallel.dp == world // (job.parallel.tp * len(stages))
    assert job.source("dp") == "default" and "tp" in job.detail("dp")
    assert f"dp {world // len(stages)} × tp 1 × pp {len(stages)}" in job.describe()
    # the stage of each rank, as the advisors see it, is its stage row's position
    where = stage_of_ranks(pk.load(sample(CLUSTER_OUTPUT)), parallel=job.parallel)
    assert where.to_dict() == {r: i for i, st in enumerate(stages) for r in st}


def test_the_bubble_is_on_the_later_stage(raw: dict) -> None:
    """The receive wait falls on the second stage's ranks only: the rows are pipeline
    stages in pipeline order, the first stage waiting for no activation."""
    first, *later = raw["stages"]
    assert all(raw["bubble"][r] == 0 for r in first)
    assert all(raw["bubble"][r] > 0 for st in later for r in st)


def _copy_with(tmp_path: Path, keep) -> Path:
    """The sample, its stage rows filtered by ``keep(index text)``."""
    dst = writable_copy(sample(CLUSTER_OUTPUT), tmp_path / "cluster")
    rows = _rows(dst)
    with open(dst / CSV, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(r for r in rows if r["Type"] != "stage" or keep(r["Index"]))
    return dst


def test_without_stage_rows_pp_stays_a_placeholder(tmp_path: Path, raw: dict) -> None:
    job = pk.infer_job(pk.load(_copy_with(tmp_path, lambda index: False)))
    assert (job.parallel.pp, job.source("pp")) == (1, "default")
    assert job.pp_unread and PIPELINE_STAGES not in job.observed
    assert job.detail("dp").endswith(f"so dp is at most {len(raw['ranks']) // 2}")


def test_stage_rows_that_do_not_cover_the_ranks_are_not_used(tmp_path: Path) -> None:
    """One stage row left (ranks 0-7 of 16): not a split of the job, so not pp."""
    job = pk.infer_job(pk.load(_copy_with(tmp_path, lambda index: index.startswith("(0,"))))
    assert (job.parallel.pp, job.source("pp")) == (1, "default")
    assert job.pp_unread


def test_the_world_size_says_where_it_came_from() -> None:
    """The cluster files name ranks 0..15 (the rank rows of the step table, read here):
    the world size is the highest plus one, and its reason says so, not "communication
    groups", which give it only on other formats."""
    from perfkit.job import infer_job

    path = sample(CLUSTER_OUTPUT) / "cluster_analysis_output" / \
        "cluster_step_trace_time.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        ranks = {int(r["Index"]) for r in csv.DictReader(fh) if r["Type"] == "rank"}
    job = infer_job(pk.load(sample(CLUSTER_OUTPUT), progress=False))
    assert job.value("world_size") == max(ranks) + 1 == 16
    detail = job.evidence.set_index("field").loc["world_size", "detail"]
    assert "highest rank msprof-analyze's cluster files name, plus one" in detail
    assert "communication groups" not in detail


def test_the_analyses_read_the_stage_rows_without_a_layout(raw: dict) -> None:
    """``stage_balance`` and ``slow_ranks`` called on the profile alone (no ``parallel=``):
    the stages are the stage rows. Without them the balance was empty ("pipeline stages
    unknown") and every rank was compared with all 16, the first stage's exposed
    communication against the second's. The bubble of each stage is the median of its
    ranks' Bubble column (the csv's, by hand)."""
    from statistics import median

    from perfkit.analysis import slow_ranks, stage_balance

    profile = pk.load(sample(CLUSTER_OUTPUT))
    balance = stage_balance(profile)
    assert [list(map(int, r.split(","))) for r in balance["ranks"]] == \
        [list(st) for st in raw["stages"]]
    for row, st in zip(balance.itertuples(), raw["stages"], strict=True):
        assert row.bubble_us == pytest.approx(median(raw["bubble"][r] for r in st))
    notes = " ".join(slow_ranks(profile).attrs.get("notes", []))
    assert "fewer than 3 comparable ranks" not in notes
    assert stage_of_ranks(profile).to_dict() == \
        {r: i for i, st in enumerate(raw["stages"]) for r in st}
