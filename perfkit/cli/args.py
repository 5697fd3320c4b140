"""What the ``perfkit`` commands share in their arguments: the ``--config`` check and the
layout of their help text."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import PerfkitError

__all__ = ["config_paths", "paragraph", "run_id", "outside_profiles"]


def config_paths(configs: Sequence[str] | None) -> list[str] | None:
    """Absolute paths of the ``--config`` files, None when none was given.

    Raises
    ------
    PerfkitError
        A file does not exist (the CLI prints it as a one-line error).
    """
    if not configs:
        return None
    out = []
    for text in configs:
        path = Path(text).expanduser()
        if not path.exists():
            raise PerfkitError(f"config not found: {text}")
        out.append(str(path.resolve()))
    return out


def paragraph(text: str) -> str:
    """``text`` filled to 88 columns: a command's description in its ``--help``."""
    return textwrap.fill(text, 88)


def run_id(text: str) -> int | str:
    """``--run``: a run's id (a whole number) or its name."""
    return int(text) if text.strip().isdigit() else text


def outside_profiles(option: str, target: Path,
                     profiles: Iterable[str | os.PathLike[str] | None]) -> None:
    """Refuse an output ``target`` inside one of the ``profiles`` (folders; a bundled
    ``sample:NAME`` is its folder), as ``perfkit report -o`` does: perfkit writes nothing
    into a profile folder.

    Raises
    ------
    PerfkitError
        ``target`` lies inside one of them (the CLI prints it as a one-line error).
    """
    from ..bundled_samples import is_sample_spec, resolve_sample

    where = target.expanduser().resolve()
    for profile in profiles:
        if profile is None:
            continue
        try:
            folder = Path(resolve_sample(profile) if is_sample_spec(profile) else profile)
        except PerfkitError:  # an unknown sample: the command says so itself
            continue
        folder = folder.expanduser().resolve()
        if folder.is_dir() and where.is_relative_to(folder):
            raise PerfkitError(f"{option}: {target} lies inside the profile folder "
                               f"{folder}; perfkit does not write into profile folders, "
                               "choose another path")

