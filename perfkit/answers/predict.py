"""The ``predict`` answer: a layout's predicted step (:func:`perfkit.plan.predict`), with
the calibration it stands on."""

from __future__ import annotations

import dataclasses
from typing import Any

from .common import envelope, number

__all__ = ["predict_answer"]


def _ms(seconds: Any) -> float | None:
    s = number(seconds)
    return None if s is None else s * 1e3


def predict_answer(prediction: Any, calibration: Any = None, path: str = "",
                   wall_step_s: float | None = None) -> dict[str, Any]:
    """The ``predict`` answer of a :class:`~perfkit.plan.predict.Prediction`.

    Parameters
    ----------
    prediction : Prediction
    calibration : Calibration, optional
        The calibration it was predicted from, reported under ``calibration``: the
        measured step, the fitted model's step before closing (``predicted_step_ms``,
        ``residual_pct``), whether it was then ``closed`` on the measured computing time
        and the calibrating layout's step after (``closed_step_ms``).
    path : str
        The profile calibrated on.
    wall_step_s : float, optional
        The profiled step with the device's wait before it, as ``perfkit info`` and
        ``perfkit compare`` measure it (:func:`perfkit.answers.calibration.wall_step_s`),
        reported as ``calibration.wall_step_ms`` beside ``measured_step_ms``, the device
        span the calibration fitted (null where not given).

    Returns
    -------
    dict
        ``step_ms``, ``low_ms``, ``high_ms`` (the band), ``parts_ms`` (they sum to
        ``step_ms``), ``tokens_per_second_per_device``, ``mfu_pct`` (100 · MFU),
        ``memory`` in bytes with ``fits``, the ``parallel`` layout, ``model`` name,
        ``hardware`` name, batch, ``changes`` from the calibrated run, ``notes``.
    """
    p = prediction
    parallel = dataclasses.asdict(p.parallel)
    parallel["world_size"] = p.parallel.world_size
    mfu = number(p.mfu)
    cal = None
    if calibration is not None:
        cal = {"measured_step_ms": _ms(calibration.measured_step_s),
               "wall_step_ms": _ms(wall_step_s),
               "predicted_step_ms": _ms(calibration.predicted_step_s),
               "closed": bool(getattr(calibration, "closed", False)),
               "closed_step_ms": _ms(getattr(calibration, "estimated_step_s", None)),
               "residual_pct": (None if number(calibration.residual) is None
                                else 100.0 * float(calibration.residual)),
               "source": str(calibration.source),
               "notes": [str(n) for n in calibration.notes]}
    return envelope(
        "predict", path=str(path), calibrated=bool(p.calibrated),
        step_ms=_ms(p.step_s), low_ms=_ms(p.low_s), high_ms=_ms(p.high_s),
        parts_ms={str(k): _ms(v) for k, v in p.parts.items()},
        tokens_per_second_per_device=number(p.tokens_per_second_per_device),
        mfu_pct=None if mfu is None else 100.0 * mfu,
        memory={"static_bytes": number(p.static_bytes),
                "activation_bytes": number(p.activation_bytes),
                "total_bytes": number(p.memory_bytes),
                "limit_bytes": number(p.memory_limit_bytes), "fits": bool(p.fits)},
        parallel=parallel, model=p.model.name if p.model is not None else None,
        hardware=p.hardware.name if p.hardware is not None else None,
        global_batch_size=int(p.global_batch_size), seq_length=int(p.seq_length),
        changes=[str(c) for c in p.changes], notes=[str(n) for n in p.notes],
        calibration=cal)
