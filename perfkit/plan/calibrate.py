"""Fit the step model's efficiency and bandwidth terms to a measured profile.

The profile's step breakdown (the canonical ``steps`` table: ``computing_us``,
``comm_not_overlapped_us``, ``free_us``, ``bubble_us``) is compared with
:func:`perfkit.calc.estimate_step` for the same model and configuration:

* ``efficiency`` = estimated compute time at 100 % of peak / measured computing time
  (of the busiest rank, which sets the pace);
* ``comm_efficiency`` = estimated exposed communication at nominal bandwidth / measured
  communication not overlapped, receive waits (``bubble_us``) excluded;
* ``overhead_s`` = measured free time (host, data loading), median over ranks.

The estimate with these terms is then compared with the measured step time
(``computing + comm_not_overlapped + free`` of the slowest rank); ``error`` reports the
relative difference. What is left is mostly the pipeline bubble, which the model computes
from ``(pp − 1)/(vpp·m)`` rather than fitting it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..calc import ActivationModel, estimate_step
from ..errors import InvalidArgumentError
from ..specs import Hardware, ModelSpec, ParallelConfig

__all__ = ["Calibration", "calibrate"]

_NEEDED = ("computing_us", "comm_not_overlapped_us", "free_us")


@dataclass(frozen=True)
class Calibration:
    """Fitted terms and how well they reproduce the measured step.

    Attributes: ``efficiency``, ``comm_efficiency``, ``overhead_s``, ``measured_step_s``,
    ``estimated_step_s``, ``error`` (estimated / measured − 1) and ``notes``.
    """

    efficiency: float
    comm_efficiency: float
    overhead_s: float
    measured_step_s: float
    estimated_step_s: float
    error: float
    notes: tuple[str, ...]


def _steps_table(profile: object) -> pd.DataFrame:
    steps = profile if isinstance(profile, pd.DataFrame) else getattr(profile, "steps", None)
    if not isinstance(steps, pd.DataFrame):
        raise InvalidArgumentError("profile", "must be a Profile/Cluster with a 'steps' table "
                                   "or that table itself", type(profile).__name__)
    if hasattr(steps, "compute"):  # a lazy (Dask) frame: the summary is small
        steps = steps.compute()
    missing = [c for c in _NEEDED if c not in steps.columns]
    if missing:
        raise InvalidArgumentError("profile", f"its steps table lacks {missing}; calibration "
                                   "needs the step breakdown (Ascend step_trace_time or a "
                                   "Kineto-derived breakdown)")
    if steps[list(_NEEDED)].dropna().empty:
        raise InvalidArgumentError("profile", "its steps table has no complete step")
    return steps


def calibrate(profile: object, model: ModelSpec, parallel: ParallelConfig,
              hardware: Hardware, dtype: str | None = None,
              activation_model: ActivationModel | None = None,
              skip_first_steps: int = 0) -> Calibration:
    """Fit efficiency, link efficiency and overhead so the estimate matches the profile.

    Parameters
    ----------
    profile : Profile, Cluster or DataFrame
        Anything with the canonical ``steps`` table (per rank and step, in µs).
    model, parallel, hardware
        What the profiled job ran.
    skip_first_steps : int
        Steps to drop from the start (warm-up, compilation).

    Returns
    -------
    Calibration
        Pass it to :func:`perfkit.plan.search` (``calibration=``) to rank strategies with
        the measured efficiencies.
    """
    steps = _steps_table(profile).copy()
    notes: list[str] = []
    if skip_first_steps:
        first = sorted(steps["step"].dropna().unique())[:skip_first_steps] \
            if "step" in steps.columns else []
        steps = steps[~steps["step"].isin(first)] if len(first) else steps
    if "rank" not in steps.columns:
        steps = steps.assign(rank=0)
    bubble = steps["bubble_us"] if "bubble_us" in steps.columns else 0.0
    if "bubble_us" not in steps.columns or steps["bubble_us"].isna().all():
        notes.append("no bubble_us column: receive waits are counted as communication")
    steps = steps.assign(
        step_us=steps["computing_us"] + steps["comm_not_overlapped_us"] + steps["free_us"],
        exposed_us=(steps["comm_not_overlapped_us"] - pd.Series(bubble, index=steps.index)
                    .fillna(0.0)).clip(lower=0.0))
    per_rank = steps.groupby("rank")[["step_us", "computing_us", "exposed_us", "free_us"]] \
        .mean()
    measured_step = float(per_rank["step_us"].max()) / 1e6
    measured_compute = float(per_rank["computing_us"].max()) / 1e6
    measured_exposed = float(per_rank["exposed_us"].median()) / 1e6
    overhead = float(per_rank["free_us"].median()) / 1e6
    if measured_compute <= 0:
        raise InvalidArgumentError("profile", "its computing time is zero")

    ideal = estimate_step(model, parallel, hardware, efficiency=1.0, comm_efficiency=1.0,
                          dtype=dtype, activation_model=activation_model)
    efficiency = ideal.compute_s / measured_compute
    if efficiency > 1.0:
        notes.append(f"measured compute is faster than the peak allows ({efficiency:.2f}x): "
                     "check the model, the configuration or the hardware peak; capped at 1")
        efficiency = 1.0
    comm_ideal = ideal.exposed_comm_s
    if comm_ideal > 0 and measured_exposed > 0:
        comm_efficiency = min(1.0, comm_ideal / measured_exposed)
        if comm_ideal / measured_exposed > 1.0:
            notes.append("communication measured faster than nominal bandwidth; capped at 1")
    else:
        comm_efficiency = 0.8
        if measured_exposed > 0:
            notes.append("the configuration has no modelled communication; the measured "
                         f"{measured_exposed * 1e3:.3g} ms is added to the overhead")
            overhead += measured_exposed
    fitted = estimate_step(model, parallel, hardware, efficiency=efficiency,
                           comm_efficiency=comm_efficiency, dtype=dtype,
                           overhead_s=overhead, activation_model=activation_model)
    error = fitted.step_s / measured_step - 1.0
    if abs(error) > 0.05:
        notes.append(f"the fitted estimate is {error:+.1%} off the measured step: the "
                     "pipeline bubble or load imbalance differs from the model's")
    return Calibration(efficiency, comm_efficiency, overhead, measured_step, fitted.step_s,
                       error, tuple(notes))
