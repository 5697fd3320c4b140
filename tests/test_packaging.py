"""The project's own files agree with each other: dependencies, README and CI."""

import re
from pathlib import Path

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
    assert "pytest" in test and "pip install" in test and "ruff" in test
    ci = (ROOT / ".ci" / "run").read_text()
    assert test in ci, "CI must run the README's test command verbatim"
