"""``perfkit check PATH [--json]``: what the recording lacks, per analysis, and the exact
profiler switch that turns it on, with its cost
(:func:`perfkit.analysis.recording_check.recording_check`; docs/recording.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ...answers.paths import load_path
from ..args import paragraph, run_id

__all__ = ["add_parser", "run"]

EPILOG = """\
examples:
  perfkit check sample:kineto-tiny-llama      what this Kineto trace lacks
  perfkit check PATH --json                   the same as JSON (the "check" answer)

docs/recording.md has complete recording snippets for each profiler.
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``check`` command to the subparsers of ``perfkit``."""
    p = sub.add_parser(
        "check", help="what a recording lacks and the profiler switch that records it",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description=paragraph("Load the profile and list, per analysis, whether the "
                              "recording holds what it needs; for what is missing, the "
                              "exact switch of torch.profiler, torch_npu or MindSpore's "
                              "profiler that turns it on, and what that costs."))
    p.add_argument("path", metavar="PATH", help="profile folder or file, or sample:NAME")
    p.add_argument("--run", type=run_id, default=None, metavar="ID", dest="run_id",
                   help="one of the separate runs a folder holds (an id or a name)")
    p.add_argument("--json", action="store_true",
                   help="print the answer as JSON (schema: docs/json.md)")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``perfkit check``: 0 whatever is missing (it is advice, not a failure)."""
    from ...answers import check_answer, dumps
    from ..profile_text import recording_lines

    profile = load_path(args.path, run=args.run_id, command="check")
    if args.json:
        print(dumps(check_answer(profile)))
    else:
        print("\n".join(recording_lines(profile)))
    return 0
