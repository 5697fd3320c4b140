"""``perfkit journal add|list|compare``: the tuning journal on the command line.

``perfkit journal add PATH [--label L] [--note TEXT] [--config FILE ...] [--journal FILE]``
    Measure the profile at PATH (or ``sample:NAME``) and record it; prints the run and
    what changed since the run before it.
``perfkit journal list [--journal FILE]``
    One line per run: layout, step, tokens/s per device and per p, MFU, HFU, peak
    memory, bubble, top finding.
``perfkit journal compare A B [--journal FILE] [--html FILE] [--by category|name] [-n N]``
    What changed from run A to run B (id or label): the sentence, the job's changed
    fields, the metrics, the step breakdown, the operators, the findings; ``--html`` also
    writes it as a self-contained page.

The journal is ``--journal FILE``, else ``$PERFKIT_JOURNAL``, else
``perfkit-journal.sqlite`` in the working folder (:func:`perfkit.journal.
default_journal_path`). ``list`` and ``compare`` never create one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ...errors import PerfkitError
from ...journal import (
    DEFAULT_JOURNAL_NAME,
    JOURNAL_ENV,
    Journal,
    JournalError,
    comparison_page,
    comparison_text,
    default_journal_path,
    measure_run,
    runs_text,
)
from ...journal.record.measure import ranks_not_loaded
from ..args import config_paths, outside_profiles, paragraph

__all__ = ["add_parser", "run", "EPILOG"]

#: The end of ``perfkit journal --help`` and of its actions': the journal file, examples.
EPILOG = f"""\
The journal file: --journal FILE, else ${JOURNAL_ENV}, else ./{DEFAULT_JOURNAL_NAME}
(one SQLite file; share it as it is: see docs/journal.md).

examples:
  perfkit journal add runs/baseline --label baseline --note "dp 16, full recompute"
  perfkit journal add runs/pp2 --label pp2 --config run_llama2_13b.yaml
  perfkit journal list
  perfkit journal compare baseline pp2 --html compare.html
"""


def _journal_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--journal", default=None, metavar="FILE",
                   help=f"journal file (default ${JOURNAL_ENV}, else ./{DEFAULT_JOURNAL_NAME})")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``journal`` command (with ``add``, ``list``, ``compare``) to the
    subparsers of ``perfkit``."""
    raw = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "journal", help="the tuning journal: record runs, list them, compare two",
        formatter_class=raw, epilog=EPILOG,
        description=paragraph(
            "Keep every run of a tuning cycle in one file: its job, measured metrics, step "
            "breakdown, findings and operators, and what changed between any two."))
    p.set_defaults(journal_parser=p)
    jsub = p.add_subparsers(dest="journal_command", metavar="ACTION")
    add = jsub.add_parser("add", help="measure a profile and record it", formatter_class=raw,
                          epilog=EPILOG,
                          description="Measure the profile at PATH (its job read from it, or "
                                      "from --config) and record the run in the journal.")
    add.add_argument("path", metavar="PATH",
                     help="profile folder or file (anything perfkit.load reads), or "
                          "sample:NAME for a bundled sample")
    add.add_argument("--label", default=None,
                     help="the run's name (unique; default the profile folder's name)")
    add.add_argument("--note", default=None, help="what was changed, why, anything")
    add.add_argument("--config", action="append", default=None, metavar="FILE",
                     help="a MindFormers YAML, HF config.json or training log that wins "
                          "over what the profile shows (repeatable)")
    add.add_argument("--if-exists", choices=("error", "return"), default="error",
                     help="when the profile is already recorded: an error (default), or "
                          "show that run")
    _journal_option(add)
    lst = jsub.add_parser("list", help="one line per run", formatter_class=raw, epilog=EPILOG,
                          description="List the runs of the journal, in the order added.")
    _journal_option(lst)
    cmp = jsub.add_parser("compare", help="what changed between two runs", formatter_class=raw,
                          epilog=EPILOG,
                          description="What changed from run A to run B (id or label): the "
                                      "job, the metrics, the step, the operators, the "
                                      "findings.")
    cmp.add_argument("a", metavar="A", help="the base run (id or label)")
    cmp.add_argument("b", metavar="B", help="the new run (id or label)")
    cmp.add_argument("--html", default=None, metavar="FILE",
                     help="also write the comparison as a self-contained HTML page "
                          "(replaced if it exists; its folder must exist)")
    cmp.add_argument("--by", choices=("category", "name"), default="category",
                     help="operator grouping (default category)")
    cmp.add_argument("-n", type=int, default=10, metavar="N",
                     help="operator rows shown (default 10)")
    _journal_option(cmp)
    return p


def _path(args: argparse.Namespace) -> Path:
    return Path(args.journal).expanduser() if args.journal else default_journal_path()


def run(args: argparse.Namespace) -> int:
    """Run ``perfkit journal ...``; returns the exit status (PerfkitErrors propagate to
    ``perfkit``'s main, which prints them as one line with status 2)."""
    action = getattr(args, "journal_command", None)
    if action is None:
        args.journal_parser.print_help()
        return 2
    path = _path(args)
    if action == "add":
        outside_profiles("--journal", path, (args.path,))
        configs = config_paths(args.config)
        if path.exists():  # checked before measuring; duplicates found before loading
            journal = Journal(path)
            before = journal.runs()
            run = journal.add(args.path, label=args.label, note=args.note, config=configs,
                              if_exists=args.if_exists)
        else:  # measure first: a profile that cannot be read leaves no empty journal
            if not path.parent.is_dir():
                raise JournalError(path, f"cannot create the journal: the folder "
                                         f"{path.parent} does not exist")
            record = measure_run(args.path, config=configs, label=args.label, note=args.note)
            journal = Journal(path)
            print(f"created the journal {path}")
            before = journal.runs()
            run = journal.add(record, if_exists=args.if_exists)
        print(("already recorded: " if run.existing else "added ") + str(run))
        if not run.existing:  # a folder some of whose ranks did not load: say which, why
            for problem in ranks_not_loaded(journal.record(run).job_problems):
                print(f"warning: {problem}; the run's figures are the loaded ranks'",
                      file=sys.stderr)
        if not run.existing and not before.empty:
            previous = str(before["label"].iloc[-1])
            print(f"since {previous!r}: {journal.compare(previous, run.id).sentence()}")
        return 0
    journal = Journal(path, create=False)
    if action == "list":
        print(runs_text(journal.runs()))
        return 0
    if action == "compare":
        if args.n is not None and args.n < 1:
            raise PerfkitError(f"-n: must be >= 1 (got {args.n})")
        target = Path(args.html).expanduser() if args.html else None
        if target is not None and not target.parent.is_dir():  # before any work
            raise PerfkitError(f"--html: the folder {target.parent} does not exist")
        first, second = journal.run(args.a), journal.run(args.b)
        if target is not None:
            outside_profiles("--html", target, (journal.profile_path(first),
                                                journal.profile_path(second)))
        if first.id == second.id:  # nothing can have changed: a slip, not a comparison
            raise PerfkitError(f"{args.a!r} and {args.b!r} are the same run (#{first.id} "
                               f"{first.label!r}): name two different runs (perfkit "
                               "journal list shows them)")
        result = journal.compare(first, second, by=args.by)
        print(comparison_text(result, n_operators=args.n))
        if target is not None:
            try:
                target.write_text(comparison_page(result, str(journal.path)), encoding="utf-8")
            except OSError as exc:
                raise PerfkitError(f"--html: cannot write {target}: "
                                   f"{exc.strerror or exc}") from None
            print(f"wrote {target}")
        return 0
    return 2
