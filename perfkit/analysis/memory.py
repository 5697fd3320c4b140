"""Memory analyses: peaks per component, a down-sampled timeline, largest allocations, theory.

Reads the canonical ``memory`` (samples of allocated / reserved / active bytes per
component) and ``op_memory`` (individual allocations) tables. Components are what the
profiler names: torch_npu ``PTA`` (the PyTorch caching allocator), ``GE`` (graph engine),
``PTA+GE``, ``APP`` (the whole process as the driver sees it, reserved only), CANN modules
(``HCCL``, ``RUNTIME``, ``SLOG`` ...), MindSpore ``MindSpore``, Kineto ``allocator``.

:func:`memory_vs_theory` puts the measured peak next to the calculators of
:mod:`perfkit.calc.memory` and splits the difference into the parts a profile can show.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._text_dtype import TEXT
from ..calc.memory import activation_memory, static_memory, zero_stage_scheme
from ..errors import InvalidArgumentError
from ..format import bytes_text, ratio_text
from ._frames import aggregate, is_lazy, per_rank
from ._util import add_note, empty_frame, has_values, table, typed

__all__ = ["memory_peaks", "device_reserved_peak", "memory_timeline", "largest_allocations",
           "memory_vs_theory", "framework_component", "FRAMEWORK_COMPONENTS"]

#: Components that stand for the framework's own allocator, most complete first.
FRAMEWORK_COMPONENTS = ("PTA+GE", "MindSpore+GE", "PTA", "MindSpore", "allocator", "GE")

_PEAK_COLS = {"rank": "Int64", "component": TEXT, "samples": "int64",
              "peak_allocated_bytes": "float64", "peak_reserved_bytes": "float64",
              "peak_active_bytes": "float64", "peak_ts_us": "float64",
              "final_allocated_bytes": "float64"}


def _memory(profile: Any) -> Any:
    m = table(profile, "memory")
    if "component" not in m.columns:
        return pd.DataFrame()
    if is_lazy(m):
        return m
    if m.empty:
        return pd.DataFrame()
    return m


def memory_peaks(profile: Any) -> pd.DataFrame:
    """Peak allocated / reserved / active bytes per rank and component.

    Returns
    -------
    DataFrame
        ``rank``, ``component``, ``samples``, ``peak_allocated_bytes``,
        ``peak_reserved_bytes``, ``peak_active_bytes`` (NA when the component never
        reports that quantity, e.g. ``APP`` has reserved only), ``peak_ts_us`` (when the
        allocated peak — else the reserved peak — happened) and ``final_allocated_bytes``
        (last sample; well above the start hints at a leak). Sorted by peak reserved.
    """
    if is_lazy(profile):  # per (rank, component) on each rank's worker, then one order
        out = per_rank(profile, memory_peaks)
        notes = list(out.attrs.get("notes", [])) if out.empty else []
        out = typed(out, _PEAK_COLS)
        out = out.sort_values("peak_reserved_bytes", ascending=False, kind="mergesort")
        out = out.reset_index(drop=True)
        out.attrs["notes"] = notes
        return out
    m = _memory(profile)
    if m.empty:
        return empty_frame(_PEAK_COLS, "no memory samples (profile_memory was off, or the "
                                       "source has none)")
    m = m.sort_values(["rank", "component", "ts_us"], kind="mergesort")
    g = m.groupby(["rank", "component"], dropna=False)
    out = g.agg(samples=("ts_us", "size"),
                peak_allocated_bytes=("allocated_bytes", "max"),
                peak_reserved_bytes=("reserved_bytes", "max"),
                peak_active_bytes=("active_bytes", "max"),
                final_allocated_bytes=("allocated_bytes", "last"))
    basis = m["allocated_bytes"].where(m["allocated_bytes"].notna(), m["reserved_bytes"])
    # samples with neither figure cannot hold the peak (a group of only those has no peak
    # time: pandas 3 refuses idxmax of an all-NA group)
    has = basis.notna().to_numpy(bool)
    b = basis[has]
    idx = b.groupby([m["rank"][has], m["component"][has]], dropna=False).idxmax()
    ts = m.loc[idx.dropna().to_numpy(), ["rank", "component", "ts_us"]]
    out = out.reset_index().merge(ts.rename(columns={"ts_us": "peak_ts_us"}),
                                  on=["rank", "component"], how="left")
    out = out.sort_values("peak_reserved_bytes", ascending=False, kind="mergesort")
    return typed(out, _PEAK_COLS).reset_index(drop=True)


def device_reserved_peak(profile: Any) -> float:
    """The device's peak reserved bytes: the ``APP`` component's (the whole process as
    the driver sees it) where it reports a reserved figure, else the largest of any
    component but the host's allocator (a Kineto trace's Device Type 0 samples); NaN when
    no sample has one.

    The largest ``peak_reserved_bytes`` of :func:`memory_peaks` over those components,
    read as the maximum of the samples themselves (the maximum of the per-component
    maxima), without grouping them; a lazy cluster's through :func:`memory_peaks`.
    """
    m = _memory(profile)
    if is_lazy(m) or m.empty or "reserved_bytes" not in m.columns:
        peaks = memory_peaks(profile)
        if peaks.empty:
            return float("nan")
        component, reserved = peaks["component"], peaks["peak_reserved_bytes"]
    else:
        component, reserved = m["component"], m["reserved_bytes"]
    values = pd.to_numeric(reserved, errors="coerce").to_numpy(np.float64, na_value=np.nan)
    text = component.astype(TEXT)
    device = text.ne("host").fillna(True).to_numpy(bool) & ~np.isnan(values)
    if not device.any():
        return float("nan")
    app = device & text.eq("APP").fillna(False).to_numpy(bool)
    return float(values[app if app.any() else device].max())


def memory_timeline(profile: Any, max_points: int = 500,
                    components: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Memory over time, down-sampled to at most ``max_points`` per (rank, component).

    Samples are put into ``max_points`` equal time bins per series and the *maximum* of
    each bin is kept (a peak is never averaged away); empty bins are dropped.

    Returns
    -------
    DataFrame
        ``rank``, ``component``, ``ts_us`` (bin start), ``allocated_bytes``,
        ``reserved_bytes``, ``active_bytes`` (bin maxima; NA when the component lacks them).
    """
    cols = {"rank": "Int64", "component": TEXT, "ts_us": "float64",
            "allocated_bytes": "float64", "reserved_bytes": "float64",
            "active_bytes": "float64"}
    if max_points < 1:
        raise InvalidArgumentError("max_points", "must be >= 1", max_points)
    if is_lazy(profile):  # binned per (rank, component) on each rank's worker
        out = per_rank(profile, memory_timeline, max_points, components)
        notes = list(out.attrs.get("notes", [])) if out.empty else []
        out = typed(out, cols).reset_index(drop=True)
        out.attrs["notes"] = notes
        return out
    m = _memory(profile)
    if m.empty:
        return empty_frame(cols, "no memory samples")
    if components is not None:
        m = m[m["component"].isin(list(components))]
    m = m.dropna(subset=["ts_us"])
    keys = ["rank", "component"]
    lo = m.groupby(keys, dropna=False)["ts_us"].transform("min")
    hi = m.groupby(keys, dropna=False)["ts_us"].transform("max")
    width = ((hi - lo) / max_points).where(hi > lo, 1.0)
    b = np.floor((m["ts_us"] - lo) / width).clip(upper=max_points - 1)
    m = m.assign(_bin=b, _t=lo + b * width)
    out = m.groupby([*keys, "_bin"], dropna=False).agg(
        ts_us=("_t", "first"),
        allocated_bytes=("allocated_bytes", "max"),
        reserved_bytes=("reserved_bytes", "max"),
        active_bytes=("active_bytes", "max")).reset_index()
    out = out.sort_values([*keys, "ts_us"], kind="mergesort")
    return typed(out, cols).reset_index(drop=True)


def largest_allocations(profile: Any, n: int = 20, by_name: bool = False) -> pd.DataFrame:
    """The largest individual allocations (or the names allocating most in total).

    Parameters
    ----------
    n : int
        Rows to keep.
    by_name : bool
        Aggregate per (rank, name): ``count``, ``total_bytes``, ``max_bytes``.

    Returns
    -------
    DataFrame
        Per allocation: ``rank``, ``name``, ``size_bytes``, ``alloc_us``, ``release_us``
        (NA: still held at the end of the window), ``duration_us``; largest first.
    """
    if is_lazy(profile):  # the n largest of each rank, then the n largest of those
        out = per_rank(profile, largest_allocations, n, by_name)
        if out.empty:
            return out
        out = out.nlargest(n, "total_bytes" if by_name else "size_bytes")
        return out.reset_index(drop=True)
    om = table(profile, "op_memory")
    if by_name:
        cols = {"rank": "Int64", "name": TEXT, "count": "int64", "total_bytes": "float64",
                "max_bytes": "float64"}
    else:
        cols = {"rank": "Int64", "name": TEXT, "size_bytes": "float64",
                "alloc_us": "float64", "release_us": "float64", "duration_us": "float64"}
    if om.empty or not has_values(om, "size_bytes"):
        return empty_frame(cols, "no per-allocation records (op_memory)")
    if by_name:
        out = om.groupby(["rank", "name"], dropna=False).agg(
            count=("size_bytes", "size"), total_bytes=("size_bytes", "sum"),
            max_bytes=("size_bytes", "max")).reset_index()
        out = out.nlargest(n, "total_bytes")
    else:
        out = om.nlargest(n, "size_bytes")
    return typed(out, cols).reset_index(drop=True)


def framework_component(profile: Any) -> str | None:
    """The component that stands for the framework allocator in this profile, or None."""
    m = _memory(profile)
    if is_lazy(m):  # components with an allocated value, counted on the workers
        if "allocated_bytes" not in m.columns:
            return None
        a = aggregate(m, ["component"], {"allocated_bytes": ["count"]})
        have = set(a.loc[a["allocated_bytes_count"] > 0, "component"].astype(str))
        return next((c for c in FRAMEWORK_COMPONENTS if c in have), None)
    if m.empty:
        return None
    present = set(m["component"].dropna().astype(str))
    for c in FRAMEWORK_COMPONENTS:
        if c in present and has_values(m[m["component"] == c], "allocated_bytes"):
            return c
    return None


def memory_vs_theory(profile: Any, model: Any, parallel: Any, scheme: str = "megatron",
                     hardware: Any = None, flag_ratio: float = 2.0,
                     activation_model: Any = None, dtype: str | None = None,
                     gradient_bytes: float | None = None) -> pd.DataFrame:
    """Measured peak memory of each rank against the theoretical static + activation memory.

    The theory is a training step's. A profile without a backward pass
    (:meth:`perfkit.Job.training_step` False) keeps no gradients, optimizer state nor saved
    activations: hold its peak against
    :func:`perfkit.calc.inference_memory.inference_memory` (weights + KV cache + the
    step's largest transient), as the Memory tab does.

    Parameters
    ----------
    profile : Profile or Cluster
    model : perfkit.ModelSpec
    parallel : perfkit.ParallelConfig
    scheme : str
        Static-memory accounting passed to :func:`perfkit.calc.static_memory`
        (``"megatron"`` suits PyTorch/MindSpeed, ``"mindspore"`` MindFormers); with
        ``parallel.zero_stage`` 2 or 3, ``"zero"`` (sharded gradients, and weights at 3:
        :func:`perfkit.calc.memory.zero_stage_scheme`, as :func:`perfkit.plan.predict`).
    hardware : perfkit.Hardware, optional
        Adds the device capacity and the headroom.
    flag_ratio : float
        A theory more than this factor above or below the measured peak is flagged
        (2×: far beyond workspaces and fragmentation, tens of percent in the seeds).
    activation_model : perfkit.calc.ActivationModel, optional
        How activations are counted: the job's (:attr:`perfkit.Job.activation_model`,
        tensor by tensor without the scores when it ran fused attention); default the
        seed's table.
    dtype : str, optional
        The run's type (the job's, :attr:`perfkit.Job.dtype`): ``"fp32"``/``"tf32"`` keep
        fp32 weights and gradients and no second copy (4 + 4 + 8 bytes per parameter),
        ``"fp16"`` under Megatron-LM an fp16 gradient buffer and fp32 main gradients
        (:func:`perfkit.calc.static_memory`'s ``dtype``). None: the scheme's mixed
        precision (bf16 under Megatron-LM).
    gradient_bytes : float, optional
        The element size of the gradient reduction (the job's,
        :attr:`perfkit.Job.gradient_bytes`, read from the profile's collectives), which
        the gradient buffer keeps; None: the scheme's size. With both taken from the job,
        the theory is the Memory tab's and the Planner's.

    Returns
    -------
    DataFrame
        One row per rank and item: ``theory_static`` (weights + gradients + optimizer
        state), ``theory_activation`` (:func:`perfkit.calc.activation_memory`, most loaded
        stage), ``theory_total``, ``measured_allocated`` (peak allocated of the framework
        component), ``gap`` (measured - theory: workspaces, temporary buffers,
        communication buffers, or a model/config mismatch), ``fragmentation`` (peak
        reserved - peak allocated of that component: cached but unused blocks),
        ``outside_framework`` (APP reserved - framework reserved: runtime, HCCL/NCCL
        buffers, other modules), ``capacity`` and ``headroom`` (capacity - APP or
        framework reserved). Columns ``rank``, ``item``, ``bytes``, ``gib``, ``share``
        (of the measured allocated peak), ``explanation``. When the theory is more than
        ``flag_ratio`` × or less than ``1 / flag_ratio`` of the largest measured peak,
        ``attrs["warnings"]`` says so: the model or split given is not the job that ran
        (the same test as :func:`perfkit.guards.check_memory`, whose default it shares).
    """
    cols = {"rank": "Int64", "item": TEXT, "bytes": "float64", "gib": "float64",
            "share": "float64", "explanation": TEXT}
    peaks = memory_peaks(profile)
    comp = framework_component(profile)
    if peaks.empty or comp is None:
        return empty_frame(cols, "no framework allocator samples to compare with the theory")
    scheme = zero_stage_scheme(scheme, parallel.zero_stage)  # ZeRO-2/3: sharded gradients
    static = static_memory(model, parallel, scheme=scheme, dtype=dtype,
                           gradient_bytes=gradient_bytes)
    act = activation_memory(model, parallel, activation_model=activation_model)
    s_bytes = float(static.total_bytes)
    a_bytes = float(act.total_bytes)
    fw = peaks[peaks["component"] == comp].set_index("rank")
    app = peaks[peaks["component"] == "APP"].set_index("rank")["peak_reserved_bytes"]
    rows = []
    for item, expl in (
        ("theory_static", f"weights + gradients + optimizer ({scheme} accounting"
                          + (f", {dtype}" if dtype else "") + ")"),
        ("theory_activation", "activations of the most loaded pipeline stage"),
        ("theory_total", "static + activation"),
        ("measured_allocated", f"peak allocated of component {comp}"),
        ("gap", "measured - theory: workspaces, temporaries, communication buffers, "
                "or a model/parallel config that differs from the run"),
        ("fragmentation", "peak reserved - peak allocated: cached blocks not in use"),
        ("outside_framework", "APP reserved - framework reserved: runtime, collective "
                              "buffers, other modules"),
        ("capacity", "device memory of the hardware"),
        ("headroom", "capacity - peak reserved by the process"),
    ):
        rows.append((item, expl))
    parts = []
    for rank, r in fw.iterrows():
        alloc = float(r["peak_allocated_bytes"])
        res = float(r["peak_reserved_bytes"])
        app_res = float(app.get(rank, np.nan))
        cap = float(hardware.memory_bytes) if hardware is not None else np.nan
        used = app_res if not np.isnan(app_res) else res
        vals = {"theory_static": s_bytes, "theory_activation": a_bytes,
                "theory_total": s_bytes + a_bytes, "measured_allocated": alloc,
                "gap": alloc - (s_bytes + a_bytes), "fragmentation": res - alloc,
                "outside_framework": app_res - res, "capacity": cap, "headroom": cap - used}
        parts.append(pd.DataFrame({"rank": rank, "item": [i for i, _ in rows],
                                   "bytes": [vals[i] for i, _ in rows],
                                   "explanation": [e for _, e in rows]}))
    out = pd.concat(parts, ignore_index=True)
    out["gib"] = out["bytes"] / 2**30
    meas = out["rank"].map(fw["peak_allocated_bytes"]).astype("float64")
    out["share"] = out["bytes"] / meas.where(meas > 0)
    out = typed(out, cols)
    # a theory far from the measurement is about another job: say so with the table
    theory, measured = s_bytes + a_bytes, float(fw["peak_allocated_bytes"].max())
    if measured > 0 and not 1.0 / flag_ratio <= theory / measured <= flag_ratio:
        out.attrs["warnings"] = [
            f"the theory (static + activation, {bytes_text(theory)}) is "
            f"{ratio_text(theory / measured)} the measured peak ({bytes_text(measured)}): "
            "check the model, the split and the recompute setting"]
    return add_note(out, f"framework component: {comp}")
