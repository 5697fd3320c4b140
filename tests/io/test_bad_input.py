"""Every bad input gives a PerfkitError naming the file and what was expected, and the
user's folder is left exactly as it was (names, sizes, modification times)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from shared_samples import PT_LEVEL1, sample, writable_copy

import perfkit.io.engines.local as detect
from perfkit.errors import PerfkitError, ProfileError
from perfkit.profile import Cluster

LEVEL1 = sample(PT_LEVEL1)  # the tests marked shared_samples damage copies of it
RANK0 = LEVEL1 / "rank0_ascend_pt"
GARBAGE = bytes(range(256)) * 64 + b"\x00\xff\xfe" * 100


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def expect_error(path: Path, user_dir: Path, *words: str, **kw) -> ProfileError:
    before = snapshot(user_dir)
    with pytest.raises(PerfkitError) as info:
        detect.load(path, **kw)
    after = snapshot(user_dir)
    assert before == after, "the loader changed the user's folder"
    msg = str(info.value)
    for w in words:
        assert w.lower() in msg.lower(), msg
    return info.value


def rank_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "user" / "rank0_ascend_pt"
    return writable_copy(RANK0, dst)


def test_path_does_not_exist(tmp_path):
    missing = tmp_path / "nowhere"
    err = expect_error(missing, tmp_path, "nowhere", "does not exist")
    assert err.path.endswith("nowhere")


def test_folder_with_nothing_known(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "readme.txt").write_text("hello")
    (user / "notes").mkdir()
    expect_error(user, user, "user", "no profile found", "ascend_pt")


def test_truncated_json_kineto(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    f = user / "trace_rank0.json"
    text = json.dumps({"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 2}] * 50})
    f.write_text(text[: len(text) // 2])
    expect_error(f, user, "trace_rank0.json", "truncated", "expected")


@pytest.mark.shared_samples
def test_truncated_trace_view_in_rank(tmp_path):
    rank = rank_copy(tmp_path)
    tv = rank / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    data = tv.read_bytes()
    tv.write_bytes(data[: len(data) // 3])
    expect_error(rank, tmp_path / "user", "trace_view.json", "truncated")


def test_truncated_gzip(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    f = user / "rank0.json.gz"
    f.write_bytes(gzip.compress(b'{"traceEvents": []}' * 1000)[:40])
    expect_error(f, user, "rank0.json.gz", "gzip")


@pytest.mark.shared_samples
def test_empty_files(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    f = user / "empty.json"
    f.write_bytes(b"")
    expect_error(f, user, "empty.json", "empty", "expected")
    rank = rank_copy(tmp_path)
    (rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_bytes(b"")
    expect_error(rank, tmp_path / "user", "kernel_details.csv", "empty")


@pytest.mark.shared_samples
def test_wrong_header(tmp_path):
    rank = rank_copy(tmp_path)
    (rank / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").write_text(
        "Iteration,Busy,Idle\n1,2,3\n")
    expect_error(rank, tmp_path / "user", "step_trace_time.csv", "expected a header",
                 "Computing", "found 'Iteration,Busy,Idle'")


@pytest.mark.shared_samples
def test_missing_header(tmp_path):
    rank = rank_copy(tmp_path)
    kd = rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = kd.read_text(encoding="utf-8").split("\n", 1)
    kd.write_text(lines[1], encoding="utf-8")  # data rows only
    expect_error(rank, tmp_path / "user", "kernel_details.csv", "expected a header", "Name")


@pytest.mark.shared_samples
def test_binary_garbage(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    f = user / "rank0.json"
    f.write_bytes(GARBAGE)
    expect_error(f, user, "rank0.json", "expected")
    rank = rank_copy(tmp_path)
    (rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_bytes(GARBAGE)
    expect_error(rank, tmp_path / "user", "kernel_details.csv", "binary", "expected")
    db_dir = tmp_path / "dbuser" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    db_dir.mkdir(parents=True)
    (db_dir / "ascend_pytorch_profiler_0.db").write_bytes(GARBAGE)
    expect_error(db_dir / "ascend_pytorch_profiler_0.db", tmp_path / "dbuser",
                 "ascend_pytorch_profiler_0.db", "not an SQLite database")


@pytest.mark.shared_samples
def test_non_utf8(tmp_path):
    rank = rank_copy(tmp_path)
    kd = rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    kd.write_bytes(kd.read_bytes().replace(b"Name", "N\u00e4me".encode("latin-1"), 1))
    expect_error(rank, tmp_path / "user", "kernel_details.csv", "UTF-8")
    user = tmp_path / "u2"
    user.mkdir()
    f = user / "trace.json"
    f.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "\xe9\xff\xfe", "ts": 1}]}')
    expect_error(f, user, "trace.json", "UTF-8")
    # non-UTF-8 in a data row (not the header)
    rank2 = tmp_path / "u3" / "rank0_ascend_pt"
    writable_copy(RANK0, rank2)
    opm = rank2 / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv"
    opm.write_bytes(opm.read_bytes().replace(b"aten::empty_strided", b"aten::\xff\xfe", 1))
    expect_error(rank2, tmp_path / "u3", "operator_memory.csv", "expected")


@pytest.mark.shared_samples
def test_two_folders_claim_same_rank(tmp_path):
    user = tmp_path / "user"
    writable_copy(RANK0, user / "a_ascend_pt")
    writable_copy(RANK0, user / "b_ascend_pt")
    expect_error(user, user, "two profiles claim rank 0", "a_ascend_pt", "b_ascend_pt")


@pytest.mark.shared_samples
def test_damaged_rank_spoils_only_itself(tmp_path):
    user = tmp_path / "user"
    writable_copy(LEVEL1, user)
    tv = user / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    tv.write_bytes(tv.read_bytes()[:1000])
    before = snapshot(user)
    c = detect.load(user)
    assert snapshot(user) == before
    assert isinstance(c, Cluster)
    assert c.ranks == [0]
    assert 1 in c.failed and "trace_view.json" in c.failed[1]
    assert any(n.startswith("rank 1 not loaded") for n in c.meta.notes)


@pytest.mark.shared_samples
def test_rank_without_analysed_files_is_noted(tmp_path):
    user = tmp_path / "user"
    writable_copy(LEVEL1, user)
    shutil.rmtree(user / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT")
    (user / "rank2_ascend_pt" / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    before = snapshot(user)
    c = detect.load(user)
    assert snapshot(user) == before
    assert c.ranks == [0]
    assert "not analysed" in c.failed[1]
    assert "no readable profiler file" in c.failed[2]
    # alone, the same folder is an error naming it
    expect_error(user / "rank1_ascend_pt", user, "rank1_ascend_pt", "ASCEND_PROFILER_OUTPUT")


@pytest.mark.shared_samples
def test_unknown_engine_is_an_error(monkeypatch):
    with pytest.raises(PerfkitError, match="engine"):
        detect.load(RANK0, engine="spark")
    monkeypatch.setenv("PERFKIT_ENGINE", "spark")
    with pytest.raises(PerfkitError, match="PERFKIT_ENGINE"):
        detect.load(RANK0)


@pytest.mark.shared_samples
def test_dask_engine_reads_a_single_rank_locally():
    # one rank needs no Dask (nor Dask installed): the same Profile as the local engine
    a = detect.load(RANK0, engine="dask", cache=False)
    b = detect.load(RANK0, engine="local", cache=False)
    assert a.meta == b.meta
    pd.testing.assert_frame_equal(a.kernels, b.kernels)
