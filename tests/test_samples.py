"""Bundled samples and resources: ``pk.samples()``, ``pk.load("sample:NAME")`` from any
folder, and the lookup of the packaged data and notebooks through importlib.resources.

Expected names and descriptions are read from the repository's ``data/`` folder here, with
plain file reading, not from perfkit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import perfkit as pk
from perfkit import bundled_samples, resources
from perfkit.bundled_samples import UnknownSampleError, resolve_sample, sample_path
from perfkit.errors import PerfkitError

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
#: The sample folders of data/ (data/README.md's table, with simulated/'s own table).
EXPECTED = ["kineto-tiny-llama", "mindspore-cpu-tiny-llama", "simulated/data-stall",
            "simulated/llama2-13b-baseline-dp16", "simulated/llama2-13b-tuned-dp8-pp2",
            "simulated/llama2-7b-tp2", "simulated/slow-link", "simulated/slow-rank"]


def _first_heading(readme: Path) -> str:
    line = next(t for t in readme.read_text(encoding="utf-8").splitlines() if t.strip())
    assert line.startswith("# ")
    return line[2:].strip()


def test_resources_are_the_repository_folders_here() -> None:
    # from a checkout, through the editable install's mapping or the source-tree fallback
    assert resources.data_dir().resolve() == DATA
    assert resources.notebook_dir().resolve() == ROOT / "notebooks"
    assert resources.dashboard_notebook().resolve() == ROOT / "notebooks" / "dashboard.ipynb"
    assert [p.name for p in resources.guided_notebooks()] == sorted(
        p.name for p in (ROOT / "notebooks").glob("*.ipynb") if p.name != "dashboard.ipynb")


def test_samples_lists_every_bundled_profile_with_its_readme_line() -> None:
    table = pk.samples()
    assert list(table.columns) == ["name", "short_name", "origin", "description", "spec",
                                   "path"]
    assert table["name"].tolist() == EXPECTED
    for row in table.itertuples():
        folder = DATA / row.name
        assert Path(row.path).resolve() == folder
        assert row.description == _first_heading(folder / "README.md")
        assert "\n" not in row.description and row.description
        assert row.short_name == folder.name and row.spec == f"sample:{folder.name}"
        assert row.origin == ("simulated" if row.name.startswith("simulated/") else "real")
    # the IR dumps and the index folder are not profiles
    assert not any(n == "ir" or n == "simulated" for n in table["name"])


def test_load_a_sample_by_short_or_full_name_from_another_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    short = pk.load("sample:slow-rank")
    full = pk.load("sample:simulated/slow-rank")
    direct = pk.load(DATA / "simulated" / "slow-rank")
    rank_folders = sorted(p for p in (DATA / "simulated" / "slow-rank").iterdir() if p.is_dir())
    assert short.ranks == full.ranks == direct.ranks == list(range(len(rank_folders)))
    assert short.steps.equals(direct.steps)
    assert pk.load(" sample:kineto-tiny-llama ").ranks == [0, 1]
    assert list(tmp_path.iterdir()) == []


def test_unknown_sample_is_a_clear_error_listing_the_names() -> None:
    with pytest.raises(UnknownSampleError) as info:
        pk.load("sample:slow-rnak")
    message = str(info.value)
    assert isinstance(info.value, PerfkitError) and isinstance(info.value, ValueError)
    assert "'slow-rnak'" in message
    for name in EXPECTED:
        assert name in message
    with pytest.raises(UnknownSampleError):
        sample_path("sample:")


def test_resolve_leaves_other_paths_alone(tmp_path: Path) -> None:
    assert resolve_sample(tmp_path) is tmp_path
    assert resolve_sample("data/simulated/slow-rank") == "data/simulated/slow-rank"
    assert resolve_sample("sample:slow-link") == DATA / "simulated" / "slow-link"
    # a real folder whose name merely starts like a sample is not one: needs the prefix
    assert not bundled_samples.is_sample_spec(Path("sample:x"))


def test_a_short_name_shared_by_two_samples_asks_for_the_full_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("real/run", "simulated/run", "ir"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "README.md").write_text(f"# The {name} one\n\nmore\n")
    (tmp_path / "README.md").write_text("# index\n")
    (tmp_path / "simulated" / "README.md").write_text("# index of simulated\n")
    monkeypatch.setattr(bundled_samples, "data_dir", lambda: tmp_path)
    names = [s.name for s in bundled_samples.sample_list()]
    # simulated/ has a README but holds samples: an index, as is ir/ (no profile)
    assert names == ["real/run", "simulated/run"]
    assert bundled_samples.sample_list()[0].description == "The real/run one"
    with pytest.raises(UnknownSampleError, match="real/run, simulated/run"):
        sample_path("run")
    assert sample_path("sample:simulated/run") == tmp_path / "simulated" / "run"


def test_missing_package_data_is_a_clear_error(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """An installation without its data, and not a source tree: a ResourceError naming it,
    while the constants used at import time still give a path (so importing never fails)."""
    resources.resource_dir.cache_clear()

    def no_package(name: str):
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(resources.importlib.resources, "files", no_package)
    monkeypatch.setattr(resources, "_package_root", lambda: tmp_path / "site" / "perfkit")
    try:
        with pytest.raises(resources.ResourceError, match="perfkit._data is missing"):
            resources.data_dir()
        assert resources.resource_path(resources.DATA_PACKAGE) == tmp_path / "site" / \
            "perfkit" / "_data"
        assert bundled_samples.sample_names() == []
    finally:
        resources.resource_dir.cache_clear()


def test_a_source_tree_on_pythonpath_finds_its_data(tmp_path: Path) -> None:
    """perfkit imported from a checkout that was never installed: the fallback maps data/
    the way pyproject.toml does, and everything else goes through importlib.resources."""
    code = ("import sys, perfkit.resources as r; sys.meta_path[:] = [f for f in sys.meta_path "
            "if 'editable' not in getattr(f, '__module__', '') and 'editable' not in "
            "getattr(type(f), '__module__', '')]; sys.modules.pop('perfkit._data', None); "
            "print(r.data_dir()); print(r.notebook_dir())")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split() == [str(DATA), str(ROOT / "notebooks")]


def test_bundled_ir_dumps_are_in_the_data() -> None:
    from perfkit.widgets import bundled_ir
    from perfkit.widgets.overview import IR_DIR

    assert IR_DIR.resolve() == DATA / "ir"
    for name in ("silu_mul.ir", "silu_mul_reshape.ir.gz", "control.ir.gz"):
        assert bundled_ir(name).resolve() == DATA / "ir" / name
    assert (DATA / "ir" / "README.md").is_file() and (DATA / "ir" / "MANIFEST.txt").is_file()


def test_cli_takes_sample_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    from perfkit import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["info", "sample:slow-link", "--findings", "0"]) == 0
    out = capsys.readouterr().out
    assert f"path           {DATA / 'simulated' / 'slow-link'}" in out
    assert "ranks          4 (0-3)" in out
    assert cli.main(["info", "sample:nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perfkit: error: sample: no bundled sample is called 'nope'")
    assert err.count("\n") == 1

    # serve hands the sample, by name, to the dashboard notebook (Voila itself not
    # started), whose page then names it as its picker does, not as a folder
    from perfkit.cli import launcher

    seen = {}

    def launch(argv, token, when_serving):
        seen["profile"] = os.environ.get(cli.PROFILE_ENV)
        seen["argv"] = argv

    monkeypatch.setattr(launcher, "_run_voila", launch)
    monkeypatch.delenv(cli.PROFILE_ENV, raising=False)
    port = cli.DEFAULT_PORT + 17
    assert cli.serve("sample:slow-rank", port=port, open_browser=False) == 0
    assert seen["profile"] == "sample:slow-rank"
    assert seen["argv"][0] == str(resources.dashboard_notebook())
    assert cli.PROFILE_ENV not in os.environ  # restored after serving


def test_a_sample_is_named_as_sample_path_finds_it() -> None:
    """Full or short, with ``sample:`` or without: the one full name (the bundled data's
    folder ``data/simulated/slow-rank``); a path or an unknown name: None."""
    from perfkit.bundled_samples import sample_named

    assert (DATA / "simulated" / "slow-rank").is_dir()
    for given in ("sample:slow-rank", "slow-rank", "simulated/slow-rank", " sample:slow-rank/"):
        assert sample_named(given) == "simulated/slow-rank", given
    assert sample_named(str(DATA / "simulated" / "slow-rank")) is None
    assert sample_named("no-such-sample") is None
