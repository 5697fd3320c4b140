"""``perfkit.load(path, wait=False)``: the same Profile or Cluster as ``load(path)``, its
steps served before the parse ends where the step files give the parse's table, every other
table waiting (never empty meanwhile), the parse's error raised at the first access that
waits, nothing written in the user's folder.

The early tables are compared with those of the plain ``load`` (the contract: the same
object, sooner) and the early steps with ``step_trace_time.csv`` read with the csv module.
"""

from __future__ import annotations

import csv
import os
import shutil
import threading
import time
from pathlib import Path

import pandas as pd
import pandas.testing as pdt
import pytest
from shared_samples import CLUSTER_OUTPUT, HTA, PT_DB_LEVEL1, PT_LEVEL1, shared_sample

import perfkit as pk
import perfkit.io.engines.local as detect
from perfkit.bundled_samples import resolve_sample
from perfkit.errors import InvalidArgumentError, PerfkitError, ProfileError, RunsFound
from perfkit.io.canonical.schema import TABLE_NAMES
from perfkit.io.engines.loading import Loading, LoadingCluster, LoadingProfile
from perfkit.io.preview.steps import preview
from perfkit.profile import Cluster, Profile

SLOW_RANK = Path(resolve_sample("sample:slow-rank"))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PERFKIT_CACHE", raising=False)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``root`` with its size and modification time."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = (Path(dirpath) / name).stat()
            out[str((Path(dirpath) / name).relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def assert_same(early: Profile | Cluster, eager: Profile | Cluster) -> None:
    """Every table, the meta and (for a Cluster) the ranks of ``early`` are ``eager``'s."""
    assert isinstance(early, Cluster) == isinstance(eager, Cluster)
    for name in TABLE_NAMES:
        pdt.assert_frame_equal(getattr(early, name), getattr(eager, name), obj=name)
    assert early.meta.to_dict() == eager.meta.to_dict()
    if isinstance(eager, Cluster):
        assert early.ranks == eager.ranks
        assert early.failed == eager.failed
        assert len(early) == len(eager)
        for rank in eager.ranks:
            pdt.assert_frame_equal(early[rank].kernels, eager[rank].kernels)


def csv_step_totals(rank_dir: Path) -> dict[int, float]:
    """Step -> computing + exposed communication + free, read from step_trace_time.csv."""
    path = rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        return {int(r["Step"]): float(r["Computing"]) + float(r["Communication(Not Overlapped)"])
                + float(r["Free"]) for r in csv.DictReader(fh)}


@pytest.fixture
def held_parse(monkeypatch):
    """Hold every full parse (``detect._load_sources``) until the event is set."""
    gate = threading.Event()
    original = detect._load_sources

    def held(*args, **kwargs):
        assert gate.wait(60), "the test never let the parse go"
        return original(*args, **kwargs)

    monkeypatch.setattr(detect, "_load_sources", held)
    yield gate
    gate.set()


# ---- the same object as load(path) ----------------------------------------------------

BUNDLED = ["sample:slow-rank", "sample:kineto-tiny-llama", "sample:mindspore-cpu-tiny-llama"]
SHARED = [PT_LEVEL1, CLUSTER_OUTPUT, HTA, PT_DB_LEVEL1, "wild/mi_run1",
          "wild/msa_kernel_details", "wild/tl_ddp_resnet18_mi300"]


def _check_same(path: str | Path) -> None:
    before = snapshot(Path(resolve_sample(path)))
    eager = pk.load(path, cache=False)
    early = pk.load(path, cache=False, wait=False)
    assert isinstance(early, LoadingProfile | LoadingCluster)
    assert isinstance(early.loading, Loading) and eager.loading is None
    assert_same(early, eager)
    assert early.done and early.wait(0) and early.loading.stage == "done"
    # steps come early exactly when the preview read the parse's own table
    assert early.loading.steps_early == preview(path).steps_final
    assert snapshot(Path(resolve_sample(path))) == before  # nothing written there


@pytest.mark.parametrize("path", BUNDLED)
def test_bundled_samples_load_the_same(path):
    _check_same(path)


@pytest.mark.shared_samples
@pytest.mark.parametrize("name", SHARED)
def test_shared_samples_load_the_same(name):
    _check_same(shared_sample(name))


@pytest.mark.shared_samples
def test_step_files_give_the_steps_early_kineto_spans_do_not():
    """The flag the early steps key off: set for step_trace_time.csv and msprof-analyze's
    step CSV, whose readers are the parse's; a trace's quick host spans are not."""
    for name in (PT_LEVEL1, CLUSTER_OUTPUT):
        assert preview(shared_sample(name)).steps_final, name
    assert preview(SLOW_RANK).steps_final
    hta = preview(shared_sample(HTA))
    if hta.steps_from == "the ProfilerStep spans":
        assert not hta.steps_final


# ---- steps before the parse ends ------------------------------------------------------

def test_steps_come_before_the_parse_ends(held_parse):
    prof = pk.load(SLOW_RANK, wait=False)
    assert isinstance(prof, LoadingCluster)
    steps = prof.steps  # served while the parse is held
    assert not prof.done and prof.loading.stage == "reading"
    assert prof.loading.steps_early
    for rank_dir in sorted(SLOW_RANK.glob("*_ascend_pt")):
        rank = int(next(rank_dir.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        expected = csv_step_totals(rank_dir)
        mine = steps[steps["rank"] == rank]
        assert sorted(mine["step"].astype(int)) == sorted(expected)
        for row in mine.itertuples():
            total = row.computing_us + row.comm_not_overlapped_us + row.free_us
            assert total == pytest.approx(expected[int(row.step)], rel=1e-9)
    # nothing else answers yet, and nothing answers empty
    got: dict[str, object] = {}
    readers = [threading.Thread(target=lambda n=n: got.__setitem__(n, getattr(prof, n)))
               for n in ("kernels", "comm_ops", "meta", "ranks")]
    for t in readers:
        t.start()
    time.sleep(0.3)
    assert all(t.is_alive() for t in readers) and not got
    assert prof.wait(timeout=0.05) is False
    assert 0 <= prof.loading.fraction <= 0.95
    assert "loading" in repr(prof) and "reading" in prof.loading.describe()
    held_parse.set()
    for t in readers:
        t.join(60)
    assert prof.wait(60) and prof.done
    eager = pk.load(SLOW_RANK)
    assert_same(prof, eager)
    pdt.assert_frame_equal(steps, eager.steps)
    pdt.assert_frame_equal(got["kernels"], eager.kernels)
    assert len(got["kernels"]) > 0 and got["ranks"] == [0, 1, 2, 3]
    assert prof.loading.fraction == 1.0 and "loaded in" in prof.loading.describe()


def test_steps_wait_when_the_quick_reading_is_not_the_parses(held_parse, monkeypatch):
    """A preview that is an approximation (``steps_final`` False, as a Kineto trace's host
    spans) is never served as ``steps``: they wait for the parse like every table."""
    import perfkit.io.preview.steps as preview_steps  # the loader imports it when it runs

    def approximate(*args, **kwargs):
        got = preview(*args, **kwargs)
        got.steps_final = False
        return got

    monkeypatch.setattr(preview_steps, "preview", approximate)
    prof = pk.load(SLOW_RANK, wait=False)
    got: list[pd.DataFrame] = []
    reader = threading.Thread(target=lambda: got.append(prof.steps))
    reader.start()
    reader.join(0.5)
    assert reader.is_alive() and not got and not prof.loading.steps_early
    assert prof.loading.preview is not None  # the quick reading is there for who wants it
    held_parse.set()
    reader.join(60)
    pdt.assert_frame_equal(got[0], pk.load(SLOW_RANK).steps)


def test_some_ranks_steps_early(held_parse):
    prof = pk.load(SLOW_RANK, ranks=[1, 3], wait=False)
    steps = prof.steps
    assert not prof.done and sorted(steps["rank"].unique()) == [1, 3]
    held_parse.set()
    eager = pk.load(SLOW_RANK, ranks=[1, 3])
    pdt.assert_frame_equal(steps, eager.steps)
    assert_same(prof, eager)


def test_one_rank_is_a_profile_with_early_steps(held_parse):
    rank_dir = sorted(SLOW_RANK.glob("*_ascend_pt"))[2]
    prof = pk.load(rank_dir, wait=False)
    assert isinstance(prof, LoadingProfile) and not isinstance(prof, Cluster)
    steps = prof.steps
    assert not prof.done
    assert sorted(steps["step"].astype(int)) == sorted(csv_step_totals(rank_dir))
    held_parse.set()
    eager = pk.load(rank_dir)
    pdt.assert_frame_equal(steps, eager.steps)
    assert_same(prof, eager)
    assert prof.rank == eager.rank == 2


def test_a_cached_profile_is_read_back(monkeypatch):
    eager = pk.load(SLOW_RANK)  # writes the cache
    calls = []
    monkeypatch.setattr(detect, "parse_source", lambda s: calls.append(s))
    prof = pk.load(SLOW_RANK, wait=False)
    assert prof.wait(60)
    assert prof.loading.cached and not calls
    assert_same(prof, eager)


def test_the_background_parse_writes_the_cache(monkeypatch):
    prof = pk.load(SLOW_RANK, wait=False)
    assert prof.wait(60) and not prof.loading.cached
    monkeypatch.setattr(detect, "parse_source",
                        lambda s: pytest.fail(f"{s.path} parsed again: not cached"))
    assert_same(pk.load(SLOW_RANK), prof)


# ---- errors -----------------------------------------------------------------------------

def _damaged_rank(tmp_path: Path, file: str, text: str) -> Path:
    src = sorted(SLOW_RANK.glob("*_ascend_pt"))[0]
    rank = tmp_path / "user" / src.name
    shutil.copytree(src, rank)
    (rank / "ASCEND_PROFILER_OUTPUT" / file).write_text(text)
    return rank


def _eager_error(path: Path) -> PerfkitError:
    with pytest.raises(PerfkitError) as info:
        pk.load(path)
    return info.value


def test_a_damaged_table_raises_at_first_access(tmp_path, held_parse):
    rank = _damaged_rank(tmp_path, "kernel_details.csv", "")
    held_parse.set()
    expected = _eager_error(rank)
    held_parse.clear()
    before = snapshot(tmp_path / "user")
    prof = pk.load(rank, wait=False)
    steps = prof.steps  # step_trace_time.csv is fine: served while the parse is held
    assert len(steps) > 0 and not prof.done
    held_parse.set()
    with pytest.raises(PerfkitError) as info:
        _ = prof.kernels
    assert type(info.value) is type(expected) and str(info.value) == str(expected)
    assert "kernel_details.csv" in str(info.value)
    for access in (lambda: prof.meta, lambda: prof.ops, prof.wait, lambda: prof.steps):
        with pytest.raises(type(expected), match="kernel_details.csv"):
            access()
    assert prof.done and prof.loading.stage == "failed" and prof.loading.error is not None
    assert "failed to load" in repr(prof)
    assert snapshot(tmp_path / "user") == before


def test_a_damaged_step_file_raises_at_steps(tmp_path):
    rank = _damaged_rank(tmp_path, "step_trace_time.csv", "Iteration,Busy,Idle\n1,2,3\n")
    expected = _eager_error(rank)
    prof = pk.load(rank, wait=False)
    with pytest.raises(ProfileError) as info:
        _ = prof.steps
    assert str(info.value) == str(expected) and "step_trace_time.csv" in str(expected)
    assert not prof.loading.steps_early


def test_what_is_found_before_parsing_raises_at_once(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(ProfileError) as early:
        pk.load(missing, wait=False)
    assert str(early.value) == str(_eager_error(missing))
    with pytest.raises(ProfileError, match="rank 9 not found"):
        pk.load(SLOW_RANK, ranks=[9], wait=False)
    with pytest.raises(InvalidArgumentError, match="local engine"):
        pk.load(SLOW_RANK, engine="dask", wait=False)


def test_dask_from_the_environment_is_named(monkeypatch):
    monkeypatch.setenv("PERFKIT_ENGINE", "dask")
    with pytest.raises(InvalidArgumentError, match=r"\$PERFKIT_ENGINE=dask"):
        pk.load(SLOW_RANK, wait=False)
    prof = pk.load(SLOW_RANK, engine="local", wait=False)
    assert prof.wait(60) and prof.ranks == [0, 1, 2, 3]


def test_several_runs_raise_at_once(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(sorted(SLOW_RANK.glob("*_ascend_pt"))[0], runs / "a" / "rank0_ascend_pt")
    shutil.copytree(sorted(SLOW_RANK.glob("*_ascend_pt"))[0], runs / "b" / "rank0_ascend_pt")
    with pytest.raises(RunsFound) as eager:
        pk.load(runs)
    with pytest.raises(RunsFound) as early:
        pk.load(runs, wait=False)
    assert str(early.value) == str(eager.value)
    prof = pk.load(runs, run=1, wait=False)
    assert prof.wait(60)
    assert_same(prof, pk.load(runs, run=1))


def test_plain_profiles_never_wait():
    eager = pk.load(SLOW_RANK)
    assert type(eager) is Cluster  # the default load is detect.load's, untouched
    assert eager.done and eager.wait() and eager.wait(0) and eager.loading is None
    assert isinstance(eager.steps, pd.DataFrame)


def test_the_common_clock_note_is_for_several_ranks_only() -> None:
    """Two ranks of the bundled gloo run are aligned on one clock and the notes say so; a
    cluster of one of them has nothing to align."""
    from pathlib import Path

    import perfkit as pk

    folder = Path(__file__).resolve().parents[2] / "data" / "kineto-tiny-llama"
    both = pk.load(folder, cache=False, progress=False)
    one = pk.load(folder, ranks=[0], cache=False, progress=False)
    assert len(both.ranks) == 2 and any("one clock" in n for n in both.meta.notes)
    assert not any("one clock" in n for n in one.meta.notes)
