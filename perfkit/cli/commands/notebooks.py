"""``perfkit notebooks [DIR] [--force]``: copy the guided notebooks into a working folder
(:func:`perfkit.workspace.copy_notebooks`) and print the ``jupyter lab`` command that opens
them."""

from __future__ import annotations

import argparse
from typing import Any

from ... import __version__
from ..args import paragraph

__all__ = ["add_parser", "run", "EPILOG", "notebooks_command"]

#: The end of ``perfkit notebooks --help``: examples.
EPILOG = """\
examples:
  perfkit notebooks                     copy into ./perfkit-notebooks
  perfkit notebooks ~/tuning            copy into ~/tuning (created if missing)
  perfkit notebooks ~/tuning --force    also overwrite the copies you changed

The notebooks open bundled samples by name (PROFILE = "sample:..." in their first cell),
so they run from any folder; set PROFILE to your own profile's folder to tune your job.
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``notebooks`` command to the subparsers of ``perfkit``."""
    from ...workspace import DEFAULT_FOLDER

    raw = argparse.RawDescriptionHelpFormatter
    nb_p = sub.add_parser(
        "notebooks", help="copy the guided notebooks into a working folder",
        formatter_class=raw, epilog=EPILOG,
        description=paragraph("Copy the guided notebooks (00_start_here ... 10_tuning_journal) "
                              "that ship with perfkit into DIR, and print the jupyter lab "
                              "command that opens them. A notebook already in DIR with other "
                              "content (your edits) is kept unless --force."))
    nb_p.add_argument("folder", nargs="?", default=DEFAULT_FOLDER, metavar="DIR",
                      help=f"working folder, created if missing (default {DEFAULT_FOLDER})")
    nb_p.add_argument("--force", action="store_true",
                      help="overwrite notebooks in DIR that differ from perfkit's (your "
                           "edits to them are lost)")
    return nb_p


def run(args: argparse.Namespace) -> int:
    """Run ``perfkit notebooks`` (:func:`notebooks_command`)."""
    return notebooks_command(args)


def notebooks_command(args: argparse.Namespace) -> int:
    """``perfkit notebooks``: copy the guided notebooks, say what was copied or kept, and
    print the ``jupyter lab`` command."""
    import shlex

    from ...workspace import copy_notebooks

    done = copy_notebooks(args.folder, force=args.force)
    for label, names in (("copied", done.copied), ("replaced (--force)", done.replaced),
                         ("already up to date", done.unchanged)):
        if names:
            print(f"{label}: {', '.join(names)}")
    if done.kept:
        print(f"kept (they differ from perfkit {__version__}'s, e.g. your edits; --force "
              f"replaces them): {', '.join(done.kept)}")
    print(f"notebooks in {done.folder}\nopen them with:\n  jupyter lab "
          f"{shlex.quote(str(done.folder))}")
    return 0
