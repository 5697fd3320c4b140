"""Fit the step model's rates to a measured run: a profile, a steps table or a step time.

:func:`calibrate` returns a :class:`Calibration` whose :class:`~perfkit.calc.rates.Rates`
make :func:`perfkit.calc.timing.step_times` — the model of :func:`perfkit.plan.predict`
and of :func:`perfkit.plan.search` with ``calibration=`` — reproduce the run, and says
how well (``residual``).

What is fitted, by source
-------------------------
**A Profile or Cluster** (the job read by :func:`perfkit.infer_job`; the ``model``,
``parallel`` and ``hardware`` you pass win over what the profile shows):

* *matrix multiplies*: the size curve ``t = (F + F½)/(e·peak) + B/(e_mem·bw)`` fitted
  by weighted least squares to the profile's own GEMM rows of
  :func:`perfkit.analysis.operator_efficiency` (one row per operator and shape: FLOPs,
  bytes, calls, time) — ``e`` and ``F½``; when the shapes do not vary enough to separate
  them, ``F½`` keeps its default and only ``e`` is fitted;
* *fused attention*: its speed relative to the GEMM curve, from the attention rows;
* *memory-bound kernels*: ``t = (B + B½)/(e_mem·bw)`` fitted to the element-wise, norm
  and reduction rows — ``e_mem`` and ``B½``;
* *the optimizer*: bytes moved per updated parameter, from the ``Adam`` kernels' time;
* *links*: per communication group (tp, dp, pp, ep, cp, from the profile's group
  names), achieved bandwidth of its transfers (``comm_bandwidth``, transit time) over
  the nominal bandwidth of the transport (intra-node HCCS/NVLink, inter-node
  RDMA/InfiniBand);
* *idle time*: the steps' ``free_us`` per kernel (launch gaps);
* *steps recorded in part*: the operator rows and the kernels per step are read from the
  steps whose device tasks were recorded in full
  (:func:`perfkit.analysis.recorded.recorded_profile`), as the Operators tab reads them; a
  note names those steps, and when no step was recorded in full the compute rates come
  from the steps table, as for a steps table (below);
* *framework behaviour*: fused attention and dropout from the kernel names, fp32 norm
  inputs from the norm kernels' dtypes, and which recompute style ran (from how often
  the MLP's output-projection shape occurs next to its input-projection shape).

The residual is the model with these rates against the measured step (slowest rank,
median step, the device span: the wait before the step's first device task, fetching data
or launching, is not part of the model and is left out); it is *not* closed unless
``close=True``, so it measures the model.

**A steps table** (``computing_us``, ``comm_not_overlapped_us``, ``free_us`` and, when
known, ``bubble_us``, per rank and step) and **a measured step time** (seconds) need
``model``, ``parallel`` and ``hardware``. The table gives three aggregates: the compute
rates are scaled to the busiest rank's computing time, the link efficiencies to the
exposed communication (receive waits — the bubble — taken out: ``bubble_us`` when
given, else the model's bubble), the idle time to ``free_us``. A step time gives one:
every compute rate is scaled by one factor. Either way the fit is then closed so that
the model reproduces the measured step exactly — a measured step is never
re-estimated with a bubble or communication added on top of it (``residual`` reports
how far the unclosed fit was).
"""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._stats import median
from ..calc import ActivationModel
from ..calc.rates import GROUPS, Rates
from ..calc.timing import PART_NAMES, step_times
from ..errors import InvalidArgumentError, PerfkitError
from ..format import counted
from ..specs import Hardware, ModelSpec, ParallelConfig
from .predict import layout_columns, run_types, stage_params, stage_rows

__all__ = ["Calibration", "CalibratedJob", "calibrate", "residual_note"]

_STEP_COLUMNS = ("computing_us", "comm_not_overlapped_us", "free_us")
_VECTOR_KINDS = ("elementwise", "norm", "reduction", "activation", "softmax")


@dataclass(frozen=True)
class CalibratedJob:
    """The run a calibration was fitted to (what :func:`perfkit.plan.predict` starts from).

    ``dtype`` is the type whose peak the step model computes at (None: the hardware's
    default); ``tensor_dtype`` the run's own type where the hardware lists no peak for it
    (:func:`perfkit.plan.run_types`), None otherwise; :attr:`run_dtype` is the
    type static memory and the gradients follow.
    """

    model: ModelSpec
    parallel: ParallelConfig
    hardware: Hardware
    global_batch_size: int
    seq_length: int
    activation_model: ActivationModel = field(default_factory=ActivationModel)
    static_scheme: str = "mindspore"
    dtype: str | None = None
    stage_layers: tuple[int, ...] | None = None
    selective_layers: tuple[int, ...] | None = None
    comm_layers: tuple[int, ...] | None = None
    tensor_dtype: str | None = None

    @property
    def run_dtype(self) -> str | None:
        """The type the run's tensors keep: :attr:`tensor_dtype` where the hardware has no
        peak for it (:attr:`dtype`, the peak's type, is then None), else :attr:`dtype`.
        Static memory and the gradients' default size follow it, so an fp32 run on an
        Ascend NPU (no fp32 peak) keeps fp32 weights and gradients in the Planner as on its
        Memory tab."""
        return self.tensor_dtype or self.dtype


@dataclass(frozen=True)
class Calibration:
    """Fitted rates and how well they reproduce the measured run.

    Attributes
    ----------
    rates : Rates
        The fitted rates (what :func:`perfkit.plan.predict` and
        :func:`perfkit.plan.search` run at).
    job : CalibratedJob
        The calibrating run's model, layout, hardware and conventions.
    source : str
        ``"profile"``, ``"steps"`` or ``"step time"``.
    measured_step_s : float
        The measured step (slowest rank, median over steps; of a profile, the device span
        without the wait before it).
    predicted_step_s : float
        The model's step for the calibrating run with the fitted rates, before closing.
    residual : float
        ``predicted_step_s / measured_step_s − 1``.
    estimated_step_s : float
        The model's step for the calibrating run with the final rates (equal to the
        measurement when the fit was closed).
    closed : bool
        Whether the compute rates were finally scaled to reproduce the measurement.
    measured : frozenset of str
        Which rates come from the run (``"compute"``, ``"overhead"``, and the groups
        ``"tp"``, ``"dp"``, ``"pp"``, ``"ep"``, ``"cp"`` whose traffic was measured); the
        others are perfkit's defaults. :func:`perfkit.plan.predict` widens its band for
        parts at default rates.
    terms : tuple of (term, value, how)
        What was fitted, with its value and from what (:meth:`to_frame`).
    parts : dict of str to float
        The calibrating run's predicted parts (seconds) with the final rates.
    notes : tuple of str
    """

    rates: Rates
    job: CalibratedJob
    source: str
    measured_step_s: float
    predicted_step_s: float
    residual: float
    estimated_step_s: float
    closed: bool
    measured: frozenset[str]
    terms: tuple[tuple[str, float, str], ...]
    parts: dict[str, float]
    notes: tuple[str, ...]

    @property
    def error(self) -> float:
        """The residual (kept under its former name)."""
        return self.residual

    @property
    def efficiency(self) -> float:
        """Fitted GEMM efficiency ``e_max``."""
        return self.rates.gemm_efficiency

    @property
    def overhead_s(self) -> float:
        """Fixed time per step plus the launch gaps of the calibrating run."""
        return self.parts.get("overhead", self.rates.overhead_s)

    def to_frame(self) -> pd.DataFrame:
        """One row per fitted term: ``term``, ``value``, ``how``."""
        return pd.DataFrame(list(self.terms), columns=["term", "value", "how"])


# ----------------------------------------------------------------------------- helpers

def _evaluate(job: CalibratedJob, rates: Rates) -> dict[str, float]:
    rows = stage_rows(job.model, job.parallel, job.stage_layers, job.selective_layers,
                      job.comm_layers)
    params = stage_params(job.model, job.parallel, job.stage_layers)
    out = step_times(job.model, job.hardware, rates, layout_columns(job.parallel), rows,
                     params=params, activation_model=job.activation_model, dtype=job.dtype,
                     static_scheme=job.static_scheme, tensor_dtype=job.tensor_dtype)
    return {k: float(v[0]) for k, v in out.items()}


def _solve_scale(job: CalibratedJob, rates: Rates, target: float,
                 parts: Sequence[str] | None = None) -> tuple[float, bool]:
    """Factor on every compute rate making the model's step (or ``parts``) hit ``target``.

    The step falls monotonically as the rates rise; bisection on the log of the factor.
    Returns the factor and whether the caps (efficiency 1) kept it from reaching the
    target.
    """
    def value(k: float) -> float:
        out = _evaluate(job, rates.scaled(k))
        return sum(out[p] for p in parts) if parts else out["step_s"]

    return _bisect_factor(value, 1e-3, 1.0 / min(rates.gemm_efficiency,
                                                  rates.memory_efficiency), target)


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


_COMM_PARTS = ("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm")

#: What calibrate reads from a loaded profile (the job and the operator table), kept per
#: profile object and job overrides, so that calibrating the same profile again (a
#: dashboard re-fitting after a field changed) does not read its tables again.
_READS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _profile_reads(source: Any, overrides: dict[str, Any]
                   ) -> tuple[Any, Any, pd.DataFrame | None]:
    """The job of ``source``, the profile whose device tasks the operator fit reads (the
    steps recorded in full, :func:`~perfkit.analysis.recorded.recorded_profile`) and that
    profile's operator table (None when the hardware is unknown)."""
    from ..analysis import operator_efficiency  # the plan layer reads the profile's tables
    from ..analysis.recorded import recorded_profile
    from ..job import infer_job

    key = tuple(sorted((k, v) for k, v in overrides.items()))
    try:
        cached = _READS.setdefault(source, {})
    except TypeError:  # not weak-referenceable: read every time
        cached = {}
    if key not in cached:
        inferred = infer_job(source, **overrides)
        tasks = recorded_profile(source)
        eff = operator_efficiency(tasks, inferred.hardware) \
            if inferred.hardware is not None else None
        cached[key] = (inferred, tasks, eff)
    return cached[key]


def _recorded_note(source: Any) -> str | None:
    """What the operator fit and the launch gaps were read from when some steps' device
    tasks were recorded only in part (:func:`~perfkit.analysis.recorded.recorded_steps_text`);
    None when every step's were."""
    from ..analysis.recorded import recorded_pairs, recorded_steps_text

    steps = source.steps
    if hasattr(steps, "compute"):  # a lazy (Dask) frame: one row per rank and step
        steps = steps.compute()
    which = recorded_steps_text(steps)
    if which is None:
        return None
    if not recorded_pairs(steps):
        return (f"no step's device tasks were recorded in full ({which}): a fragment of a "
                "step does not say how fast its operators run, so the compute rates come "
                "from the steps table")
    return ("operator rates and launch gaps fitted to the device tasks of the steps "
            f"recorded in full: {which} (a fragment of a step is not the step)")
_COMPUTE_PARTS = ("compute", "recompute", "optimizer")


# ----------------------------------------------------------------------------- sources

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
              f"{step_s:.4g} s")]
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
        notes.append("the measured step is faster than the model's compute allows at the "
                     "peak with perfkit's default links: the link efficiencies were scaled "
                     "too" + ("; even at full link efficiency the model stays slower: check "
                               "the model, the layout or the hardware" if link_capped else ""))
    predicted = _evaluate(job, fitted)["step_s"]
    return fitted, {"measured": step_s, "terms": terms,
                    "residual": predicted / step_s - 1.0 if capped else 0.0,
                    "predicted": predicted, "kinds": {"compute"}}


def _links_scaled(job: CalibratedJob, rates: Rates, factor: float) -> Rates:
    """Every group's link efficiency times ``factor``, capped at 1."""
    dpn = job.hardware.devices_per_node
    return rates.replace(link_efficiency={
        g: min(1.0, rates.link(g, _group_span(job, g) <= dpn) * factor) for g in GROUPS})


def _solve_link_scale(job: CalibratedJob, rates: Rates, target: float) -> tuple[float, bool]:
    """Factor on every link efficiency making the model's step hit ``target`` (bisection),
    and whether the cap (efficiency 1) kept it from reaching it."""
    dpn = job.hardware.devices_per_node
    lowest = min(rates.link(g, _group_span(job, g) <= dpn) for g in GROUPS)

    def value(k: float) -> float:
        return _evaluate(job, _links_scaled(job, rates, k))["step_s"]

    return _bisect_factor(value, 1.0, 1.0 / lowest, target)


def _bisect_factor(value: Callable[[float], float], lo: float, hi: float,
                   target: float) -> tuple[float, bool]:
    """The factor in [lo, hi] at which the falling ``value`` meets ``target`` (bisection on
    its log, to 1e-9), and whether ``hi`` (the caps) still leaves it above the target."""
    if value(hi) > target:
        return hi, True
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if value(mid) > target:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-9:
            break
    return math.sqrt(lo * hi), False


def _from_steps(steps: pd.DataFrame, job: CalibratedJob, rates: Rates, notes: list[str],
                skip_first_steps: int) -> tuple[Rates, dict[str, Any]]:
    m = _measured_from_steps(_steps_table(steps, skip_first_steps))
    if m["computing"] <= 0:
        raise InvalidArgumentError("source", "its computing time is zero")
    terms: list[tuple[str, float, str]] = []
    # compute rates from the busiest rank's computing time
    k, capped = _solve_scale(job, rates, m["computing"], _COMPUTE_PARTS)
    if capped:
        notes.append("measured compute is faster than the peak allows: check the model, the "
                     "layout or the hardware peak; rates capped at 1")
    fitted = rates.scaled(k)
    terms.append(("compute scale", k, "compute + recompute + optimizer = busiest rank's "
                  "computing_us"))
    out = _evaluate(job, fitted)
    # exposed communication: receive waits (the bubble) taken out
    bubble = m["bubble"] if math.isfinite(m["bubble"]) and m["bubble"] > 0 else out["bubble"]
    if not (math.isfinite(m["bubble"]) and m["bubble"] > 0) and out["bubble"] > 0:
        notes.append("no bubble_us in the steps: the model's bubble "
                     f"({out['bubble']:.4g} s) is taken out of the exposed communication")
    exposed = max(0.0, m["comm"] - bubble)
    model_comm = sum(out[p] for p in _COMM_PARTS)
    kinds = {"compute", "overhead"}
    if model_comm > 0 and exposed > 0:
        ratio = model_comm / exposed
        dpn = job.hardware.devices_per_node
        current = {g: fitted.link(g, _group_span(job, g) <= dpn) for g in GROUPS}
        eff = {g: min(1.0, v * ratio) for g, v in current.items()}
        if any(v * ratio > 1 for v in current.values()):
            notes.append("communication measured faster than nominal bandwidth; capped at 1")
        fitted = fitted.replace(link_efficiency=eff)
        terms.append(("link efficiency scale", ratio, "exposed communication = "
                      "comm_not_overlapped_us − bubble"))
        kinds |= {g for g in GROUPS if out[f"{g}_comm_raw_s"] > 0}
    elif exposed > 0:
        notes.append(f"the layout has no modelled communication; the measured "
                     f"{exposed * 1e3:.3g} ms goes to the overhead")
    overhead = m["free"] + (exposed if model_comm <= 0 else 0.0)
    fitted = fitted.replace(overhead_s=overhead, kernel_gap_s=0.0)
    terms.append(("overhead_s", overhead, "free_us (median over ranks)"))
    predicted = _evaluate(job, fitted)["step_s"]
    return fitted, {"measured": m["step"], "terms": terms,
                    "residual": predicted / m["step"] - 1.0, "predicted": predicted,
                    "kinds": kinds}


def _shape_dims(text: Any) -> list[tuple[int, ...]]:
    if not isinstance(text, str):
        return []
    return [tuple(int(x) for x in re.findall(r"\d+", part)) for part in text.split(";")]


def _fit_line(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float] | None:
    """Weighted least squares ``y = a·x + c`` with ``a > 0``, ``c >= 0``; None if degenerate."""
    if len(x) < 2 or x.max() < 1.5 * x.min():
        return None
    sw = w.sum()
    mx, my = (w * x).sum() / sw, (w * y).sum() / sw
    var = (w * (x - mx) ** 2).sum()
    if var <= 0:
        return None
    a = (w * (x - mx) * (y - my)).sum() / var
    c = my - a * mx
    if a <= 0:
        return None
    if c < 0:
        a, c = (w * x * y).sum() / (w * x * x).sum(), 0.0
    return a, c


def _fit_operators(eff: pd.DataFrame, job: CalibratedJob, rates: Rates,
                   terms: list[tuple[str, float, str]], notes: list[str]) -> Rates:
    """GEMM curve, attention, memory-bound and optimizer rates from operator rows."""
    hw = job.hardware
    peak, bw = hw.peak(job.dtype), hw.memory_bandwidth
    kinds = eff["kind"].astype("string").fillna("")
    mean_s = eff["mean_us"].astype(float) * 1e-6
    weight = eff["total_us"].astype(float)
    changes: dict[str, Any] = {}
    vec = eff[kinds.isin(_VECTOR_KINDS) & (eff["bytes"].astype(float) > 0)]
    if len(vec):
        fit = _fit_line(vec["bytes"].to_numpy(float), mean_s[vec.index].to_numpy(),
                        weight[vec.index].to_numpy())
        if fit is not None:
            a, c = fit
            changes["memory_efficiency"] = min(1.0, 1.0 / (a * bw))
            changes["memory_half_bytes"] = c / a
        else:
            total_b = (vec["bytes"] * vec["count"]).sum() + rates.memory_half_bytes \
                * vec["count"].sum()
            changes["memory_efficiency"] = min(1.0, total_b / bw / (
                (mean_s[vec.index] * vec["count"]).sum()))
        terms.append(("memory_efficiency", changes["memory_efficiency"],
                      f"{len(vec)} memory-bound operator shapes"))
    e_mem = changes.get("memory_efficiency", rates.memory_efficiency)
    gemm = eff[(kinds == "gemm") & (eff["flops"].astype(float) > 0)]
    if len(gemm):
        flops = gemm["flops"].to_numpy(float)
        memory = gemm["bytes"].to_numpy(float) / (e_mem * bw) if rates.gemm_memory == "sum" \
            else 0.0
        t = mean_s[gemm.index].to_numpy() - memory
        fit = _fit_line(flops, t, weight[gemm.index].to_numpy())
        if fit is not None:
            a, c = fit
            changes["gemm_efficiency"] = min(1.0, 1.0 / (a * peak))
            changes["gemm_half_flops"] = c / a
            how = f"size curve fitted to {len(gemm)} GEMM shapes"
        else:
            count = gemm["count"].to_numpy(float)
            work = ((flops + rates.gemm_half_flops) * count).sum()
            changes["gemm_efficiency"] = min(1.0, work / peak / (t * count).sum())
            how = (f"{counted(len(gemm), 'GEMM shape')} of similar size: e fitted, F½ kept at "
                   f"{rates.gemm_half_flops:.3g}")
        terms.append(("gemm_efficiency", changes["gemm_efficiency"], how))
        if "gemm_half_flops" in changes:
            terms.append(("gemm_half_flops", changes["gemm_half_flops"], how))
    e_gemm = changes.get("gemm_efficiency", rates.gemm_efficiency)
    half = changes.get("gemm_half_flops", rates.gemm_half_flops)
    att = eff[(kinds == "attention") & (eff["flops"].astype(float) > 0)]
    if len(att):
        count = att["count"].to_numpy(float)
        memory = att["bytes"].to_numpy(float) / (e_mem * bw) if rates.gemm_memory == "sum" \
            else 0.0
        spent = ((mean_s[att.index].to_numpy() - memory) * count).sum()
        ideal = ((att["flops"].to_numpy(float) + half) / (e_gemm * peak) * count).sum()
        changes["attention_efficiency"] = float(np.clip(ideal / spent, 0.05, 2.0))
        terms.append(("attention_efficiency", changes["attention_efficiency"],
                      f"{len(att)} attention operator shapes against the GEMM curve"))
    adam = eff[eff["name"].astype("string").str.contains("adam", case=False, na=False)]
    if len(adam):
        params = stage_params(job.model, job.parallel, job.stage_layers)
        updated = float(params["dense"][0] + params["experts"][0]) \
            / max(job.parallel.optimizer_shard, 1)
        seconds = float(adam["per_step_us"].sum()) * 1e-6
        per_param = (seconds * e_mem * bw - changes.get("memory_half_bytes",
                                                         rates.memory_half_bytes)) / updated
        if per_param > 0:
            changes["optimizer_bytes_per_param"] = per_param
            terms.append(("optimizer_bytes_per_param", per_param,
                          f"optimizer kernels: {seconds * 1e3:.3g} ms per step"))
    if not changes:
        notes.append("the profile has no operator rows with FLOPs or bytes: compute rates "
                     "kept at their defaults")
    return rates.replace(**changes)


def _group_kinds(meta: Any) -> dict[str, str]:
    out = {}
    for gid, info in (getattr(meta, "groups", None) or {}).items():
        name = str((info or {}).get("group_name", "")).lower()
        for g in GROUPS:
            if name == g or name.startswith(g + "_") or name.endswith("_" + g):
                out[str(gid)] = g
    return out


def _group_span(job: CalibratedJob, kind: str) -> int:
    """Consecutive ranks a group spans (tp, cp, dp, pp from the inside out)."""
    p = job.parallel
    return {"tp": p.tp, "cp": p.tp * p.cp, "dp": p.tp * p.cp * p.dp,
            "pp": 2 * p.tp * p.cp * p.dp, "ep": p.expert_tp_size * p.ep}[kind]


def _fit_links(source: Any, job: CalibratedJob, rates: Rates,
               terms: list[tuple[str, float, str]]) -> tuple[Rates, set[str]]:
    """Link efficiency per group: achieved bandwidth over the model's nominal one.

    Per operation, the bytes this rank sent and the transit time (the largest over the
    transports it used); per group, their sums; the nominal bandwidth is the one the
    model gives the group (intra-node while its ranks fit in a node, else inter-node).
    """
    kinds = _group_kinds(source.meta)
    if not kinds:
        return rates, set()
    try:
        ops = source.comm_ops
        bw = source.comm_bandwidth
    except (PerfkitError, OSError, ValueError):
        return rates, set()
    if ops is None or bw is None or ops.empty or bw.empty:
        return rates, set()
    ops = ops.assign(kind=ops["group"].astype(str).map(kinds)).dropna(subset=["kind"])
    pairs = ops[["rank", "name", "kind"]].drop_duplicates(["rank", "name"])
    sent = bw[(bw["size_bytes"] > 0) & (bw["transit_us"] > 0)]
    sent = sent.groupby(["rank", "name"], as_index=False)[["size_bytes", "transit_us"]].max()
    moved = sent.merge(pairs, on=["rank", "name"], how="inner")
    eff: dict[str, float] = {}
    changes: dict[str, Any] = {}
    reduce = ops[(ops["kind"] == "dp") & ops["name"].astype(str).str.contains(
        "reduce", case=False)]
    if len(reduce):
        per_step = reduce.groupby(["rank", "step"]).size().median() \
            if "step" in reduce.columns else reduce.groupby("rank").size().median()
        changes["dp_buckets"] = max(1, int(round(float(per_step))))
        terms.append(("dp_buckets", changes["dp_buckets"], "gradient reductions per step "
                      "in the data-parallel group"))
    dpn = job.hardware.devices_per_node
    for kind, part in moved.groupby("kind"):
        span = _group_span(job, str(kind))
        nominal = job.hardware.intra_node_bandwidth if span <= dpn \
            else job.hardware.inter_node_bandwidth
        achieved = part["size_bytes"].sum() / (part["transit_us"].sum() * 1e-6)
        eff[str(kind)] = min(1.0, float(achieved / nominal))
        terms.append((f"link_efficiency[{kind}]", eff[str(kind)],
                      f"{len(part)} transfers: {achieved / 1e9:.3g} GB/s of "
                      f"{nominal / 1e9:.3g} GB/s nominal"))
    return rates.replace(link_efficiency=eff, **changes), set(eff)


def _infer_recompute(eff: pd.DataFrame, job: CalibratedJob, rates: Rates,
                     notes: list[str]) -> Rates:
    """The recompute style a fully recomputed run shows in its MLP projection calls."""
    full = sum(job.parallel.full_recompute_layers_per_stage(job.model))
    share = full / job.model.num_layers
    if share >= 0.25:
        tp = job.parallel.tp
        h = job.model.hidden_size
        f = (job.model.moe_ffn_hidden_size if job.model.is_moe else job.model.ffn_hidden_size)
        f_t = f // tp
        out_n = in_n = 0.0
        for dims, count in zip(eff["input_shapes"].map(_shape_dims), eff["count"],
                               strict=True):
            if len(dims) >= 2 and len(dims[0]) == 2 and len(dims[1]) == 2:
                k, n = dims[1]
                if (k, n) == (f_t, h):
                    out_n += count
                elif (k, n) == (h, f_t):
                    in_n += count
        g = 3 if job.model.mlp == "gated" else 2
        if in_n > 0 and out_n > 0:
            ratio = out_n / in_n
            # out = g + share·a, in = g + (g−1)·share per layer and micro-batch
            a = (ratio * (g + (g - 1) * share) - g) / share
            style = "all" if a > 0.5 else "needed"
            if style != rates.recompute_style:
                rates = rates.replace(recompute_style=style)
            what = "the whole forward" if style == "all" else "only what the backward needs"
            notes.append(f"full recompute reruns {what} (MLP output/input projection calls "
                         f"{ratio:.2f})")
    return rates


def _kernels_per_rank_step(source: Any) -> float:
    """Compute kernels a rank launches per step (median over ranks and steps), 0 if unknown.

    ``source`` is the profile of the steps recorded in full
    (:func:`~perfkit.analysis.recorded.recorded_profile`): a fragment of a step would count
    a fraction of its kernels."""
    try:
        k = source.kernels
    except (PerfkitError, OSError, ValueError):
        return 0.0
    if k is None or len(k) == 0 or "rank" not in k.columns:
        return 0.0
    if "category" in k.columns:
        k = k[k["category"] != "communication"]
    keys = ["rank", "step"] if "step" in k.columns else ["rank"]
    sizes = k.groupby(keys).size()
    if hasattr(sizes, "compute"):  # a lazy (Dask) cluster: one count per rank and step
        sizes = sizes.compute()
    return float(sizes.median()) if len(sizes) else 0.0


def _from_profile(source: Any, model: ModelSpec | None, parallel: ParallelConfig | None,
                  hardware: Hardware | str | None, am: ActivationModel | None, rates: Rates,
                  static_scheme: str | None, dtype: str | None, notes: list[str],
                  skip_first_steps: int, job_kw: dict[str, Any]
                  ) -> tuple[CalibratedJob, Rates, dict[str, Any]]:
    overrides = {k: v for k, v in (("model", model), ("parallel", parallel),
                                   ("hardware", hardware)) if v is not None}
    inferred, tasks, eff = _profile_reads(source, overrides)
    # what the user passed wins as given (the profile may not pin the whole model down)
    job_model = model if model is not None else inferred.model
    job_parallel = parallel if parallel is not None else inferred.parallel
    job_hw = Hardware.preset(hardware) if isinstance(hardware, str) else (
        hardware if hardware is not None else inferred.hardware)
    for name, value in (("model", job_model), ("hardware", job_hw)):
        if value is None:
            raise InvalidArgumentError(name, "the profile does not show it; pass it to "
                                       "calibrate()", None)
    # the job's own convention (its framework's, or the one a simulation was made with):
    # the Planner's memory and the job's figures count static memory alike
    scheme = static_scheme or inferred.static_scheme
    # the run's type (the one asked for, else the profile's matrix dtype): its peak where
    # the device has one, and its size in static memory and the gradients in any case
    peak, tensor, said = run_types(dtype or inferred.dtype, job_hw)
    if said:
        notes.append(("the profile's matrix dtype " if dtype is None else "") + said)
    job = CalibratedJob(job_model, job_parallel, job_hw, job_parallel.global_batch_size,
                        job_model.seq_length, am or inferred.activation_model, scheme, peak,
                        tensor_dtype=tensor, **job_kw)
    if am is None:
        notes.append(f"activations as the profile keeps them: {inferred.activation_detail}")
    if eff is None or (hardware is not None and inferred.hardware != job_hw):
        from ..analysis import operator_efficiency
        eff = operator_efficiency(tasks, job_hw)
    recorded = _recorded_note(source)
    if recorded is not None:
        notes.append(recorded)
    terms: list[tuple[str, float, str]] = []
    kinds_measured: set[str] = set()
    if eff is not None and len(eff):
        rates = _infer_recompute(eff, job, rates, notes)
        rates = _fit_operators(eff, job, rates, terms, notes)
        kinds_measured.add("compute")
    from ..analysis.reduced_dtype import reductions_are_gradients

    if rates.gradient_bytes is None and reductions_are_gradients(job.parallel):
        # what the profile's own reductions move wins over the scheme's guess, where they
        # are all the gradients' (the job's one reading, which its Memory tab and figures
        # count in static memory too: perfkit.Job.gradient_bytes)
        reduced = inferred.reduced_gradient
        if reduced is not None:
            rates = rates.replace(gradient_bytes=float(reduced.element_bytes))
            terms.append(("gradient_bytes", float(reduced.element_bytes), reduced.evidence))
    rates, groups = _fit_links(source, job, rates, terms)
    kinds_measured |= groups
    steps = _steps_table(source.steps, skip_first_steps)
    m = _measured_from_steps(steps)
    # the model's step is the device's (compute, communication, bubble, idle gaps): it is
    # calibrated on the device span, without the wait before the step (data, launch) that
    # the job's wall step time includes (the advisor reports that wait on its own)
    device_step = _device_step_s(source) if not skip_first_steps else math.nan
    measured = device_step if device_step > 0 else m["step"]
    kernels = _kernels_per_rank_step(tasks)
    if kernels > 0 and m["free"] > 0:
        gap = m["free"] / kernels
        rates = rates.replace(kernel_gap_s=gap, overhead_s=0.0)
        terms.append(("kernel_gap_s", gap, f"free_us over {kernels:.0f} kernels per rank "
                      "and step"))
        kinds_measured.add("overhead")
    else:
        rates = rates.replace(overhead_s=m["free"])
        terms.append(("overhead_s", m["free"], "free_us (median over ranks)"))
        kinds_measured.add("overhead")
    if "compute" not in kinds_measured:
        rates, info = _from_steps(steps, job, rates, notes, 0)
        return job, rates, info
    predicted = _evaluate(job, rates)["step_s"]
    return job, rates, {"measured": measured, "terms": terms, "predicted": predicted,
                        "residual": predicted / measured - 1.0, "kinds": kinds_measured}


def _device_step_s(source: Any) -> float:
    """The measured device step of a profile: median over steps of the slowest rank's
    device span (:func:`perfkit.analysis.measured_step_s` without the wait before it);
    NaN when the profile has none."""
    from ..analysis.steps import measured_step_s, step_breakdown

    try:
        steps = step_breakdown(source)
    except PerfkitError:
        return math.nan
    return measured_step_s(steps, preparing=False) if not steps.empty else math.nan


#: A fitted model further than this share off the measured step gets a note.
RESIDUAL_NOTE_SHARE = 0.05


def residual_note(residual: float) -> str:
    """The note a calibration carries when its fitted model, before closing, is more than
    :data:`RESIDUAL_NOTE_SHARE` off the measured step (``residual`` =
    :attr:`Calibration.residual`), or ``""`` when it is closer: a page that says the
    residual itself can leave this note out instead of saying it twice."""
    if not abs(residual) > RESIDUAL_NOTE_SHARE:
        return ""
    return (f"the fitted model is {residual:+.1%} off the measured step before closing: the "
            "run does something the model does not (see the parts)")


# ----------------------------------------------------------------------------- entry point

def calibrate(source: Any, model: ModelSpec | None = None,
              parallel: ParallelConfig | None = None, hardware: Hardware | str | None = None,
              *, activation_model: ActivationModel | None = None, rates: Rates | None = None,
              static_scheme: str | None = None, dtype: str | None = None,
              skip_first_steps: int = 0, close: bool | None = None,
              stage_layers: Sequence[int] | None = None,
              selective_layers: Sequence[int] | None = None,
              comm_layers: Sequence[int] | None = None) -> Calibration:
    """Fit the step model's rates to a measured run (see the module docstring).

    Parameters
    ----------
    source : Profile, Cluster, DataFrame or float
        A loaded profile (the job is inferred; ``model``/``parallel``/``hardware`` win over
        what it shows), its canonical ``steps`` table, or a measured step time in seconds.
    model, parallel, hardware
        What ran. Required with a steps table or a step time.
    activation_model : ActivationModel, optional
        Fused attention, dropout, norm storage, selective kind (the profile's, as the job
        reads it, when not given: :attr:`perfkit.Job.activation_model`;
        ``ActivationModel()`` otherwise).
    rates : Rates, optional
        Starting rates and framework behaviour (recompute style, gradient-reduction
        buckets and bytes); default ``Rates()``.
    static_scheme : str, optional
        Static-memory accounting for later predictions. Default: for a profile, the
        job's (:attr:`perfkit.Job.static_scheme`: ``"megatron"`` for PyTorch, on a GPU or
        an Ascend NPU, ``"mindspore"`` for MindSpore); ``"mindspore"`` for a steps table
        or a step time.
    dtype : str, optional
        The run's type (default, for a profile, its matrix dtype; else the hardware's
        default): its peak, or the hardware's default peak where it lists none for it
        (said in the notes); static memory and the gradients' default size keep the run's
        type either way (:attr:`CalibratedJob.run_dtype`).
    skip_first_steps : int
        Steps to drop from the start (warm-up, compilation).
    close : bool, optional
        Scale the compute rates at the end so the model reproduces the measured step.
        Default: True for a steps table or a step time, False for a profile (its
        residual then measures the model).
    stage_layers, selective_layers, comm_layers : sequence of int, optional
        Uneven layers per stage and per-stage selective / communication recompute of the
        calibrating run (see :func:`perfkit.plan.predict`).

    Returns
    -------
    Calibration
        Pass it to :func:`perfkit.plan.predict` or to :func:`perfkit.plan.search`
        (``calibration=``).
    """
    if isinstance(skip_first_steps, bool) or not isinstance(skip_first_steps, int) \
            or skip_first_steps < 0:
        raise InvalidArgumentError("skip_first_steps", "must be a whole number >= 0",
                                   skip_first_steps)
    rates = Rates() if rates is None else rates
    if not isinstance(rates, Rates):
        raise InvalidArgumentError("rates", "must be a perfkit.calc.Rates", type(rates).__name__)
    notes: list[str] = []
    job_kw = {"stage_layers": tuple(stage_layers) if stage_layers is not None else None,
              "selective_layers": tuple(selective_layers) if selective_layers is not None
              else None,
              "comm_layers": tuple(comm_layers) if comm_layers is not None else None}
    is_number = isinstance(source, (int, float, np.integer, np.floating)) \
        and not isinstance(source, bool)
    if is_number or isinstance(source, pd.DataFrame):
        model, parallel, hw = _check_job(model, parallel, hardware)
        peak, tensor, said = run_types(dtype, hw)
        if said:
            notes.append(said)
        job = CalibratedJob(model, parallel, hw, parallel.global_batch_size,
                            model.seq_length, activation_model or ActivationModel(),
                            static_scheme or "mindspore", peak, tensor_dtype=tensor,
                            **job_kw)
        if is_number:
            kind = "step time"
            rates, info = _from_step_time(float(source), job, rates, notes)
        else:
            kind = "steps"
            rates, info = _from_steps(source, job, rates, notes, skip_first_steps)
        close = True if close is None else close
    elif getattr(source, "meta", None) is not None and getattr(source, "steps", None) \
            is not None:
        kind = "profile"
        job, rates, info = _from_profile(source, model, parallel, hardware, activation_model,
                                         rates, static_scheme, dtype, notes,
                                         skip_first_steps, job_kw)
        close = False if close is None else close
    else:
        raise InvalidArgumentError("source", "must be a Profile/Cluster, a steps table "
                                   "(DataFrame) or a measured step time in seconds",
                                   type(source).__name__)
    measured = float(info["measured"])
    residual = float(info["residual"])
    terms = list(info["terms"])
    if close and abs(residual) > 1e-9:
        factor, capped = _solve_scale(job, rates, measured)
        rates = rates.scaled(factor)
        terms.append(("closing scale", factor, "every compute rate, so the model reproduces "
                      "the measured step"))
        if capped:
            notes.append("the fit could not be closed: the measured step is faster than the "
                         "model allows at the peak")
    final = _evaluate(job, rates)
    gap = residual_note(residual)
    if gap:
        notes.append(gap)
    return Calibration(rates, job, kind, measured, float(info["predicted"]), residual,
                       final["step_s"], bool(close), frozenset(info["kinds"]), tuple(terms),
                       {p: final[p] for p in PART_NAMES}, tuple(notes))
