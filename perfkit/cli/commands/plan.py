"""``perfkit plan PATH [--dp N] [--tp N] [--pp N] ... [--config FILE] [--json]``: calibrate
the step model on a profile (:func:`perfkit.plan.calibrate`) and predict another layout of
the same job (:func:`perfkit.plan.predict`); docs/planner.md.

What the profile does not show (the model of a trace without shapes, the device of a CPU
recording) comes from ``--config`` (as ``perfkit info`` reads it) or ``--model`` /
``--hardware`` presets. An inference profile is refused: the step model predicts training
steps (the Planner tab says the same)."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from ...answers.paths import load_path
from ...errors import ParallelConfigError, PerfkitError
from ..args import config_paths, paragraph, run_id

__all__ = ["add_parser", "run", "layout_changes", "predict_text"]

EPILOG = """\
examples:
  perfkit plan sample:llama2-13b-baseline-dp16 --dp 8 --pp 2
  perfkit plan PATH --tp 2 --pp 2 --recompute selective --json
  perfkit plan PATH --config config.json --hardware h100   what the profile does not show

Knobs not given keep the profiled run's value; with tp, pp or cp changed and no --dp,
dp keeps the device count; the global batch stays the run's unless --num-micro-batches
is given.
"""

#: The layout options: (option, ParallelConfig field, type).
_KNOBS = (("--dp", "dp", int), ("--tp", "tp", int), ("--pp", "pp", int),
          ("--vpp", "vpp", int), ("--cp", "cp", int), ("--ep", "ep", int),
          ("--micro-batch-size", "micro_batch_size", int),
          ("--num-micro-batches", "num_micro_batches", int),
          ("--optimizer-shard", "optimizer_shard", int))


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``plan`` command to the subparsers of ``perfkit``."""
    p = sub.add_parser(
        "plan", help="predict another layout's step, calibrated on a profile",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description=paragraph("Fit perfkit's step model to the profile (its kernels, "
                              "links and fixed costs) and predict the step time, its band, "
                              "its parts and the memory of the layout the options give."))
    p.add_argument("path", metavar="PATH", help="profile folder or file, or sample:NAME")
    for option, dest, kind in _KNOBS:
        p.add_argument(option, dest=dest, type=kind, default=None, metavar="N",
                       help=f"{dest} of the predicted layout (default: the run's)")
    p.add_argument("--recompute", choices=("none", "selective", "full"), default=None,
                   help="recompute policy (default: the run's)")
    p.add_argument("--sequence-parallel", dest="sequence_parallel", default=None,
                   action=argparse.BooleanOptionalAction,
                   help="sequence parallelism on or off (default: the run's)")
    p.add_argument("--config", action="append", default=None, metavar="FILE",
                   help="a MindFormers YAML, HF config.json or training log that wins over "
                        "what the profile shows (repeatable)")
    p.add_argument("--model", default=None, metavar="NAME",
                   help="the model, a preset (perfkit info lists them), where the profile "
                        "and --config do not give it")
    p.add_argument("--hardware", default=None, metavar="NAME",
                   help="the device, a preset (perfkit info lists them), where the profile "
                        "does not show it (a CPU recording of a GPU job, say)")
    p.add_argument("--run", type=run_id, default=None, metavar="ID", dest="run_id",
                   help="one of the separate runs a folder holds (an id or a name)")
    p.add_argument("--json", action="store_true",
                   help="print the answer as JSON (schema: docs/json.md)")
    return p


def predict_text(answer: dict[str, Any]) -> str:
    """The ``predict`` answer for people: step and band, parts, memory, changes, notes."""
    from ...format import bytes_text, time_text
    from ...plan.calibrate import NOT_CLOSED_NOTE
    from ...plan.relayout import layout_text

    def ms(x: float | None) -> str:
        return "unknown" if x is None else time_text(x * 1e3)

    p = answer["parallel"]
    model = answer["model"] or "the profile's model"
    lines = [f"Predicted layout: {layout_text(p)} ({model}, "
             f"{answer['hardware'] or 'hardware unknown'})",
             f"  step {ms(answer['step_ms'])} (band {_band(answer)}; "
             f"{_calibrated_on(answer)})"
             + _per_device(answer)]
    cal = answer["calibration"]
    if cal and cal["measured_step_ms"] is not None and cal["source"] == "step time":
        lines.append(f"  the profiled run: measured {ms(cal['measured_step_ms'])}, which the "
                     "model was scaled to (equal by construction: no check of the model)")
    elif cal and cal["measured_step_ms"] is not None and NOT_CLOSED_NOTE in cal["notes"]:
        # the peak stopped the closing: no band holds this run, whatever its width
        lines += _wrap_line(
            f"the profiled run: measured {ms(cal['measured_step_ms'])}; the fitted model gave "
            f"it {ms(cal['predicted_step_ms'])}{_signed(cal.get('residual_pct'))}, and at "
            f"the device's peak it still gives {ms(cal['closed_step_ms'])}"
            f"{_signed(_pct(cal['closed_step_ms'], cal['measured_step_ms']))}: the model does "
            "not reproduce this run, which computed less than the model counts — the model, "
            "layout or device given may not be the run's (perfkit info PATH shows what the "
            "profile reads)")
    elif cal and cal["measured_step_ms"] is not None and cal.get("closed"):
        # as the Planner tab says it: the fit against the run, then the closed model
        lines += _wrap_line(
            f"the profiled run: measured {ms(cal['measured_step_ms'])}; the fitted model gave "
            f"it {ms(cal['predicted_step_ms'])}{_signed(cal.get('residual_pct'))}, closed on "
            f"the measured computing time it gives {ms(cal['closed_step_ms'])}"
            + _residual_words(cal, answer, cal["closed_step_ms"]))
    elif cal and cal["measured_step_ms"] is not None:
        lines.append(f"  the profiled run: measured {ms(cal['measured_step_ms'])}, the "
                     f"calibrated model gives it {ms(cal['predicted_step_ms'])}"
                     + _residual_words(cal, answer, cal["predicted_step_ms"]))
    lines += _wall_words(cal)
    parts = ", ".join(f"{k} {ms(v)}" for k, v in answer["parts_ms"].items()
                      if v is not None and v > 0)
    lines.append(f"  parts: {parts or 'none'}")
    m = answer["memory"]
    lines.append(f"  memory: {bytes_text(m['total_bytes'])} of {bytes_text(m['limit_bytes'])}"
                 f" ({'fits' if m['fits'] else 'does not fit'})")
    if answer["changes"]:
        lines.append(f"  changes from the run: {', '.join(answer['changes'])}")
    lines += [f"  note: {n}" for n in answer["notes"]]
    for n in (cal or {}).get("notes", []):  # what the fit read, assumed or could not fit
        lines += textwrap.wrap(f"calibration: {n}", 100, initial_indent="  ",
                               subsequent_indent="    ")
    return "\n".join(lines)


def _wall_words(cal: dict[str, Any] | None) -> list[str]:
    """Where the calibration fitted the device span and the profile's step time (``perfkit
    info``, ``perfkit compare``) also counts the wait before it, one line that says so, as
    the Planner tab does; none where the two print alike."""
    from ...format import time_text

    if not cal or cal["source"] == "step time" or not cal.get("wall_step_ms") \
            or cal["measured_step_ms"] is None:
        return []
    wall, span = cal["wall_step_ms"] * 1e3, cal["measured_step_ms"] * 1e3
    if wall <= span or time_text(wall) == time_text(span):
        return []
    return _wrap_line(
        f"measured on the device's span: perfkit info and perfkit compare give the step as "
        f"{time_text(wall)}, with the {time_text(wall - span)} the device waits before "
        "each step's first task (data, launch), which no layout shortens")


def _per_device(answer: dict[str, Any]) -> str:
    """``, 3,770 tokens/s per device on 32 devices`` (:func:`perfkit.plan.relayout.
    per_device_text`), or nothing without a throughput."""
    from ...plan.relayout import per_device_text

    tps = answer.get("tokens_per_second_per_device")
    return "" if tps is None else ", " + per_device_text(tps, answer["parallel"]["world_size"])


def _band(answer: dict[str, Any]) -> str:
    """``"1.15 s – 1.27 s"``, ``"up to 11.0 s"`` where its low end is 0, ``"unknown"``."""
    from ...format import band_range_text

    if answer["high_ms"] is None:
        return "unknown"
    low = answer["low_ms"]
    return band_range_text(None if low is None else low * 1e3, answer["high_ms"] * 1e3)


def _calibrated_on(answer: dict[str, Any]) -> str:
    """What the model was calibrated on: the profile, or its step time alone."""
    cal = answer["calibration"]
    if not answer["calibrated"]:
        return "uncalibrated"
    if cal and cal.get("source") == "step time":
        return "calibrated on the measured step time only"
    return "calibrated on the profile"


def _signed(pct: float | None) -> str:
    """`` (−14.8 %)``, or nothing without a figure."""
    return "" if pct is None else f" ({pct:+.1f} %)".replace("-", "−")


def _wrap_line(text: str) -> list[str]:
    return textwrap.wrap(text, 100, initial_indent="  ", subsequent_indent="    ")


def _pct(model_ms: float | None, measured_ms: float | None) -> float | None:
    """How far ``model_ms`` is from ``measured_ms``, in %; None where either is unknown."""
    if model_ms is None or not measured_ms:
        return None
    return 100.0 * (model_ms / measured_ms - 1.0)


def _residual_words(cal: dict[str, Any], answer: dict[str, Any],
                    model_ms: float | None) -> str:
    """`` (−14.8 %, outside the band: …)``: how far the model (``model_ms``: the fitted
    or the closed one) is from the profiled run, and, for the run's own layout, whether
    the measurement is in the band."""
    measured = cal["measured_step_ms"]
    if model_ms is None or not measured:
        return ""
    pct = 100.0 * (model_ms / measured - 1.0)
    text = f" ({pct:+.1f} %".replace("-", "−")
    low, high = answer["low_ms"], answer["high_ms"]
    if not answer["changes"] and low is not None and high is not None:
        if low <= measured <= high:
            text += ", inside the band"
        else:
            text += (", outside the band: the model does not reproduce this run — a rank "
                     "slower than the others, idle time or work it does not price "
                     "(perfkit advise PATH says what the profile shows)")
    return text + ")"


def _as_option(exc: Exception) -> Exception:
    """A layout error that names a ParallelConfig field, naming the option given for it
    (``--micro-batch-size``, not ``micro_batch_size``)."""
    option = {dest: opt for opt, dest, _ in _KNOBS}.get(getattr(exc, "parameter", None))
    if isinstance(exc, ParallelConfigError) and option is not None:
        return ParallelConfigError(option, exc.rule, exc.value)
    return exc


def layout_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The layout options given on the command line, by ParallelConfig field."""
    names = [dest for _, dest, _ in _KNOBS] + ["recompute", "sequence_parallel"]
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


def run(args: argparse.Namespace) -> int:
    """Run ``perfkit plan``."""
    from ...answers import dumps, predict_answer
    from ...answers.calibration import calibrated, wall_step_s
    from ...plan import predict
    from ...plan.relayout import relayout

    profile = load_path(args.path, run=args.run_id, command="plan")
    cal = calibrated(profile, config=config_paths(args.config), model=args.model,
                     hardware=args.hardware)
    try:
        target = relayout(cal.job.parallel, layout_changes(args), cal.job.global_batch_size)
    except PerfkitError as exc:
        raise _as_option(exc) from None
    batch = None if args.num_micro_batches is not None else cal.job.global_batch_size
    pred = predict(cal, parallel=target, global_batch_size=batch)
    answer = predict_answer(pred, cal, path=str(profile.meta.path or args.path),
                            wall_step_s=wall_step_s(profile))
    print(dumps(answer) if args.json else predict_text(answer))
    return 0
