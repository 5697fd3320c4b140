"""The way to other projects' real profiles (tests/shared_samples.py): found beside the
checkout or through ``$PERFKIT_SHARED_SAMPLES``, skipped with the reason without them,
never skipped under CI."""

from __future__ import annotations

from pathlib import Path

import pytest
import shared_samples as S


def test_under_ci_the_shared_samples_are_found() -> None:
    """CI has ../shared: there a missing folder fails the suite instead of skipping tests."""
    if not S.required():
        pytest.skip("not under CI ($CI unset): the shared samples may be absent here")
    assert S.samples_dir() is not None, S.absent_reason()


@pytest.mark.shared_samples
@pytest.mark.parametrize("name", [S.PT_LEVEL1, S.PT_DB_LEVEL1, S.PT_GPT3_OLD, S.CLUSTER_OUTPUT,
                                  S.HTA, S.MINDINSIGHT, S.TRACE_VIEW_EXCERPT])
def test_every_named_sample_is_there(name: str) -> None:
    path = S.shared_sample(name)
    assert path.exists() and path == S.samples_dir() / name
    # each comes with its provenance: a PROVENANCE.md in its group folder
    assert (S.samples_dir() / name.split("/")[0] / "PROVENANCE.md").is_file()


def test_default_is_the_shared_folder_beside_the_checkout(monkeypatch) -> None:
    monkeypatch.delenv(S.ENV, raising=False)
    assert S.configured() == Path(__file__).resolve().parents[2] / "shared" / "samples"
    assert S.sample("gpu/x.json") == S.DEFAULT / "gpu" / "x.json"


def test_the_environment_variable_names_another_folder(tmp_path, monkeypatch) -> None:
    (tmp_path / "ascend").mkdir()
    monkeypatch.setenv(S.ENV, str(tmp_path))
    assert S.samples_dir() == tmp_path and S.shared_root() == tmp_path
    assert S.shared_sample("ascend") == tmp_path / "ascend"
    with pytest.raises(pytest.fail.Exception, match="has no 'gpu/none'"):
        S.shared_sample("gpu/none")  # a misspelt name fails, it is not a skip


def test_absent_folder_skips_with_the_reason_or_fails_under_ci(tmp_path, monkeypatch) -> None:
    missing = tmp_path / "nowhere"
    monkeypatch.setenv(S.ENV, str(missing))
    monkeypatch.delenv("CI", raising=False)
    assert S.samples_dir() is None and str(missing) in S.absent_reason()
    with pytest.raises(pytest.skip.Exception, match="never committed"):
        S.shared_sample(S.PT_LEVEL1)
    for value in ("true", "1"):
        monkeypatch.setenv("CI", value)
        with pytest.raises(pytest.fail.Exception, match=r"\$CI is set"):
            S.shared_root()
    monkeypatch.setenv("CI", "false")
    assert not S.required()


def test_writable_copy_can_be_changed(tmp_path) -> None:
    src = tmp_path / "src" / "rank0"
    (src / "OUT").mkdir(parents=True)
    (src / "OUT" / "a.csv").write_text("x\n")
    (src / "OUT" / "b.json").write_text("{}")
    for p in (src / "OUT" / "a.csv", src / "OUT" / "b.json", src / "OUT", src):
        p.chmod(0o555 if p.is_dir() else 0o444)  # as in shared/samples
    try:
        import shutil

        dst = S.writable_copy(src, tmp_path / "dst", ignore=shutil.ignore_patterns("*.json"))
        (dst / "OUT" / "a.csv").write_text("y\n")
        (dst / "OUT" / "new.csv").write_text("z\n")
        assert sorted(p.name for p in (dst / "OUT").iterdir()) == ["a.csv", "new.csv"]
        one = S.writable_copy(src / "OUT" / "a.csv", tmp_path / "one" / "a.csv")
        one.write_text("w\n")
    finally:
        for p in (src, src / "OUT", src / "OUT" / "a.csv", src / "OUT" / "b.json"):
            p.chmod(0o755 if p.is_dir() else 0o644)


def test_ci_runs_the_suite_with_ci_set() -> None:
    """.ci/run sets $CI before the test command, so there a missing folder fails."""
    run = (S.ROOT / ".ci" / "run").read_text()
    assert 'export CI="${CI:-true}"' in run
    assert run.index("export CI=") < run.index("python -m pytest")
