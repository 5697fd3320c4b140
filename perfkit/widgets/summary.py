"""The numbers behind the metrics & memory panel, as plain DataFrames.

Pure functions, no widgets: every value comes from a :mod:`perfkit.calc` calculator (this
module only picks the conventions, converts units and labels the rows), so the tests can
check the panel's numbers without a browser. Where a figure meets a measurement (MFU and
HFU against the peak, the memory theory against the measured peak, the predicted step
against the measured one) it goes through :mod:`perfkit.guards`: a figure that cannot be
right carries a warning instead of showing as a plain number. For an inference step
(:meth:`perfkit.Job.training_step` False) MFU and HFU are the forward pass's, the
Overview's (:mod:`perfkit.job.inference_mfu`), and the training-step estimates say
they are not inference figures.
"""

from __future__ import annotations

import pandas as pd

from ..calc import (
    ActivationModel,
    activation_memory,
    bubble_fraction,
    hfu,
    mfu,
    samples_per_second,
    static_memory,
    tokens_per_second_per_device,
    tokens_per_second_per_p,
)
from ..calc.memory import STATIC_SCHEME_NAMES, zero_stage_scheme
from ..errors import InvalidArgumentError, check_positive
from ..format import bytes_text, counted, number_text, share_text, time_text
from ..guards import Guarded, check_memory, check_step, check_utilization
from ..job import Job
from ..job.unknowns import unknown_line
from ..plan import Prediction, predict
from ..specs import Hardware, ModelSpec, ParallelConfig
from .inference_mfu import inference_summary_rows
from .static_words import static_note

__all__ = ["SUMMARY_COLUMNS", "resolve_model", "resolve_hardware", "metrics_summary",
           "memory_breakdown", "job_summary", "job_figures"]

SUMMARY_COLUMNS = ("key", "metric", "value", "unit", "text", "note", "warning")
GIB = 2**30


def resolve_model(model: ModelSpec | str) -> ModelSpec:
    """A :class:`~perfkit.specs.ModelSpec`, or the preset of that name."""
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, str):
        return ModelSpec.preset(model)
    raise InvalidArgumentError("model", "must be a ModelSpec or a preset name",
                               type(model).__name__)


def resolve_hardware(hardware: Hardware | str) -> Hardware:
    """A :class:`~perfkit.specs.Hardware`, or the preset of that name."""
    if isinstance(hardware, Hardware):
        return hardware
    if isinstance(hardware, str):
        return Hardware.preset(hardware)
    raise InvalidArgumentError("hardware", "must be a Hardware or a preset name",
                               type(hardware).__name__)


def _row(key: str, metric: str, value: float, unit: str, text: str,
         note: str, guard: Guarded | None = None) -> dict[str, object]:
    if guard is not None and not guard.ok:
        text = f"{text} {'⚠'} not plausible"
    return {"key": key, "metric": metric, "value": float(value), "unit": unit, "text": text,
            "note": note, "warning": None if guard is None else guard.warning}


def metrics_summary(model: ModelSpec | str, hardware: Hardware | str,
                    parallel: ParallelConfig, step_time_s: float,
                    dtype: str | None = None, *, job: Job | None = None,
                    measured_peak_bytes: float | None = None,
                    activation_model: ActivationModel | None = None,
                    static_scheme: str | None = None,
                    gradient_bytes: float | None = None) -> pd.DataFrame:
    """Throughput, utilisation, memory and pipeline figures of one training configuration.

    Parameters
    ----------
    model : ModelSpec or str
        The model, or a preset name (``"llama2-13b"``).
    hardware : Hardware or str
        The device, or a preset name (``"ascend-910b"``).
    parallel : ParallelConfig
        The split; validated against ``model`` first (every broken rule is named).
    step_time_s : float
        Measured time of one training step, seconds.
    dtype : str, optional
        Which peak of ``hardware`` MFU and HFU divide by (default its ``default_dtype``).
    job : perfkit.Job, optional
        The job these figures are for: a warning then names where it disagrees with its
        profile, and its measured peak memory is compared with the theory.
    measured_peak_bytes : float, optional
        The measured peak memory (default: ``job.peak_memory_bytes``).
    activation_model : perfkit.calc.ActivationModel, optional
        How activations are counted (default: the job's, :attr:`perfkit.Job.
        activation_model`, which reads the attention kernel the profile ran; without a job
        the seed's table).
    static_scheme : str, optional
        The static-memory convention (:func:`~perfkit.calc.memory.static_memory`'s
        ``scheme``; the row's label names it). Default: the job's
        (:attr:`perfkit.Job.static_scheme`: ``"megatron"`` for PyTorch, on a GPU or an
        Ascend NPU, as the Planner's calibration counts it, ``"mindspore"`` otherwise, or
        the scheme a simulated profile was made with); without a job
        ``"mindspore"`` (the seed's).
    gradient_bytes : float, optional
        Bytes per gradient element of the data-parallel reduction, which the gradient
        buffer in static memory keeps too (:func:`perfkit.calc.precision.parameter_bytes`).
        Default: the job's (:attr:`perfkit.Job.gradient_bytes`, what its profile's
        reductions record), else the scheme's size.

    Returns
    -------
    pandas.DataFrame
        One row per figure, columns ``key`` (stable identifier), ``metric`` (label),
        ``value`` (float in ``unit``; utilisations and shares are fractions), ``unit``,
        ``text`` (the value formatted for display; a figure a guard flags ends in
        "⚠ not plausible"), ``note`` (formula or convention) and ``warning`` (None, or
        the guard's sentence naming the inputs that disagree: MFU / HFU above 100 %,
        theory more than 2× or under 0.5× the measured peak memory, a predicted step more
        than 3× off the measured one — see :mod:`perfkit.guards`).
        Keys: ``devices``, ``global_batch_size``, ``tokens_per_s_per_device``,
        ``tokens_per_s_per_p``, ``samples_per_s``, ``mfu``, ``hfu``, ``static_gib``,
        ``activation_gib``, ``memory_gib``, ``device_memory_gib``, ``bubble_fraction``,
        ``predicted_step_s``, ``predicted_mfu``.

    Raises
    ------
    perfkit.errors.PerfkitError
        When the configuration breaks a rule (e.g. ``tp`` does not divide the heads) or a
        value is out of range.

    Notes
    -----
    Conventions: tokens/s per device divides by all ``dp·tp·pp`` devices; the seed's
    tokens/s/p divides by the data-parallel size ``p = dp``; MFU and HFU count the full
    (non-causal) attention score matrix and the model's exact GEMMs; HFU adds recompute
    FLOPs with strict selective recompute (only the attention core re-runs, where the
    activation accounting's selective recompute drops it and the attention is not fused;
    recomputing the MLP activation adds no matrix FLOPs); static memory
    uses ``static_scheme`` (the MindSpore scheme is the seed's ``10N/t + 2N``, the
    Megatron-LM one ``6N + 12N/d``); activation memory is the peak pipeline
    stage (Korthikanti et al. 2022, Table 2, or tensor by tensor without the attention
    scores when the job ran a fused attention kernel); the bubble is relative to the ideal compute
    time; the predicted step is :func:`perfkit.plan.predict`'s step model at perfkit's default
    rates (uncalibrated) with the rows' activation accounting, static-memory scheme, type and
    gradients' size: the model :func:`perfkit.plan.search` ranks with by default and the
    Planner tab predicts with uncalibrated, so a layout reads the same predicted step there
    (:func:`perfkit.widgets.prediction.predict_layout`).
    """
    model = resolve_model(model)
    hardware = resolve_hardware(hardware)
    if not isinstance(parallel, ParallelConfig):
        raise InvalidArgumentError("parallel", "must be a ParallelConfig",
                                   type(parallel).__name__)
    parallel.validate(model)
    step = check_positive("step_time_s", step_time_s)
    devices = parallel.world_size
    gbs = parallel.global_batch_size
    seq = model.seq_length
    peak = hardware.peak(dtype)
    dtype_name = dtype or hardware.default_dtype

    tps_device = tokens_per_second_per_device(gbs, seq, step, devices)
    tps_p = tokens_per_second_per_p(gbs, seq, step, parallel.dp)
    sps = samples_per_second(gbs, step)
    mfu_value = mfu(model, tps_device, hardware, causal=False, dtype=dtype)
    if activation_model is None and job is not None:
        activation_model = job.activation_model
    am = ActivationModel() if activation_model is None else activation_model
    hfu_value = hfu(model, tps_device, hardware, recompute=parallel.recompute,
                    selective_mode="strict", causal=False,
                    full_recompute_layers=parallel.full_recompute_layers_per_stage(model),
                    dtype=dtype, selective_core=am.recomputes_attention_core)
    run_dtype = dtype or (job.dtype if job is not None else None)  # the run's tensors
    scheme = _scheme(static_scheme, job)
    grads, read = _gradients(gradient_bytes, job, scheme)
    # a ZeRO-2/3 layout shards its gradients (and weights) as predict counts them
    static = static_memory(model, parallel, scheme=zero_stage_scheme(scheme, parallel.zero_stage),
                           dtype=run_dtype, gradient_bytes=grads)
    act = activation_memory(model, parallel, activation_model=activation_model)
    bubble = bubble_fraction(parallel.pp, parallel.num_micro_batches, parallel.vpp)
    # the prediction counts the run's bytes as the rows above do (its peak where the device
    # has one for the run's type, else the default peak: plan.run_types)
    estimate = predict(None, model, parallel, hardware, dtype=run_dtype, activation_model=am,
                       static_scheme=scheme, overrides={"gradient_bytes": grads})

    static_gib = static.total_bytes / GIB
    act_gib = act.total_bytes / GIB
    if measured_peak_bytes is None and job is not None:
        measured_peak_bytes = job.peak_memory_bytes
    g_mfu = check_utilization(mfu_value, "MFU", job)
    g_hfu = check_utilization(hfu_value, "HFU", job)
    g_mem = check_memory(static.total_bytes + act.total_bytes, measured_peak_bytes, job,
                         what="static + activation memory")
    g_step = check_step(estimate.step_s, step, job, what="the uncalibrated step estimate")
    g_pmfu = check_utilization(estimate.mfu, "the uncalibrated MFU estimate", job)
    device_gib = hardware.memory_bytes / GIB
    rows = [
        _row("devices", "devices (dp × tp × pp)", devices, "devices",
             f"{devices} = {parallel.dp} × {parallel.tp} × {parallel.pp}",
             "every device of the job"),
        _row("global_batch_size", "global batch size", gbs, "sequences",
             f"{gbs:,} × {seq:,} tokens",
             f"dp × micro-batch size × micro-batches = {parallel.dp} × "
             f"{parallel.micro_batch_size} × {parallel.num_micro_batches}"),
        _row("tokens_per_s_per_device", "tokens/s per device", tps_device, "tokens/s",
             number_text(tps_device),
             f"B·s / (step time · {counted(devices, 'device')}): the figure MFU uses"),
        _row("tokens_per_s_per_p", "tokens/s/p (the MindSpore guide's, p = DP size)", tps_p,
             "tokens/s",
             number_text(tps_p),
             f"the MindSpore guide's tokens/s/p divides by p = dp = {parallel.dp}, not by all "
             f"{counted(devices, 'device')}" if parallel.dp != devices else
             f"the MindSpore guide's tokens/s/p divides by p = dp = {parallel.dp}: every device of "
             "this job, so it equals the figure per device"),
        _row("samples_per_s", "samples/s", sps, "sequences/s", number_text(sps),
             "global batch size / step time"),
        _row("mfu", "MFU", mfu_value, "fraction", share_text(mfu_value),
             f"model FLOPs (exact GEMMs, non-causal attention) / {dtype_name} peak "
             f"{peak / 1e12:,.0f} TFLOP/s", g_mfu),
        _row("hfu", "HFU", hfu_value, "fraction", share_text(hfu_value),
             "; ".join([f"adds recompute FLOPs ({parallel.recompute})"]
                       + ([am.selective_flops_note] if parallel.recompute == "selective"
                          else []) + ["non-causal"]), g_hfu),
        _row("static_gib", f"static memory ({STATIC_SCHEME_NAMES[scheme]})", static_gib,
             "GiB", bytes_text(static.total_bytes),
             static_note(scheme, parallel, run_dtype, grads, read)),
        _row("activation_gib", "activation memory", act_gib, "GiB",
             bytes_text(act.total_bytes),
             f"peak stage {act.stage}, {counted(act.in_flight, 'micro-batch')} in flight; "
             f"{act.formula}"),
        _row("memory_gib", "static + activation", static_gib + act_gib, "GiB",
             bytes_text(static.total_bytes + act.total_bytes),
             ("fits" if estimate.fits else
              f"does not fit in {bytes_text(estimate.memory_limit_bytes)} usable")
             + (f"; measured peak {bytes_text(measured_peak_bytes)}"
                if measured_peak_bytes else ""), g_mem),
        _row("device_memory_gib", "device memory", device_gib, "GiB",
             bytes_text(hardware.memory_bytes),
             hardware.name),
        _row("bubble_fraction", "pipeline bubble", bubble, "fraction", share_text(bubble),
             f"(pp − 1) / (vpp · m) = ({parallel.pp} − 1) / ({parallel.vpp} · "
             f"{parallel.num_micro_batches}), relative to ideal compute time",
             _placeholder_pp(bubble, job)),
        _row("predicted_step_s", "uncalibrated step estimate", estimate.step_s, "s",
             time_text(estimate.step_s * 1e6), _estimate_note(estimate, step), g_step),
        _row("predicted_mfu", "uncalibrated MFU estimate", estimate.mfu, "fraction",
             share_text(estimate.mfu), "MFU at the uncalibrated step estimate", g_pmfu),
    ]
    if job is not None and job.training_step() is False:
        rows = inference_summary_rows(rows, job, step, hardware, parallel, dtype_name)
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))



def _estimate_note(pred: Prediction, measured_s: float) -> str:
    """The uncalibrated prediction's parts, as :func:`perfkit.plan.predict` sums them:
    compute (with recompute and the optimizer) + bubble + exposed communication + idle."""
    parts = pred.parts
    compute = parts["compute"] + parts["recompute"] + parts["optimizer"]
    exposed = sum(parts[name] for name in ("tp_comm", "cp_comm", "ep_comm", "pp_comm",
                                           "dp_comm"))
    return ("perfkit.plan.predict at perfkit's default rates (published A100 figures), the "
            "model the strategy search ranks with, not calibrated on this run (the Planner "
            "and perfkit.plan.calibrate fit it): compute "
            f"{time_text(compute * 1e6, 's')} + bubble "
            f"{time_text(parts['bubble'] * 1e6, 's')} + exposed communication "
            f"{time_text(exposed * 1e6, 's')} + idle "
            f"{time_text(parts['overhead'] * 1e6, 's')}; the step time the figures above use: "
            f"{time_text(measured_s * 1e6)}")


def _placeholder_pp(bubble: float, job: Job | None) -> Guarded | None:
    """The schedule's bubble flagged where the job's pp is a placeholder (a bubble is
    measured but pp was not read, :attr:`perfkit.Job.pp_unread`); None otherwise."""
    if job is None or not job.pp_unread:
        return None
    return Guarded(bubble, f"pp = 1 is a placeholder, not the run's: {job.pp_unread}; set "
                           "pp (and dp) in the job")


def job_summary(job: Job) -> pd.DataFrame:
    """:func:`metrics_summary` of a :class:`~perfkit.job.Job`: its model, hardware, split,
    measured step and dtype, with its measured peak memory for the memory guard.

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        When the job lacks what the figures need (``job.missing()`` says what and why): a
        view without a job says so instead of computing with a default.
    """
    if not isinstance(job, Job):
        raise InvalidArgumentError("job", "must be a perfkit.Job (perfkit.infer_job)",
                                   type(job).__name__)
    gaps = job.missing()
    if gaps:
        raise InvalidArgumentError("job", "has no " + "; no ".join(gaps))
    dtype = job.dtype if job.dtype in job.hardware.peak_flops else None
    if job.dtype and dtype is None:
        raise InvalidArgumentError(
            "job", f"computes in {job.dtype}, and MFU and HFU divide by the device's "
                   f"{job.dtype} peak: {job.hardware.missing_peak(job.dtype)}", job.dtype)
    return metrics_summary(job.model, job.hardware, job.parallel, job.step_time_s,
                           dtype, job=job)


def job_figures(job: Job, keys: tuple[str, ...] | None = None) -> pd.DataFrame:
    """What a notebook or report shows of a job's figures: the table, or why there is none.

    Parameters
    ----------
    job : perfkit.Job
    keys : tuple of str, optional
        Rows of :func:`metrics_summary` to keep (default: all).

    Returns
    -------
    pandas.DataFrame
        With a complete job: ``metric``, ``value`` (the text shown, flagged by the guards
        when implausible), ``how it is counted`` and ``warning``. Without one: the same
        columns and one row, ``figures`` not computed, with what is missing in ``how it is
        counted`` (the job panel's "What perfkit could not read" says why), so the reader
        sees why instead of a figure computed with a default, and a table of these columns
        still draws.
    """
    try:
        summary = job_summary(job)
    except InvalidArgumentError as exc:
        # one line; the job panel's "What perfkit could not read" says why (said once)
        why = unknown_line(job, "figures", ("model", "hardware", "step_time_s"), "python") \
            if job.missing() else str(exc)
        return pd.DataFrame({"metric": ["figures"], "value": ["not computed"],
                             "how it is counted": [why], "warning": [""]})
    if keys is not None:
        summary = summary[summary["key"].isin(keys)]
    out = summary[["metric", "text", "note", "warning"]].rename(
        columns={"text": "value", "note": "how it is counted"})
    out["warning"] = out["warning"].fillna("")  # no warning: blank, never NaN
    return out.reset_index(drop=True)


def memory_breakdown(model: ModelSpec | str | Job, hardware: Hardware | str | None = None,
                     parallel: ParallelConfig | None = None,
                     activation_model: ActivationModel | None = None,
                     dtype: str | None = None,
                     static_scheme: str | None = None,
                     gradient_bytes: float | None = None) -> pd.DataFrame:
    """Memory of the most loaded device by component, for :func:`perfkit.charts.memory_chart`.

    Parameters
    ----------
    model : ModelSpec, str or perfkit.Job
        A job gives its model, hardware and split (the other arguments then default to
        its own); a job without a model or hardware raises, naming what is missing.
    hardware : Hardware or str
    parallel : ParallelConfig
    activation_model : perfkit.calc.ActivationModel, optional
        How activations are counted (default: a job's own, else the seed's table).
    dtype : str, optional
        The run's type (default: a job's own): ``"fp32"`` or ``"tf32"`` keeps fp32 weights
        and gradients (:func:`~perfkit.calc.memory.static_memory`'s ``dtype``).
    static_scheme : str, optional
        The static-memory convention, as for :func:`metrics_summary` (default: a job's
        framework's, :attr:`perfkit.Job.static_scheme`; else ``"mindspore"``).
    gradient_bytes : float, optional
        The gradients' element size, as for :func:`metrics_summary` (default: a job's
        :attr:`perfkit.Job.gradient_bytes`, else the scheme's).

    Returns
    -------
    pandas.DataFrame
        Rows ``weights``, ``gradients``, ``optimizer state`` (``static_scheme``,
        :func:`~perfkit.calc.memory.static_memory`) and ``activations`` (peak stage,
        :func:`~perfkit.calc.memory.activation_memory`); columns ``component``, ``bytes``,
        ``GiB`` and ``device_GiB`` (the device capacity); ``attrs["static_scheme"]``
        names the convention and ``attrs["static_note"]`` what it counts per parameter
        (:func:`perfkit.widgets.static_words.static_note`, as the job's figures say it).
    """
    job: Job | None = None
    if isinstance(model, Job):
        job = model
        if job.model is None or job.hardware is None:
            raise InvalidArgumentError("job", "has no " + "; no ".join(
                m for m in job.missing() if not m.startswith("the step")))
        model = job.model
        hardware = job.hardware if hardware is None else hardware
        parallel = job.parallel if parallel is None else parallel
        activation_model = job.activation_model if activation_model is None \
            else activation_model
        dtype = job.dtype if dtype is None else dtype
    model = resolve_model(model)
    hardware = resolve_hardware(hardware)
    if not isinstance(parallel, ParallelConfig):
        raise InvalidArgumentError("parallel", "must be a ParallelConfig",
                                   type(parallel).__name__)
    parallel.validate(model)
    scheme = _scheme(static_scheme, job)
    grads, read = _gradients(gradient_bytes, job, scheme)
    static = static_memory(model, parallel, scheme=zero_stage_scheme(scheme, parallel.zero_stage),
                           dtype=dtype, gradient_bytes=grads)
    act = activation_memory(model, parallel, activation_model=activation_model)
    parts = {"weights": static.weights_bytes, "gradients": static.gradients_bytes,
             "optimizer state": static.optimizer_bytes, "activations": act.total_bytes}
    frame = pd.DataFrame({"component": list(parts), "bytes": [float(v) for v in parts.values()]})
    frame["GiB"] = frame["bytes"] / GIB
    frame["device_GiB"] = hardware.memory_bytes / GIB
    frame.attrs["static_scheme"] = scheme
    frame.attrs["static_note"] = static_note(scheme, parallel, dtype, grads, read)
    return frame


def _scheme(static_scheme: str | None, job: Job | None) -> str:
    """The static-memory convention: the one given, else the job's framework's, else the
    seed's (MindSpore)."""
    if static_scheme is not None:
        return static_scheme
    return job.static_scheme if job is not None else "mindspore"


def _gradients(given: float | None, job: Job | None, scheme: str) -> tuple[float | None, str]:
    """The gradients' element size for static memory and the reduction, and where it was
    read: the one given, else the job's profile's reductions
    (:attr:`perfkit.Job.gradient_bytes`), else None (the scheme's size); None under
    DeepSpeed's estimator, which counts its own bytes."""
    if scheme == "deepspeed":
        return None, ""
    if given is not None:
        return float(given), ""
    if job is not None and job.gradient_bytes is not None:
        return job.gradient_bytes, "the profile's reductions"
    return None, ""
