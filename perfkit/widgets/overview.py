"""Small helpers the guided notebooks call: bundled profiles, the measured step, sliders.

Nothing here computes a metric: the step figures come from
:func:`perfkit.analysis.step_breakdown`, the throughput and utilisation figures from
:func:`perfkit.widgets.summary.metrics_summary` (the :mod:`perfkit.calc` calculators);
this module picks rows, converts units and wires sliders.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import ipywidgets as W
import pandas as pd

from ..analysis import measured_step_s
from ..bundled_samples import sample_names, sample_path
from ..calc import linearity
from ..errors import InvalidArgumentError, PerfkitError, check_positive
from ..format import counted, ranks_text, share_text
from ..io.detect.sources import format_fact
from ..job import Job
from ..job.world import world_size_fact
from ..notes import every_note
from ..resources import DATA_PACKAGE, resource_path
from ..specs import Hardware, ModelSpec, ParallelConfig
from .job import JobNote, missing_note
from .metrics import _TABLE_STYLE, _error_html, summary_html
from .summary import job_summary, metrics_summary

__all__ = ["DATA_DIR", "IR_DIR", "bundled_profiles", "bundled_profile", "bundled_ir",
           "measured_step_s", "profile_facts", "StepTimeExplorer", "step_time_explorer",
           "LinearityExplorer", "linearity_explorer", "step_shares", "step_chart"]

#: The bundled data (``data/`` of the repository, ``perfkit/_data`` once installed), found
#: with importlib.resources (:mod:`perfkit.resources`).
DATA_DIR = resource_path(DATA_PACKAGE)


def bundled_profiles() -> list[str]:
    """Names of the bundled profiles, relative to :data:`DATA_DIR`.

    Returns
    -------
    list of str
        For example ``"kineto-tiny-llama"`` or ``"simulated/slow-rank"`` (the ``name``
        column of :func:`perfkit.samples`); empty when this installation lacks the data.
    """
    return sample_names()


def bundled_profile(name: str) -> Path:
    """The absolute path of a bundled profile, so notebooks work from any folder.

    Parameters
    ----------
    name : str
        A name of :func:`bundled_profiles`, e.g. ``"simulated/llama2-13b-baseline-dp16"``;
        a short name (``"slow-rank"``) and the ``"sample:NAME"`` spelling work too
        (:func:`perfkit.bundled_samples.sample_path`).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        When there is no such bundled profile (the message lists those that exist).
    """
    return sample_path(name)


#: Real MindSpore IR dumps bundled with perfkit (``data/ir``, see its README).
IR_DIR = DATA_DIR / "ir"


def bundled_ir(name: str) -> Path:
    """The absolute path of a bundled MindSpore IR dump, for :func:`perfkit.load_ir`.

    Parameters
    ----------
    name : str
        A file name of :data:`IR_DIR`, e.g. ``"silu_mul.ir"`` or ``"control.ir.gz"``.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        When the dump is not there (the message lists the dumps that exist, or says that
        this installation lacks the bundled data).
    """
    path = IR_DIR / name
    if path.name == name and path.is_file():
        return path
    available = sorted(p.name for p in IR_DIR.glob("*.ir*")) if IR_DIR.is_dir() else []
    raise InvalidArgumentError(
        "name", "must be a bundled IR dump: " + (", ".join(available) or
                                                  f"none found ({IR_DIR} is missing: this "
                                                  "perfkit installation lacks its bundled "
                                                  "data)"),
        name)


def profile_facts(profile: Any, job: Any = None) -> pd.DataFrame:
    """What was opened: format, framework, ranks, device, profiler level, notes.

    Parameters
    ----------
    profile : Profile or Cluster
        From :func:`perfkit.load`.
    job : perfkit.Job, optional
        The job on show: where the profiler records no world size, its layout's devices
        are given instead (:func:`perfkit.job.world.world_size_fact`).

    Returns
    -------
    pandas.DataFrame
        Columns ``fact`` and ``value`` (strings), one row per fact and per note.
    """
    meta = profile.meta
    rows = [("path", meta.path), ("format", format_fact(meta.source_format, meta.device_type)),
            ("framework", meta.framework or "unknown"),
            ("device", meta.device_type or "unknown"),
            ("profiler level", meta.profiler_level or "unknown"),
            # their number, then which: as ``perfkit info`` writes them ("1 (rank 0)", not
            # a bare "0" that reads as no rank)
            ("ranks", ranks_text(getattr(profile, "ranks", None), meta.rank)),
            ("world size", world_size_fact(meta, job))]
    rows += [("note", note) for note in every_note(profile)]
    return pd.DataFrame(rows, columns=["fact", "value"])


class StepTimeExplorer(W.VBox):
    """The panel returned by :func:`step_time_explorer`.

    Attributes
    ----------
    slider : ipywidgets.FloatSlider
        Step time in seconds; setting ``value`` recomputes.
    summary : pandas.DataFrame or None
        The last :func:`~perfkit.widgets.summary.metrics_summary` (None after an error).
    table, message : ipywidgets.HTML
    """

    def __init__(self, model: ModelSpec, hardware: Hardware, parallel: ParallelConfig,
                 step_time_s: float, keys: tuple[str, ...], job: Job | None = None,
                 dtype: str | None = None) -> None:
        self._args = (model, hardware, parallel)
        self._job, self._dtype = job, dtype
        self._keys = keys
        self.slider = W.FloatSlider(value=step_time_s, min=step_time_s / 4,
                                    max=step_time_s * 2, step=step_time_s / 100,
                                    readout_format=".3f", description="step time (s)",
                                    continuous_update=False,
                                    style={"description_width": "120px"},
                                    layout=W.Layout(width="520px"))
        self.summary: pd.DataFrame | None = None
        self.table = W.HTML()
        self.message = W.HTML()
        super().__init__([self.slider, self.message, self.table])
        self.slider.observe(lambda _change: self.refresh(), names="value")
        self.refresh()

    def refresh(self) -> None:
        """Recompute the table from the slider's step time."""
        try:
            frame = metrics_summary(*self._args, step_time_s=self.slider.value,
                                    dtype=self._dtype, job=self._job)
        except PerfkitError as exc:
            self.summary = None
            self.message.value = _TABLE_STYLE + _error_html(str(exc))
            self.table.value = ""
            return
        if self._keys:
            frame = frame[frame["key"].isin(self._keys)]
        self.summary = frame
        self.message.value = ""
        self.table.value = _TABLE_STYLE + summary_html(frame)


def step_shares(steps: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str], str]:
    """The steps with the shares the steps tables show, those columns with their labels,
    and a caption's words for them (the dashboard's Overview and ``00_start_here``).

    The split into computing / exposed communication / pipeline bubble / free / the wait
    before the first device task, as shares of the step's wall time, which is the step
    time the table shows (:func:`perfkit.analysis.step_wall_us`, as the headline counts
    it); a legacy MindSpore step trace, which has no such split, gives its phases instead
    (as the chart does, :func:`perfkit.charts.step_parts`). A share no step has is left out
    rather than shown as a column of dashes (the bubble of a run without pipeline stages,
    the wait of a profile that does not measure it).

    Parameters
    ----------
    steps : pandas.DataFrame
        :func:`perfkit.analysis.step_breakdown` (with or without the exposed communication
        less the bubble, :func:`perfkit.widgets.headline.with_exposed_comm`).

    Returns
    -------
    tuple
        The steps with ``step_us`` replaced by the wall time (the device span and the
        wait before it) and a ``<part>_share`` column per part; ``{column: label}`` of the
        share columns that hold a value; the caption's words (``" and its split (shares of
        the step time)"``, empty where no share is known).
    """
    from .. import analysis as A
    from .. import charts as C
    from .._shares import rounded_split
    from ..tables import with_values
    from .headline import split_parts, split_step_us, with_exposed_comm

    if "comm_exposed_us" not in steps.columns:  # as the step breakdown gives it
        steps = with_exposed_comm(steps)
    if C.step_parts(steps) == C.TRACE_PHASES:
        step = steps["step_us"].where(steps["step_us"] > 0)
        shares = {c.removesuffix("_us") + "_share": label for c, label in C.TRACE_PHASES.items()}
        data = steps.assign(split_us=step, **{c.removesuffix("_us") + "_share": steps[c] / step
                                              for c in C.TRACE_PHASES})
        words = " and its phases (shares of the step time)"
    else:
        parts = split_parts(steps)  # no bubble or wait reported: no column of zeros
        wall = A.step_wall_us(steps)
        wall = wall.where(wall > 0)
        # the shares are of the step as its split counts it (the sum of its parts), so
        # that they add up to 100 % (split_step_us: a legacy MindSpore step trace's total
        # is not the sum of its ascend_cluster_analyse parts), rounded to 0.1 % so that
        # each row's shown shares add up to 100.0 % (perfkit._shares.rounded_split)
        whole = split_step_us(steps)
        whole = whole.where(whole > 0)
        shares = {c.removesuffix("_us") + "_share": label for c, label in parts.items()}
        fractions = pd.DataFrame({c.removesuffix("_us") + "_share":
                                  steps[c].astype("float64") / whole for c in parts})
        data = steps.assign(step_us=wall, split_us=whole,
                            **(rounded_split(fractions) if not fractions.empty else fractions))
        words = " and its split (shares of the step time)"
        if "computing_or_free_us" in parts:
            before = (" and the step interval before it" if "iteration_interval_us" in parts
                      else "")
            words = (" and its split (shares of the sum of its parts, MindSpore's own step"
                     f"{before}, which can differ from the step trace's time shown by up to "
                     "1 %)")
    shares = {c: shares[c] for c in with_values(data, shares)}
    return data, shares, words if shares else ""



def step_chart(steps: pd.DataFrame, title: str | None = "Step time per rank",
               **chart: Any) -> Any:
    """The "Step time per rank" chart as the Overview and ``perfkit info`` count the step.

    The bars are each step's wall time, the device span and the wait before its first
    task (:func:`perfkit.analysis.step_wall_us`), stacked from the parts the steps table
    shows (:func:`step_shares`); a plain :func:`perfkit.charts.step_breakdown_chart` of the
    breakdown stacks computing, communication and free time only, which leaves the wait
    out (on a data-bound run, half the step).

    Parameters
    ----------
    steps : pandas.DataFrame
        :func:`perfkit.analysis.step_breakdown`.
    title : str, optional
        The chart's title.
    **chart
        Passed to :func:`perfkit.charts.step_breakdown_chart` (``width``, ``height``,
        ``select``, ``max_bars``).

    Returns
    -------
    altair.LayerChart
    """
    from .. import charts as C

    shown, shares, _ = step_shares(steps)
    parts = {c.removesuffix("_share") + "_us": label for c, label in shares.items()}
    return C.step_breakdown_chart(shown, parts=parts or None, title=title, **chart)

def step_time_explorer(model: ModelSpec | Job, hardware: Hardware | None = None,
                       parallel: ParallelConfig | None = None,
                       step_time_s: float | None = None,
                       keys: tuple[str, ...] = ("tokens_per_s_per_device", "tokens_per_s_per_p",
                                                "mfu", "hfu", "bubble_fraction",
                                                "predicted_step_s")
                       ) -> StepTimeExplorer | JobNote:
    """A slider over the step time and the figures it implies, for any model (not only presets).

    Parameters
    ----------
    model : ModelSpec or perfkit.Job
        The model that ran (e.g. ``ModelSpec.preset("llama2-13b", num_layers=8)``), or the
        job :func:`perfkit.infer_job` read — then its hardware, split and measured step are
        used and the other arguments may be left out.
    hardware : Hardware
        The device.
    parallel : ParallelConfig
        The split that ran.
    step_time_s : float
        The starting step time (usually the measured one); the slider spans ¼× to 2×.
    keys : tuple of str
        Rows of :func:`~perfkit.widgets.summary.metrics_summary` to show.

    Returns
    -------
    StepTimeExplorer or JobNote
        An ``ipywidgets.VBox``; an invalid configuration shows its message instead of
        raising. A job that lacks its model, hardware or step gives a note saying which.
    """
    job = None
    if isinstance(model, Job):
        job = model
        if job.missing():
            return missing_note(job, "step-time explorer")
        model, hardware, parallel = job.model, job.hardware, job.parallel
        step_time_s = job.step_time_s if step_time_s is None else step_time_s
    if not isinstance(model, ModelSpec) or not isinstance(hardware, Hardware):
        raise InvalidArgumentError("model", "needs a ModelSpec and a Hardware",
                                   f"{type(model).__name__}, {type(hardware).__name__}")
    if not isinstance(parallel, ParallelConfig):
        raise InvalidArgumentError("parallel", "must be a ParallelConfig",
                                   type(parallel).__name__)
    step = check_positive("step_time_s", step_time_s)
    dtype = job.dtype if job is not None and job.dtype in hardware.peak_flops else None
    return StepTimeExplorer(model, hardware, parallel, step, tuple(keys), job=job,
                            dtype=dtype)


class LinearityExplorer(W.VBox):
    """The panel returned by :func:`linearity_explorer`.

    Attributes
    ----------
    base_throughput, base_devices : ipywidgets widgets
        The reference run; setting ``value`` recomputes.
    value : float
        The last linearity (NaN after an error).
    result : ipywidgets.HTML
    """

    def __init__(self, tokens_per_s_per_device: float, devices: int) -> None:
        self._tps = tokens_per_s_per_device
        self._devices = devices
        style = {"description_width": "260px"}
        self.base_throughput = W.FloatSlider(
            value=tokens_per_s_per_device, min=tokens_per_s_per_device / 2,
            max=tokens_per_s_per_device * 2, step=tokens_per_s_per_device / 200,
            readout_format=",.0f", continuous_update=False,
            description="reference tokens/s per device", style=style,
            layout=W.Layout(width="640px"))
        self.base_devices = W.BoundedIntText(value=max(1, min(8, devices)), min=1,
                                             max=max(1, devices),
                                             description="devices of the reference run",
                                             style=style, layout=W.Layout(width="360px"))
        self.value = math.nan
        self.result = W.HTML()
        super().__init__([self.base_throughput, self.base_devices, self.result])
        for widget in (self.base_throughput, self.base_devices):
            widget.observe(lambda _change: self.refresh(), names="value")
        self.refresh()

    def refresh(self) -> None:
        """Recompute the linearity from the reference run."""
        try:
            self.value = linearity(self._tps, self.base_throughput.value, self._devices,
                                   self.base_devices.value, throughput="per_device")
        except PerfkitError as exc:
            self.value = math.nan
            self.result.value = _TABLE_STYLE + _error_html(str(exc))
            return
        self.result.value = (
            f"<div class='pk-metrics'><b>linearity {share_text(self.value)}</b>: "
            f"{self._tps:,.0f} tokens/s per device on {counted(self._devices, 'device')} "
            f"against {self.base_throughput.value:,.0f} on {self.base_devices.value} "
            "(1.0 = perfect scaling; above 0.8 is usually good)</div>")


def linearity_explorer(tokens_per_s_per_device: float | Job, devices: int | None = None
                       ) -> LinearityExplorer | JobNote:
    """Sliders for a reference run, and the linearity of the measured run against it.

    Parameters
    ----------
    tokens_per_s_per_device : float or perfkit.Job
        Measured throughput per device of the large run, or the job whose measured
        throughput (:func:`~perfkit.widgets.summary.job_summary`) and devices to use.
    devices : int
        Devices of the large run (the job's when a job is given).

    Returns
    -------
    LinearityExplorer or JobNote
        Starts with the reference equal to the measured run (linearity 1.0): type or
        slide the per-device throughput of your smaller run.
        :func:`perfkit.calc.linearity` (``throughput="per_device"``) does the arithmetic.
        A job without a measured throughput gives a note saying why.
    """
    if isinstance(tokens_per_s_per_device, Job):
        job = tokens_per_s_per_device
        if job.missing():
            return missing_note(job, "linearity")
        summary = job_summary(job).set_index("key")
        tokens_per_s_per_device = float(summary.loc["tokens_per_s_per_device", "value"])
        devices = job.parallel.world_size if devices is None else devices
    check_positive("tokens_per_s_per_device", tokens_per_s_per_device)
    check_positive("devices", devices)
    return LinearityExplorer(float(tokens_per_s_per_device), int(devices))
