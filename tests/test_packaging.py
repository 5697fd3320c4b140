"""The project's own files agree with each other: dependencies, README and CI; and the
package data that the wheel and sdist carry (data/, notebooks/) is complete and small.

What a built wheel really holds is checked by .ci/wheel_check.sh (CI), which builds one
and installs it; these tests check the declarations it is built from, on every run.
"""

import io
import re
import zipfile
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = {"jupyterlab", "ipywidgets", "pandas", "altair", "voila"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject_deps() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = [Requirement(r) for r in data["project"]["dependencies"]]
    return {_norm(r.name): str(r.specifier) for r in reqs}


def environment_deps() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    out = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str):
            req = Requirement(dep.replace(" ", ""))
            if _norm(req.name) not in ("python", "pip"):
                out[_norm(req.name)] = str(req.specifier)
    return out


def test_environment_yml_matches_pyproject():
    assert environment_deps() == pyproject_deps()


def test_required_packages_are_declared():
    assert REQUIRED <= set(pyproject_deps())


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    first_section = text.split("\n## ", 2)[1]  # the section after the title
    block = re.search(r"```(?:bash|sh)?\n(.*?)```", first_section, re.S)
    assert block, "README's first section has no code block"
    return [line for line in block.group(1).splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_readme_starts_with_exactly_two_commands_and_ci_runs_the_test_one():
    commands = readme_commands()
    assert len(commands) == 2, commands
    serve, test = commands
    assert "perfkit serve" in serve and "pip install" in serve
    # a new user's set-up: a virtual environment made and activated before installing
    assert serve.index("-m venv") < serve.index(". .venv/bin/activate") < \
        serve.index("pip install")
    assert "pytest" in test and "pip install" in test and "ruff" in test
    ci = (ROOT / ".ci" / "run").read_text()
    assert test in ci, "CI must run the README's test command verbatim"


def test_readme_documents_the_fast_subset_and_ci_runs_the_wheel_check():
    text = (ROOT / "README.md").read_text()
    assert 'python -m pytest -m "not slow"' in text
    assert "## Install from a wheel / air-gapped" in text
    assert "pip download" in text and "--no-index --find-links" in text
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash .ci/wheel_check.sh" in ci
    # the README's command leaves the slow end-to-end group out: CI runs that group once
    test = readme_commands()[1]
    assert test.endswith('-m "not slow"'), test
    assert "python -m pytest -n auto --dist loadgroup -m slow " in ci
    assert "python -m pytest -m slow -n auto --dist loadgroup" in text


# ---- package data ------------------------------------------------------------------------

#: Compressed size the wheel's bundled files may reach (the README states "about 3 MB";
#: .ci/wheel_check.sh applies the same limit to the built wheel).
WHEEL_LIMIT_BYTES = 12 * 10**6
#: Unpacked size of the bundled data (data/README.md states it).
DATA_LIMIT_BYTES = 30 * 2**20


def setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _source_files(folder: Path) -> set[Path]:
    """Every file of a folder but Python caches, notebook checkpoints and the package's
    ``__init__.py`` (a module, not data)."""
    return {p for p in folder.rglob("*") if p.is_file()
            and not {"__pycache__", ".ipynb_checkpoints"} & set(p.parts)
            and p != folder / "__init__.py"}


def packaged_files(package: str) -> set[Path]:
    """The files setuptools takes as package data: the package-data globs, applied the
    way setuptools applies them (``glob`` from the mapped folder, ``**`` recursive)."""
    config = setuptools_config()
    folder = ROOT / config["package-dir"][package]
    return {p for pattern in config["package-data"][package] for p in folder.glob(pattern)
            if p.is_file()}


def test_mapping_of_data_and_notebooks_is_the_one_perfkit_reads():
    from perfkit import resources

    config = setuptools_config()
    assert config["package-dir"] == resources.SOURCE_FOLDERS
    assert set(resources.SOURCE_FOLDERS) <= set(config["packages"])
    for folder in resources.SOURCE_FOLDERS.values():
        assert (ROOT / folder / "__init__.py").is_file(), folder


def test_every_subpackage_of_perfkit_is_listed():
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "perfkit").rglob("__init__.py") if "__pycache__" not in p.parts}
    listed = set(setuptools_config()["packages"])
    assert found - listed == set(), ("add these to [tool.setuptools] packages in "
                                     f"pyproject.toml or the wheel lacks them: {found - listed}")
    # listed but not under perfkit/: only the two folders mapped in from the top level
    assert listed - found == {"perfkit._data", "perfkit._notebooks"}


@pytest.mark.parametrize("package", ["perfkit._data", "perfkit._notebooks"])
def test_package_data_patterns_take_every_file(package):
    folder = ROOT / setuptools_config()["package-dir"][package]
    missing = _source_files(folder) - packaged_files(package)
    assert not missing, ("the wheel would lack these files (add their type to "
                         f"[tool.setuptools.package-data]): {sorted(map(str, missing))[:10]}")


def test_notebooks_and_licences_are_in_the_package_data():
    notebooks = {p.name for p in packaged_files("perfkit._notebooks")}
    assert "dashboard.ipynb" in notebooks and "00_start_here.ipynb" in notebooks
    data = packaged_files("perfkit._data")
    # only data this project made: no licence of another project rides along
    assert not [p for p in data if p.name.upper().startswith(("LICENSE", "LICENCE", "COPYING"))]
    readmes = {p.parent for p in data if p.name == "README.md"}
    for folder in {p.parent for p in data}:  # every data folder is described by a README
        assert any(r == folder or r in folder.parents for r in readmes - {ROOT / "data"}) \
            or folder == ROOT / "data", folder
    # perfkit's own licence goes into the wheel's .dist-info/licenses, and only it
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    picked = {p for pattern in project["license-files"] for p in ROOT.glob(pattern)}
    assert picked == {ROOT / "LICENSE"}
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]


def test_bundled_files_fit_the_stated_size():
    files = sorted(packaged_files("perfkit._data") | packaged_files("perfkit._notebooks"))
    unpacked = sum(p.stat().st_size for p in files if ROOT / "data" in p.parents)
    assert unpacked <= DATA_LIMIT_BYTES, f"{unpacked / 2**20:.1f} MiB of bundled data"
    # compressed the way a wheel is (zip, deflate): what the download weighs
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            zf.write(path, path.relative_to(ROOT).as_posix())
    assert buffer.tell() <= WHEEL_LIMIT_BYTES, f"{buffer.tell() / 1e6:.1f} MB compressed"
