"""load(engine="dask"): ranks parsed as Dask tasks into the cache, lazy tables that equal the
local engine's, atomic cache entries, the same errors, and no Dask for engine="local"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from dask_settings import quiet_cluster
from shared_samples import PT_LEVEL1, sample, shared_param, writable_copy

import perfkit.io.engines.local as detect
from perfkit.errors import InvalidArgumentError, ProfileError
from perfkit.io.cache import store as cache
from perfkit.io.canonical.schema import TABLE_NAMES
from perfkit.profile import Cluster, Profile, ProfileMeta

pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

from perfkit.io.engines import dask as dask_engine  # noqa: E402 - needs dask

ROOT = Path(__file__).resolve().parents[2]
REAL = sample(PT_LEVEL1)
SIM16 = ROOT / "data" / "simulated" / "llama2-13b-tuned-dp8-pp2"


@pytest.fixture(scope="module")
def client():
    cluster = quiet_cluster(n_workers=2, threads_per_worker=1, processes=False,
                            dashboard_address=":0")
    c = distributed.Client(cluster, set_as_default=False)
    yield c
    c.close()
    cluster.close()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(d))
    monkeypatch.delenv("PERFKIT_CACHE", raising=False)
    monkeypatch.delenv("PERFKIT_ENGINE", raising=False)
    monkeypatch.setenv("PERFKIT_DASK_PANDAS_MB", "0")  # small test jobs: lazy tables
    return d


def by_rank(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in rank order, each rank's rows in their original order, fresh index."""
    return frame.sort_values("rank", kind="mergesort").reset_index(drop=True)


def assert_same_tables(lazy: Cluster, eager: Cluster) -> None:
    for name in TABLE_NAMES:
        got = getattr(lazy, name)
        assert type(got).__module__.startswith("dask"), name
        assert got.npartitions == len(lazy.ranks)
        pd.testing.assert_frame_equal(by_rank(got.compute()), by_rank(getattr(eager, name)),
                                      obj=name)


def entries(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if not p.name.startswith(".")) \
        if root.is_dir() else []


@pytest.mark.slow
@pytest.mark.parametrize("path", [shared_param(REAL), SIM16],
                         ids=["real-2-ranks", "simulated-16-ranks"])
def test_tables_equal_the_local_engine(path, client, cache_dir, monkeypatch):
    calls = []
    parse = dask_engine.parse_source

    def spy(source):
        calls.append((source.rank, distributed.get_worker().address))  # raises off-worker
        return parse(source)

    monkeypatch.setattr(dask_engine, "parse_source", spy)
    lazy = detect.load(path, engine="dask", client=client, progress=False)
    eager = detect.load(path, engine="local", cache=False, progress=False)
    assert isinstance(lazy, dask_engine.DaskCluster) and lazy.lazy
    assert lazy.ranks == eager.ranks
    assert sorted(r for r, _ in calls) == eager.ranks  # every rank, once, on a worker
    assert lazy.meta == eager.meta and lazy.failed == eager.failed == {}
    assert_same_tables(lazy, eager)
    # one cache entry per rank; a rank's own Profile is the local one
    assert len(entries(cache_dir)) == len(eager.ranks)
    r = eager.ranks[-1]
    pd.testing.assert_frame_equal(lazy[r].kernels, eager[r].kernels)
    # the second load reads the entries and parses nothing
    calls.clear()
    again = detect.load(path, engine="dask", client=client, progress=False)
    assert calls == []
    pd.testing.assert_frame_equal(by_rank(again.steps.compute()), by_rank(eager.steps))


@pytest.mark.slow
def test_map_ranks_and_rank_view_see_the_cluster_rows(client, cache_dir):
    lazy = detect.load(SIM16, engine="dask", client=client, progress=False)
    eager = detect.load(SIM16, engine="local", cache=False, progress=False)
    with client.as_current():
        counts = lazy.map_ranks(lambda p: (p.rank, len(p.kernels), p.kernels["start_us"].min()))
    k = eager.kernels
    expect = [(r, int((k["rank"] == r).sum()), k.loc[k["rank"] == r, "start_us"].min())
              for r in eager.ranks]
    assert counts == expect  # times on the cluster's clock, not the rank's own
    view = lazy.rank_view(3).comm_ops
    pd.testing.assert_frame_equal(view, eager.comm_ops[eager.comm_ops["rank"] == 3]
                                  .reset_index(drop=True))


@pytest.mark.shared_samples
def test_cache_off_gives_computed_tables(client, cache_dir, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    got = detect.load(REAL, engine="dask", client=client, progress=False)
    eager = detect.load(REAL, engine="local", progress=False)
    assert type(got) is Cluster and not got.lazy
    for name in TABLE_NAMES:
        pd.testing.assert_frame_equal(getattr(got, name), getattr(eager, name), obj=name)
    assert any("without the cache" in n for n in got.meta.notes)
    assert not cache_dir.exists()


@pytest.mark.shared_samples
def test_failed_cache_write_leaves_nothing_and_still_loads(client, cache_dir, monkeypatch):
    written = []

    def half_then_fail(folder, meta, tables):
        conform_first = cache.conform(tables.get("kernels"), "kernels", meta.rank)
        conform_first.to_parquet(folder / "kernels.parquet", index=False)
        written.append(folder)
        raise OSError("disk full")

    monkeypatch.setattr(cache, "write_entry", half_then_fail)
    lazy = detect.load(REAL, engine="dask", client=client, progress=False)
    assert written  # the writes really started, in the tasks and again in the client
    assert list(cache_dir.iterdir()) == []  # no entry and no temporary folder
    assert any("could not be written to the cache" in n for n in lazy.meta.notes)
    eager = detect.load(REAL, engine="local", cache=False, progress=False)
    assert_same_tables(lazy, eager)


@pytest.mark.shared_samples
@pytest.mark.slow
def test_worker_killed_mid_write_leaves_no_entry(client, cache_dir, tmp_path):
    # a real crash: the process dies (os._exit) after two of the nine table files
    script = f"""
import os, sys
from pathlib import Path
import pandas as pd
from perfkit.io.cache import store as cache
from perfkit.io.engines import dask as dask_engine
from perfkit.io.engines.local import detect
src = detect({str(REAL)!r})[1][1]
key = cache.entry_key(src.fmt, Path(src.path), src.file_paths(), src.rank)
print(key, flush=True)
real = pd.DataFrame.to_parquet
n = [0]
def dying(self, *a, **k):
    n[0] += 1
    if n[0] == 3:
        os._exit(3)
    return real(self, *a, **k)
pd.DataFrame.to_parquet = dying
dask_engine.parse_task(src, key, {str(cache_dir)!r})
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=os.environ.copy(), timeout=60)
    assert proc.returncode == 3, proc.stderr
    key = proc.stdout.split()[0]
    assert cache.read(key, cache_dir) is None and not (cache_dir / key).exists()
    leftovers = [p for p in cache_dir.iterdir() if p.name.startswith(f".{key}.")]
    assert len(leftovers) == 1 and len(list(leftovers[0].glob("*.parquet"))) == 2
    assert not (leftovers[0] / "meta.json").exists()
    # the next load parses that rank again and is complete
    lazy = detect.load(REAL, engine="dask", client=client, progress=False)
    assert cache.read(key, cache_dir) is not None
    assert_same_tables(lazy, detect.load(REAL, engine="local", cache=False, progress=False))
    assert cache.sweep(older_than_s=0) == 1
    assert len(entries(cache_dir)) == 2 and not any(
        p.name.startswith(".") for p in cache_dir.iterdir())


@pytest.mark.shared_samples
def test_complete_entry_is_never_rewritten(cache_dir):
    prof = detect.load(REAL / "rank0_ascend_pt", cache=False)
    assert cache.write("k" * 32, prof.meta, prof.tables())
    meta_file = cache_dir / ("k" * 32) / "meta.json"
    before = meta_file.stat().st_mtime_ns
    other = ProfileMeta(source_format="other", rank=0)
    assert cache.write("k" * 32, other, {})  # a racing writer: the first entry stays
    assert meta_file.stat().st_mtime_ns == before
    assert cache.read("k" * 32).meta == prof.meta


def damaged_copy(tmp_path: Path, ranks=(1,)) -> Path:
    user = writable_copy(REAL, tmp_path / "user")
    for r in ranks:
        f = user / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
        f.write_text("Iteration,Busy,Idle\n1,2,3\n")
    return user


@pytest.mark.shared_samples
def test_damaged_rank_gives_the_same_error_as_the_local_engine(client, cache_dir, tmp_path):
    user = damaged_copy(tmp_path)
    lazy = detect.load(user, engine="dask", client=client, progress=False)
    eager = detect.load(user, engine="local", cache=False, progress=False)
    assert lazy.ranks == eager.ranks == [0]
    assert lazy.failed == eager.failed
    assert "step_trace_time.csv" in lazy.failed[1]
    assert lazy.meta.notes == eager.meta.notes
    pd.testing.assert_frame_equal(by_rank(lazy.steps.compute()), by_rank(eager.steps))


@pytest.mark.shared_samples
def test_every_rank_damaged_raises_naming_the_file(client, cache_dir, tmp_path):
    user = damaged_copy(tmp_path, ranks=(0, 1))
    with pytest.raises(ProfileError, match="step_trace_time.csv"):
        detect.load(user, engine="dask", client=client, progress=False)


@pytest.mark.shared_samples
def test_environment_default_and_scheduler_address(client, cache_dir, monkeypatch):
    monkeypatch.setenv("PERFKIT_ENGINE", "dask")
    got = detect.load(REAL, client=client.cluster.scheduler_address, progress=False)
    assert got.lazy
    # the Client opened for the address is closed again; no client is left current
    with pytest.raises(ValueError):
        distributed.get_client()
    monkeypatch.setenv("PERFKIT_ENGINE", "local")
    assert not detect.load(REAL, progress=False).lazy
    with pytest.raises(InvalidArgumentError):
        detect.load(REAL, engine="Dask")


@pytest.mark.shared_samples
@pytest.mark.slow
def test_no_client_starts_and_closes_a_local_cluster(cache_dir, monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    started = []
    real = distributed.LocalCluster

    def spy(*a, **k):
        started.append(k)
        return real(*a, **k)

    monkeypatch.setattr(distributed, "LocalCluster", spy)
    lazy = detect.load(REAL, engine="dask", workers=1, progress=False)
    assert started and started[0]["n_workers"] == 1 and started[0]["processes"] is True
    with pytest.raises(ValueError):
        distributed.get_client()
    # the lazy tables still compute (Dask's local scheduler) after the cluster is gone
    eager = detect.load(REAL, engine="local", cache=False, progress=False)
    pd.testing.assert_frame_equal(by_rank(lazy.comm_ops.compute()), by_rank(eager.comm_ops))


def test_group_local_ranks_are_mapped_like_the_eager_cluster(tmp_path):
    def prof(rank, me):
        ops = pd.DataFrame({"group": ["g8", "gx"], "name": ["allreduce", "send"],
                            "elapse_us": [1.0, 1.0]})
        mx = pd.DataFrame({"group": ["g8", "g8", "gx"], "name": ["allreduce-top1"] * 2
                           + ["send-top1"], "src_local": [float(me)] * 3,
                           "dst_local": [float(me), float(1 - me), 5.0],
                           "size_bytes": [1.0, 1.0, 1.0]})
        meta = ProfileMeta(source_format="x", rank=rank, origin_ns=1000 * rank)
        return meta, {"comm_ops": ops, "comm_matrix": mx}

    for ordering in ((0, 1), (1, 0)):  # the second contradicts the member order: no mapping
        folders, profiles = [], []
        for rank, me in zip((8, 24), ordering, strict=True):
            meta, tables = prof(rank, me)
            folder = tmp_path / f"{ordering}-{rank}"
            folder.mkdir()
            cache.write_entry(folder, meta, tables)
            folders.append(folder)
            profiles.append(Profile(meta, tables))
        lazy = dask_engine.from_entries(folders, tmp_path)
        eager = Cluster(profiles, ProfileMeta(source_format="x", origin_ns=8000))
        got = by_rank(lazy.comm_matrix.compute())
        pd.testing.assert_frame_equal(got, by_rank(eager.comm_matrix))
        mapped = [n for n in lazy.meta.notes if "g8" in n]
        assert mapped == [n for n in eager.meta.notes if "g8" in n]
        assert bool(mapped) == (ordering == (0, 1))
        assert got["src_rank"].notna().any() == (ordering == (0, 1))


@pytest.mark.slow
def test_local_engine_never_imports_dask():
    code = f"""
import sys, json
import perfkit as pk
c = pk.load({str(SIM16)!r}, engine="local", cache=False, progress=False)
c.tables()
import perfkit.analysis, perfkit.analysis.rank_summary
perfkit.analysis.rank_summary.rank_comm_summary(c)
print(json.dumps(sorted(m for m in sys.modules
                        if m.split(".")[0] in ("dask", "distributed"))))
"""
    env = {k: v for k, v in os.environ.items() if k != "PERFKIT_ENGINE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_ranks_with_different_extra_columns_concatenate_like_pandas(tmp_path):
    # rank 0 has PMU-like extras that rank 1 lacks; rank 2 has no kernels at all
    k0 = pd.DataFrame({"name": ["MatMul", "Add"], "start_us": [1.0, 2.0], "dur_us": [3.0, 1.0],
                       "aic_ratio": [0.5, 0.25], "block_dim": [8, 16], "fused": [True, False],
                       "note": ["a", None]})
    k1 = pd.DataFrame({"name": ["Cast"], "start_us": [5.0], "dur_us": [2.0]})
    k2 = pd.DataFrame({"name": pd.Series([], dtype=object),
                       "only_here": pd.Series([], dtype="int64")})
    folders, profiles = [], []
    for rank, k in enumerate((k0, k1, k2)):
        meta = ProfileMeta(source_format="x", rank=rank, origin_ns=10_000 + rank)
        folder = tmp_path / str(rank)
        folder.mkdir()
        cache.write_entry(folder, meta, {"kernels": k})
        folders.append(folder)
        profiles.append(cache.read_entry(folder))
    lazy = dask_engine.from_entries(folders, tmp_path)
    eager = Cluster(profiles, ProfileMeta(source_format="x", origin_ns=10_000))
    assert "only_here" not in lazy.kernels.columns  # empty ranks add no columns
    pd.testing.assert_frame_equal(by_rank(lazy.kernels.compute()), by_rank(eager.kernels))


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_a_small_job_is_analysed_in_pandas(client, cache_dir, monkeypatch):
    """Under the size limit the ranks are still parsed on Dask, the tables held in pandas."""
    monkeypatch.setenv("PERFKIT_DASK_PANDAS_MB", "32")
    small = detect.load(SIM16, engine="dask", client=client, progress=False)
    eager = detect.load(SIM16, engine="local", cache=False, progress=False)
    assert isinstance(small, dask_engine.DaskCluster) and not small.lazy
    assert any("analysed in pandas" in n for n in small.meta.notes)
    # its repr said "lazy tables" (a walk): it says what they are
    assert "tables in pandas" in repr(small) and "lazy tables" not in repr(small)
    for name in ("kernels", "steps", "comm_ops", "memory"):
        got = getattr(small, name)
        assert isinstance(got, pd.DataFrame)
        pd.testing.assert_frame_equal(got, getattr(eager, name))
    # the job is far below the limit: its entries are a few MB
    total = sum(f.stat().st_size for p in small.parts for f in Path(p.entry).glob("*.parquet"))
    assert 0 < total < dask_engine.pandas_below_bytes() == 32 << 20
    # 0 turns the limit off: lazy tables again
    monkeypatch.setenv("PERFKIT_DASK_PANDAS_MB", "0")
    lazy = detect.load(SIM16, engine="dask", client=client, progress=False)
    assert lazy.lazy and "lazy tables" in repr(lazy)
