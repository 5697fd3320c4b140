"""The metrics & memory calculator panel (ipywidgets).

Pick a model and a device, describe the split and the measured step time, and read back
throughput (per device and the seed's per-DP figure), MFU and HFU, static and activation
memory, the pipeline bubble and the uncalibrated predicted step time (the planner's step
model at perfkit's default rates), with a memory chart.
Given a :class:`~perfkit.job.Job` (``metrics_panel(job=...)``) it starts from the job a
profile recorded — its model, device, split and measured step — and says so; without one
it is a what-if calculator on the presets and says that. The numbers come from
:func:`perfkit.widgets.summary.metrics_summary` (which calls the :mod:`perfkit.calc`
calculators and flags what cannot be right); this module only wires controls to it.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as W
import pandas as pd

from ..charts import chart_to_svg, memory_chart
from ..errors import PerfkitError, check_choice
from ..job import Job
from ..specs import Hardware, ModelSpec, ParallelConfig
from .inference_memory import inference_memory_breakdown
from .summary import memory_breakdown, metrics_summary, resolve_hardware
from .what_if import FALLBACK_STEP_S, StartingStep, starting_step

__all__ = ["MetricsPanel", "metrics_panel", "stand_in_sentence", "starting_dtype",
           "summary_html"]

RECOMPUTE_CHOICES = ("none", "selective", "full")
_TABLE_STYLE = (
    "<style>"
    ".pk-metrics table{border-collapse:collapse;font-size:13px;line-height:1.35}"
    ".pk-metrics td,.pk-metrics th{padding:3px 10px;border-bottom:1px solid #ddd;"
    "text-align:left;vertical-align:top}"
    ".pk-metrics td.pk-value{text-align:right;font-weight:600;white-space:nowrap}"
    ".pk-metrics td.pk-note{color:#555;font-size:12px}"
    ".pk-error{color:#a94442;background:#f2dede;border:1px solid #ebccd1;padding:8px;"
    "border-radius:4px}"
    "</style>"
)


def summary_html(summary: pd.DataFrame) -> str:
    """An HTML table of a :func:`~perfkit.widgets.summary.metrics_summary` frame.

    Parameters
    ----------
    summary : pandas.DataFrame
        With columns ``metric``, ``text`` and ``note``.

    Returns
    -------
    str
        A ``<table>`` (metric, value, how it is counted), text escaped; a figure a guard
        flags shows its warning in bold above the note. A warning gives its reason after
        its first colon (``"MFU 74.2% counts a training step's FLOPs: the profile is not
        a training step: ..."``); a reason an earlier row gave is not said again (``"HFU
        74.2% counts a training step's FLOPs, for the reason above"``).
    """
    said: set[str] = set()

    def note(r: Any) -> str:
        warning = getattr(r, "warning", None)
        if isinstance(warning, str) and warning:
            head, colon, reason = warning.partition(": ")
            if colon and reason in said:
                warning = f"{head}, for the reason above"
            said.add(reason)
            return f"<b>{html.escape(warning)}</b><br>{html.escape(str(r.note))}"
        return html.escape(str(r.note))

    rows = "".join(
        f"<tr><td>{html.escape(str(r.metric))}</td><td class='pk-value'>"
        f"{html.escape(str(r.text))}</td><td class='pk-note'>{note(r)}</td>"
        "</tr>"
        for r in summary.itertuples(index=False))
    return ("<div class='pk-metrics'><table><thead><tr><th>metric</th><th>value</th>"
            f"<th>how it is counted</th></tr></thead><tbody>{rows}</tbody></table></div>")


def _error_html(message: str) -> str:
    return (f"<div class='pk-error'><b>This configuration is not valid:</b> "
            f"{html.escape(message)}<br>Change a value above; the panel updates.</div>")


class MetricsPanel(W.VBox):
    """The panel returned by :func:`metrics_panel`.

    Attributes
    ----------
    controls : dict of str to ipywidgets.Widget
        ``model``, ``hardware``, ``dp``, ``tp``, ``pp``, ``vpp``, ``micro_batch_size``,
        ``num_micro_batches``, ``recompute``, ``optimizer_parallel``,
        ``sequence_parallel``, ``step_time_s``, ``dtype`` (which of the device's peaks MFU
        and HFU divide by; its options follow the ``hardware``). Setting a ``value``
        recomputes.
    summary : pandas.DataFrame or None
        The last :func:`~perfkit.widgets.summary.metrics_summary` (None while the
        configuration is invalid).
    error : str or None
        The message of the last :class:`~perfkit.errors.PerfkitError`, if any.
    header, table, chart, message : ipywidgets.HTML
        The profile line, the results table, the memory chart (inline SVG) and the error
        box.
    job : perfkit.Job or None
        The job the panel started from (its model is the ``"job"`` choice of ``model``).
    """

    def __init__(self, model: str, hardware: str, profile: str | None = None,
                 job: Job | None = None, step_note: str = "", **values: Any) -> None:
        self.job = job
        self._models: dict[str, ModelSpec | str] = {name: name for name in ModelSpec.presets()}
        model_options: list[Any] = [(name, name) for name in ModelSpec.presets()]
        if job is not None and job.model is not None:
            self._models["job"] = job.model
            label = f"the job's model ({job.model.name or 'not a preset'}, " \
                    f"{job.model.num_layers} layers)"
            model_options = [(label, "job"), *model_options]
        style = {"description_width": "150px"}
        layout = W.Layout(width="280px")

        def int_box(name: str, label: str) -> W.BoundedIntText:
            return W.BoundedIntText(value=values[name], min=1, max=65536, description=label,
                                    style=style, layout=layout)

        self.controls: dict[str, W.Widget] = {
            "model": W.Dropdown(options=model_options, value=model, description="model",
                                style=style, layout=layout),
            "hardware": W.Dropdown(options=Hardware.presets(), value=hardware,
                                   description="hardware", style=style, layout=layout),
            "dtype": W.Dropdown(options=_peak_types(hardware), value=values["dtype"],
                                description="precision (MFU peak)", style=style,
                                layout=layout),
            # Seven figures: a measured step's full float (1.215988953671) reads as noise.
            "step_time_s": W.BoundedFloatText(value=float(f"{values['step_time_s']:.7g}"),
                                              min=1e-3, max=1e5,
                                              step=0.1, description="step time (s)",
                                              style=style, layout=layout),
            "dp": int_box("dp", "data parallel (dp)"),
            "tp": int_box("tp", "tensor parallel (tp)"),
            "pp": int_box("pp", "pipeline parallel (pp)"),
            "vpp": int_box("vpp", "virtual stages (vpp)"),
            "micro_batch_size": int_box("micro_batch_size", "micro-batch size"),
            "num_micro_batches": int_box("num_micro_batches", "micro-batches (m)"),
            "recompute": W.Dropdown(options=RECOMPUTE_CHOICES, value=values["recompute"],
                                    description="recompute", style=style, layout=layout),
            "optimizer_parallel": W.Checkbox(value=values["optimizer_parallel"],
                                             description="optimizer parallel (shard over dp)",
                                             indent=False),
            "sequence_parallel": W.Checkbox(value=values["sequence_parallel"],
                                            description="sequence parallel", indent=False),
        }
        self.summary: pd.DataFrame | None = None
        self.error: str | None = None
        self.table = W.HTML()
        self.chart = W.HTML()
        self.message = W.HTML()
        c = self.controls
        columns = W.HBox([
            W.VBox([c["model"], c["hardware"], c["dtype"], c["step_time_s"],
                    c["recompute"]]),
            W.VBox([c["dp"], c["tp"], c["pp"], c["vpp"]]),
            W.VBox([c["micro_batch_size"], c["num_micro_batches"], c["optimizer_parallel"],
                    c["sequence_parallel"]]),
        ])
        step_note = f" {html.escape(step_note)}" if step_note else ""
        if job is not None:
            about = (f"<div><b>The job of</b> <code>{html.escape(job.path)}</code>: "
                     f"{html.escape(job.describe())} &mdash; the controls start from it; a "
                     "change here is a what-if."
                     f"{html.escape(stand_in_sentence(job, model, hardware))}{step_note}"
                     "</div>")
        elif profile:
            about = (f"<div><b>Profile:</b> <code>{html.escape(profile)}</code> &mdash; the "
                     "figures below come from the configuration and the step time set here, "
                     f"not from the profile.{step_note}</div>")
        else:
            about = ("<div><b>What-if calculator:</b> the figures come from the model, split "
                     f"and step time set here, not from a measurement.{step_note}</div>")
        self.header = W.HTML(_TABLE_STYLE + about)
        super().__init__([self.header, columns, self.message, self.table, self.chart])
        self.add_class("pk-metrics-panel")
        c["hardware"].observe(self._on_hardware, names="value")  # before the refresh
        for widget in self.controls.values():
            widget.observe(self._on_change, names="value")
        self.refresh()

    # ---- state -----------------------------------------------------------------------
    def parallel_config(self) -> ParallelConfig:
        """The :class:`~perfkit.specs.ParallelConfig` the controls describe (may raise)."""
        c = self.controls
        dp = c["dp"].value
        return ParallelConfig(
            dp=dp, tp=c["tp"].value, pp=c["pp"].value, vpp=c["vpp"].value,
            micro_batch_size=c["micro_batch_size"].value,
            num_micro_batches=c["num_micro_batches"].value,
            recompute=c["recompute"].value,
            optimizer_shard=dp if c["optimizer_parallel"].value else 1,
            sequence_parallel=bool(c["sequence_parallel"].value))

    def refresh(self) -> None:
        """Recompute every figure from the controls; show the error instead if invalid."""
        c = self.controls
        model = self._models[c["model"].value]
        on_job = self.job is not None and c["model"].value == "job"
        try:
            parallel = self.parallel_config()
            summary = metrics_summary(model, c["hardware"].value, parallel,
                                      c["step_time_s"].value, c["dtype"].value,
                                      job=self.job if on_job else None)
            # the job's own forward-only step is held against its inference theory (the
            # table's memory row says so): the chart draws the same theory
            forward_only = on_job and self.job.training_step() is False
            memory = inference_memory_breakdown(self.job, parallel) if forward_only else \
                memory_breakdown(model, c["hardware"].value, parallel)
            if forward_only:  # the device in the controls, as the training chart's
                memory["device_GiB"] = resolve_hardware(c["hardware"].value).memory_bytes \
                    / 2**30
        except PerfkitError as exc:
            self.summary, self.error = None, str(exc)
            self.message.value = _error_html(self.error)
            self.table.value = ""
            self.chart.value = ""
            return
        self.summary, self.error = summary, None
        self.message.value = ""
        self.table.value = summary_html(summary)
        name = model.name or "the job's model" if isinstance(model, ModelSpec) else model
        theory = f" ({memory.attrs['theory']})" if "theory" in memory.attrs else ""
        chart = memory_chart(memory, title=f"Memory per device: {name} on "
                                           f"{c['hardware'].value}{theory}")
        self.chart.value = chart_to_svg(chart)

    def _on_change(self, change: dict[str, Any]) -> None:
        self.refresh()

    def _on_hardware(self, change: dict[str, Any]) -> None:
        """The precision's options are the new device's peaks: the same type where it
        lists one, else its default (set without a refresh: the hardware's follows)."""
        box = self.controls["dtype"]
        kept = box.value
        box.unobserve(self._on_change, names="value")
        try:
            box.options = _peak_types(change["new"])
            box.value = kept if kept in box.options else box.options[0]
        finally:
            box.observe(self._on_change, names="value")

    # ---- static fallback ---------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        """Add a static HTML snapshot (table and chart) for frontends without widgets.

        Live frontends (JupyterLab, Voila) render the widget view; nbconvert, GitHub and
        other static viewers fall back to this snapshot of the values at display time.
        """
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        body = self.message.value or (self.table.value + self.chart.value)
        bundle["text/html"] = self.header.value + body
        return bundle


def _peak_types(hardware: str) -> list[str]:
    """The precisions ``hardware`` (a preset) lists a peak for, its default first."""
    h = Hardware.preset(hardware)
    return [h.default_dtype, *(d for d in h.peak_flops if d != h.default_dtype)]


def starting_dtype(hardware: str, job: Job | None, dtype: str | None = None) -> str:
    """The precision the panel starts on: ``dtype`` as given; else the job's where the
    device lists a peak for it (a bf16 run on an Ascend 910B is measured against its bf16
    peak, not the fp16 default); else the device's ``default_dtype``.

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        When ``dtype`` is given and ``hardware`` lists no peak for it.
    """
    types = _peak_types(hardware)
    if dtype is not None:
        check_choice("dtype", dtype, types)
        return dtype
    own = getattr(job, "dtype", None)
    return own if own in types else types[0]


def stand_in_sentence(job: Job, model: str, hardware: str) -> str:
    """What the panel fills in that ``job`` does not give, in one sentence ("" if nothing).

    A profile without operator shapes gives no model, and one recorded on an unnamed
    device no hardware; the panel then computes with the preset in its control. Every
    figure that needs them (throughput through the sequence length, MFU, HFU, memory) is
    that preset's, not the job's, and the header must say so: unsaid, MFU 279 % of a
    Llama2-13B stand-in sits under a header reading "model unknown" (the DeepSeek H800
    trace of ``shared/samples/wild/ds_train``).

    Parameters
    ----------
    job : perfkit.Job
    model, hardware : str
        The control's initial values: ``"job"`` for the job's own model, else a preset.

    Returns
    -------
    str
        With a leading space, to follow the header's sentence.
    """
    missing = []
    if model != "job":
        missing.append(("model", model))
    if job.hardware is None or job.hardware.name != hardware:
        missing.append(("device", hardware))
    if not missing:
        return ""
    what = " and ".join(name for name, _ in missing)
    presets = " and ".join(f"the preset {value}" for _, value in missing)
    return (f" The profile does not give the {what}: the figures below that need "
            f"{'them' if len(missing) > 1 else 'it'} are for {presets} (the "
            f"control{'s' if len(missing) > 1 else ''} above), not for this job.")


def metrics_panel(model: str = "llama2-13b", hardware: str = "ascend-910b", *,
                  dp: int = 4, tp: int = 1, pp: int = 2, vpp: int = 1,
                  micro_batch_size: int = 1, num_micro_batches: int = 8,
                  recompute: str = "selective", optimizer_parallel: bool = True,
                  sequence_parallel: bool = False, step_time_s: float | None = None,
                  dtype: str | None = None,
                  profile: str | None = None, job: Job | None = None,
                  measured_job: Job | None = None) -> MetricsPanel:
    """The metrics & memory calculator panel.

    Parameters
    ----------
    model : str
        Model preset (:meth:`ModelSpec.presets`); ignored when ``job`` has a model.
    hardware : str
        Hardware preset (:meth:`Hardware.presets`); the job's when it has one.
    dp, tp, pp, vpp, micro_batch_size, num_micro_batches : int
        Initial split (see :class:`~perfkit.specs.ParallelConfig`); the job's when given.
        The defaults are an 8-device Llama2-13B job like the seed guide's case.
    recompute : {"none", "selective", "full"}
    optimizer_parallel : bool
        Shard weights and optimizer state over ``dp`` (MindSpore optimizer parallel).
    sequence_parallel : bool
    step_time_s : float, optional
        The step time to start from, seconds. Default (:func:`~perfkit.widgets.what_if.
        starting_step`): the measured step of ``job`` (or ``measured_job``) when that job
        ran the configuration of the controls, else the uncalibrated step estimate of the
        configuration — never another job's step (a ResNet-50's 177 ms under a stand-in
        Llama2-13B read MFU 1,609.9 %). The header says which.
    dtype : str, optional
        Which of the device's peaks MFU and HFU divide by (:func:`starting_dtype`:
        default the job's precision where the device lists a peak for it, else the
        device's ``default_dtype``).
    profile : str, optional
        Path of the profile the dashboard was started on; shown in the header.
    job : perfkit.Job, optional
        Start from this job (:func:`perfkit.infer_job`): its model, device, split and
        measured step; the header says so, and the guards name where the job disagrees
        with its profile.
    measured_job : perfkit.Job, optional
        A profile's job that is not the panel's starting point (``02_parallel_strategy``
        plans a full model beside its profile): its measured step is used when it ran the
        configuration of the controls, and the header says why when it did not.

    Returns
    -------
    MetricsPanel
        An ``ipywidgets.VBox``; invalid combinations show the
        :class:`~perfkit.errors.PerfkitError` message in the panel, which keeps working.
    """
    if job is not None:
        p = job.parallel
        if job.model is not None:
            model = "job"
        if job.hardware is not None and job.hardware.name in Hardware.presets():
            hardware = job.hardware.name
        dp, tp, pp, vpp = p.dp, p.tp, p.pp, p.vpp
        micro_batch_size, num_micro_batches = p.micro_batch_size, p.num_micro_batches
        recompute, sequence_parallel = p.recompute, p.sequence_parallel
        optimizer_parallel = p.optimizer_shard > 1
    if model != "job":
        check_choice("model", model, ModelSpec.presets())
    check_choice("hardware", hardware, Hardware.presets())
    check_choice("recompute", recompute, RECOMPUTE_CHOICES)
    dtype = starting_dtype(hardware, job or measured_job, dtype)
    step_note = ""
    if step_time_s is None:
        spec = job.model if model == "job" and job is not None else model
        try:
            parallel = ParallelConfig(
                dp=dp, tp=tp, pp=pp, vpp=vpp, micro_batch_size=micro_batch_size,
                num_micro_batches=num_micro_batches, recompute=recompute,
                optimizer_shard=dp if optimizer_parallel else 1,
                sequence_parallel=sequence_parallel)
        except PerfkitError:
            start = StartingStep(FALLBACK_STEP_S, False, "")
        else:
            start = starting_step(spec, hardware, parallel, job or measured_job, dtype)
        step_time_s, step_note = start.step_s, start.sentence
    return MetricsPanel(model, hardware, profile=profile, job=job, step_note=step_note,
                        dtype=dtype,
                        dp=dp, tp=tp, pp=pp,
                        vpp=vpp, micro_batch_size=micro_batch_size,
                        num_micro_batches=num_micro_batches, recompute=recompute,
                        optimizer_parallel=optimizer_parallel,
                        sequence_parallel=sequence_parallel, step_time_s=step_time_s)
