"""Write pip constraints that pin every dependency pyproject.toml declares to its lower bound.

CI's second job installs perfkit with these constraints (``PIP_CONSTRAINT``), so the oldest
versions the project says it supports are the ones tested: a ``>=`` bound that no longer
works fails CI instead of a user's install. Only the packages pyproject.toml names are
pinned (runtime dependencies and the extras given); what they pull in resolves to its newest
compatible version, as pip does for a user who asks for those versions.

Usage: python .ci/lower_bounds.py [--extras test,dask] > constraints.txt

Every requirement must have a ``>=`` bound (a requirement without one, or with an upper
bound only, is an error: the oldest version is then undefined). Extras in brackets are
dropped (pip refuses extras in constraints); environment markers are kept.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
#: ``name[extras] specifiers ; marker`` -- the requirement forms pyproject.toml uses. Parsed
#: here rather than with ``packaging`` so that the script runs on a bare Python, before
#: anything is installed.
REQUIREMENT = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?"
                         r"\s*(?P<specs>[^;]*?)\s*(?:;\s*(?P<marker>.+?))?\s*$")


def lower_bounds(pyproject: Path, extras: list[str]) -> list[str]:
    """``name==lower`` lines (with their markers) for the dependencies and ``extras``."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    declared = list(project["dependencies"])
    for extra in extras:
        declared += project["optional-dependencies"][extra]
    pins: dict[str, str] = {}
    for text in declared:
        match = REQUIREMENT.match(text)
        specs = [s.strip() for s in match.group("specs").split(",")] if match else []
        lows = [s[2:].strip() for s in specs if s.startswith(">=")]
        if len(lows) != 1:
            sys.exit(f"lower_bounds: {text!r} has no single '>=' bound in {pyproject}")
        name, marker = match.group("name"), match.group("marker")
        line = f"{name}=={lows[0]}" + (f"; {marker}" if marker else "")
        if pins.setdefault(re.sub(r"[-_.]+", "-", name).lower(), line) != line:
            sys.exit(f"lower_bounds: {name} is declared with two lower bounds")
    return sorted(pins.values(), key=str.lower)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", default="test",
                        help="comma-separated optional-dependency groups to pin too")
    args = parser.parse_args(argv)
    extras = [e for e in args.extras.split(",") if e]
    print("# the lower bound of every dependency in pyproject.toml (.ci/lower_bounds.py)")
    print("\n".join(lower_bounds(ROOT / "pyproject.toml", extras)))


if __name__ == "__main__":
    main()
