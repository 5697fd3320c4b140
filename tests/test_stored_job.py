"""The job kept in perfkit's cache (:mod:`perfkit.job.stored`): a second open of the same
files gets the job the first one worked out, without working it out again; other or changed
files, a damaged kept job, or the cache switched off get a job worked out afresh, equal to
:func:`perfkit.infer_job`'s; nothing is written beside the user's files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.job import stored

_LLAMA = Path(__file__).resolve().parent / "data" / "kineto_llama_h100"


@pytest.fixture
def run(tmp_path: Path, monkeypatch) -> Path:
    """A copy of the two-rank Llama H100 traces, and a cache of the test's own."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PERFKIT_CACHE", "1")
    folder = tmp_path / "run"
    shutil.copytree(_LLAMA, folder)
    return folder


def _counting(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = stored.infer_job

    def counted(profile):
        calls.append(1)
        return real(profile)
    monkeypatch.setattr(stored, "infer_job", counted)
    return calls


def test_a_second_open_gets_the_kept_job(run: Path, monkeypatch) -> None:
    calls = _counting(monkeypatch)
    before = sorted(p.name for p in run.iterdir())
    first = stored.stored_infer_job(pk.load(run), run)
    assert calls == [1] and first == pk.infer_job(pk.load(run))
    again = stored.stored_infer_job(pk.load(run), run)
    assert calls == [1] and again == first  # read back, not worked out
    assert sorted(p.name for p in run.iterdir()) == before
    assert len(list((Path(str(pk.io.cache.store.cache_root())) / stored.JOB_FOLDER).glob(
        "*.pickle"))) == 1


def test_changed_files_get_a_job_worked_out_again(run: Path, monkeypatch) -> None:
    calls = _counting(monkeypatch)
    stored.stored_infer_job(pk.load(run), run)
    (run / "rank1.pt.trace.json.gz").unlink()  # another profile: one rank
    job = stored.stored_infer_job(pk.load(run), run)
    assert calls == [1, 1] and job == pk.infer_job(pk.load(run))


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_a_damaged_kept_job_is_worked_out_again(run: Path, monkeypatch) -> None:
    calls = _counting(monkeypatch)
    first = stored.stored_infer_job(pk.load(run), run)
    kept = stored._job_file(stored.job_key(run))
    for damage in (b"", b"not a pickle", __import__("pickle").dumps({"a": 1})):
        kept.write_bytes(damage)
        assert stored.stored_infer_job(pk.load(run), run) == first
    assert len(calls) == 4


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_without_the_cache_nothing_is_kept(run: Path, monkeypatch) -> None:
    calls = _counting(monkeypatch)
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    assert stored.job_key(run) is None
    stored.stored_infer_job(pk.load(run), run)
    stored.stored_infer_job(pk.load(run), run)
    assert calls == [1, 1]
    assert not (Path(str(pk.io.cache.store.cache_root())) / stored.JOB_FOLDER).exists()
