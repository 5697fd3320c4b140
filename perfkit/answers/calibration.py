"""The calibration behind a ``predict`` answer, as ``perfkit plan`` and the
``predict_layout`` tool of ``perfkit mcp`` make it: what the profile does not show (the
model of a trace without shapes, the device of a CPU recording) comes from a config file
or a preset, an inference profile is refused, and every error names the option (of the
command line, or of the tool) that would mend it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidArgumentError, PerfkitError
from ..notes import runs_apart

__all__ = ["CLI_OPTIONS", "TOOL_OPTIONS", "STEP_TIME_ONLY", "calibrated", "on_step_time",
           "wall_step_s"]

#: The note of a calibration on the measured step time alone (:func:`calibrated` where the
#: profile cannot be fitted): its parts are perfkit's defaults, not the profile's.
STEP_TIME_ONLY = ("calibrated on the measured step time only: every compute rate scaled by "
                  "one factor, links and idle time at perfkit's defaults, so the step matches "
                  "by construction and its parts are the model's, not the run's")

#: How a caller gives what the profile does not show, by field: ``perfkit plan``'s words.
CLI_OPTIONS: Mapping[str, str] = {
    "model": "--model NAME (a preset) or --config FILE (an HF config.json or a MindFormers "
             "YAML)",
    "hardware": "--hardware NAME (a preset)",
    "info": "perfkit info PATH",
    "presets": "perfkit info lists the presets",
}
#: The same for the ``predict_layout`` tool of ``perfkit mcp``.
TOOL_OPTIONS: Mapping[str, str] = {
    "model": "model=NAME (a preset) or config=[FILE] (an HF config.json or a MindFormers "
             "YAML)",
    "hardware": "hardware=NAME (a preset)",
    "info": "the open_profile tool",
    "presets": "the presets are those perfkit info lists on the command line",
}


def _preset(kind: Any, name: str, field: str, options: Mapping[str, str]) -> Any:
    """``kind.preset(name)``; an unknown name refused as the caller's option for it
    (``--hardware``, ``hardware=``), not as the preset method's ``name``."""
    try:
        return kind.preset(name)
    except InvalidArgumentError as exc:
        option = options[field].split(" ", 1)[0].split("=", 1)[0]
        raise InvalidArgumentError(option, exc.rule, exc.value) from None


def calibrated(profile: Any, *, config: Sequence[str] | None = None,
               model: str | None = None, hardware: str | None = None,
               options: Mapping[str, str] = CLI_OPTIONS) -> Any:
    """:func:`perfkit.plan.calibrate` on ``profile`` with what the caller gave, fitted as
    the Planner tab fits (:func:`perfkit.widgets.prediction_fit.fit_job`): with the job's
    static-memory scheme, closed on the measured computing time (``close=True``), so that
    ``perfkit plan`` and the tab predict a layout alike.

    Parameters
    ----------
    profile : Profile or Cluster
    config : list of str, optional
        MindFormers YAML, HF config.json or training log files that win over the profile
        (as ``perfkit info --config`` reads them); their layout wins over the profile's.
    model, hardware : str, optional
        Presets (:meth:`perfkit.ModelSpec.preset`, :meth:`perfkit.Hardware.preset`) that
        win over the profile and the config.
    options : mapping
        The words that name, in errors, how to give the model and the hardware, where
        the presets are listed and where the measured figures are
        (:data:`CLI_OPTIONS`, :data:`TOOL_OPTIONS`).

    Returns
    -------
    Calibration

    Raises
    ------
    PerfkitError
        An inference step (the step model predicts training steps); a profile without
        measured steps to fit nor a step time (with a step time but no steps to fit, the
        calibration is on the step time, as the Planner tab's, and its notes end with
        :data:`STEP_TIME_ONLY`).
    InvalidArgumentError
        Neither the profile nor the caller gives the model or the device (``parameter``
        ``model`` or ``hardware``, the message naming ``options``), or a preset is
        unknown.
    """
    from ..analysis._shared import shared_results
    from ..job import infer_job
    from ..job.network import NETWORK
    from ..job.unknowns import said_no_transformer
    from ..plan import calibrate
    from ..specs import Hardware, ModelSpec

    with shared_results():  # the analyses the job is read from: once for both reads
        job = infer_job(profile, config=list(config) if config else None)
        where = str(profile.meta.path or "the profile")
        if job.training_step() is False:
            raise PerfkitError(
                f"{where}: this profile is an inference step, not a training step (it runs "
                "no backward pass): the step model predicts training steps (forward, "
                "backward, optimizer), which is not this run. Its measured figures: "
                f"{options['info']}")
        if model is None and said_no_transformer(job):  # no preset or file can describe it
            raise PerfkitError(
                f"{where}: this is not a transformer ({job.observed[NETWORK][1]}): the step "
                "model prices transformer layers, so no layout of it can be predicted. Its "
                f"measured figures: {options['info']}")
        chosen = {"model": _preset(ModelSpec, model, "model", options) if model
                  else job.model,
                  "hardware": _preset(Hardware, hardware, "hardware", options) if hardware
                  else job.hardware}
        for name, value in chosen.items():
            if value is None:
                raise InvalidArgumentError(name, f"the profile does not show it; give "
                                           f"{options[name]}; {options['presets']}")
        if config:  # the config's layout wins over the profile's, as in perfkit info
            chosen["parallel"] = job.parallel
        try:  # as the Planner tab fits (perfkit.widgets.prediction_fit.fit_job): closed
            cal = calibrate(profile, **chosen, static_scheme=job.static_scheme, close=True)
            apart = runs_apart(profile)  # a fit over separate runs mixes them: said first
            return dataclasses.replace(cal, notes=(apart, *cal.notes)) if apart else cal
        except InvalidArgumentError as exc:
            if exc.parameter != "source":  # calibrate's name for the profile itself
                raise
            why = exc.rule
        # as the Planner tab does (perfkit.widgets.prediction_fit.fit_job): the step time
        # the profile does show, where its steps cannot be fitted
        if job.step_time_s:
            cal = on_step_time(job, chosen["model"], chosen.get("parallel", job.parallel),
                               chosen["hardware"])
            return dataclasses.replace(cal, notes=(
                *cal.notes, f"{STEP_TIME_ONLY}; the profile itself could not be fitted: "
                f"{why}"))
        raise PerfkitError(f"the profile cannot be calibrated on: {why} (the step model fits "
                           "measured steps: an Ascend export's step_trace_time.csv, a Kineto "
                           "trace's ProfilerStep marks)")


def on_step_time(job: Any, model: Any = None, parallel: Any = None,
                 hardware: Any = None) -> Any:
    """:func:`perfkit.plan.calibrate` on ``job``'s measured step time alone, with its
    activations, gradient bytes, static-memory scheme and data type; ``model``,
    ``parallel`` and ``hardware`` replace the job's own (default the job's)."""
    from ..calc.rates import Rates
    from ..plan import calibrate

    return calibrate(float(job.step_time_s), model or job.model, parallel or job.parallel,
                     hardware or job.hardware, activation_model=job.activation_model,
                     rates=Rates(gradient_bytes=job.gradient_bytes),
                     static_scheme=job.static_scheme, dtype=job.dtype)


def wall_step_s(profile: Any) -> float | None:
    """The profiled step as ``perfkit info`` and ``perfkit compare`` measure it: per step
    the slowest rank's wall time, with the device's wait before the step (data, launch),
    the median over steps (:func:`perfkit.analysis.measured_step_s`). A calibration on a
    profile fits the device span without that wait (no layout shortens it); the answer
    gives both, so the two figures can be told apart. None where the profile has no
    step breakdown or no step with a duration."""
    import math

    from ..analysis import measured_step_s, step_breakdown

    try:
        steps = step_breakdown(profile)
    except PerfkitError:
        return None
    if steps.empty or "step" not in steps.columns or "step_us" not in steps.columns:
        return None
    step = measured_step_s(steps)
    return step if math.isfinite(step) else None
