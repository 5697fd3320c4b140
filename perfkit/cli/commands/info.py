"""``perfkit info [PATH] [--findings N] [--config FILE ...]``: the version and presets, or
what a profile is (:func:`perfkit.cli.profile_text.profile_info_text`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ... import __version__
from ...bundled_samples import path_not_found, resolve_sample
from ...errors import InvalidArgumentError, PerfkitError, RunsFound
from ...specs import Hardware, ModelSpec
from .. import profile_text
from ..args import config_paths, paragraph

__all__ = ["add_parser", "run", "EPILOG", "info_text"]

#: The end of ``perfkit info --help``: examples.
EPILOG = """\
examples:
  perfkit info                          version, model and hardware presets, and the
                                        bundled samples (sample:NAME)
  perfkit info sample:slow-rank         what the profile is, its steps, its top findings
                                        (sample:NAME: a bundled sample; or a PATH)
  perfkit info PATH --findings 10       list more findings (0: skip the advisor)
  perfkit info PATH --run 1            one of several separate runs in a folder (the
                                        error without it lists them: an id or a name)
  perfkit info PATH --config run.yaml   the job from a MindFormers YAML (or an HF
                                        config.json, a training log) where it differs
  perfkit info PATH --json              the same as JSON (docs/json.md: the "info" answer)
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``info`` command to the subparsers of ``perfkit``."""
    raw = argparse.RawDescriptionHelpFormatter
    info_p = sub.add_parser(
        "info", help="version and presets, or a summary of a profile",
        formatter_class=raw, epilog=EPILOG,
        description=paragraph(
            "Without PATH: print the perfkit version, the model and hardware presets and "
            "the bundled samples. With PATH: load the profile and print its format, "
            "framework, device, profiler level, ranks and world size, the loader's notes, "
            "the job read from it (each value's source, MFU and HFU checked), the steps "
            "with the measured step time (per step the slowest rank), and the advisor's "
            "top findings."))
    info_p.add_argument("path", nargs="?", default=None, metavar="PATH",
                        help="profile folder or file (anything perfkit.load reads), or "
                             "sample:NAME for a bundled sample")
    info_p.add_argument("--findings", type=int, default=5, metavar="N",
                        help="how many findings to list (default 5; 0 skips the advisor)")
    info_p.add_argument("--config", action="append", default=None, metavar="FILE",
                        help="a MindFormers YAML, HF config.json or training log that wins "
                             "over what the profile shows (repeatable)")
    info_p.add_argument("--run", type=_run_id, default=None, metavar="ID", dest="run_id",
                        help="read this one of the separate runs a folder holds (an id or a "
                             "name, as perfkit.runs(PATH) lists them)")
    info_p.add_argument("--json", action="store_true",
                        help="print the answer as JSON (schema: docs/json.md)")
    return info_p


def _run_id(text: str) -> int | str:
    """``--run``: a run's id (a whole number) or its name."""
    return int(text) if text.strip().isdigit() else text


def run(args: argparse.Namespace) -> int:
    """Run ``perfkit info``: print the presets, or the profile's summary."""
    if args.findings < 0:
        raise InvalidArgumentError("--findings", "must be a whole number >= 0", args.findings)
    if args.path is None:
        if getattr(args, "json", False):
            raise PerfkitError("--json answers for a profile: perfkit info PATH --json (without "
                               "PATH, perfkit info prints the version, the presets and the "
                               "bundled samples as text)")
        print(info_text())
        return 0
    if getattr(args, "json", False):
        from ...answers import dumps, info_answer
        from ...answers.paths import load_path

        profile = load_path(args.path, run=args.run_id)
        print(dumps(info_answer(profile, n_findings=args.findings,
                                config=config_paths(args.config))))
        return 0
    path = resolve_sample(args.path)  # "sample:NAME" -> the bundled sample
    if not Path(path).expanduser().exists():
        raise PerfkitError(path_not_found(args.path))
    try:
        text = profile_text.profile_info_text(path, n_findings=args.findings,
                                              config=config_paths(args.config),
                                              run=args.run_id)
    except RunsFound as exc:  # the API's advice, in the command's words
        raise PerfkitError(f"{exc}; on the command line: perfkit info PATH --run ID") from exc
    print(text)
    return 0


def info_text() -> str:
    """What ``perfkit info`` prints: version, model presets, hardware presets and the
    bundled samples.

    Returns
    -------
    str
        Plain text, one preset a line; hardware peaks are dense FLOP/s of the preset's
        default dtype, memory in GiB (2**30 bytes); each bundled sample as the
        ``sample:NAME`` to pass for PATH with its one-line description
        (:func:`perfkit.bundled_samples.samples`; none listed where this installation
        lacks the bundled data).
    """
    lines = [f"perfkit {__version__}", "", "Model presets (ModelSpec.preset):",
             f"  {'name':<14}{'parameters':>12}{'layers':>8}{'hidden':>8}{'heads':>7}"
             f"{'kv':>5}{'seq':>7}  mlp"]
    for name in ModelSpec.presets():
        m = ModelSpec.preset(name)
        params = f"{m.num_parameters() / 1e9:,.2f} B"
        lines.append(f"  {name:<14}{params:>12}{m.num_layers:>8}{m.hidden_size:>8}"
                     f"{m.num_attention_heads:>7}{m.num_kv_heads:>5}{m.seq_length:>7}  "
                     f"{m.mlp}{f' MoE {m.num_experts}x top-{m.moe_top_k}' if m.is_moe else ''}")
    lines += ["", "Hardware presets (Hardware.preset):",
              f"  {'name':<14}{'dtype':>6}{'peak TFLOP/s':>14}{'memory GiB':>12}"]
    for name in Hardware.presets():
        hw = Hardware.preset(name)
        lines.append(f"  {name:<14}{hw.default_dtype:>6}{hw.peak() / 1e12:>14,.1f}"
                     f"{hw.memory_bytes / 2**30:>12,.1f}")
    return "\n".join(lines + _sample_lines())


def _sample_lines() -> list[str]:
    """The bundled samples, ``sample:NAME`` and a line of description each."""
    from ...bundled_samples import sample_list
    from ...resources import ResourceError

    try:
        found = sample_list()
    except ResourceError as exc:
        return ["", f"Bundled samples: none ({exc})"]
    width = max((len(s.spec) for s in found), default=0) + 2
    return ["", "Bundled samples (sample:NAME wherever a command takes a profile: info, "
                "advise, check, plan, compare, report, serve, and the tools of mcp):"] + [
        f"  {s.spec:<{width}}{s.description}" for s in found]
