"""``perfkit report PATH [-o report.html] [--notebook NAME] [--run ID] [--timeout S]
[--config FILE ...] [--ir FILE]``: a guided notebook run on a profile, written as one
self-contained HTML file (:func:`perfkit.report.write_report`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ...errors import InvalidArgumentError, PerfkitError, RunsFound
from ..args import config_paths, paragraph, run_id

__all__ = ["add_parser", "run", "EPILOG"]

#: The end of ``perfkit report --help``: examples and what the page holds.
EPILOG = """\
examples:
  perfkit report sample:slow-rank -o slow-rank.html
  perfkit report ~/runs/job42 -o job42.html --notebook 07_cluster --timeout 1200
  perfkit report ~/runs -o second.html --run 1        one of a folder's separate runs
  perfkit report ~/runs/job42 --notebook 06 --ir graphs/21_validate_0076.ir --config job.yaml
                                                      your IR dump against your YAML's patterns

The notebook runs in a Python kernel of this interpreter (ipykernel); the profile path is
injected as its PROFILE parameter. The page holds the notebook's explanations and outputs
(tables, inline SVG charts), no code and nothing fetched from another server, so it can be
mailed or archived as one file. Nothing is written into the profile folder.
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``report`` command to the subparsers of ``perfkit``."""
    from ...report import DEFAULT_NOTEBOOK, DEFAULT_TIMEOUT_S

    raw = argparse.RawDescriptionHelpFormatter
    report_p = sub.add_parser(
        "report", help="run a guided notebook on a profile, write one self-contained HTML",
        formatter_class=raw, epilog=EPILOG,
        description=paragraph(f"Run the guided notebook {DEFAULT_NOTEBOOK} (or --notebook) on "
                              "the profile at PATH and write its outputs as a self-contained HTML "
                              "page without code cells or CDN scripts. A progress bar over the "
                              "cells goes to stderr."))
    report_p.add_argument("path", metavar="PATH",
                          help="profile folder or file (anything perfkit.load reads), or "
                               "sample:NAME for a bundled sample")
    report_p.add_argument("-o", "--output", default="report.html", metavar="FILE",
                          help="HTML file to write (default report.html; replaced if it "
                               "exists; its folder must exist)")
    report_p.add_argument("--notebook", default=DEFAULT_NOTEBOOK, metavar="NAME",
                          help=f"guided notebook: its name, a part only it has (05, "
                               f"memory) or an .ipynb path (default {DEFAULT_NOTEBOOK})")
    report_p.add_argument("--run", type=run_id, default=None, metavar="ID", dest="run_id",
                          help="one of the separate runs a folder holds (an id or a name; "
                               "the notebook's RUN parameter)")
    report_p.add_argument("--timeout", type=float, default=float(DEFAULT_TIMEOUT_S),
                          metavar="S",
                          help=f"seconds each cell may run (default {DEFAULT_TIMEOUT_S})")
    report_p.add_argument("--no-progress", action="store_true",
                          help="no progress bar on stderr")
    report_p.add_argument("--config", action="append", default=None, metavar="FILE",
                          help="a MindFormers YAML, HF config.json or training log that "
                               "wins over what the profile shows (the notebook's CONFIG; "
                               "repeatable)")
    report_p.add_argument("--ir", default=None, metavar="FILE",
                          help="a MindSpore IR dump (.ir or .ir.gz, MS_DEV_SAVE_GRAPHS=2) "
                               "whose select_recompute the recompute notebook checks, with "
                               "the patterns of --config's YAML (the notebook's IR_DUMP)")
    return report_p


def ir_path(given: str) -> str:
    """``--ir``: an existing file's absolute path (the kernel runs in another folder)."""
    path = Path(given).expanduser()
    if not path.is_file():
        raise InvalidArgumentError("--ir", "must be a MindSpore IR dump file (.ir or .ir.gz)",
                                   given)
    return str(path.resolve())


def run(args: argparse.Namespace) -> int:
    """Run ``perfkit report``: write the page and say where."""
    from ...report import write_report

    configs = config_paths(args.config)
    params: dict[str, Any] = {"CONFIG": configs} if configs else {}
    if args.ir is not None:
        params["IR_DUMP"] = ir_path(args.ir)
    try:
        path = write_report(args.path, args.output, notebook=args.notebook,
                            timeout=args.timeout, progress=not args.no_progress,
                            params=params or None, run=args.run_id)
    except RunsFound as exc:  # the API's advice, in the command's words
        raise PerfkitError(f"{exc}; on the command line: perfkit report PATH --run ID"
                           ) from exc
    print(f"wrote {path}")
    return 0
