"""Parquet cache: outside the user's folder, keyed by path+size+mtime, env switches."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

import perfkit.io.detect as detect
from perfkit.io import cache

DATA = Path(__file__).resolve().parents[1] / "data"
RANK0 = DATA / "ascend_pt_level1" / "rank0_ascend_pt"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(d))
    monkeypatch.delenv("PERFKIT_CACHE", raising=False)
    return d


def _no_parse(monkeypatch):
    def boom(source):
        raise AssertionError(f"parsed {source.path} again instead of using the cache")

    monkeypatch.setattr(detect, "parse_source", boom)


def test_second_load_comes_from_cache(cache_dir, monkeypatch):
    first = detect.load(RANK0)
    entries = [p for p in cache_dir.iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1
    assert {f.name for f in entries[0].iterdir()} >= {"meta.json", "kernels.parquet"}
    _no_parse(monkeypatch)
    second = detect.load(RANK0)
    assert second.meta == first.meta
    for name in ("kernels", "ops", "steps", "comm_ops", "comm_bandwidth", "comm_matrix",
                 "memory", "op_memory"):
        pd.testing.assert_frame_equal(getattr(second, name), getattr(first, name))


def test_cluster_cache_per_rank(cache_dir, monkeypatch):
    first = detect.load(DATA / "ascend_pt_level1")
    _no_parse(monkeypatch)
    second = detect.load(DATA / "ascend_pt_level1")
    pd.testing.assert_frame_equal(second.steps, first.steps)


def test_changed_file_is_reparsed(cache_dir, tmp_path):
    user = tmp_path / "user" / "rank0_ascend_pt"
    shutil.copytree(RANK0, user)
    a = detect.load(user)
    st = user / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    st.write_text(st.read_text().replace("8873.756000000001", "9000.5"))
    os.utime(st, ns=(st.stat().st_atime_ns, st.stat().st_mtime_ns + 10**9))
    b = detect.load(user)
    assert a.steps["computing_us"].iloc[0] != b.steps["computing_us"].iloc[0]
    assert b.steps["computing_us"].iloc[0] == 9000.5


def test_env_disables_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    detect.load(RANK0)
    assert not cache_dir.exists()
    monkeypatch.setenv("PERFKIT_CACHE", "1")
    detect.load(RANK0, cache=False)
    assert not cache_dir.exists()


def test_cache_never_inside_the_profile_folder(tmp_path, monkeypatch):
    user = tmp_path / "user" / "rank0_ascend_pt"
    shutil.copytree(RANK0, user)
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(user / "cache_here"))
    before = sorted(p.name for p in user.rglob("*"))
    detect.load(user)
    assert sorted(p.name for p in user.rglob("*")) == before


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.delenv("PERFKIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_root() == tmp_path / "xdg" / "perfkit"
