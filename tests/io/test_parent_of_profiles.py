"""A parent folder of several unrelated profiles lists them (``RunsFound``), never loads
the one its scan happens to reach nor merges profiles of different formats or depths.

The profiles expected are found here independently of perfkit: by walking the folder
(``os.walk``) for rank folders (``ASCEND_PROFILER_OUTPUT/`` beside ``profiler_info_{n}.json``),
bare ``kernel_details.csv`` / ``trace_view.json`` files and Kineto traces (gzip + json,
their ``distributedInfo.rank``).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from shared_samples import CLUSTER_OUTPUT, HTA, PT_GPT3_OLD, PT_LEVEL1, sample

import perfkit as pk

pytestmark = pytest.mark.shared_samples

MSPROF_TESTS = "ascend/msprof-analyze-tests"
QWEN = "wild/tl_qwen_h100"


def _kineto_rank(path: Path) -> int | None:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or "traceEvents" not in doc:
        return None
    return doc.get("distributedInfo", {}).get("rank", 0)


def _expected(root: Path) -> dict[str, list[int | None]]:
    """Folder (relative to ``root``) of each profile -> the ranks found in it, by walking."""
    out: dict[str, list[int | None]] = {}
    for folder, dirs, files in os.walk(root, followlinks=True):
        here = Path(folder)
        dirs[:] = [d for d in dirs if d != "cluster_analysis_output"]
        if here.name == "ASCEND_PROFILER_OUTPUT":
            continue
        if "ASCEND_PROFILER_OUTPUT" in dirs:  # a rank folder: its job is its parent
            info = [int(m.group(1)) for f in files
                    if (m := re.fullmatch(r"profiler_info_(\d+)\.json", f))]
            out.setdefault(here.parent.relative_to(root).as_posix(), []).append(
                info[0] if info else None)
            dirs.clear()
            continue
        rel = here.relative_to(root).as_posix()
        if "kernel_details.csv" in files or "trace_view.json" in files:
            out.setdefault(rel, []).append(None)  # a bare export: nothing says its rank
        for f in files:
            if f.endswith((".json", ".json.gz")) and f != "trace_view.json":
                rank = _kineto_rank(here / f)
                if rank is not None:
                    out.setdefault(rel, []).append(rank)
    return out


def _listed(err: pk.RunsFound) -> dict[str, list[int | None]]:
    return {r.where: list(r.ranks) for r in err.runs}


def _check_listing(root: Path) -> pk.RunsFound:
    expected = _expected(root)
    assert len(expected) >= 2, expected  # the folder really holds several profiles
    with pytest.raises(pk.RunsFound) as info:
        pk.load(root, cache=False)
    got = _listed(info.value)
    assert sorted(got) == sorted(expected)
    for where, ranks in expected.items():
        assert len(got[where]) == len(ranks), where
        if None not in ranks:  # every rank recorded in the files: those very ranks
            assert sorted(got[where]) == sorted(ranks), where  # type: ignore[type-var]
    message = str(info.value)
    assert str(root) in message
    for where in expected:
        assert f"in {where}" in message
    return info.value


def test_symlinked_profiles_at_different_depths_are_listed(tmp_path: Path) -> None:
    """A 2-rank Ascend job one level down beside a Kineto trace three levels down: the old
    scan loaded the Ascend job alone (a one-job Cluster) and said nothing of the trace."""
    root = tmp_path / "parent"
    (root / "deep" / "er").mkdir(parents=True)
    (root / "level1").symlink_to(sample(PT_LEVEL1), target_is_directory=True)
    (root / "deep" / "er" / "qwen").symlink_to(sample(QWEN), target_is_directory=True)
    err = _check_listing(root)
    assert {r.formats for r in err.runs} == {("ascend_text",), ("kineto",)}
    # each listed profile loads as that folder loads on its own
    for r in err.runs:
        alone = pk.load(root / r.where, cache=False)
        picked = pk.load(root, run=r.id, cache=False)
        assert len(picked.ranks) == len(getattr(alone, "ranks", [alone.meta.rank]))
        first = picked[picked.ranks[0]] if isinstance(picked, pk.Cluster) else picked
        ref = alone[alone.ranks[0]] if isinstance(alone, pk.Cluster) else alone
        assert len(first.kernels) == len(ref.kernels) > 0


def test_copied_profiles_beyond_the_scan_are_listed(tmp_path: Path) -> None:
    """Two small multi-rank samples copied two and three levels down: the old code found
    no profile at all there."""
    root = tmp_path / "parent"
    shutil.copytree(sample(PT_GPT3_OLD), root / "ascend" / "gpt3")
    shutil.copytree(sample(HTA), root / "gpu" / "traces" / "hta")
    err = _check_listing(root)
    assert sorted(len(r.ranks) for r in err.runs) == [2, 2]


def test_one_profile_deep_below_loads_as_itself(tmp_path: Path) -> None:
    """The only profile below a folder, deeper than two levels, is no pick: it loads, with
    the ranks its files record (the old code found no profile)."""
    root = tmp_path / "parent"
    shutil.copytree(sample(PT_GPT3_OLD), root / "a" / "b" / "gpt3")
    expected = _expected(root)
    assert list(expected) == ["a/b/gpt3"]
    job = pk.load(root, cache=False)
    assert isinstance(job, pk.Cluster)
    assert sorted(job.ranks) == sorted(expected["a/b/gpt3"])


def test_fixture_folder_of_unrelated_files_is_not_one_job() -> None:
    """msprof-analyze's test fixtures: two bare ``kernel_details.csv`` and a
    ``trace_view.json`` excerpt, unrelated; the old code merged them as 3 ranks."""
    err = _check_listing(sample(MSPROF_TESTS))
    assert len(err.runs) == 3


def test_msprof_analyze_output_beside_a_job_is_a_profile_of_its_own(tmp_path: Path) -> None:
    """A folder holding only msprof-analyze output beside a job's folder: the old scan
    skipped it and loaded the job alone; it is listed, and picking it reads its ranks."""
    import csv

    root = tmp_path / "parent"
    root.mkdir()
    (root / "job").symlink_to(sample(PT_LEVEL1), target_is_directory=True)
    (root / "analysis").symlink_to(sample(CLUSTER_OUTPUT), target_is_directory=True)
    with pytest.raises(pk.RunsFound) as info:
        pk.load(root, cache=False)
    runs = {r.where: r for r in info.value.runs}
    assert sorted(runs) == ["analysis/cluster_analysis_output", "job"]
    assert runs["analysis/cluster_analysis_output"].formats == ("cluster_analysis_output",)
    table = root / "analysis" / "cluster_analysis_output" / "cluster_step_trace_time.csv"
    with table.open(newline="", encoding="utf-8") as fh:
        ranks = {int(r["Index"]) for r in csv.DictReader(fh) if r["Type"] == "rank"}
    picked = pk.load(root, run=runs["analysis/cluster_analysis_output"].id, cache=False)
    assert set(picked.ranks) == ranks
