"""``perfkit advise PATH [--json] [--limit N]``: the advisor's ranked findings
(:func:`perfkit.advise`, with the job :func:`perfkit.infer_job` reads), as text or as the
``advise`` answer (docs/json.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ...answers.paths import load_path
from ..args import config_paths, paragraph, run_id

__all__ = ["add_parser", "run", "advise_text"]

EPILOG = """\
examples:
  perfkit advise sample:slow-rank          the findings, best first
  perfkit advise PATH --limit 3 --json     the first three as JSON (the "advise" answer)
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``advise`` command to the subparsers of ``perfkit``."""
    p = sub.add_parser(
        "advise", help="the advisor's findings on a profile, best first",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description=paragraph("Load the profile, read its job and list what the advisor "
                              "finds, ranked by the step time at stake: severity, the "
                              "milliseconds per step, evidence and what to change."))
    p.add_argument("path", metavar="PATH", help="profile folder or file, or sample:NAME")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="list only the first N findings (default: all)")
    p.add_argument("--config", action="append", default=None, metavar="FILE",
                   help="a MindFormers YAML, HF config.json or training log that wins "
                        "over what the profile shows (repeatable)")
    p.add_argument("--run", type=run_id, default=None, metavar="ID", dest="run_id",
                   help="one of the separate runs a folder holds (an id or a name)")
    p.add_argument("--json", action="store_true",
                   help="print the answer as JSON (schema: docs/json.md)")
    return p


def advise_text(answer: dict[str, Any]) -> str:
    """The ``advise`` answer as lines for people: rank, severity, title, the time at
    stake (:func:`perfkit.format.time_text`), evidence and the next step."""
    from ...format import share_text, time_text

    found = answer["findings"]
    if not found and answer["total"]:  # --limit 0: the count, none listed
        return (f"Findings: {answer['total']:,} found, none listed (--limit 0; perfkit "
                "advise PATH lists them)")
    if not found:
        return "Findings: none (nothing abnormal found by the advisor)"
    lines = [f"Findings ({len(found)} of {answer['total']}, best first):"]
    bases = {f["step_ms"] for f in found if f["step_ms"] is not None}
    if bases:  # what "of the step" is of: the advisor's step, not the median step info shows
        lines.append("(shares of the step the advisor measures: per step the slowest "
                     "rank's, with the wait before its first device task, the mean over "
                     "the steps; perfkit info's step time is their median)")
    for f in found:
        lines.append(f"{f['rank']}. [{f['severity']}] {f['title']}  ({f['id']})")
        if f["ms_per_step"] is not None:
            share = (share_text(f["step_share_pct"] / 100)
                     if f["step_share_pct"] is not None else "-")
            of = f" of {time_text(f['step_ms'] * 1e3)}" if f["step_ms"] is not None else ""
            lines.append(f"   at stake: {time_text(f['ms_per_step'] * 1e3)} per step "
                         f"({share}{of})")
        else:
            lines.append("   at stake: not measurable from the profile")
        lines.append(f"   evidence: {f['evidence']}")
        lines.append(f"   next: {f['recommendation']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``perfkit advise``."""
    from ...advisor import advise
    from ...answers import advise_answer, dumps
    from ...errors import InvalidArgumentError
    from ...job import infer_job

    if args.limit is not None and args.limit < 0:
        raise InvalidArgumentError("--limit", "must be a whole number >= 0", args.limit)
    profile = load_path(args.path, run=args.run_id, command="advise")
    job = infer_job(profile, config=config_paths(args.config))
    found = advise(profile, model=job.model, parallel=job.parallel, hardware=job.hardware)
    answer = advise_answer(found, path=str(profile.meta.path or args.path),
                           limit=args.limit)
    print(dumps(answer) if args.json else advise_text(answer))
    return 0
