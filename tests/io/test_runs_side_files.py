"""The runs of a folder that also holds files that are not profiles (issue: the legacy
MindInsight sample on the run picker).

``shared: ascend/mindinsight-legacy`` gathers separately recorded outputs, one sub-folder
each (see its PROVENANCE.md). What it holds is read here from the raw files, without
perfkit: the rank numbers in the legacy MindSpore file names, ``rank_id`` and
``collectionTimeBegin`` of the raw CANN device folder, ``rankId`` of the parallel strategy
files. perfkit's :func:`perfkit.runs` must find the same runs: one per recording, with the
ranks its files name, the parallel strategy files in none (their folder holds no profile)
and never as ranks of their own, and labels in words.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from kineto_files import write_trace
from shared_samples import MINDINSIGHT, sample

import perfkit as pk
from perfkit.io.detect.sources import FORMATS

LEGACY = sample(MINDINSIGHT)
#: A legacy MindSpore profiler file of one rank: ``step_trace_raw_{rank}_detail_time.csv``,
#: ``framework_raw_{rank}.csv``, ``hccl_raw_{rank}.csv`` (the files MindInsight reads per
#: rank).
_LEGACY_RANK_FILE = re.compile(r"^(?:step_trace_raw_(\d+)_detail_time\.csv|"
                               r"framework_raw_(\d+)\.csv|hccl_raw_(\d+)\.csv)$")


def _raw_reading(root: Path) -> dict[str, list[int]]:
    """The recordings under ``root``, read from the files: {folder relative to root:
    sorted ranks}; a folder without any profile data (only side files) is none."""
    found: dict[str, set[int]] = {}
    for f in sorted(root.rglob("*")):
        if not f.is_file():
            continue
        m = _LEGACY_RANK_FILE.match(f.name)
        if m:
            rank = int(next(g for g in m.groups() if g is not None))
            found.setdefault(f.parent.relative_to(root).as_posix(), set()).add(rank)
        elif f.name.startswith("info.json.") and f.parent.name.startswith("device_"):
            info = json.loads(f.read_text())
            found.setdefault(f.parent.relative_to(root).as_posix(), set()).add(
                int(info["rank_id"]))
    return {k: sorted(v) for k, v in found.items()}


def _collection_start_ns(device: Path) -> int:
    start = json.loads(next(device.glob("start_info.*")).read_text())
    return int(start["collectionTimeBegin"]) * 1000  # µs since the epoch


def _folder_of(run: pk.Run, root: Path) -> str:
    folders = {(Path(p) if Path(p).is_dir() else Path(p).parent).relative_to(root).as_posix()
               for p in run.paths}
    assert len(folders) == 1, f"{run.label} mixes folders: {sorted(folders)}"
    return folders.pop()


@pytest.mark.shared_samples
def test_the_legacy_sample_splits_into_its_recordings() -> None:
    expected = _raw_reading(LEGACY)
    # what the raw files say, written out: a check of the reading itself
    assert expected == {"PROF_000001_20230818142704322_COJGGGCANRMICFBC/device_0": [0],
                        "cluster_propose": [0, 1, 2, 3], "profiler_misc": [0, 1, 10],
                        "run_2_normal_run/profiler": [1]}
    runs = pk.runs(LEGACY)
    got = {_folder_of(r, LEGACY): sorted(r.ranks) for r in runs}  # type: ignore[type-var]
    assert got == expected
    assert [r.id for r in runs] == list(range(len(expected)))


@pytest.mark.shared_samples
def test_parallel_strategy_files_are_no_ranks_and_in_no_run_of_another_folder() -> None:
    strategy = LEGACY / "parallel_strategy"
    side = sorted(strategy.glob("parallel_strategy_*.json"))
    ranks = [json.loads(f.read_text())["config"]["rankId"] for f in side]
    assert ranks == [0, 1]  # per-rank side files of a job whose profile is not here
    for run in pk.runs(LEGACY):
        assert None not in run.ranks
        assert not [p for p in (*run.paths, *run.side_files) if Path(p).parent == strategy]
        assert len(run.paths) == len(run.ranks)


@pytest.mark.shared_samples
def test_the_labels_say_the_ranks_listed_in_words() -> None:
    runs = pk.runs(LEGACY)
    codes = [f for f in FORMATS if "_" in f]  # not_a_trace, cann_raw, mindspore_legacy ...
    for run in runs:
        text = run.label
        assert not [c for c in codes if c in text], text
        assert "None" not in text
        ranks = sorted(run.ranks)  # type: ignore[type-var]
        if len(ranks) == 1:
            assert f"rank {ranks[0]}," in text, text
        else:
            m = re.search(r"(\d+) ranks \(([^)]*)\)", text)
            assert m, text
            assert int(m.group(1)) == len(ranks), text
            listed = [int(x) for x in re.findall(r"\d+", m.group(2))]
            assert listed in (ranks, [ranks[0], ranks[-1]]), text  # 0-3 spans 0..3
    names = [r.name for r in runs]
    assert len(set(names)) == len(names)
    assert not [n for n in names if n.endswith((".json", ".jsonb"))]


@pytest.mark.shared_samples
def test_the_raw_cann_run_starts_when_its_collection_began() -> None:
    device = LEGACY / "PROF_000001_20230818142704322_COJGGGCANRMICFBC" / "device_0"
    start = _collection_start_ns(device)
    run = next(r for r in pk.runs(LEGACY) if str(device) in r.paths)
    assert run.start_ns == start
    day = datetime.fromtimestamp(start / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    assert f"started {day} UTC" in run.label


# ---- a folder of Kineto traces of two runs, with side files written here -------------

@pytest.fixture()
def two_runs_and_side_files(tmp_path: Path) -> Path:
    """Run A: ranks 0 and 1 (t0); run B: rank 0 an hour later; beside them a parallel
    strategy of rank 1, and one of rank 0 in a folder of its own."""
    t0 = 1.7e15  # µs since the epoch
    write_trace(tmp_path / "a_rank0.json", 0, 2, t0)
    write_trace(tmp_path / "a_rank1.json", 1, 2, t0 + 50)
    write_trace(tmp_path / "b_rank0.json", 0, 2, t0 + 3600e6)
    strategy = {"config": {"rankId": 1, "stageId": 0}, "graph": {"node": []}}
    (tmp_path / "parallel_strategy_1.json").write_text(json.dumps(strategy))
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "parallel_strategy_0.json").write_text(
        json.dumps({**strategy, "config": {"rankId": 0, "stageId": 0}}))
    return tmp_path


def test_a_side_file_goes_with_the_run_of_its_rank_in_its_folder(
        two_runs_and_side_files: Path) -> None:
    root = two_runs_and_side_files
    runs = pk.runs(root)
    assert [sorted(Path(p).name for p in r.paths) for r in runs] == [
        ["a_rank0.json", "a_rank1.json"], ["b_rank0.json"]]
    assert [[Path(p).name for p in r.side_files] for r in runs] == [
        ["parallel_strategy_1.json"], []]
    assert [r.ranks for r in runs] == [(0, 1), (0,)]
    assert runs[0].label.startswith("run 0: kineto pytorch, 2 ranks (0, 1), world size 2")
    assert [r.name for r in runs] == ["20231114-221320", "20231114-231320"]
    first = pk.load(root, run=0, cache=False, progress=False)
    assert first.ranks == [0, 1]
    assert [n for n in first.meta.notes if "left out" in n] == [
        "parallel_strategy_1.json left out: not a profiler trace (a JSON object without "
        "traceEvents)"]
    second = pk.load(root, run=1, cache=False, progress=False)
    assert not [n for n in second.meta.notes if "left out" in n]
