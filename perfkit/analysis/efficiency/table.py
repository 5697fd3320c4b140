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

from ..._text_dtype import TEXT
from ...errors import InvalidArgumentError
from ...format import counted, number_text, plural
from ...specs import Hardware
from ...specs.hardware_presets import unpublished_peak
from .._cluster_steps import per_rank_in_steps
from .._frames import is_lazy
from .._shared import shared_factorize
from .._tasks import pmu_maxima
from .._util import (
    add_note,
    empty_frame,
    n_step_pairs,
    nan_as_zero,
    noted_no_step,
    table,
    take_rows,
    typed,
)
from .costs import first_rows, narrow_costs
from .hardware import infer_hardware
from .tensors import peak_key

__all__ = ["EFFICIENCY_COLUMNS", "operator_efficiency"]

EFFICIENCY_COLUMNS: dict[str, str | pd.StringDtype] = {
    "key": TEXT, "kind": TEXT, "name": TEXT, "input_shapes": TEXT,
    "input_dtypes": TEXT, "count": "int64", "total_us": "float64", "mean_us": "float64",
    "per_step_us": "float64", "flops": "float64", "bytes": "float64",
    "total_flops": "float64", "total_bytes": "float64", "achieved_tflops": "float64",
    "achieved_gbps": "float64", "intensity": "float64", "peak_dtype": TEXT,
    "peak_tflops": "float64", "bound_tflops": "float64", "ideal_us": "float64",
    "efficiency": "float64", "bound": TEXT, "problem": TEXT, "causal": TEXT,
    "pmu_compute_ratio": "float64", "pmu_memory_ratio": "float64", "pmu_bound": TEXT,
}


def _pmu(frame: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per row, the largest compute-pipe and data-movement-pipe PMU ratio (NaN: none).

    Rows of :func:`~.costs.narrow_costs` carry them worked out (``_pmu_compute``,
    ``_pmu_memory``); other rows have the ratio columns (:func:`pmu_maxima`).
    """
    if "_pmu_compute" in frame.columns:
        return frame["_pmu_compute"], frame["_pmu_memory"]
    got = pmu_maxima(frame)
    if got is None:
        nan = pd.Series(np.nan, index=frame.index)
        return nan, nan
    return pd.Series(got[0], index=frame.index), pd.Series(got[1], index=frame.index)


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
        out = _partial_by_row(rows, key_col, comp, mem, ok, per_call=by == "type")
    out["steps"] = n_step_pairs(rows)
    out["_unit"] = str(getattr(getattr(profile, "meta", None), "rank", None))
    out["_source"] = rows.attrs.get("source", "")
    return out


_PARTIAL_SUMS = ("count", "total_us", "flops_sum", "bytes_sum", "_priced", "pmu_us", "pmu_c",
                 "pmu_m")
_PARTIAL_FIRSTS = ("kind", "dtype", "causal")  # constant per call


def _partial_by_row(rows: pd.DataFrame, key_col: str, comp: pd.Series, mem: pd.Series,
                    ok: pd.Series, per_call: bool = True) -> pd.DataFrame:
    """:func:`_partial`'s groups, every row grouped by its key, shapes and dtypes as text."""
    rows = rows.assign(
        _k=rows[key_col].astype(TEXT).fillna(""),
        _s=rows["input_shapes"].astype(TEXT).fillna(""),
        _d=rows["input_dtypes"].astype(TEXT).fillna(""),
        _n=_call_starts(rows) if per_call else 1,
        _pt=rows["dur_us"].where(ok, 0.0), _pc=(comp * rows["dur_us"]).where(ok, 0.0),
        _pm=(mem * rows["dur_us"]).where(ok, 0.0))
    g = rows.groupby(["_k", "_s", "_d"], sort=False, dropna=False)
    out = g.agg(count=("_n", "sum"), total_us=("dur_us", "sum"),
                flops_sum=("flops", "sum"), bytes_sum=("bytes", "sum"),
                _priced=("flops", "count"), kind=("kind", "first"),
                dtype=("dtype", "first"), causal=("causal", "first"),
                pmu_us=("_pt", "sum"), pmu_c=("_pc", "sum"), pmu_m=("_pm", "sum"))
    out = _no_price_is_na(out)
    out["name"] = _main_names(rows, g.ngroup().to_numpy(), len(out)).array
    out = out[["count", "total_us", "flops_sum", "bytes_sum", "kind", "name", "dtype",
               "causal", "pmu_us", "pmu_c", "pmu_m"]]
    return out.reset_index().rename(columns={"_k": "key", "_s": "input_shapes",
                                             "_d": "input_dtypes"})


def _call_starts(rows: pd.DataFrame) -> np.ndarray:
    """1 on the first row of each operator call (``call_first``), else 0."""
    if "call_first" not in rows.columns:
        return np.ones(len(rows), dtype=np.int64)
    return rows["call_first"].to_numpy(bool).astype(np.int64)


def _where_not_nan(call: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The calls of the rows whose value is not NaN (``call`` itself when none is)."""
    missing = np.isnan(values)
    return call[~missing] if missing.any() else call


def _no_price_is_na(out: pd.DataFrame) -> pd.DataFrame:
    """Sums of groups with no priced row are NA, not 0 (no model, or shapes it cannot use)."""
    none = out.pop("_priced").to_numpy() == 0
    for c in ("flops_sum", "bytes_sum"):
        out[c] = out[c].where(~none)
    return out


def _main_names(rows: pd.DataFrame, group: np.ndarray, n_groups: int) -> pd.Series:
    """Each group's main kernel: the name with the most non-memory time (memsets and
    copies only where a group has nothing else), NA for a group without names."""
    names = rows["name"]  # text, or a categorical of it: read by code either way
    if not isinstance(names.dtype, pd.CategoricalDtype):
        names = names.astype(TEXT)
    code, uniq = shared_factorize(names, use_na_sentinel=True)  # the codes others share
    out = pd.Series(pd.NA, index=range(n_groups), dtype=TEXT)
    named = code >= 0
    if not named.any():
        return out
    dur = rows["dur_us"].to_numpy(np.float64, na_value=np.nan)
    finite = np.isfinite(dur)
    if not finite.all():
        dur = np.where(finite, dur, 0.0)
    memory = rows["category"].eq("memory").fillna(False).to_numpy(bool) \
        if "category" in rows.columns else np.zeros(len(rows), dtype=bool)
    # compute time first, then memory time, then the first name seen: one score per row
    score = dur * 1e6  # a new array, changed in place below
    np.copyto(score, dur, where=memory)
    score += 1e-9
    if not named.all():
        group, code, score = group[named], code[named], score[named]
    pair = group.astype(np.int64)  # a new array, made the (group, name) pair in place
    pair *= len(uniq)
    pair += code
    space = n_groups * len(uniq)
    if space <= 4 * len(pair) + 1024:  # the pairs counted, not sorted
        all_totals = np.bincount(pair, score, space)
        # every score is positive (a duration, at least 1e-9): a pair present has a total
        present = all_totals > 0 if len(score) and score.min() > 0 else \
            np.bincount(pair, minlength=space) > 0
        keys = np.flatnonzero(present)
        totals = all_totals[keys]
    else:
        keys, inverse = np.unique(pair, return_inverse=True)
        totals = np.bincount(inverse.ravel(), score)
    best = pd.DataFrame({"g": keys // len(uniq), "n": keys % len(uniq), "t": totals})
    best = best.sort_values(["g", "t"], ascending=[True, False], kind="mergesort")
    best = best.drop_duplicates("g")
    out.iloc[best["g"].to_numpy()] = np.asarray(uniq, dtype=object)[best["n"].to_numpy()]
    return out


def _partial_by_call(rows: pd.DataFrame, comp: pd.Series, mem: pd.Series, ok: pd.Series
                     ) -> pd.DataFrame:
    """:func:`_partial_by_row` by type, summed per distinct priced call first.

    A group (label, shapes, dtypes) is a set of whole distinct calls (``_call`` of the
    priced rows, constant prices): the rows are summed per distinct call (integer
    codes), then the few distinct calls are grouped as the rows would be.
    """
    call = rows["_call"].to_numpy(np.int64)
    dur = rows["dur_us"].to_numpy(np.float64, na_value=np.nan)
    okv = ok.to_numpy(bool)
    first = first_rows(call)
    n_calls = len(first)

    def total(values: np.ndarray) -> np.ndarray:  # per call, missing values left out
        return np.bincount(call, nan_as_zero(values), n_calls)

    fl = rows["flops"].to_numpy(np.float64, na_value=np.nan)
    by = rows["bytes"].to_numpy(np.float64, na_value=np.nan)
    starts = rows["call_first"].to_numpy(bool) if "call_first" in rows.columns else None
    own = starts is None or bool(starts.all())  # every row an operator call of its own
    counted = call if own else call[starts]  # first rows only
    count = np.bincount(counted, minlength=n_calls).astype(np.int64)
    if own:
        # each row carries its distinct call's whole price: a call's sum is that price
        # times its rows (a row without a price adds nothing and is not counted as priced)
        price_fl, price_by = fl[first], by[first]
        flops_sum = np.where(np.isnan(price_fl), 0.0, price_fl * count)
        bytes_sum = np.where(np.isnan(price_by), 0.0, price_by * count)
        priced = np.where(np.isnan(price_fl), 0, count)
    else:
        flops_sum, bytes_sum = total(fl), total(by)
        priced = np.bincount(_where_not_nan(call, fl), minlength=n_calls).astype(np.int64)
    sums = {"count": count, "total_us": total(dur), "flops_sum": flops_sum,
            "bytes_sum": bytes_sum, "_priced": priced,
            "pmu_us": total(np.where(okv, dur, 0.0)),
            "pmu_c": total(np.where(okv, comp.to_numpy(np.float64) * dur, 0.0)),
            "pmu_m": total(np.where(okv, mem.to_numpy(np.float64) * dur, 0.0))}
    calls = take_rows(rows[["label", "input_shapes", "input_dtypes", "kind", "dtype",
                            "causal"]], first).reset_index(drop=True)
    calls.attrs = {}  # as a groupby's result: the rows' notes stay with the rows
    calls = calls.assign(
        _k=calls["label"].astype(TEXT).fillna(""),
        _s=calls["input_shapes"].astype(TEXT).fillna(""),
        _d=calls["input_dtypes"].astype(TEXT).fillna(""), **sums)
    keys = ["_k", "_s", "_d"]
    g = calls.groupby(keys, sort=False, dropna=False)
    out = g.agg(**{c: (c, "sum") for c in _PARTIAL_SUMS},
                **{c: (c, "first") for c in _PARTIAL_FIRSTS})
    out = _no_price_is_na(out)
    group_of_call = g.ngroup().to_numpy()
    out["name"] = _main_names(rows, group_of_call[call], len(out)).array
    out = out[["count", "total_us", "flops_sum", "bytes_sum", "kind", "name", "dtype",
               "causal", "pmu_us", "pmu_c", "pmu_m"]]
    return out.reset_index().rename(columns={"_k": "key", "_s": "input_shapes",
                                             "_d": "input_dtypes"})


#: Kinds of operator the matrix unit runs, whose compute roof is the peak of their dtype.
_MATRIX_KINDS = frozenset({"gemm", "conv", "attention"})


def _operand_key(dtypes: Any) -> str | None:
    """The peak key of a matrix operator's operands: its first input dtype that names a
    floating-point type (``"INT32;FLOAT;FLOAT"``, a convolution's input gradient whose
    first input is the output size, is ``"fp32"``)."""
    for part in str(dtypes if isinstance(dtypes, str) else "").split(";"):
        key = peak_key(part)
        if key is not None and key != "int8":
            return key
    return None


def _above_roofline(out: pd.DataFrame, hardware: Hardware) -> pd.Series:
    """Why a row's measured rate exceeds its roofline (NA where it does not).

    A rate above the roofline is not a speed the device can reach: the measurement is
    wrong for the model, and the reason is said rather than an efficiency above 100 %.
    """
    eff = out["efficiency"].to_numpy(np.float64, na_value=np.nan)
    over = np.flatnonzero(eff > 1.0)
    problem = pd.Series(pd.NA, index=out.index, dtype=TEXT)
    bw = hardware.memory_bandwidth
    for i in over:
        r = out.iloc[i]
        if r["flops"] > 0 and r["bound"] == "compute":
            text = (f"{number_text(r['achieved_tflops'], unit='TFLOP/s')} measured, above "
                    f"the {r['peak_dtype']} peak of {hardware.name} "
                    f"({number_text(r['peak_tflops'], unit='TFLOP/s')}): ")
            if r["peak_dtype"] == "fp32" and "tf32" in hardware.peak_flops:
                text += ("fp32 operands are likely computed in TF32 (cuDNN convolutions allow "
                         "it by default, matmuls with allow_tf32); compare with the tf32 peak")
            else:
                text += ("the preset is not the device profiled, its kernels' time misses "
                         "part of the work (kernels not linked to the operator), or its "
                         "shapes are read wrongly")
        else:
            text = (f"{number_text(r['achieved_gbps'], unit='GB/s')} measured, above the "
                    f"memory bandwidth of {hardware.name} ({number_text(bw / 1e9, unit='GB/s')})"
                    ": the bytes assume every tensor "
                    "read from device memory once, and part of it came from on-chip cache "
                    "(L2), or the shapes overstate the data moved")
        problem.iloc[i] = text
    return problem


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
        where no model applies), ``name`` (the group's main kernel: most compute time),
        ``count`` (operator calls, not kernels, with ``by="type"``; kernels with
        ``by="name"``), ``total_us`` (all their kernels' time, summed over ranks and
        steps; the device tasks in scope, :func:`~perfkit.analysis._tasks.scope_rows`:
        a task of no step, launched before the trace began, is left out where other tasks
        have one, with a note), ``mean_us`` (per call), ``per_step_us`` (total / (rank,
        step) pairs),
        ``flops`` and ``bytes`` per call (each call counted once, however many kernels
        it launched), their totals, ``achieved_tflops`` (total FLOPs / total time),
        ``achieved_gbps``, ``intensity`` (FLOPs / byte), ``peak_dtype`` and ``peak_tflops``
        (the hardware's peak used), ``bound_tflops`` (the roofline at that intensity),
        ``ideal_us`` (per call, at the roofline), ``efficiency`` (achieved over roofline;
        blank where the measurement exceeds the roofline), ``bound`` (``compute`` /
        ``memory``), ``problem`` (why a row's measured rate is above its roofline, which
        no device can reach: on-chip cache, TF32 for fp32 operands, unlinked kernels, a
        wrong preset; NA otherwise), ``causal`` (attention), and the Ascend PMU
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
        part = per_rank_in_steps(profile, _partial, by, causal, backward_factor)
    else:
        part = _partial(profile, by, causal, backward_factor)
    if part.empty:
        return empty_frame(EFFICIENCY_COLUMNS, "no input shapes in this profile: operator "
                           "efficiency needs Ascend kernel_details Input Shapes or a PyTorch "
                           "trace recorded with record_shapes=True")
    source = str(part["_source"].iloc[0])
    steps = int(part.groupby("_unit")["steps"].max().sum())
    grp = part.groupby(["key", "input_shapes", "input_dtypes"], sort=False, dropna=False)
    g = pd.concat([grp[["count", "total_us", "pmu_us", "pmu_c", "pmu_m"]].sum(),
                   grp[["flops_sum", "bytes_sum"]].sum(min_count=1),
                   grp[["kind", "name", "dtype", "causal"]].first()], axis=1).reset_index()
    calls = g["count"].where(g["count"] > 0)
    g["mean_us"] = g["total_us"] / calls
    g["per_step_us"] = g["total_us"] / max(steps, 1)
    g["total_flops"] = g.pop("flops_sum")
    g["total_bytes"] = g.pop("bytes_sum")
    g["flops"] = g["total_flops"] / calls
    g["bytes"] = g["total_bytes"] / calls
    secs = g["total_us"].where(g["total_us"] > 0) * 1e-6
    g["achieved_tflops"] = g["total_flops"] / secs / 1e12
    g["achieved_gbps"] = g["total_bytes"] / secs / 1e9
    g["intensity"] = g["flops"] / g["bytes"].where(g["bytes"] > 0)
    out = g
    notes: list[str] = []
    if hardware is not None:
        keys = [peak_key(d) if isinstance(d, str) else None for d in out["dtype"]]
        have = [k in hardware.peak_flops if k else False for k in keys]
        # a matrix operator in a dtype the device lists no peak for has no compute roof:
        # not the default dtype's (fp32 GEMMs on an Ascend NPU are not on its fp16 roof)
        kinds = out["kind"].astype(TEXT).fillna("")
        keys = [_operand_key(ds) if kd in _MATRIX_KINDS else k
                for k, kd, ds in zip(keys, kinds, out["input_dtypes"], strict=True)]
        have = [k in hardware.peak_flops if k else False for k in keys]
        roofless = np.array([bool(k) and not h and kd in _MATRIX_KINDS
                             for k, h, kd in zip(keys, have, kinds, strict=True)], dtype=bool)
        out["peak_dtype"] = [k if h else hardware.default_dtype
                             for k, h in zip(keys, have, strict=True)]
        out["peak_tflops"] = out["peak_dtype"].map(hardware.peak) / 1e12
        out["peak_tflops"] = out["peak_tflops"].where(~roofless)
        out["peak_dtype"] = out["peak_dtype"].astype(TEXT).where(~roofless)
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
        out["bound"] = pd.Series(lab, index=out.index, dtype=TEXT).where(
            out["kind"].notna() & out["bytes"].notna())
        missing = sorted({str(d) for d, h, r in zip(out["dtype"], have, roofless, strict=True)
                          if not h and not r and isinstance(d, str) and d})
        if missing:
            notes.append(f"{hardware.name} lists no peak for {', '.join(missing)}: those "
                         f"operators use its {hardware.default_dtype} peak (peak_dtype)")
        if roofless.any():
            lacking = sorted({k for k, r in zip(keys, roofless, strict=True) if r})
            notes.append(f"{counted(int(roofless.sum()), 'matrix operator row')} in "
                         f"{', '.join(lacking)}, for which {hardware.name} lists no peak"
                         + (" (its vendor publishes none)" if unpublished_peak(
                             hardware.name, lacking[0]) else "") + ", "
                         f"{plural(int(roofless.sum()), 'has', 'have')} no roofline: "
                         "efficiency left blank rather than measured against another dtype's "
                         "peak")
        out["bound"] = out["bound"].where(~roofless)
        out["problem"] = _above_roofline(out, hardware)
        over = out["problem"].notna()
        out["efficiency"] = out["efficiency"].where(~over)
        if over.any():
            n_over = int(over.sum())
            notes.append(f"{counted(n_over, 'operator row')} "
                         f"{plural(n_over, 'measures', 'measure')} above the roofline: that "
                         f"cannot be a real speed, so {plural(n_over, 'its', 'their')} "
                         "efficiency is left blank and the "
                         "column problem says why")
        notes.append(f"roofline of {hardware.name} ({why})")
    else:
        for c in ("peak_tflops", "bound_tflops", "ideal_us", "efficiency"):
            out[c] = np.nan
        out["peak_dtype"] = pd.NA
        out["bound"] = pd.NA
        out["problem"] = pd.NA
        notes.append(why)
    out["pmu_compute_ratio"] = out["pmu_c"] / out["pmu_us"].where(out["pmu_us"] > 0)
    out["pmu_memory_ratio"] = out["pmu_m"] / out["pmu_us"].where(out["pmu_us"] > 0)
    pl = np.where(out["pmu_memory_ratio"] > out["pmu_compute_ratio"], "memory", "compute")
    pl = np.where((out["pmu_compute_ratio"] < 0.2) & (out["pmu_memory_ratio"] < 0.2),
                  "latency", pl)
    out["pmu_bound"] = pd.Series(pl, index=out.index, dtype=TEXT).where(
        out["pmu_compute_ratio"].notna() & ((out["pmu_compute_ratio"] > 0)
                                            | (out["pmu_memory_ratio"] > 0)))
    out = out.sort_values("total_us", ascending=False, kind="mergesort")
    if n is not None:
        out = out.head(n)
    out = typed(out, EFFICIENCY_COLUMNS).reset_index(drop=True)
    if source == "ops":
        notes.insert(0, "no device tasks: priced from the innermost host operators "
                        "(CPU time of a CPU-only run)")
    elif source == "kernels":  # a lazy cluster's counted over its ranks, as the eager one's
        out = noted_no_step(out, table(profile, "kernels"))
    for note in notes:
        add_note(out, note)
    out.attrs["hardware"] = hardware.name if hardware is not None else None
    return out
