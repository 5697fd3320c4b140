"""``perfkit compare A B [--gate PCT] [--json] [--html FILE]``: did the change help?

Two runs (profiles of any formats perfkit reads, ``sample:NAME``, or run ids / labels of
the tuning journal) compared by :func:`perfkit.compare`: each step time with its spread,
a verdict that knows the noise, the difference by step part, kernel kind and operator, and
what changed in the job. Exit status 1 when ``--gate PCT`` is given and B is slower than A
by more than PCT % and more than the noise (a CI check), 0 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from ...compare import DEFAULT_THRESHOLD_PCT, compare
from ...compare.verdict import NOT_ONE_JOB
from ...errors import PerfkitError, RunsFound
from ...journal import default_journal_path
from ..args import outside_profiles, paragraph, run_id

__all__ = ["add_parser", "run", "EPILOG"]

#: The end of ``perfkit compare --help``: examples.
EPILOG = """\
examples:
  perfkit compare runs/before runs/after              text: verdict, parts, kinds, operators
  perfkit compare sample:llama2-13b-baseline-dp16 sample:llama2-13b-tuned-dp8-pp2
  perfkit compare before after --gate 5               CI: exit 1 when after is > 5 % slower
                                                      beyond the noise
  perfkit compare before after --json > cmp.json     the result as JSON on stdout
  perfkit compare 1 3 --journal tuning.sqlite         two runs of a tuning journal
  perfkit compare npu_prof gpu_trace --html cmp.html  Ascend against GPU, as an HTML page
  perfkit compare runs runs --run-a 0 --run-b 1       two separate runs of one folder

exit status: 0 (no gate, or the gate passed), 1 (the gate failed), 2 (bad input, or a
  gate on runs that cannot be compared)
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``compare`` command to the subparsers of ``perfkit``."""
    p = sub.add_parser(
        "compare", help="compare two runs: a verdict that knows the noise, and a CI gate",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description=paragraph(
            "Did the change help? Compare run B with run A: each step time (median over "
            "the steps of the slowest rank) with its spread, a verdict (faster, slower or no "
            "change within the step-to-step noise), the difference by step part, kernel "
            "kind and matched operator, and what changed in the job. Where the two runs do "
            "different work per step, the verdict is per token per device."))
    p.add_argument("a", metavar="A", help="the base run: a profile folder or file, "
                   "sample:NAME, or a run id or label of the journal")
    p.add_argument("b", metavar="B", help="the new run (as A)")
    p.add_argument("--gate", type=float, default=None, metavar="PCT",
                   help="exit 1 when B is slower than A by more than PCT %% and more than "
                        "the noise")
    p.add_argument("--json", action="store_true",
                   help="print the comparison as JSON on stdout (nothing else)")
    p.add_argument("--html", default=None, metavar="FILE",
                   help="also write a self-contained HTML page (replaced if it exists)")
    p.add_argument("--threshold", type=float, default=None, metavar="PCT",
                   help=f"smallest change called: the no-change band is the larger of it "
                        f"and the noise (default {DEFAULT_THRESHOLD_PCT:g} %%; 0: the noise "
                        f"alone)")
    p.add_argument("--journal", default=None, metavar="FILE",
                   help="tuning journal whose run ids or labels A and B may be (default "
                        "$PERFKIT_JOURNAL or ./perfkit-journal.sqlite where it exists)")
    p.add_argument("--run-a", type=run_id, default=None, metavar="ID", dest="run_a",
                   help="A is a folder of several separate runs: this one (an id or a name)")
    p.add_argument("--run-b", type=run_id, default=None, metavar="ID", dest="run_b",
                   help="the same for B (two runs of one folder: A and B the folder, "
                        "--run-a 0 --run-b 1)")
    p.add_argument("-n", type=int, default=10, metavar="N",
                   help="operator rows shown in the text (default 10; JSON has them all)")
    return p


def _journal(args: argparse.Namespace) -> Path | None:
    """The journal to read run ids from: ``--journal``, else the default where it exists."""
    if args.journal:
        path = Path(args.journal).expanduser()
        if not path.is_file():
            raise PerfkitError(f"--journal: no journal at {args.journal}")
        return path
    default = default_journal_path()
    return default if default.is_file() else None


def _side(ref: str, run: int | str | None, flag: str) -> Any:
    """A side as ``compare`` takes it: the text given, or, with ``--run-a`` / ``--run-b``,
    that run of the folder, loaded."""
    if run is None:
        return ref
    from ...answers.paths import load_path

    try:
        return load_path(ref, run=run, command="compare")
    except PerfkitError as exc:
        raise PerfkitError(f"{flag}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    """Run ``perfkit compare``; returns 1 when the gate failed, else 0 (PerfkitErrors go to
    ``perfkit``'s main: one line, status 2)."""
    if args.gate is not None and not args.gate >= 0:
        raise PerfkitError(f"--gate: must be a percentage >= 0 (got {args.gate})")
    if args.threshold is not None and not args.threshold >= 0:
        raise PerfkitError(f"--threshold: must be a percentage >= 0 (got {args.threshold})")
    if args.n < 1:
        raise PerfkitError(f"-n: must be >= 1 (got {args.n})")
    target = None
    if args.html:
        target = Path(args.html).expanduser()
        if not target.parent.is_dir():
            raise PerfkitError(f"--html: the folder {target.parent} does not exist")
        outside_profiles("--html", target, (args.a, args.b))
    sides = [_side(ref, run_id_, flag) for ref, run_id_, flag in
             ((args.a, args.run_a, "--run-a"), (args.b, args.run_b, "--run-b"))]
    try:
        result = compare(*sides, journal=_journal(args), gate_pct=args.gate,
                         threshold_pct=args.threshold)
    except RunsFound as exc:  # the API's advice, in the command's words
        raise PerfkitError(f"{exc}; on the command line: perfkit compare A B --run-a ID "
                           "--run-b ID") from exc
    if args.json:
        print(json.dumps(result.to_dict(), allow_nan=False, indent=1))
    else:
        print(result.text(n_operators=args.n))
    if target is not None:
        try:
            target.write_text(result.html(), encoding="utf-8")
        except OSError as exc:
            raise PerfkitError(f"--html: cannot write {target}: "
                               f"{exc.strerror or exc}") from None
        if not args.json:
            print(f"wrote {target}")
    why = None if args.gate is None else result.gate_not_judged
    if why is not None and not math.isfinite(result.verdict.change_pct):
        # a gate that cannot compare must not pass silently in CI
        raise PerfkitError(f"--gate: {args.b} cannot be compared with {args.a}: {why}")
    if why is not None:
        # nor may a gate on two unrelated jobs pass (or fail) as if it judged a change
        raise PerfkitError(f"--gate: {args.a} and {args.b} are not one job "
                           f"({why.removeprefix(NOT_ONE_JOB).strip()}); gate two runs of one "
                           "job, before and after a change")
    return 1 if result.gate_failed else 0
