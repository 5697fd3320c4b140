"""An Ascend cluster's first answer: one rank's tables read ahead of the cluster's load.

A cluster's ranks are read by worker processes, which hand nothing over; the dashboard
reads the lowest rank's tables first (:mod:`perfkit.io.preview.cluster`, by the code the
load's hand-over uses, :func:`perfkit.io.ascend.text.read_tables_first`) and shows the
throughput and MFU of their job at the step time of every rank. Checked here:

* the tables read directly are those the load hands over, table for table, note for note;
* on every simulated cluster (``data/simulated``) and the real torch_npu pair, the first
  answer's throughput and MFU are the whole cluster's (``pk.infer_job`` on ``pk.load`` of
  it), but the MFU under pipeline parallelism, which is "–" with the reason (one rank holds
  one stage's layers: the model read from it is not the model's); the throughput is also
  the simulator's own settings in profiler_metadata.json (``perfkit_simulation``: the
  sequences of a step × their length / the devices) over the slowest rank's step of the
  raw step_trace_time.csv files (``csv``: computing + exposed communication + free +
  preparing, the median over the steps of the slowest rank's);
* in the dashboard, with the load held, the Overview shows them, saying where they come
  from, and its step time is the cluster's; the whole cluster's replace them;
* nothing is read ahead for a small cluster, a cached one, one rank or a Kineto cluster.
* a rank whose tables see fewer devices than the folder holds ranks gives no figure, saying
  why.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from shared_samples import PT_LEVEL1, shared_sample

import perfkit as pk
from perfkit.format import number_text, time_text
from perfkit.io.ascend import text as ascend
from perfkit.io.detect.paths import detect
from perfkit.io.detect.sources import tables_first_source
from perfkit.io.preview import cluster as preview_cluster
from perfkit.io.preview import tables_first
from perfkit.io.preview.cluster import cluster_tables_first, cluster_tables_wanted
from perfkit.io.preview.steps import preview
from perfkit.profile import Profile
from perfkit.widgets.first_answer import first_answer
from perfkit.widgets.headline import mfu_figure, throughput_figure

ROOT = Path(__file__).resolve().parents[1]
SIMULATED = ROOT / "data" / "simulated"
CLUSTERS = sorted(p for p in SIMULATED.iterdir() if p.is_dir() and any(p.glob("*_ascend_pt")))


def _settings(cluster: Path) -> dict[str, Any]:
    rank = min(cluster.glob("*_ascend_pt"))
    return json.loads((rank / "profiler_metadata.json").read_text())["perfkit_simulation"]


def _raw_step_s(cluster: Path) -> float:
    """The slowest rank's step from the raw step_trace_time.csv files, median over the
    steps (µs summed as computing + exposed communication + free + preparing), in s."""
    parts = ("Computing", "Communication(Not Overlapped)", "Free", "Preparing")
    slowest: dict[str, float] = defaultdict(float)
    for rank in cluster.glob("*_ascend_pt"):
        with open(rank / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="",
                  encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                wall = sum(float(row[p]) for p in parts)
                slowest[row["Step"]] = max(slowest[row["Step"]], wall)
    return statistics.median(slowest.values()) / 1e6


def _expected_throughput(cluster: Path) -> str:
    """Tokens per second per device from the simulator's settings (independent of perfkit)."""
    settings = _settings(cluster)
    par = settings["parallel"]
    tokens = par["micro_batch_size"] * par["num_micro_batches"] * par["dp"] * \
        settings["model"]["seq_length"]
    devices = par["dp"] * par["tp"] * par["pp"]
    assert devices == len(list(cluster.glob("*_ascend_pt")))
    return number_text(tokens / devices / _raw_step_s(cluster)) + " tokens/s per device"


def test_the_tables_read_directly_are_those_the_load_hands_over() -> None:
    rank = min((SIMULATED / "llama2-13b-baseline-dp16").glob("*_ascend_pt"))
    got: list[tuple[Any, dict[str, pd.DataFrame]]] = []
    with tables_first.listen(lambda meta, tables: got.append((meta, tables))):
        pk.load(rank, cache=False)
    (handed_meta, handed), = got
    source = detect(rank)[1][0]  # the rank as the load finds it
    meta, tables = tables_first_source(source)
    assert set(tables) == set(handed) and "ops" not in tables
    for name, frame in tables.items():
        pd.testing.assert_frame_equal(frame, handed[name], obj=name)
    assert meta.notes == handed_meta.notes and meta.origin_ns == handed_meta.origin_ns
    assert meta.rank == handed_meta.rank == 0
    assert meta.extra["table_files"] == handed_meta.extra["table_files"]


def test_a_rank_without_kernel_details_is_refused_naming_the_folder(tmp_path: Path) -> None:
    rank = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    rank.mkdir(parents=True)
    src = min((SIMULATED / "slow-rank").glob("*_ascend_pt")) / "ASCEND_PROFILER_OUTPUT"
    (rank / "step_trace_time.csv").write_bytes((src / "step_trace_time.csv").read_bytes())
    with pytest.raises(pk.ProfileError, match="kernel_details.csv") as err:
        ascend.read_tables_first(rank.parent)
    assert "ASCEND_PROFILER_OUTPUT" in str(err.value)


def _compare(cluster: Path) -> tuple[Any, list[Any]]:
    """The first answer's figures and the whole cluster's, checked equal (MFU: or "–"
    with the pipeline's reason)."""
    early = preview(cluster)
    answer = first_answer(cluster_tables_first(early))
    whole = pk.load(cluster, cache=False)
    job = pk.infer_job(whole)
    figures = answer.figures()
    assert figures[0].text == throughput_figure(job, job.step_time_s).text, cluster
    whole_mfu = mfu_figure(job)
    if job.parallel.pp > 1:
        assert figures[1].text == "–", cluster
        assert f"with pipeline parallelism (pp={job.parallel.pp}) rank 0 holds one " \
            "stage's layers, not the model's" in figures[1].note
    else:
        assert figures[1].text == whole_mfu.text, cluster
    assert "from rank 0's kernel_details.csv and other tables, read first; the whole " \
        "profile's follows" in figures[0].note
    return answer, figures


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize("cluster", CLUSTERS, ids=[c.name for c in CLUSTERS])
def test_the_first_answer_of_a_simulated_cluster_is_the_whole_clusters(cluster: Path) -> None:
    assert len(CLUSTERS) == 6
    answer, figures = _compare(cluster)
    assert figures[0].text == _expected_throughput(cluster)
    # the step is the cluster's: the slowest rank's of every rank's step_trace_time.csv
    step = answer.step_figure().text
    assert step == time_text(_raw_step_s(cluster) * 1e6), (cluster, step)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_with_pipeline_parallelism_the_mfu_waits_but_the_throughput_does_not() -> None:
    cluster = SIMULATED / "llama2-13b-tuned-dp8-pp2"
    assert _settings(cluster)["parallel"]["pp"] == 2
    _, figures = _compare(cluster)
    assert figures[0].text != "–" and figures[1].text == "–"


@pytest.mark.shared_samples
def test_the_real_pair_gives_the_whole_clusters_figures() -> None:
    cluster = shared_sample(PT_LEVEL1)
    assert len(list(cluster.glob("*_ascend_pt"))) == 2
    _compare(cluster)


def test_nothing_is_read_ahead_of_a_small_cached_or_single_rank_profile(monkeypatch,
                                                                       tmp_path) -> None:
    # an empty cache of its own: another test's load of the same set would make it cached
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path))
    cluster = SIMULATED / "slow-rank"
    assert not cluster_tables_wanted(preview(cluster))  # its traces are far below the bar
    monkeypatch.setattr(preview_cluster, "MIN_CLUSTER_TRACE_BYTES", 0)
    assert cluster_tables_wanted(preview(cluster))
    one = min(cluster.glob("*_ascend_pt"))
    assert not cluster_tables_wanted(preview(one))
    cached = preview(cluster)
    cached.cached = True
    assert not cluster_tables_wanted(cached)
    assert not cluster_tables_wanted(preview(ROOT / "data" / "kineto-tiny-llama"))


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_overview_shows_the_first_answer_of_a_cluster(monkeypatch) -> None:
    from widget_html import panel_html

    from perfkit.widgets.dashboard import Dashboard

    cluster = SIMULATED / "slow-rank"
    monkeypatch.setattr(preview_cluster, "MIN_CLUSTER_TRACE_BYTES", 0)
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    go = threading.Event()
    real = Dashboard._load

    def held(self: Any, *args: Any, **kwargs: Any) -> Any:  # the load waits to be let go
        assert go.wait(120), "the test never released the load"
        return real(self, *args, **kwargs)
    monkeypatch.setattr(Dashboard, "_load", held)
    board = Dashboard(background_bytes=0)
    assert board.load_profile(str(cluster))
    deadline = time.monotonic() + 120
    while "rank 0&#x27;s kernel_details.csv" not in (html := panel_html(board.panels["Overview"])):
        assert time.monotonic() < deadline, "the first answer never showed"
        time.sleep(0.05)
    expected = _expected_throughput(cluster)
    card = re.search(r"<div class='pk-k'>throughput</div><div class='pk-v'>([^<]*)<"
                     r"/div><div class='pk-n'>([^<]*)<", html)
    assert card is not None and card.group(1) == expected, card and card.groups()
    assert "from rank 0&#x27;s kernel_details.csv and other tables, read first; the whole " \
        "profile&#x27;s follows" in card.group(2)
    step = re.search(r"<div class='pk-k'>step time</div><div class='pk-v'>([^<]*)<", html)
    assert step is not None and step.group(1) == time_text(_raw_step_s(cluster) * 1e6)
    assert "read first from rank 0&#x27;s kernel_details.csv and other tables" in \
        board.job.summary.value
    go.set()
    assert board.wait(120) and board.error is None
    final = panel_html(board.panels["Overview"])
    card = re.search(r"<div class='pk-k'>throughput</div><div class='pk-v'>([^<]*)<", final)
    assert card is not None and card.group(1) == expected
    assert "read first" not in final and "read first" not in board.job.summary.value


def test_the_one_rank_job_is_worked_out_from_the_rank_read() -> None:
    """The job comes from the lowest rank's tables, not from another rank's."""
    cluster = SIMULATED / "llama2-7b-tp2"
    first = cluster_tables_first(preview(cluster))
    assert first.rank == 0 and isinstance(first.profile, Profile)
    assert Path(first.profile.meta.path) == min(cluster.glob("*_ascend_pt"))
    assert first.of_cluster and first.steps_of is not None
    assert "ops" not in first.profile.tables() or not len(first.profile.ops)


def test_a_rank_without_a_number_is_named_by_its_folder() -> None:
    cluster = SIMULATED / "slow-rank"
    first = cluster_tables_first(preview(cluster))
    first.rank = None
    assert first.which() == f"{min(cluster.glob('*_ascend_pt')).name}'s kernel_details.csv " \
        "and other tables"


def test_a_rank_that_sees_fewer_devices_than_the_cluster_has_ranks_gives_no_figure(
        tmp_path: Path) -> None:
    """Three ranks whose tables say two devices (a third copied from the tp=2 set's rank 1
    as rank 2): the job of rank 0 is not the folder's; its figures say why instead."""
    import shutil

    source = SIMULATED / "llama2-7b-tp2"
    for rank in source.glob("*_ascend_pt"):
        shutil.copytree(rank, tmp_path / rank.name)
    extra = tmp_path / "node0_200002_20251121000100002_ascend_pt"
    shutil.copytree(max(source.glob("*_ascend_pt")), extra)
    info = extra / "profiler_info_1.json"
    info.rename(extra / "profiler_info_2.json")
    text = (extra / "profiler_info_2.json").read_text()
    (extra / "profiler_info_2.json").write_text(re.sub(r'"rank_id":\s*1', '"rank_id": 2', text))
    early = preview(tmp_path)
    assert len(early.profile.profiles) == 3
    answer = first_answer(cluster_tables_first(early))
    assert answer.job.world_size == _settings(source)["parallel"]["tp"] == 2
    for figure in answer.figures():
        assert figure.text == "–"
        assert "rank 0's kernel_details.csv and other tables see 2 devices, the profile " \
            "holds 3 ranks; it comes with the whole profile" in figure.note
