"""Operator analyses: the top operators, bound type, AI CPU, tiny-kernel storms, unfused patterns.

All functions read the canonical ``kernels`` table (one row per device task) and work the
same on Ascend and GPU profiles; on a CPU-only run (no device task) :func:`top_operators`
reads the host operators by self time instead (:func:`host_tasks`). Shares are of *device
time*: the sum of the durations of the tasks in scope (by default every non-communication
task), not of wall time.

Unfused patterns are found in the order tasks run on each (rank, stream): every task gets
a one-letter token from its type or name (``Pow`` -> ``P``, ``ReduceMean`` -> ``R``, ...),
the tokens of a stream form a string, and a regular expression per pattern finds the
decomposed sequences (the search is vectorised over the string, not a Python loop over
tasks). The time a fusion could save is ``sum(durations) - max(duration)`` per occurrence:
a fused kernel still has to make one pass over the data, which is about as long as the
slowest member of the chain; the other passes disappear. Copies (``TensorMove``,
contiguous) are saved entirely (``saving = duration``) because an in-place or
stride-aware operator does not need them.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import InvalidArgumentError
from ..io.categories import host_comm_family
from ._frames import (
    aggregate,
    any_values,
    compute_all,
    is_lazy,
    per_rank,
    transform,
    with_position,
)
from ._util import (
    add_note,
    empty_frame,
    group_codes,
    has_values,
    n_step_pairs,
    shared,
    shared_factorize,
    stable_order,
    table,
    take_array,
    take_rows,
    tasks_in_scope,
    value_changes,
)
from .compare import class_codes, kernel_class

__all__ = ["top_operators", "operator_bound", "ai_cpu_operators", "tiny_kernels",
           "unfused_patterns", "host_tasks", "kernel_tokens", "recompute_evidence", "PATTERNS",
           "TOKENS", "TOP_COLUMNS", "UNFUSED_COLUMNS", "TINY_COLUMNS"]

_GENERIC_TYPES = ("kernel", "gpu_memcpy", "gpu_memset", "")
_BY = {"type": ["type"], "name": ["name"], "name_shapes": ["name", "input_shapes"]}

TOP_COLUMNS: dict[str, str] = {
    "key": "string", "type": "string", "name": "string", "input_shapes": "string",
    "core": "string", "category": "string", "count": "int64", "total_us": "float64",
    "mean_us": "float64", "max_us": "float64", "min_us": "float64", "share": "float64",
    "per_step_us": "float64", "calls_per_step": "float64", "ai_cpu": "boolean",
    "bound": "string",
}

#: (token, regex on the operator type or kernel name). The first match wins.
TOKENS: tuple[tuple[str, str], ...] = (
    ("Z", r"flashattention|flash_attn|fmha|fused_attention|scaled_dot_product"),
    ("T", r"tensormove|contiguous|viewcopy|asstrided|^identity$|copy_kernel|direct_copy"),
    ("C", r"^cast|cast$|_to_copy|to_copy|cast_kernel"),
    ("W", r"swiglu|swish|silu"),
    ("G", r"sigmoid"),
    ("F", r"softmax"),
    ("O", r"dropout|dropoutdomask|dropoutgenmask"),
    ("B", r"batchmatmul|bmm|matmul|gemm|cutlass|xmma"),
    ("Q", r"rsqrt"),
    ("S", r"sqrt"),
    ("P", r"^pow|pow_|square"),
    ("R", r"reducemean|reduce_mean|meanops|^mean"),
    ("N", r"^neg|neg_kernel|negative"),
    ("K", r"^concat|cat_array|catarray|^cat$"),
    ("L", r"slice|split|^narrow|index_select"),
    ("D", r"^div|realdiv|div_|div_true"),
    ("M", r"^mul|mul_|mulfunctor"),
    ("A", r"^add|add_|addfunctor|cuda_add"),
)
_TOKEN_RE = [(t, re.compile(p, re.IGNORECASE)) for t, p in TOKENS]

#: Unfused patterns: name -> (regex over tokens, fused replacement, saving rule).
PATTERNS: dict[str, tuple[str, str, str]] = {
    "rmsnorm_decomposed": (r"C*P[C]*R[C]*A[C]*(?:S[C]*D|Q)[C]*M(?:[C]*M)?",
                           "a fused RmsNorm kernel", "chain"),
    "rotary_small_ops": (r"L{1,2}[C]*N[C]*K[C]*M[C]*M?[C]*A|M[C]*L{1,2}[C]*N[C]*K[C]*M[C]*A",
                         "a fused rotary position embedding kernel", "chain"),
    "silu_mul_not_swiglu": (r"(?:W|G[C]*M)[C]*M", "a fused SwiGLU kernel", "chain"),
    "softmax_dropout_matmul": (r"B[CMDA]{0,3}F[CO]{0,3}B", "flash attention", "chain"),
    "cast_chain": (r"C{2,}", "one cast (or none)", "chain"),
    "copies": (r"T", "in-place / stride-aware operators", "all"),
}

UNFUSED_COLUMNS: dict[str, str] = {
    "rank": "Int64", "pattern": "string", "occurrences": "int64", "kernels": "int64",
    "total_us": "float64", "saving_us": "float64", "saving_share": "float64",
    "example": "string", "fused_replacement": "string",
}

TINY_COLUMNS: dict[str, str] = {
    "rank": "Int64", "kernels": "int64", "tiny_kernels": "int64", "tiny_count_share": "float64",
    "tiny_total_us": "float64", "tiny_time_share": "float64", "longest_run": "int64",
    "run_gap_us": "float64", "storm": "boolean", "top_names": "string",
}


_USED = ("rank", "step", "name", "type", "category", "core", "stream", "start_us", "dur_us",
         "input_shapes")
#: What the analyses of task sequences read (tiny kernels, unfused patterns, attention
#: directions): no core, shapes or PMU ratios, which a million tasks would copy for nothing.
_LANES = ("rank", "step", "name", "type", "category", "stream", "start_us", "dur_us")


def _scope(kernels: pd.DataFrame, include_communication: bool,
           columns: tuple[str, ...] = _USED) -> pd.DataFrame:
    """The tasks in scope, with only the columns the analyses read.

    Tasks with a duration (and, unless ``include_communication``, not communication),
    taken out in one pass (:func:`tasks_in_scope`); the PMU ratios too, except with
    ``columns`` :data:`_LANES`. The same frame for the same columns within a block.
    """
    return shared("scope", (kernels,), (include_communication, columns),
                  lambda: tasks_in_scope(kernels, include_communication, columns,
                                         pmu=columns != _LANES))


def _stream_order(k: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """``columns`` of the tasks in scope, sorted by (rank, stream, start), index 0..n-1.

    The stable order is found on the three keys alone and the other columns are taken in
    that order (a missing stream is NA), once per :func:`shared_results` block.
    """
    def ordered() -> pd.DataFrame:
        pos = _stream_positions(k)
        lanes = k if "stream" in k.columns else k.assign(stream=pd.NA)
        lanes = lanes[[c for c in columns if c in lanes.columns]]
        return (lanes if pos is None else take_rows(lanes, pos)).reset_index(drop=True)

    return shared("stream_ordered", (k,), (tuple(columns),), ordered)


def _stream_positions(k: pd.DataFrame) -> np.ndarray | None:
    """Positions of the tasks in (rank, stream, start) order, stable; once per block.

    None when the tasks are already in that order.
    """
    def order() -> np.ndarray | None:
        keys = k[["rank", "start_us"]].assign(
            stream=k["stream"] if "stream" in k.columns else pd.NA)
        return stable_order(keys, ["rank", "stream", "start_us"])

    return shared("stream_order", (k,), (), order)


def _effective_type(k: pd.DataFrame) -> pd.Series:
    """Operator type; GPU tasks (generic type ``kernel``) get their shared category."""
    typ = k["type"].astype("string") if "type" in k.columns else \
        pd.Series(pd.NA, index=k.index, dtype="string")
    generic = typ.isna() | typ.str.lower().isin(list(_GENERIC_TYPES)).fillna(True)
    if not generic.any():
        return typ
    cls = shared("kernel_class", (k,), (), lambda: kernel_class(
        k["name"], None, k.get("category"))).astype("string")
    has_type = typ.notna() & ~generic
    # Ascend tasks without a type (trace_view) keep their name; GPU tasks get a class
    fallback = cls.where(typ.notna(), k["name"].astype("string"))
    return typ.where(has_type, fallback)


def _row_max(k: pd.DataFrame, cols: list[str]) -> pd.Series:
    """``k[cols].astype("float64").max(axis=1)`` (NaN only where every value is)."""
    with np.errstate(invalid="ignore"):
        vals = np.fmax.reduce([k[c].to_numpy(np.float64, na_value=np.nan) for c in cols])
    return pd.Series(vals, index=k.index)


def _bound_frame(k: pd.DataFrame) -> pd.Series:
    """Per-task bound label from PMU pipe ratios (NA where no PMU columns)."""
    compute_cols = [c for c in ("aic_mac_ratio", "aiv_vec_ratio") if c in k.columns]
    memory_cols = [c for c in ("aic_mte1_ratio", "aic_mte2_ratio", "aiv_mte2_ratio",
                               "aiv_mte3_ratio") if c in k.columns]
    if not compute_cols or not memory_cols:
        return pd.Series(pd.NA, index=k.index, dtype="string")
    comp = _row_max(k, compute_cols)
    mem = _row_max(k, memory_cols)
    c, m = comp.to_numpy(), mem.to_numpy()
    with np.errstate(invalid="ignore"):
        code = np.where(m > c, 0, 1)  # memory, compute
        code = np.where((c < 0.2) & (m < 0.2), 2, code)  # latency
        known = ~np.isnan(c) & ~np.isnan(m) & ((c > 0) | (m > 0))
    # the three labels as a dictionary column (no Python string per task)
    arr = pa.DictionaryArray.from_arrays(pa.array(code.astype(np.int8), mask=~known),
                                         pa.array(["memory", "compute", "latency"]))
    return pd.Series(pd.arrays.ArrowStringArray(arr.cast(pa.large_string())),
                     index=k.index, dtype="string")


def _pmu_columns(columns: Any) -> tuple[list[str], list[str]]:
    """(compute-pipe, data-movement) PMU ratio columns present in ``columns``."""
    compute_cols = [c for c in ("aic_mac_ratio", "aiv_vec_ratio") if c in columns]
    memory_cols = [c for c in ("aic_mte1_ratio", "aic_mte2_ratio", "aiv_mte2_ratio",
                               "aiv_mte3_ratio") if c in columns]
    return compute_cols, memory_cols


def _bound_weights(kernels: pd.DataFrame) -> pd.DataFrame:
    """Tasks in scope with PMU ratios: ``_type``, ``dur_us``, duration-weighted ratios."""
    k = _scope(kernels, include_communication=False)
    compute_cols, memory_cols = _pmu_columns(k.columns)
    k = k.assign(_c=k[compute_cols].astype("float64").max(axis=1),
                 _m=k[memory_cols].astype("float64").max(axis=1))
    k = k[k["_c"].notna() & k["_m"].notna()]
    k = k.assign(_cw=k["_c"] * k["dur_us"], _mw=k["_m"] * k["dur_us"],
                 _type=k["type"].fillna(k["name"]))
    return k[["_type", "dur_us", "_cw", "_mw"]]


def operator_bound(profile: Any) -> pd.DataFrame:
    """Compute- vs memory-bound per operator type from the PMU pipe ratios.

    Uses the Ascend ``aic_mac_ratio`` / ``aiv_vec_ratio`` (compute pipes) against
    ``aic_mte1/2_ratio``, ``aiv_mte2/3_ratio`` (data movement), duration-weighted per
    operator type. ``bound`` is ``"memory"`` when the busiest movement pipe exceeds the
    busiest compute pipe, ``"compute"`` otherwise, ``"latency"`` when both are below 0.2
    (the kernel mostly waits: too small, or scalar-bound).

    Returns
    -------
    DataFrame
        ``type``, ``count``, ``total_us``, ``compute_ratio``, ``memory_ratio``, ``bound``;
        empty with a note when the profile has no PMU columns (for example GPU traces or
        Ascend ``aic_metrics`` other than PipeUtilization).
    """
    cols = {"type": "string", "count": "int64", "total_us": "float64",
            "compute_ratio": "float64", "memory_ratio": "float64", "bound": "string"}
    note = ("no PMU pipe-ratio columns (needs Ascend aic_metrics=PipeUtilization); bound "
            "type unknown")
    kernels = table(profile, "kernels")
    if is_lazy(kernels):  # weighted sums per type on the workers
        if not _pmu_columns(kernels.columns)[0] or not _pmu_columns(kernels.columns)[1]:
            return empty_frame(cols, note)
        a = aggregate(transform(kernels, _bound_weights), ["_type"],
                      {"dur_us": ["size", "sum"], "_cw": ["sum"], "_mw": ["sum"]},
                      dropna=False)
        if a.empty:
            return empty_frame(cols, note)
        g = a.set_index("_type").rename(columns={"dur_us_size": "count",
                                                 "dur_us_sum": "total_us",
                                                 "_cw_sum": "_cw", "_mw_sum": "_mw"})
    else:
        k = _scope(kernels, include_communication=False)
        compute_cols, memory_cols = _pmu_columns(k.columns)
        if k.empty or not compute_cols or not memory_cols:
            return empty_frame(cols, note)
        k = _bound_weights(k)
        g = k.groupby("_type", dropna=False).agg(
            count=("dur_us", "size"), total_us=("dur_us", "sum"), _cw=("_cw", "sum"),
            _mw=("_mw", "sum"))
    g["compute_ratio"] = g["_cw"] / g["total_us"].where(g["total_us"] > 0)
    g["memory_ratio"] = g["_mw"] / g["total_us"].where(g["total_us"] > 0)
    lab = np.where(g["memory_ratio"] > g["compute_ratio"], "memory", "compute")
    lab = np.where((g["compute_ratio"] < 0.2) & (g["memory_ratio"] < 0.2), "latency", lab)
    g["bound"] = pd.Series(lab, index=g.index, dtype="string").where(
        g["compute_ratio"].notna() & ((g["compute_ratio"] > 0) | (g["memory_ratio"] > 0)))
    g = g.rename_axis("type").reset_index().sort_values("total_us", ascending=False)
    out = g[list(cols)].reset_index(drop=True)
    return out.astype(cols)


def top_operators(profile: Any, by: str = "type", n: int | None = 20,
                  include_communication: bool = False) -> pd.DataFrame:
    """Top operators by total device time.

    Parameters
    ----------
    profile : Profile or Cluster
    by : {"type", "name", "name_shapes"}
        Group by operator type, by task name, or by (name, input shapes).
    n : int or None
        Keep the ``n`` largest rows (None: all).
    include_communication : bool
        Include communication tasks (default: computation and memory tasks only).

    Returns
    -------
    DataFrame
        :data:`TOP_COLUMNS`: ``key`` (the group label), ``type``/``name``/``input_shapes``
        (the grouping values; the most common value of the others), ``core``, ``category``,
        ``count``, ``total_us`` (both summed over every rank and step in scope),
        ``mean_us``, ``max_us``, ``min_us`` (per call), ``share`` (of the device time in
        scope), ``per_step_us`` and ``calls_per_step`` (per rank and step: the total and
        the count divided by the number of (rank, step) pairs, so that ``per_step_us =
        calls_per_step × mean_us``), ``ai_cpu`` (runs on the Ascend AI CPU), ``bound``
        (duration-weighted PMU verdict, NA without PMU columns). Sorted by ``total_us``.
        A lazy cluster is aggregated on the workers (sums may differ from the eager ones
        in the last bits).
    """
    if by not in _BY:
        raise InvalidArgumentError("by", f"must be one of {tuple(_BY)}", by)
    kernels = table(profile, "kernels")
    host = host_tasks(profile, kernels)
    if host is not None:  # a CPU-only run: its operators are the host's
        out = _top_of(host, by, n, include_communication)
        return add_note(out, "a CPU-only run: host operators by self time (the time "
                             "not spent in an operator nested inside), the CPU being the "
                             "device that computes")
    if is_lazy(kernels):
        if not any_values(kernels, "dur_us"):
            return empty_frame(TOP_COLUMNS, "the profile has no device tasks (kernels table)")
        return _lazy_top(kernels, by, n, include_communication)
    if kernels.empty or not has_values(kernels, "dur_us"):
        return empty_frame(TOP_COLUMNS, "the profile has no device tasks (kernels table)")
    return _top_of(kernels, by, n, include_communication)


def host_tasks(profile: Any, kernels: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """The host operators of a CPU-only run as a ``kernels``-like table, else None.

    A CPU-only run (``meta.device_type == "cpu"``, no device task: PyTorch with gloo, a
    MindSpore CPU profile) computes on the host: its operators are the ``ops`` table's,
    each counted by its *self time* (``self_us``: its duration less that of the operators
    nested inside it on the same thread), so that nested operators (``aten::linear`` >
    ``aten::matmul`` > ``aten::mm``) are not counted twice and the times add up to the
    threads' busy time. The type is the profiler's operator type where it gives one
    (MindSpore's ``MatMul``), else the name. Operators outside every step are left out
    when the profile has steps. Host collectives (``gloo:*``, ``c10d::*``,
    ``record_param_comms``) are ``communication``.
    """
    meta = getattr(profile, "meta", None)
    if meta is None or getattr(meta, "device_type", None) != "cpu":
        return None
    if kernels is None:
        kernels = table(profile, "kernels")
    if is_lazy(kernels) or len(kernels):
        return None
    ops = table(profile, "ops")
    if is_lazy(ops) or ops.empty or "self_us" not in ops.columns \
            or not has_values(ops, "self_us"):
        return None
    if "step" in ops.columns and ops["step"].notna().any():
        # per rank and step: operators outside every step (a partial graph run before
        # the first whole one, the profiler's own setup) would count in no step
        ops = ops[ops["step"].notna()]
    comm = host_comm_family(ops["name"]).notna().to_numpy(bool)
    names = ops["name"].astype("string")
    # an operator's type where the profiler gives one (MindSpore: MatMul for
    # Default/MatMul-op10); a PyTorch operator's name is its type (aten::mm)
    kind = (ops["type"].astype("string").replace("", pd.NA).fillna(names)
            if "type" in ops.columns else names)
    out = pd.DataFrame({
        "rank": ops["rank"].to_numpy() if "rank" in ops.columns else pd.NA,
        "step": ops["step"].array,
        "name": names.array,
        "type": kind.array,
        "category": pd.array(np.where(comm, "communication", "compute"), dtype="string"),
        "start_us": ops["start_us"].to_numpy(np.float64),
        "dur_us": ops["self_us"].to_numpy(np.float64),
    })
    if "input_shapes" in ops.columns:
        out["input_shapes"] = ops["input_shapes"].astype("string").array
    return out


def _top_of(kernels: pd.DataFrame, by: str, n: int | None, include_communication: bool
            ) -> pd.DataFrame:
    """:func:`top_operators` of an eager tasks table."""
    k = _scope(kernels, include_communication)
    keys = _BY[by]
    k = k.assign(type=_effective_type(k), _bound=_bound_frame(k))
    if "input_shapes" not in k.columns:
        k = k.assign(input_shapes=pd.Series(pd.NA, index=k.index, dtype="string"))
    grp = k.groupby([k[c].fillna("") for c in keys], sort=False)
    out = grp.agg(count=("dur_us", "size"), total_us=("dur_us", "sum"),
                  mean_us=("dur_us", "mean"), max_us=("dur_us", "max"),
                  min_us=("dur_us", "min"))
    firsts = {c: (c, "first") for c in ("type", "name", "input_shapes", "core", "category")
              if c not in keys and c in k.columns}
    if firsts:
        out = out.join(grp.agg(**firsts))
    cores = k["core"].astype("string").fillna("") if "core" in k.columns else None
    if cores is not None:
        out["ai_cpu"] = cores.eq("AI_CPU").groupby([k[c].fillna("") for c in keys],
                                                   sort=False).any()
    else:
        out["ai_cpu"] = False
    # duration-weighted bound: the label carrying most time in the group
    bt = k[[*dict.fromkeys([*keys, "_bound", "dur_us"])]].dropna(subset=["_bound"])
    if not bt.empty:
        wb = bt.groupby([*[bt[c].fillna("") for c in keys], bt["_bound"]])["dur_us"].sum()
        wb = wb.sort_values(ascending=False)
        wb = wb[~wb.index.droplevel(-1).duplicated()]
        best = pd.Series(wb.index.get_level_values(-1), index=wb.index.droplevel(-1))
        out["bound"] = best.reindex(out.index)
    out = out.reset_index()
    return _top_finish(out, keys, float(k["dur_us"].sum()), n_step_pairs(k), n)


def _top_rows(kernels: pd.DataFrame, by: str, include_communication: bool) -> pd.DataFrame:
    """Tasks in scope with what :func:`top_operators` groups and aggregates (row-wise)."""
    k = _scope(kernels, include_communication)
    k = k.assign(type=_effective_type(k), _bound=_bound_frame(k))
    if "input_shapes" not in k.columns:
        k = k.assign(input_shapes=pd.Series(pd.NA, index=k.index, dtype="string"))
    cores = k["core"].astype("string").fillna("") if "core" in k.columns else \
        pd.Series("", index=k.index, dtype="string")
    k = k.assign(_aicpu=cores.eq("AI_CPU").astype("int64"))
    return k.assign(**{f"_k_{c}": k[c].astype("string").fillna("") for c in _BY[by]})


def _lazy_top(kernels: Any, by: str, n: int | None, include_communication: bool
              ) -> pd.DataFrame:
    """:func:`top_operators` of a lazy ``kernels``: one groupby-aggregation on the workers.

    Groups are put in the order in which the eager ``groupby(sort=False)`` meets them
    (smallest row position), so that ties in ``total_us`` sort alike.
    """
    keys = _BY[by]
    kcols = [f"_k_{c}" for c in keys]
    k = with_position(transform(kernels, lambda f: _top_rows(f, by, include_communication)))
    firsts = [c for c in ("type", "name", "input_shapes", "core", "category")
              if c not in keys and c in k.columns]
    spec = {"dur_us": ["size", "sum", "max", "min"], "_pos": ["min"], "_aicpu": ["sum"],
            **{c: ["first"] for c in firsts}}
    a = aggregate(k, kcols, spec)
    a = a.sort_values("_pos_min", kind="mergesort")
    out = a.rename(columns={**{kc: c for kc, c in zip(kcols, keys, strict=True)},
                            "dur_us_size": "count", "dur_us_sum": "total_us",
                            "dur_us_max": "max_us", "dur_us_min": "min_us",
                            **{f"{c}_first": c for c in firsts}}).set_index(keys)
    out["mean_us"] = out["total_us"] / out["count"]
    out["ai_cpu"] = out["_aicpu_sum"] > 0
    wb = aggregate(k[k["_bound"].notnull()], [*kcols, "_bound"], {"dur_us": ["sum"]})
    if not wb.empty:
        wb = wb.set_index([*kcols, "_bound"])["dur_us_sum"].sort_values(ascending=False)
        wb = wb[~wb.index.droplevel(-1).duplicated()]
        best = pd.Series(wb.index.get_level_values(-1), index=wb.index.droplevel(-1))
        best.index = best.index.set_names(keys)
        out["bound"] = best.reindex(out.index)
    out = out.drop(columns=["_pos_min", "_aicpu_sum"]).reset_index()
    return _top_finish(out, keys, float(out["total_us"].sum()), n_step_pairs(k), n)


def _top_finish(out: pd.DataFrame, keys: list[str], total: float, pairs: int,
                n: int | None) -> pd.DataFrame:
    """Shares, labels, order and dtypes of :func:`top_operators` from its group sums."""
    out["share"] = out["total_us"] / total if total > 0 else np.nan
    out["per_step_us"] = out["total_us"] / pairs
    out["calls_per_step"] = out["count"] / pairs
    out["key"] = out[keys].astype("string").agg(" | ".join, axis=1) if len(keys) > 1 \
        else out[keys[0]].astype("string")
    out = out.sort_values("total_us", ascending=False, kind="mergesort")
    if n is not None:
        out = out.head(n)
    for col, dtype in TOP_COLUMNS.items():
        if col not in out.columns:
            out[col] = pd.Series(pd.NA, index=out.index, dtype=dtype) if dtype != "float64" \
                else np.nan
    out = out[list(TOP_COLUMNS)].astype(TOP_COLUMNS).reset_index(drop=True)
    for c in keys:
        out[c] = out[c].replace("", pd.NA)
    return out


def ai_cpu_operators(profile: Any) -> pd.DataFrame:
    """Operators that ran on the Ascend AI CPU, by type, with their share of device time.

    AI CPU operators run on the device's general-purpose cores, typically ten times slower
    than an AI Core implementation, and often stall the stream. Returns the
    :func:`top_operators` columns for those types only; empty (with a note) when the
    profile records no accelerator core (GPU traces) or has no AI CPU task.
    """
    kernels = table(profile, "kernels")
    if not any_values(kernels, "core"):
        return empty_frame(TOP_COLUMNS, "no accelerator core recorded (not an Ascend profile)")
    (ai_cpu,) = compute_all(kernels["core"].eq("AI_CPU").any())
    if not ai_cpu:  # no AI CPU task anywhere: nothing to rank, the full table is not built
        return empty_frame(TOP_COLUMNS, "no AI CPU operator in this profile")
    top = top_operators(profile, by="type", n=None)
    out = top[top["ai_cpu"].fillna(False)].reset_index(drop=True)
    if out.empty:
        add_note(out, "no AI CPU operator in this profile")
    else:  # a lazy table: its AI CPU tasks are few, read them whole
        (cpu_tasks,) = compute_all(kernels[kernels["core"].eq("AI_CPU")]) \
            if is_lazy(kernels) else (kernels,)
        out = _ai_cpu_only(out, cpu_tasks)
    return out


def _ai_cpu_only(out: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    """Count and time of each type's AI CPU tasks only (a type such as Cast may run most
    of its tasks on the AI Core and a few on the AI CPU); per-step figures and shares are
    scaled with the time, so they keep the denominators of :func:`top_operators`."""
    k = _scope(kernels, include_communication=False)
    k = k[k["core"].astype("string").eq("AI_CPU").fillna(False).to_numpy(bool)]
    typ = _effective_type(k).fillna("")
    g = k["dur_us"].groupby(typ.to_numpy()).agg(["size", "sum", "mean", "max", "min"])
    key = out["type"].astype("string").fillna("").to_numpy()
    g = g.reindex(key)
    scale = (g["sum"].to_numpy() / out["total_us"].to_numpy(np.float64))
    out = out.copy()
    out["count"] = g["size"].fillna(0).to_numpy(np.int64)
    for col, agg in (("total_us", "sum"), ("mean_us", "mean"), ("max_us", "max"),
                     ("min_us", "min")):
        out[col] = g[agg].to_numpy(np.float64)
    for col in ("share", "per_step_us"):
        out[col] = out[col].to_numpy(np.float64) * scale
    # the column keeps its text dtype: a bare string would make it object under pandas 2
    out["core"] = pd.Series(["AI_CPU"] * len(out), index=out.index, dtype=out["core"].dtype)
    return out.sort_values("total_us", ascending=False, kind="mergesort").reset_index(
        drop=True)


def tiny_kernels(profile: Any, threshold_us: float = 10.0, storm_share: float = 0.5,
                 min_run: int = 50, max_gap_us: float = 1000.0) -> pd.DataFrame:
    """Storms of tiny kernels: many very short tasks whose launch cost dominates.

    Parameters
    ----------
    threshold_us : float
        A task shorter than this is *tiny*.
    storm_share : float
        A rank has a storm when at least this share of its tasks is tiny ...
    min_run : int
        ... or when at least ``min_run`` tiny tasks run back to back on one stream.
    max_gap_us : float
        Gaps between tiny tasks longer than this are not launch overhead (the stream waits
        for something else) and are left out of ``run_gap_us``.

    Returns
    -------
    DataFrame
        One row per rank (:data:`TINY_COLUMNS`): task counts, tiny count and time
        shares, ``longest_run`` (most consecutive tiny tasks on one stream),
        ``run_gap_us`` (device idle time between consecutive tiny tasks of a stream, the
        launch overhead they expose), ``storm`` and the five most frequent tiny names.
    """
    if is_lazy(profile):  # runs of one stream of one rank: computed on that rank's worker
        return per_rank(profile, tiny_kernels, threshold_us, storm_share, min_run,
                        max_gap_us)[list(TINY_COLUMNS)].astype(TINY_COLUMNS)
    k = _scope(table(profile, "kernels"), include_communication=False, columns=_LANES)
    if k.empty:
        return empty_frame(TINY_COLUMNS, "the profile has no device tasks (kernels table)")
    # which names are tiny does not depend on the order: counted before ordering the tasks
    names = _name_counts(k, (k["dur_us"] < threshold_us).to_numpy(bool))
    k = _stream_order(k, ("rank", "stream", "start_us", "dur_us"))
    start = k["start_us"].to_numpy(np.float64, na_value=np.nan)
    dur = k["dur_us"].to_numpy(np.float64, na_value=np.nan)
    tiny = dur < threshold_us
    after_tiny = np.r_[False, tiny[:-1]]
    # the same stream of the same rank as the task before (a missing rank or stream never is)
    same = _same_as_before(k["rank"]) & _same_as_before(k["stream"])
    # consecutive tiny tasks on one stream: run ids break on a non-tiny task or stream change
    run_id = np.cumsum(~tiny | ~same | ~after_tiny)
    run_len = np.where(tiny, np.bincount(run_id, weights=tiny).astype(np.int64)[run_id], 0)
    gap = np.clip(start - np.r_[np.nan, (start + dur)[:-1]], 0.0, None)
    gap = np.where(tiny & after_tiny & same & (gap < max_gap_us), gap, 0.0)  # NaN: 0
    code, index = group_codes(k, ["rank"])  # few ranks: per-rank sums over the code space
    n_codes = int(code.max()) + 1
    present = np.flatnonzero(np.bincount(code, minlength=n_codes))

    def rank_sum(weights: np.ndarray) -> np.ndarray:
        return np.bincount(code, weights, n_codes)[present]

    longest = np.zeros(n_codes, dtype=np.int64)
    np.maximum.at(longest, code, run_len)
    out = pd.DataFrame({
        "kernels": np.bincount(code, minlength=n_codes)[present],
        "tiny_kernels": rank_sum(tiny.astype(np.float64)).astype(np.int64),
        "tiny_total_us": rank_sum(np.where(tiny, dur, 0.0)),
        "total_us": rank_sum(np.nan_to_num(dur, nan=0.0)),
        "longest_run": longest[present], "run_gap_us": rank_sum(gap)}, index=index)
    out["tiny_count_share"] = out["tiny_kernels"] / out["kernels"]
    out["tiny_time_share"] = out["tiny_total_us"] / out["total_us"].where(out["total_us"] > 0)
    out["storm"] = (out["tiny_count_share"] >= storm_share) | (out["longest_run"] >= min_run)
    # stable: equal counts keep name order, so a rank alone gives the same five names
    names = names.sort_values(ascending=False, kind="mergesort").groupby(
        level=0, dropna=False).head(5)
    top = names.reset_index().groupby("rank", dropna=False)["name"].agg(
        lambda s: ", ".join(s.astype(str)))
    out["top_names"] = top.reindex(out.index)
    out = out.reset_index()
    return out[list(TINY_COLUMNS)].astype(TINY_COLUMNS)


def _same_as_before(col: pd.Series) -> np.ndarray:
    """Whether each row holds the value of the row before (missing values never do)."""
    values = col.to_numpy(np.float64, na_value=np.nan)  # ranks and streams: whole numbers
    return np.r_[False, values[1:] == values[:-1]]


def _name_counts(k: pd.DataFrame, rows: np.ndarray) -> pd.Series:
    """``k[rows].groupby(["rank", "name"], dropna=False).size()``, grouping integer codes.

    The names are coded once (codes other analyses share) and each code is replaced by
    the rank of its text, so that the groups sort as the texts do (missing names last).
    """
    code, uniq = shared_factorize(k["name"], use_na_sentinel=True)
    texts, text_rank = np.unique(np.asarray(uniq, dtype=object).astype(str),
                                 return_inverse=True)
    text_rank = np.append(text_rank.ravel(), len(texts))  # code -1 (missing) sorts last
    pairs = pd.DataFrame({"rank": k["rank"].array[rows], "name": text_rank[code[rows]]})
    try:  # sorted groups, missing ranks last, as the groupby: counted by integer code
        group, index = group_codes(pairs, ["rank", "name"])
        if len(group) and int(group.max()) <= 4 * len(group) + 1024:
            sizes = np.bincount(group)
            sizes = sizes[sizes > 0]  # the codes present, in order: the index's
        else:
            sizes = np.unique(group, return_counts=True)[1]
        counts = pd.Series(sizes, index=index, dtype="int64")
    except OverflowError:
        counts = pairs.groupby(["rank", "name"], dropna=False).size()
    text_of_rank = np.append(texts, None).astype(object)  # the last rank: missing name
    name = pd.array(text_of_rank[counts.index.get_level_values("name").to_numpy(np.int64)],
                    dtype=k["name"].dtype)
    counts.index = pd.MultiIndex.from_arrays(
        [counts.index.get_level_values("rank"), name], names=["rank", "name"])
    return counts


def kernel_tokens(kernels: pd.DataFrame) -> pd.Series:
    """One-letter token per task for the pattern search (``"."`` when nothing matches).

    The operator ``type`` is tried first, then the ``name`` (GPU kernels have the generic
    type ``kernel``). The regexes run once per distinct label, not per task, and the
    tokens are spread back by code.
    """
    tokens, code, _, _ = _token_codes(kernels)
    text = pd.Series(tokens, dtype=object).astype(str)
    return pd.Series(take_array(text.array, code), index=kernels.index)


def _token_codes(kernels: pd.DataFrame
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(token per label, label code per row, name code per row, distinct names).

    The names (missing ones as ``""``) are coded once here for callers that also need them.
    """
    typ = kernels["type"].astype("string") if "type" in kernels.columns else \
        pd.Series(pd.NA, index=kernels.index, dtype="string")
    name = kernels["name"].astype("string").fillna("")
    t_code, t_uniq = shared_factorize(typ, use_na_sentinel=True)
    n_code, n_uniq = shared_factorize(name, use_na_sentinel=True)
    t_uniq = pd.Series(t_uniq, dtype="string")
    generic_t = t_uniq.str.lower().isin(["kernel", "gpu_memcpy", "gpu_memset", ""]).to_numpy(bool)
    generic = np.where(t_code < 0, True, generic_t[np.maximum(t_code, 0)] if len(t_uniq)
                       else True)
    # each row's label is its type, or its name where the type is generic (as a label code:
    # names first, then types)
    labels = pd.Series(pd.concat([pd.Series(n_uniq, dtype="string"), t_uniq],
                                 ignore_index=True), dtype="string")
    code = np.where(generic, n_code, len(n_uniq) + np.maximum(t_code, 0))
    return _tokens_of(labels), code, n_code, np.asarray(n_uniq, dtype=object)


def _tokens_of(labels: pd.Series) -> np.ndarray:
    """Token of each distinct label: the first of :data:`_TOKEN_RE` that matches.

    A missing label matches nothing (``"."``). The labels are distinct values (a few
    hundred to a few thousand), so a plain loop costs less than one column-wide regex
    per token.
    """
    return np.array([next((t for t, rx in _TOKEN_RE if rx.search(s)), ".")
                     if isinstance(s, str) else "." for s in labels.tolist()], dtype=object)


def _joined_letters(chars: np.ndarray) -> str:
    """``"".join(chars)`` for an array of one-character strings, without a list of them."""
    codes = chars.astype("U1").view(np.uint32)
    if len(codes) and codes.max() < 128:  # ASCII (the tokens' letters): bytes decode at once
        return codes.astype(np.uint8).tobytes().decode("ascii")
    return "".join(chars.tolist())


def _find(text: str, regex: str) -> tuple[np.ndarray, np.ndarray]:
    """Start/end positions (end exclusive) of non-overlapping matches in the token text.

    A pattern of one literal character (``"T"``, the copies) matches at every position
    holding it: found with numpy, since such tokens can be a large share of a trace.
    """
    if len(regex) == 1 and regex.isascii() and regex.isalnum() and text.isascii():
        starts = np.flatnonzero(np.frombuffer(text.encode("ascii"), np.uint8) == ord(regex))
        return starts.astype(int), starts.astype(int) + 1
    spans = [m.span() for m in re.finditer(regex, text)]
    if not spans:
        return np.empty(0, int), np.empty(0, int)
    arr = np.asarray(spans, dtype=int)
    return arr[:, 0], arr[:, 1]


class _Names:
    """``k["name"].astype(str).to_numpy()`` by code: rows are looked up when indexed."""

    def __init__(self, codes: np.ndarray, text: np.ndarray) -> None:
        self.codes, self.text = codes, text

    def __getitem__(self, idx: Any) -> np.ndarray:
        return self.text[self.codes[idx]]


def unfused_patterns(profile: Any, detail: bool = False,
                     patterns: dict[str, tuple[str, str, str]] | None = None) -> pd.DataFrame:
    """Known unfused operator sequences and the time a fused kernel could save.

    Parameters
    ----------
    profile : Profile or Cluster
    detail : bool
        Return one row per occurrence (``rank``, ``stream``, ``pattern``, ``first_row``,
        ``kernels``, ``total_us``, ``saving_us``, ``names``) instead of the summary.
    patterns : dict, optional
        Replace :data:`PATTERNS` (name -> (token regex, fused replacement, saving rule
        ``"chain"`` or ``"all"``)).

    Returns
    -------
    DataFrame
        Summary per (rank, pattern) (:data:`UNFUSED_COLUMNS`): ``occurrences``,
        ``kernels`` matched, ``total_us`` of the matched tasks, ``saving_us`` (rule
        ``"chain"``: sum - max per occurrence; ``"all"``: the whole duration),
        ``saving_share`` of the rank's device time, an ``example`` of the names and the
        ``fused_replacement``. Sorted by ``saving_us``. A flash-attention task anywhere on
        a rank suppresses ``softmax_dropout_matmul`` there.
    """
    pats = PATTERNS if patterns is None else patterns
    if is_lazy(profile):
        return _lazy_unfused(profile, detail, pats)
    k = _scope(table(profile, "kernels"), include_communication=False, columns=_LANES)
    if k.empty or "start_us" not in k.columns:
        return empty_frame(UNFUSED_COLUMNS, "the profile has no device tasks (kernels table)")
    # the columns read below (the type and name give the tokens)
    # tokens and names coded on the tasks in scope (codes other analyses share), then
    # put in stream order with the columns read below
    tokens, code, name_code, name_uniq = _token_codes(k)
    pos = _stream_positions(k)
    if pos is not None:
        code, name_code = code[pos], name_code[pos]
    k = _stream_order(k, ("rank", "stream", "start_us", "dur_us"))
    tokens = tokens.astype(str)
    tok = tokens[code]
    # one separator between (rank, stream) blocks so that no match spans two streams
    new_block = np.r_[True, value_changes(k["rank"], k["stream"])]
    # the token text, "|" before each block, and the row of each of its characters
    if all(len(t) == 1 for t in tokens):  # one character per row (TOKENS' letters)
        chars = np.insert(tok.astype("U1"), np.flatnonzero(new_block), "|")
        row_of_char = np.repeat(np.arange(len(k)), 1 + new_block.astype(np.int64))
        text = _joined_letters(chars)
    else:
        tokens = np.char.add(np.where(new_block, "|", ""), tok)
        row_of_char = np.repeat(np.arange(len(k)), np.char.str_len(tokens))
        text = "".join(tokens.tolist())
    dur = k["dur_us"].to_numpy(float)
    flash_ranks = set(k.loc[tok == "Z", "rank"].dropna().tolist())
    rows = []
    names = _Names(name_code, name_uniq.astype(str))
    rank_arr = k["rank"].to_numpy()
    stream_arr = k["stream"].to_numpy()
    for pname, (regex, fused, rule) in pats.items():
        starts, ends = _find(text, regex)
        if not len(starts):
            continue
        first = row_of_char[starts]
        last = row_of_char[ends - 1]  # patterns hold no "|", so matches end on a token
        counts = last - first + 1
        idx = np.repeat(first, counts) + (np.arange(counts.sum())
                                          - np.repeat(np.cumsum(counts) - counts, counts))
        occ = np.repeat(np.arange(len(first)), counts)
        d = pd.Series(dur[idx])
        tot = d.groupby(occ).sum().to_numpy()
        mx = d.groupby(occ).max().to_numpy()
        saving = tot if rule == "all" else tot - mx
        part = pd.DataFrame({"rank": rank_arr[first], "stream": stream_arr[first],
                             "pattern": pname, "first_row": first, "kernels": counts,
                             "total_us": tot, "saving_us": saving,
                             "fused_replacement": fused})
        if pname == "softmax_dropout_matmul" and flash_ranks:
            part = part[~part["rank"].isin(flash_ranks)]
        rows.append(part)
    det_cols = {"rank": "Int64", "stream": "Int64", "pattern": "string", "first_row": "int64",
                "kernels": "int64", "total_us": "float64", "saving_us": "float64",
                "names": "string", "fused_replacement": "string"}
    if not rows:
        return empty_frame(det_cols if detail else UNFUSED_COLUMNS,
                           "no known unfused pattern found")
    det = pd.concat(rows, ignore_index=True)

    def chain_names(frame: pd.DataFrame) -> pd.Series:
        # "a > b > c" per occurrence, built with string concatenation (no Python loop)
        idx = np.repeat(frame["first_row"].to_numpy(), frame["kernels"].to_numpy())
        occ = np.repeat(np.arange(len(frame)), frame["kernels"].to_numpy())
        idx = idx + (np.arange(len(idx)) - np.repeat(np.cumsum(frame["kernels"].to_numpy())
                                                     - frame["kernels"].to_numpy(),
                                                     frame["kernels"].to_numpy()))
        sep = np.where(np.r_[True, occ[1:] != occ[:-1]], "", " > ")
        text = pd.Series(np.char.add(sep.astype(str), names[idx].astype(str)))
        return text.groupby(occ).sum().set_axis(frame.index)

    if detail:
        return det.assign(names=chain_names(det))[list(det_cols)].astype(det_cols)
    device = k.groupby("rank", dropna=False)["dur_us"].sum()
    out = det.groupby(["rank", "pattern"], dropna=False, sort=False).agg(
        occurrences=("kernels", "size"), kernels=("kernels", "sum"),
        total_us=("total_us", "sum"), saving_us=("saving_us", "sum"),
        first=("first_row", "first"), n_first=("kernels", "first"),
        fused_replacement=("fused_replacement", "first"))
    out = out.reset_index()
    out["example"] = chain_names(pd.DataFrame({"first_row": out["first"],
                                               "kernels": out["n_first"]})).to_numpy()
    out["saving_share"] = out["saving_us"] / out["rank"].map(device).astype("float64")
    out = out.sort_values("saving_us", ascending=False, kind="mergesort")
    return out[list(UNFUSED_COLUMNS)].astype(UNFUSED_COLUMNS).reset_index(drop=True)


def _lazy_unfused(profile: Any, detail: bool,
                  pats: dict[str, tuple[str, str, str]]) -> pd.DataFrame:
    """:func:`unfused_patterns` of a lazy cluster: each rank searched on its worker.

    Streams never span ranks, so the per-rank matches are the cluster's; ``first_row`` of
    the detail is shifted by the rows of the ranks before, and the summary is put in the
    eager order (pattern, then rank, then largest saving first).
    """
    out = per_rank(profile, unfused_patterns, detail, pats)
    notes = list(out.attrs.get("notes", [])) if out.empty else []
    if detail:
        cols = ["rank", "stream", "pattern", "first_row", "kernels", "total_us", "saving_us",
                "names", "fused_replacement"]
        if len(out):
            rows = aggregate(transform(table(profile, "kernels"),
                                       lambda f: _scope(f, include_communication=False,
                                                         columns=_LANES)),
                             ["rank"], {"dur_us": ["size"]})
            before = rows["dur_us_size"].cumsum() - rows["dur_us_size"]
            shift = out["rank"].astype("float64").map(
                pd.Series(before.to_numpy(), index=rows["rank"].astype("float64")))
            out["first_row"] = (out["first_row"] + shift.fillna(0).astype("int64"))
            order = out["pattern"].map({p: i for i, p in enumerate(pats)})
            out = out.assign(_o=order).sort_values(["_o", "first_row"], kind="mergesort")
            out = out.drop(columns="_o").reset_index(drop=True)
        out = out[cols].astype(dict(out[cols].dtypes))
    elif len(out):
        order = out["pattern"].map({p: i for i, p in enumerate(pats)})
        out = out.assign(_o=order).sort_values(["_o", "rank"], kind="mergesort")
        out = out.sort_values("saving_us", ascending=False, kind="mergesort")
        out = out[list(UNFUSED_COLUMNS)].astype(UNFUSED_COLUMNS).reset_index(drop=True)
    out.attrs["notes"] = notes
    return out


_BACKWARD = r"(?i)grad|bwd|backward"


def recompute_evidence(profile: Any, full_ratio: float = 1.8) -> pd.DataFrame:
    """Does the profile recompute the forward pass? Count forward vs backward attention.

    Every layer runs its attention forward once per micro-batch and its attention backward
    once; full recompute runs the forward a second time before the backward. The ratio of
    forward to backward attention tasks (``FlashAttentionScore`` vs
    ``FlashAttentionScoreGrad``, ``flash_fwd`` vs ``flash_bwd``, ...) is therefore about 1
    without recompute and about 2 with full recompute of every layer.

    Returns
    -------
    DataFrame
        Per ``rank``: ``forward``, ``backward`` (task counts), ``ratio`` (forward /
        backward), ``recompute`` (``"full"`` when ratio >= ``full_ratio``, ``"partial"``
        when above 1.2, else ``"none"``) and ``recompute_share``: the share of the
        computation spent recomputing, ``(ratio - 1) / (ratio + 2)`` (a forward pass is
        about one third of forward + backward). Empty when no attention task is found
        in both directions.
    """
    cols = {"rank": "Int64", "forward": "int64", "backward": "int64", "ratio": "float64",
            "recompute": "string", "recompute_share": "float64"}
    if is_lazy(profile):  # counted per rank on that rank's worker
        out = per_rank(profile, recompute_evidence, full_ratio)
        notes = list(out.attrs.get("notes", [])) if out.empty else []
        out = out[list(cols)].astype(cols).reset_index(drop=True)
        out.attrs["notes"] = notes
        return out
    k = _scope(table(profile, "kernels"), include_communication=False, columns=_LANES)
    if k.empty:
        return empty_frame(cols, "the profile has no device tasks (kernels table)")
    labels, cls = class_codes(k["name"], k.get("type"), k.get("category"))
    att = take_rows(k, np.isin(cls, np.flatnonzero(labels == "attention")))
    if att.empty:
        return empty_frame(cols, "no attention task to count forward and backward passes")
    label = att["type"].astype("string").fillna("") + " " + att["name"].astype("string")
    bwd = label.str.contains(_BACKWARD, regex=True).fillna(False).astype(bool)
    g = att.assign(_b=bwd, _f=~bwd).groupby("rank", dropna=False).agg(
        forward=("_f", "sum"), backward=("_b", "sum")).reset_index()
    g = g[(g["forward"] > 0) & (g["backward"] > 0)]
    if g.empty:
        return empty_frame(cols, "attention tasks of only one direction")
    g["ratio"] = g["forward"] / g["backward"]
    g["recompute"] = np.where(g["ratio"] >= full_ratio, "full",
                              np.where(g["ratio"] > 1.2, "partial", "none"))
    g["recompute_share"] = ((g["ratio"] - 1.0) / (g["ratio"] + 2.0)).clip(lower=0.0)
    return g[list(cols)].astype(cols).reset_index(drop=True)
