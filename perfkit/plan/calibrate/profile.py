"""Calibrating on a loaded profile: what is read from it (cached per profile), the operator,
gradient-size and link fits, the idle time and the measured device step."""

from __future__ import annotations

import math
import weakref
from typing import Any

import pandas as pd

from ..._text_dtype import TEXT
from ...calc import ActivationModel
from ...calc.elementwise import kernels_from_activations
from ...calc.layout_rows import run_types
from ...calc.rates import Rates
from ...errors import InvalidArgumentError, PerfkitError
from ...specs import Hardware, ModelSpec, ParallelConfig
from .fallback import _from_steps, _measured_from_steps, _steps_table
from .gradients import read_gradient_bytes
from .links import _fit_links
from .operators import _fit_operators, _infer_recompute
from .passes import _forward_share
from .result import CalibratedJob
from .solve import _evaluate

__all__: list[str] = []  # private parts of perfkit.plan.calibrate


#: What calibrate reads from a loaded profile (the job and the operator table), kept per
#: profile object and job overrides, so that calibrating the same profile again (a
#: dashboard re-fitting after a field changed) does not read its tables again.
_READS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


#: How a calibration's note on the attention kernel read from the profile begins (the
#: Planner's assumptions table quotes what follows its first ": ").
ATTENTION_READ = "attention priced as"
#: The note of a calibration whose element-wise count was read from the profile.
ELEMENTWISE_READ = "element-wise kernels counted as"


def _profile_reads(source: Any, overrides: dict[str, Any]
                   ) -> tuple[Any, Any, pd.DataFrame | None]:
    """The job of ``source``, the profile whose device tasks the operator fit reads (the
    steps recorded in full, :func:`~perfkit.analysis.recorded.recorded_profile`) and that
    profile's operator table (None when the hardware is unknown)."""
    from ...analysis import operator_efficiency  # the plan layer reads the profile's tables
    from ...analysis.recorded import recorded_profile
    from ...job import infer_job

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
    from ...analysis.recorded import recorded_pairs, recorded_steps_text

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
                  skip_first_steps: int, job_kw: dict[str, Any],
                  read_elementwise: bool = False
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
    rates = rates.resolved(job_hw.name, job.dtype)
    if am is None:
        notes.append(f"activations as the profile keeps them: {inferred.activation_detail}")
    if read_elementwise:  # no rates given: count the element-wise work as the profile ran it
        kind, why = kernels_from_activations(job.activation_model)
        rates = rates.replace(elementwise_kernels=kind)
        notes.append(f"{ELEMENTWISE_READ} {kind!r}: {why}")
    read_kernel = inferred.attention_implementation
    if read_kernel is not None and rates.attention_implementation == "auto":
        # the kernel that ran, not the hardware's guess: its curve is what the operator
        # fit measures attention against, and what later predictions keep
        rates = rates.replace(attention_implementation=read_kernel)
        notes.append(f"{ATTENTION_READ} {read_kernel!r}, the kernel the profile ran: "
                     f"{inferred.attention_detail}")
    if eff is None or (hardware is not None and inferred.hardware != job_hw):
        from ...analysis import operator_efficiency
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
    rates = read_gradient_bytes(inferred, job, rates, terms)
    rates, groups = _fit_links(source, job, rates, terms, notes)
    kinds_measured |= groups
    steps = _steps_table(source.steps, skip_first_steps)
    m = _measured_from_steps(steps)
    # the model's step is the device's (compute, communication, bubble, idle gaps): it is
    # calibrated on the device span, without the wait before the step (data, launch) that
    # the job's wall step time includes (the advisor reports that wait on its own)
    device_step = _device_step_s(source) if not skip_first_steps else math.nan
    measured = device_step if device_step > 0 else m["step"]
    kernels = _kernels_per_rank_step(tasks)
    modelled = _evaluate(job, rates)["kernels"]
    least = _least_free_s(steps)
    if kernels > 0 and least > 0 and modelled > 0:
        # the idle time of each rank's least idle step: the profiler's own host stalls
        # (flushing its buffers) add idle time to some steps and never take any away (the
        # H100 layout set: 3.8 and 25.9 ms in two steps of one run, at the same 80.3 ms of
        # computing; about 3 ms without the profiler); per kernel *of the model*, so that
        # the model's idle part reproduces it although a run of unfused kernels launches
        # more than the model counts (there 1,398 kernels per step, the model's 304)
        gap = least / modelled
        rates = rates.replace(kernel_gap_s=gap, overhead_s=0.0)
        terms.append(("kernel_gap_s", gap, f"the least idle step's free (idle) time (median "
                      f"over ranks) over the model's {modelled:.0f} kernels per step (the "
                      f"profile launches {kernels:.0f} per rank and step)"))
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
                        "residual": predicted / measured - 1.0, "kinds": kinds_measured,
                        "steps_measured": m, "matrix_share": _matrix_share(eff),
                        "forward_share": _forward_share(tasks)}


#: Kernel classes (:func:`perfkit.analysis.compare.kernel_class`) that run on the matrix
#: units: the model's GEMMs and fused attention.
_MATRIX_CLASSES = ("matmul", "attention")


def _matrix_share(eff: pd.DataFrame | None) -> float:
    """The matrix kernels' share of the profile's kernel time, the optimizer's left out.

    Over the operator rows of the steps recorded in full (``per_step_us``): rows of kind
    ``gemm`` or ``attention``, and, among the rows no cost model priced (no kind), those
    whose kernel the name classes as a matrix product or attention
    (:func:`perfkit.analysis.compare.kernel_class`: cuDNN's fused attention kernels) —
    a priced row's kind wins over its name, which may carry a scope (an Ascend
    ``aclnnRmsNormGrad_attention_norm_RmsNormGrad`` is a norm) — against every row but
    the optimizer's (``adam`` in the name, the rows :func:`~.operators._fit_operators`
    times the optimizer by) and communication. NaN when there is no such time, or no
    matrix or no other kernel (the closing then keeps one factor)."""
    from ...analysis.compare import kernel_class

    if eff is None or not len(eff) or "per_step_us" not in eff.columns:
        return math.nan
    names = eff["name"].astype(TEXT).fillna("")
    classes = kernel_class(names)
    kinds = eff["kind"].astype(TEXT).fillna("") if "kind" in eff.columns \
        else pd.Series("", index=eff.index, dtype=TEXT)
    time = eff["per_step_us"].astype(float).fillna(0.0)
    optimizer = names.str.contains("adam", case=False)
    kept = ~optimizer & (classes != "communication")
    matrix = kept & (kinds.isin(("gemm", "attention"))
                     | ((kinds == "") & classes.isin(_MATRIX_CLASSES)))
    total, on_matrix = float(time[kept].sum()), float(time[matrix].sum())
    if not total > 0 or not 0 < on_matrix < total:
        return math.nan
    return on_matrix / total


def _least_free_s(steps: pd.DataFrame) -> float:
    """Seconds of idle time in each rank's least idle step (``free_us``), median over the
    ranks; 0 when the steps table has none."""
    if steps.empty or "free_us" not in steps.columns:
        return 0.0
    least = steps.groupby("rank")["free_us"].min().dropna()
    return float(least.median()) / 1e6 if len(least) else 0.0


def _device_step_s(source: Any) -> float:
    """The measured device step of a profile: median over steps of the slowest rank's
    device span (:func:`perfkit.analysis.measured_step_s` without the wait before it);
    NaN when the profile has none."""
    from ...analysis.steps import measured_step_s, step_breakdown

    try:
        steps = step_breakdown(source)
    except PerfkitError:
        return math.nan
    return measured_step_s(steps, preparing=False) if not steps.empty else math.nan
