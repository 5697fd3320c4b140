"""What a change of layout saves per step, by the Planner's model: one function for every
place that states it (the advisor's recompute finding, the Recompute tab)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..specs import ParallelConfig
from .predict import predict

__all__ = ["layout_saving_s", "recompute_off"]


def recompute_off(parallel: ParallelConfig) -> ParallelConfig:
    """``parallel`` with no recompute on any layer (``recompute="none"``, no per-stage
    layer counts)."""
    return dataclasses.replace(parallel, recompute="none", recompute_layers=None)


def layout_saving_s(calibration: Any, parallel: ParallelConfig,
                    changed: ParallelConfig) -> float:
    """Seconds per step that ``changed`` saves against ``parallel``, predicted by one
    calibration (:func:`perfkit.plan.calibrate`)::

        saving = predict(calibration, parallel).step_s - predict(calibration, changed).step_s

    Negative where the change costs time. Both layouts are predicted by the same model,
    rates and closing, so the saving is the difference of the two rows the Recompute tab
    shows for them.
    """
    return (predict(calibration, parallel=parallel).step_s
            - predict(calibration, parallel=changed).step_s)
