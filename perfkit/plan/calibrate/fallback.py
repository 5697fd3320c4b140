"""The fallback fits: a measured step time (one factor on every compute rate) and a steps
table (compute, exposed communication and idle time), used where no operator can be fitted."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..._stats import median
from ...calc.rates import GROUPS, Rates
from ...errors import InvalidArgumentError
from ...specs import Hardware, ModelSpec, ParallelConfig
from .result import CalibratedJob
from .solve import (
    COMPUTING_PARTS,
    _evaluate,
    _group_link,
    _links_scaled,
    _solve_link_scale,
    _solve_scale,
    attention_kept,
)

__all__: list[str] = []  # private parts of perfkit.plan.calibrate


_STEP_COLUMNS = ("computing_us", "comm_not_overlapped_us", "free_us")


_COMM_PARTS = ("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm")


def _check_job(model: Any, parallel: Any, hardware: Any) -> tuple[ModelSpec, ParallelConfig,
                                                                  Hardware]:
    if not isinstance(model, ModelSpec):
        raise InvalidArgumentError("model", "must be a ModelSpec (a steps table or a step "
                                   "time does not say what ran)", type(model).__name__)
    if not isinstance(parallel, ParallelConfig):
        raise InvalidArgumentError("parallel", "must be a ParallelConfig (a steps table or a "
                                   "step time does not say how the job was split)",
                                   type(parallel).__name__)
    if isinstance(hardware, str):
        hardware = Hardware.preset(hardware)
    if not isinstance(hardware, Hardware):
        raise InvalidArgumentError("hardware", "must be a Hardware or a preset name",
                                   type(hardware).__name__)
    return model, parallel, hardware


def _steps_table(steps: pd.DataFrame, skip_first_steps: int) -> pd.DataFrame:
    if hasattr(steps, "compute"):  # a lazy (Dask) frame: the summary is small
        steps = steps.compute()
    missing = [c for c in _STEP_COLUMNS if c not in steps.columns]
    if missing:
        raise InvalidArgumentError("source", f"its steps table lacks {missing}; calibration "
                                   "needs the step breakdown (Ascend step_trace_time or a "
                                   "Kineto-derived breakdown)")
    steps = steps.dropna(subset=list(_STEP_COLUMNS))
    if steps.empty:
        raise InvalidArgumentError("source", "its steps table has no complete step")
    if skip_first_steps and "step" in steps.columns:
        first = sorted(steps["step"].unique())[:skip_first_steps]
        rest = steps[~steps["step"].isin(first)]
        if rest.empty:
            raise InvalidArgumentError("skip_first_steps", "leaves no step", skip_first_steps)
        steps = rest
    if "rank" not in steps.columns:
        steps = steps.assign(rank=0)
    return steps


def _measured_from_steps(steps: pd.DataFrame) -> dict[str, float]:
    """Per-rank means, then: the slowest rank's step, the busiest's computing, medians."""
    bubble = steps["bubble_us"] if "bubble_us" in steps.columns else pd.Series(
        np.nan, index=steps.index)
    frame = steps.assign(step_us=steps["computing_us"] + steps["comm_not_overlapped_us"]
                         + steps["free_us"], bubble=bubble)
    per_rank = frame.groupby("rank")[["step_us", "computing_us", "comm_not_overlapped_us",
                                      "free_us", "bubble"]].mean()
    has_bubble = bool(per_rank["bubble"].notna().any())
    return {"step": float(per_rank["step_us"].max()) / 1e6,
            "computing": float(per_rank["computing_us"].max()) / 1e6,
            "comm": median(per_rank["comm_not_overlapped_us"]) / 1e6,
            "free": median(per_rank["free_us"]) / 1e6,
            "bubble": median(per_rank["bubble"]) / 1e6 if has_bubble else math.nan}


def _from_step_time(step_s: float, job: CalibratedJob, rates: Rates,
                    notes: list[str]) -> tuple[Rates, dict[str, Any]]:
    if not step_s > 0 or not math.isfinite(step_s):
        raise InvalidArgumentError("source", "a measured step time must be a positive number "
                                   "of seconds", step_s)
    before = _evaluate(job, rates)["step_s"]
    factor, capped = _solve_scale(job, rates, step_s)
    fitted = rates.scaled(factor)
    terms = [("compute scale", factor, f"one factor on every compute rate: the model "
              f"({before:.4g} s at the starting rates) reproduces the measured "
              f"{step_s:.4g} s{attention_kept(job, rates)}")]
    if capped:
        # compute at its cap is still too slow: what is left must be the links, which a
        # step time cannot tell apart; one factor on every group's efficiency, capped at 1
        link, link_capped = _solve_link_scale(job, fitted, step_s)
        fitted = _links_scaled(job, fitted, link)
        reached = _evaluate(job, fitted)["step_s"]
        terms = [("compute scale", factor, "every compute rate at its cap (efficiency 1)"),
                 ("link efficiency scale", link, f"one factor on every group's link "
                  f"efficiency: the model ({before:.4g} s at the starting rates) gives "
                  f"{reached:.4g} s for the measured {step_s:.4g} s")]
        notes.append("the measured step is faster than the model's compute allows at its "
                     "highest rates (every kernel's efficiency at most 1) with perfkit's "
                     "default links: the link efficiencies were scaled too"
                     + ("; even at full link efficiency the model stays slower: check the "
                        "model, the layout or the hardware" if link_capped else ""))
    predicted = _evaluate(job, fitted)["step_s"]
    return fitted, {"measured": step_s, "terms": terms,
                    "residual": predicted / step_s - 1.0 if capped else 0.0,
                    "predicted": predicted, "kinds": {"compute"}}


def _links_to_exposed(job: CalibratedJob, rates: Rates, m: dict[str, float],
                      out: dict[str, float], notes: list[str],
                      terms: list[tuple[str, float, str]]
                      ) -> tuple[Rates, float, float, set[str]]:
    """Every link efficiency scaled by one factor so that the model's communication parts
    (``out``: the model at ``rates``) are the measured exposed communication,
    ``comm_not_overlapped_us`` less the receive waits (the bubble: the steps' ``bubble_us``,
    else the model's); capped at 1. Returns the rates, the exposed and the model's
    communication (s) and the groups whose links were scaled (none where either is 0)."""
    measured_bubble = math.isfinite(m["bubble"]) and m["bubble"] > 0
    bubble = m["bubble"] if measured_bubble else out["bubble"]
    if not measured_bubble and out["bubble"] > 0:
        notes.append("no bubble_us in the steps: the model's bubble "
                     f"({out['bubble']:.4g} s) is taken out of the exposed communication")
    exposed = max(0.0, m["comm"] - bubble)
    model_comm = sum(out[p] for p in _COMM_PARTS)
    if not (model_comm > 0 and exposed > 0):
        return rates, exposed, model_comm, set()
    ratio = model_comm / exposed
    current = {g: _group_link(job, rates, g) for g in GROUPS}
    if any(v * ratio > 1 for v in current.values()):
        notes.append("communication measured faster than nominal bandwidth; capped at 1")
    rates = rates.replace(link_efficiency={g: min(1.0, v * ratio) for g, v in current.items()})
    terms.append(("link efficiency scale", ratio, "exposed communication = "
                  "comm_not_overlapped_us − bubble"))
    return rates, exposed, model_comm, {g for g in GROUPS if out[f"{g}_comm_raw_s"] > 0}


def _from_steps(steps: pd.DataFrame, job: CalibratedJob, rates: Rates, notes: list[str],
                skip_first_steps: int) -> tuple[Rates, dict[str, Any]]:
    m = _measured_from_steps(_steps_table(steps, skip_first_steps))
    if m["computing"] <= 0:
        raise InvalidArgumentError("source", "its computing time is zero")
    terms: list[tuple[str, float, str]] = []
    # compute rates from the busiest rank's computing time
    k, capped = _solve_scale(job, rates, m["computing"], COMPUTING_PARTS)
    if capped:
        notes.append("measured compute is faster than the peak allows: check the model, the "
                     "layout or the hardware peak; rates capped at 1")
    fitted = rates.scaled(k)
    terms.append(("compute scale", k, "compute + recompute + optimizer = busiest rank's "
                  "computing_us" + attention_kept(job, rates)))
    out = _evaluate(job, fitted)
    fitted, exposed, model_comm, groups = _links_to_exposed(job, fitted, m, out, notes, terms)
    kinds = {"compute", "overhead"} | groups
    if model_comm <= 0 and exposed > 0:
        notes.append(f"the layout has no modelled communication; the measured "
                     f"{exposed * 1e3:.3g} ms goes to the overhead")
    overhead = m["free"] + (exposed if model_comm <= 0 else 0.0)
    fitted = fitted.replace(overhead_s=overhead, kernel_gap_s=0.0)
    terms.append(("overhead_s", overhead, "free_us (median over ranks)"))
    predicted = _evaluate(job, fitted)["step_s"]
    return fitted, {"measured": m["step"], "terms": terms,
                    "residual": predicted / m["step"] - 1.0, "predicted": predicted,
                    "kinds": kinds}
