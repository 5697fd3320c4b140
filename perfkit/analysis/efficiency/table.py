"""The operator efficiency table: per operator and shapes, achieved rates on the roofline.

Groups the priced calls of :mod:`~.costs` by operator (or kernel name), input shapes and
dtypes, and puts each group on the roofline of a :class:`perfkit.Hardware` (Williams,
Waterman, Patterson, CACM 2009): ``attainable(I) = min(peak_flops[dtype], I ×
memory_bandwidth)`` with ``I = FLOPs / bytes``. An operator is **memory-bound** when
``I × bandwidth < peak`` and **compute-bound** otherwise; ``efficiency`` is the achieved
rate over that bound (for a pure data-movement operator: achieved bytes/s over the
bandwidth); the ideal time of one call is ``max(FLOPs / peak, bytes / bandwidth)``. A dtype
the hardware lists no peak for uses its ``default_dtype`` peak and says so in
``peak_dtype``. Ascend PMU pipe ratios, where recorded, are summed beside it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...errors import InvalidArgumentError
from ...specs import Hardware
from .._frames import is_lazy, per_rank
from .._util import add_note, empty_frame, n_step_pairs, take_rows
from .costs import first_rows, narrow_costs
from .hardware import infer_hardware
from .tensors import peak_key

__all__ = ["EFFICIENCY_COLUMNS", "operator_efficiency"]

EFFICIENCY_COLUMNS: dict[str, str] = {
    "key": "string", "kind": "string", "name": "string", "input_shapes": "string",
    "input_dtypes": "string", "count": "int64", "total_us": "float64", "mean_us": "float64",
    "per_step_us": "float64", "flops": "float64", "bytes": "float64",
    "total_flops": "float64", "total_bytes": "float64", "achieved_tflops": "float64",
    "achieved_gbps": "float64", "intensity": "float64", "peak_dtype": "string",
    "peak_tflops": "float64", "bound_tflops": "float64", "ideal_us": "float64",
    "efficiency": "float64", "bound": "string", "causal": "string",
    "pmu_compute_ratio": "float64", "pmu_memory_ratio": "float64", "pmu_bound": "string",
}


def _pmu(frame: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    comp = [c for c in ("aic_mac_ratio", "aiv_vec_ratio") if c in frame.columns]
    mem = [c for c in ("aic_mte1_ratio", "aic_mte2_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio")
           if c in frame.columns]
    if not comp or not mem:
        nan = pd.Series(np.nan, index=frame.index)
        return nan, nan
    def row_max(cols: list[str]) -> pd.Series:  # NaN only where every column is
        values = [frame[c].to_numpy(np.float64, na_value=np.nan) for c in cols]
        return pd.Series(np.fmax.reduce(values) if len(values) > 1 else values[0],
                         index=frame.index)

    return row_max(comp), row_max(mem)


def _partial(profile: Any, by: str, causal: bool, backward_factor: float) -> pd.DataFrame:
    """Per-group sums of one profile (or eager cluster); combined by the caller."""
    rows = narrow_costs(profile, causal, backward_factor)
    if rows.empty:
        return pd.DataFrame()
    key_col = "label" if by == "type" else "name"
    if "input_shapes" not in rows.columns:
        rows = rows.assign(input_shapes=pd.NA)
    if "input_dtypes" not in rows.columns:
        rows = rows.assign(input_dtypes=pd.NA)
    comp, mem = _pmu(rows)
    ok = comp.notna() & mem.notna()
    if by == "type" and "_call" in rows.columns:
        out = _partial_by_call(rows, comp, mem, ok)
    else:
        out = _partial_by_row(rows, key_col, comp, mem, ok)
    out["steps"] = n_step_pairs(rows)
    out["_unit"] = str(getattr(getattr(profile, "meta", None), "rank", None))
    out["_source"] = rows.attrs.get("source", "")
    return out


_PARTIAL_SUMS = ("count", "total_us", "pmu_us", "pmu_c", "pmu_m")
_PARTIAL_FIRSTS = ("flops", "bytes", "kind", "dtype", "causal")  # constant per call


def _partial_by_row(rows: pd.DataFrame, key_col: str, comp: pd.Series, mem: pd.Series,
                    ok: pd.Series) -> pd.DataFrame:
    """:func:`_partial`'s groups, every row grouped by its key, shapes and dtypes as text."""
    rows = rows.assign(
        _k=rows[key_col].astype("string").fillna(""),
        _s=rows["input_shapes"].astype("string").fillna(""),
        _d=rows["input_dtypes"].astype("string").fillna(""),
        _fl=rows["flops"], _by=rows["bytes"],
        _pt=rows["dur_us"].where(ok, 0.0), _pc=(comp * rows["dur_us"]).where(ok, 0.0),
        _pm=(mem * rows["dur_us"]).where(ok, 0.0))
    g = rows.groupby(["_k", "_s", "_d"], sort=False, dropna=False)
    out = g.agg(count=("dur_us", "size"), total_us=("dur_us", "sum"),
                flops=("_fl", "first"), bytes=("_by", "first"), kind=("kind", "first"),
                name=("name", "first"), dtype=("dtype", "first"), causal=("causal", "first"),
                pmu_us=("_pt", "sum"), pmu_c=("_pc", "sum"), pmu_m=("_pm", "sum"))
    return out.reset_index().rename(columns={"_k": "key", "_s": "input_shapes",
                                             "_d": "input_dtypes"})


def _partial_by_call(rows: pd.DataFrame, comp: pd.Series, mem: pd.Series, ok: pd.Series
                     ) -> pd.DataFrame:
    """:func:`_partial_by_row` by type, summed per distinct call first.

    A group (label, shapes, dtypes) is a set of whole calls (``_call`` of the priced
    rows), whose prices are constant: the rows are summed per call (integer codes), then
    the few calls are grouped as the rows would be. The name is the group's first
    non-missing one in row order, as ``first`` gives it.
    """
    call = rows["_call"].to_numpy(np.int64)
    dur = rows["dur_us"].to_numpy(np.float64, na_value=np.nan)
    okv = ok.to_numpy(bool)
    first = first_rows(call)
    n_calls = len(first)

    def total(values: np.ndarray) -> np.ndarray:  # per call, missing values left out
        return np.bincount(call, np.where(np.isnan(values), 0.0, values), n_calls)

    sums = {"count": np.bincount(call, minlength=n_calls), "total_us": total(dur),
            "pmu_us": total(np.where(okv, dur, 0.0)),
            "pmu_c": total(np.where(okv, comp.to_numpy(np.float64) * dur, 0.0)),
            "pmu_m": total(np.where(okv, mem.to_numpy(np.float64) * dur, 0.0))}
    calls = take_rows(rows[["label", "input_shapes", "input_dtypes", "flops", "bytes",
                            "kind", "dtype", "causal", "name"]], first).reset_index(drop=True)
    calls.attrs = {}  # as a groupby's result: the rows' notes stay with the rows
    named = np.flatnonzero(rows["name"].notna().to_numpy(bool))
    name_at = np.full(len(first), len(call), dtype=np.int64)
    np.minimum.at(name_at, call[named], named)
    calls = calls.assign(
        _k=calls["label"].astype("string").fillna(""),
        _s=calls["input_shapes"].astype("string").fillna(""),
        _d=calls["input_dtypes"].astype("string").fillna(""),
        name=take_rows(rows[["name"]], np.minimum(name_at, len(call) - 1))["name"].array,
        _named=name_at < len(call), **{c: sums[c] for c in _PARTIAL_SUMS})
    calls["name"] = calls["name"].where(calls["_named"])
    keys = ["_k", "_s", "_d"]
    g = calls.groupby(keys, sort=False, dropna=False)
    out = g.agg(**{c: (c, "sum") for c in _PARTIAL_SUMS},
                **{c: (c, "first") for c in _PARTIAL_FIRSTS})
    # the name: the group's call whose first named row comes first
    by_name = calls.assign(_at=name_at).sort_values("_at", kind="mergesort")
    out["name"] = by_name.groupby(keys, sort=False, dropna=False)["name"].first()
    out = out[["count", "total_us", "flops", "bytes", "kind", "name", "dtype", "causal",
               "pmu_us", "pmu_c", "pmu_m"]]
    return out.reset_index().rename(columns={"_k": "key", "_s": "input_shapes",
                                             "_d": "input_dtypes"})


def operator_efficiency(profile: Any, hardware: Hardware | None = None, by: str = "type",
                        causal: bool = True, backward_factor: float = 2.5,
                        n: int | None = None) -> pd.DataFrame:
    """Per operator and input shapes: FLOPs, bytes, achieved rates, roofline and bound.

    Parameters
    ----------
    profile : Profile or Cluster
        Shapes come from the device tasks (Ascend ``kernel_details``, GPU kernels through
        their PyTorch operator); a profile without device tasks (a CPU-only PyTorch trace)
        is priced from its innermost host operators.
    hardware : perfkit.Hardware, optional
        The roofline's peaks. Default: the profiled device (:func:`infer_hardware`); when
        it is unknown the roofline columns are NA and a note says to pass one.
    by : {"type", "name"}
        Group by operator (Ascend type, PyTorch operator) or by kernel name, and always by
        input shapes and dtypes.
    causal : bool
        Attention is causal where the profile does not say (PyTorch records it).
    backward_factor : float
        Attention backward FLOPs over forward (2.5: FlashAttention-2's five products, as
        PyTorch's ``flop_counter`` counts; 2.0: a backward that keeps the scores).
    n : int, optional
        Keep the ``n`` groups with the most time.

    Returns
    -------
    DataFrame
        :data:`EFFICIENCY_COLUMNS`, one row per group, most time first: ``kind`` (NA
        where no model applies), ``count``, ``total_us`` (summed over ranks and steps),
        ``mean_us``, ``per_step_us`` (total / (rank, step) pairs), ``flops`` and ``bytes``
        per call, their totals, ``achieved_tflops`` (total FLOPs / total time),
        ``achieved_gbps``, ``intensity`` (FLOPs / byte), ``peak_dtype`` and ``peak_tflops``
        (the hardware's peak used), ``bound_tflops`` (the roofline at that intensity),
        ``ideal_us`` (per call, at the roofline), ``efficiency`` (achieved over roofline),
        ``bound`` (``compute`` / ``memory``), ``causal`` (attention), and the Ascend PMU
        pipe ratios beside it (duration-weighted ``pmu_compute_ratio``,
        ``pmu_memory_ratio`` and ``pmu_bound`` by :func:`operator_bound`'s rule).
        ``attrs["hardware"]`` names the hardware used; notes say where numbers come from.
    """
    if by not in ("type", "name"):
        raise InvalidArgumentError("by", "must be 'type' or 'name'", by)
    if hardware is not None and not isinstance(hardware, Hardware):
        raise InvalidArgumentError("hardware", "must be a perfkit.Hardware",
                                   type(hardware).__name__)
    why = "given"
    if hardware is None:
        hardware, why = infer_hardware(profile)
    if is_lazy(profile):
        part = per_rank(profile, _partial, by, causal, backward_factor)
    else:
        part = _partial(profile, by, causal, backward_factor)
    if part.empty:
        return empty_frame(EFFICIENCY_COLUMNS, "no input shapes in this profile: operator "
                           "efficiency needs Ascend kernel_details Input Shapes or a PyTorch "
                           "trace recorded with record_shapes=True")
    source = str(part["_source"].iloc[0])
    steps = int(part.groupby("_unit")["steps"].max().sum())
    g = part.groupby(["key", "input_shapes", "input_dtypes"], sort=False, dropna=False).agg(
        count=("count", "sum"), total_us=("total_us", "sum"), flops=("flops", "first"),
        bytes=("bytes", "first"), kind=("kind", "first"), name=("name", "first"),
        dtype=("dtype", "first"), causal=("causal", "first"), pmu_us=("pmu_us", "sum"),
        pmu_c=("pmu_c", "sum"), pmu_m=("pmu_m", "sum")).reset_index()
    g["mean_us"] = g["total_us"] / g["count"]
    g["per_step_us"] = g["total_us"] / max(steps, 1)
    g["total_flops"] = g["flops"] * g["count"]
    g["total_bytes"] = g["bytes"] * g["count"]
    secs = g["total_us"].where(g["total_us"] > 0) * 1e-6
    g["achieved_tflops"] = g["total_flops"] / secs / 1e12
    g["achieved_gbps"] = g["total_bytes"] / secs / 1e9
    g["intensity"] = g["flops"] / g["bytes"].where(g["bytes"] > 0)
    out = g
    notes: list[str] = []
    if hardware is not None:
        keys = [peak_key(d) if isinstance(d, str) else None for d in out["dtype"]]
        have = [k in hardware.peak_flops if k else False for k in keys]
        out["peak_dtype"] = [k if h else hardware.default_dtype
                             for k, h in zip(keys, have, strict=True)]
        out["peak_tflops"] = out["peak_dtype"].map(hardware.peak) / 1e12
        bw = hardware.memory_bandwidth
        peak = out["peak_tflops"] * 1e12
        roof = np.minimum(peak, out["intensity"] * bw)
        out["bound_tflops"] = roof / 1e12
        ideal = np.maximum(out["flops"] / peak, out["bytes"] / bw) * 1e6
        out["ideal_us"] = ideal.where(out["kind"].notna())
        compute_eff = out["achieved_tflops"] * 1e12 / roof.where(roof > 0)
        move_eff = out["achieved_gbps"] * 1e9 / bw
        out["efficiency"] = compute_eff.where(out["flops"] > 0, move_eff)
        lab = np.where(out["intensity"] * bw < peak, "memory", "compute")
        lab = np.where(out["flops"] == 0, "memory", lab)
        out["bound"] = pd.Series(lab, index=out.index, dtype="string").where(
            out["kind"].notna() & out["bytes"].notna())
        missing = sorted({str(d) for d, h in zip(out["dtype"], have, strict=True)
                          if not h and isinstance(d, str) and d})
        if missing:
            notes.append(f"{hardware.name} lists no peak for {', '.join(missing)}: those "
                         f"operators use its {hardware.default_dtype} peak (peak_dtype)")
        if (out["efficiency"] > 1.05).any():
            notes.append("some operators run above their roofline (efficiency > 100 %): "
                         "their data came partly from on-chip cache (the bytes assume device "
                         "memory), the hardware given is not the one profiled, or their "
                         "shapes are read wrongly")
        notes.append(f"roofline of {hardware.name} ({why})")
    else:
        for c in ("peak_tflops", "bound_tflops", "ideal_us", "efficiency"):
            out[c] = np.nan
        out["peak_dtype"] = pd.NA
        out["bound"] = pd.NA
        notes.append(why)
    out["pmu_compute_ratio"] = out["pmu_c"] / out["pmu_us"].where(out["pmu_us"] > 0)
    out["pmu_memory_ratio"] = out["pmu_m"] / out["pmu_us"].where(out["pmu_us"] > 0)
    pl = np.where(out["pmu_memory_ratio"] > out["pmu_compute_ratio"], "memory", "compute")
    pl = np.where((out["pmu_compute_ratio"] < 0.2) & (out["pmu_memory_ratio"] < 0.2),
                  "latency", pl)
    out["pmu_bound"] = pd.Series(pl, index=out.index, dtype="string").where(
        out["pmu_compute_ratio"].notna() & ((out["pmu_compute_ratio"] > 0)
                                            | (out["pmu_memory_ratio"] > 0)))
    out = out.sort_values("total_us", ascending=False, kind="mergesort")
    if n is not None:
        out = out.head(n)
    out = out[list(EFFICIENCY_COLUMNS)].astype(EFFICIENCY_COLUMNS).reset_index(drop=True)
    if source == "ops":
        notes.insert(0, "no device tasks: priced from the innermost host operators "
                        "(CPU time of a CPU-only run)")
    for note in notes:
        add_note(out, note)
    out.attrs["hardware"] = hardware.name if hardware is not None else None
    return out
