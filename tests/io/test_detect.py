"""Autodetection, rank subsets, parallel cluster loading and the progress bar."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from shared_samples import HTA, PT_LEVEL1, sample, writable_copy

import perfkit.io.engines.local as detect
from perfkit.errors import ProfileError
from perfkit.io._common import progress as _progress
from perfkit.profile import Cluster, Profile

LEVEL1 = sample(PT_LEVEL1)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.shared_samples
@pytest.mark.parametrize("rel, fmt, kind", [  # rel: a path in shared/samples
    ("ascend/msinsight-pt-level1/rank0_ascend_pt", "ascend_text", Profile),
    ("ascend/msinsight-pt-level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT", "ascend_text",
     Profile),
    ("ascend/msinsight-pt-level1", "ascend_text", Cluster),
    ("ascend/msinsight-pt-gpt3-old", "ascend_text", Cluster),
    ("ascend/msinsight-pt-db-level1", "ascend_db", Cluster),
    ("ascend/msinsight-pt-db-level1/rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/analysis.db",
     "ascend_db", Profile),
    ("gpu/hta-trace_filter", "kineto", Cluster),
    ("gpu/hta-trace_filter/sampled_rank-1.json.gz", "kineto", Profile),
    ("ascend/msprof-analyze-tests/timeline_advice/trace_view.json", "trace_view", Profile),
    ("ascend/mindinsight-legacy/cluster_propose", "mindspore_legacy", Cluster),
    ("ascend/msinsight-cluster-output", "cluster_analysis_output", Cluster),
    ("ascend/msinsight-cluster-output/cluster_analysis_output/cluster_step_trace_time.csv",
     "cluster_analysis_output", Cluster),
    ("ascend/mindinsight-legacy/cluster_propose/hccl_raw_2.csv", "mindspore_legacy", Profile),
    ("ascend/msinsight-pt-level1/rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
     "ascend_text", Profile),
])
def test_autodetect(rel, fmt, kind):
    obj = detect.load(sample(rel), cache=False)
    assert isinstance(obj, kind)
    assert obj.meta.source_format == fmt


def test_unknown_file_is_an_error(tmp_path):
    notes = tmp_path / "PROVENANCE.md"
    notes.write_text("# where the profile came from\n")
    with pytest.raises(ProfileError, match="unknown kind of file"):
        detect.load(notes)


@pytest.mark.shared_samples
def test_ranks_from_folder_names_when_info_is_missing(tmp_path):
    user = tmp_path / "job"
    for r in (0, 1):
        dst = user / f"rank{r}_ascend_pt"
        writable_copy(LEVEL1 / f"rank{r}_ascend_pt", dst)
        (dst / f"profiler_info_{r}.json").unlink()
    c = detect.load(user, cache=False)
    assert c.ranks == [0, 1]
    assert any("rank" in n for n in c[1].meta.notes)


@pytest.mark.shared_samples
def test_rank_subset():
    c = detect.load(LEVEL1, ranks=[1], cache=False)
    assert isinstance(c, Cluster) and c.ranks == [1]
    assert set(c.steps["rank"]) == {1}
    with pytest.raises(ProfileError, match=r"rank 7 not found"):
        detect.load(LEVEL1, ranks=[7], cache=False)


@pytest.mark.shared_samples
def test_parallel_equals_serial():
    serial = detect.load(LEVEL1, cache=False, workers=1, progress=False)
    parallel = detect.load(LEVEL1, cache=False, workers=2, progress=False)
    for name in ("kernels", "ops", "steps", "comm_ops", "memory"):
        pd.testing.assert_frame_equal(getattr(serial, name), getattr(parallel, name))


@pytest.mark.shared_samples
def test_cluster_times_share_one_origin():
    c = detect.load(LEVEL1, cache=False)
    assert c.meta.origin_ns == min(p.meta.origin_ns for p in c)
    p1 = c[1]
    shift = (p1.meta.origin_ns - c.meta.origin_ns) / 1000
    k = c.kernels[c.kernels["rank"] == 1]["start_us"].to_numpy()
    assert k == pytest.approx(p1.kernels["start_us"].to_numpy() + shift)


def test_progress_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    with _progress.Progress(3, "loading", stream=out) as bar:
        for r in range(3):
            bar.update(1, f"rank {r}")
    text = out.getvalue()
    assert "\r" in text and "3/3" in text and text.endswith("\n")
    log = io.StringIO()
    with _progress.Progress(2, "loading", stream=log) as bar:
        bar.update(2)
    assert log.getvalue().startswith("loading: 2/2")


def test_progress_notebook(monkeypatch):
    pytest.importorskip("ipywidgets")
    pytest.importorskip("IPython")
    shown = []
    monkeypatch.setattr(_progress, "in_notebook", lambda: True)
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.append(a))
    bar = _progress.Progress(2, "loading")
    assert bar.mode == "widget" and shown
    bar.update(1, "rank 0")
    assert bar._widget.value == 1
    bar.update(1)
    bar.close()
    assert bar._widget.value == 2


@pytest.mark.shared_samples
def test_load_shows_progress_for_clusters(capsys):
    detect.load(LEVEL1, cache=False, progress=True)
    assert "2/2" in capsys.readouterr().err


@pytest.mark.shared_samples
def test_profile_metadata_groups_map_local_ranks(tmp_path):
    dst = tmp_path / "rank0_ascend_pt"
    writable_copy(LEVEL1 / "rank0_ascend_pt", dst)
    group = "17522688603477080586"
    md = {"parallel_group_info": {group: {"group_name": "dp", "group_rank": 0,
                                          "global_ranks": [0, 8, 16, 24, 32, 40, 48, 56]}}}
    (dst / "profiler_metadata.json").write_text(json.dumps(md))
    p = detect.load(dst, cache=False)
    mx = p.comm_matrix
    assert mx["src_rank"].notna().all()
    assert set(mx["dst_rank"].astype(int)) <= {0, 8, 16, 24, 32, 40, 48, 56}
    assert (mx["dst_rank"] == mx["dst_local"] * 8).all()
    assert p.meta.world_size == 57


def _hta_folder_with(tmp_path: Path, extra: dict[str, bytes]) -> Path:
    job = tmp_path / "job"
    job.mkdir()
    for trace in sorted(sample(HTA).glob("*.json.gz")):
        shutil.copy(trace, job / trace.name)
    for name, data in extra.items():
        (job / name).write_bytes(data)
    return job


@pytest.mark.shared_samples
def test_json_beside_traces_that_is_not_a_trace_is_left_out_with_a_note(tmp_path):
    import gzip

    env = json.dumps({"python": "3.12", "torch": "2.11.0", "cuda": "13.0"}).encode()
    job = _hta_folder_with(tmp_path, {"environment.json": env,
                                      "settings.json.gz": gzip.compress(b'{"steps": 3}')})
    cluster = detect.load(job, cache=False, progress=False)
    assert isinstance(cluster, Cluster)
    assert cluster.ranks == [0, 1] and cluster.failed == {}
    notes = [n for n in cluster.meta.notes if "left out" in n]
    assert sorted(notes) == [
        "environment.json left out: not a profiler trace (a JSON object without traceEvents)",
        "settings.json.gz left out: not a profiler trace (a JSON object without traceEvents)"]
    assert (job / "environment.json").read_bytes() == env  # the user's file is untouched


@pytest.mark.shared_samples
def test_a_broken_trace_beside_traces_is_still_a_failed_rank(tmp_path):
    """Only a JSON object read whole without traceEvents is ruled out; the rest is parsed."""
    job = _hta_folder_with(tmp_path, {"rank_2.json": b'{"traceEvents": [{"ph": "X", ',
                                      "rank_3.json": b"[not json"})
    cluster = detect.load(job, cache=False, progress=False)
    assert cluster.ranks == [0, 1]
    assert sorted(cluster.failed) == [2, 3]
    assert not [n for n in cluster.meta.notes if "left out" in n]


def test_a_folder_of_json_files_that_are_not_traces_is_an_error(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "environment.json").write_text('{"torch": "2.11.0"}')
    with pytest.raises(ProfileError, match="environment.json is not a profiler trace"):
        detect.load(job, cache=False, progress=False)
