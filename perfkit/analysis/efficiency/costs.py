"""Per-call costs of a profile: every priced device task (or host operator) and its price.

The rows are the device tasks with input shapes (Ascend ``kernel_details``, GPU kernels
through the PyTorch operator that launched them), or the host operators of a profile
without device tasks (a CPU-only PyTorch trace), of which only the innermost modelled ones
are priced (:func:`_leaf_ops`). Each distinct call (label, shapes, dtypes, formats, scalar
inputs) is priced once by :func:`~.registry.cost_of` and the price spread back to its rows.

**One operator call, one price.** A PyTorch operator may launch several GPU kernels (an
``aten::addmm`` launches a memset and a GEMM; a cuDNN convolution a transpose, the
convolution and an epilogue): they share the operator's ``External id`` (``op_id``). The
call's FLOPs and bytes are counted once and spread over its kernels in proportion to
their time; memory tasks (memsets, copies) take no share. Each row keeps the whole call's
price in ``call_flops`` / ``call_bytes``, ``op_call`` numbers the calls and
``call_first`` marks each call's first row, so that tables count calls, not kernels. A
row without an ``op_id`` (an Ascend task, a host operator, an unlinked kernel) is a call
of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..._text_codes import first_appearance, first_rows, ids_of, values_of
from ..._text_dtype import TEXT
from .._cluster_steps import per_rank_in_steps
from .._frames import is_lazy
from .._shared import shared, shared_factorize
from .._tasks import PMU_RATIOS, categorical_of, pmu_maxima, scope_rows, tasks_in_scope
from .._util import (
    distinct_rows,
    empty_frame,
    has_values,
    table,
    take_array,
    take_rows,
    typed,
    with_columns,
)
from .registry import PRIORITY, cost_of, kind_of
from .tensors import dtype_bytes, split_args

__all__ = ["COST_COLUMNS", "operator_costs", "narrow_costs", "first_rows"]

#: The price columns each row of :func:`operator_costs` gains: ``flops`` and ``bytes`` are
#: the row's share of its operator call's, ``call_flops`` / ``call_bytes`` the whole call's,
#: ``op_call`` the call (numbered per table) and ``call_first`` its first row.
COST_COLUMNS = ("kind", "flops", "bytes", "dtype", "causal", "call_flops", "call_bytes",
                "op_call", "call_first")


#: Below this many rows :func:`_label` labels row by row (no coding of the texts first).
_LABEL_BY_ROW_MAX = 4096


def _label(frame: pd.DataFrame) -> pd.Series:
    """Operator label of each row: GPU kernels' launching op, Ascend type, else the name.

    Where every row is typed and none has a launching operator (Ascend), the label is the
    ``type`` column itself, whose codes other analyses share. Otherwise texts are merged,
    which for a large table is done on one row of each distinct (type, name, op_name)
    (:func:`~perfkit.analysis._util.distinct_rows`: the label depends on nothing else),
    the labels spread back by position."""
    cols = [c for c in ("type", "name", "op_name") if c in frame.columns]
    if len(frame) <= _LABEL_BY_ROW_MAX or "name" not in cols or (
            "op_name" not in cols and "type" in cols and not _generic(frame["type"]).any()):
        return _row_labels(frame)
    inverse, first = distinct_rows(frame, cols)
    labels = _row_labels(frame[cols].take(first))
    return pd.Series(labels.array.take(inverse), index=frame.index, name=labels.name)


def _generic(types: pd.Series) -> np.ndarray:
    """Whether each row's ``type`` says nothing of the operator (missing, empty, or
    Kineto's ``kernel``, ``gpu_memcpy``, ``gpu_memset``), worked out per distinct type."""
    codes, uniq = shared_factorize(types.astype(TEXT), use_na_sentinel=False)
    per_type = pd.Series(uniq, dtype=TEXT)
    generic_u = (per_type.isna() | per_type.str.lower().isin(
        ["kernel", "gpu_memcpy", "gpu_memset", ""])).fillna(True).to_numpy(bool)
    return generic_u[codes]


def _row_labels(frame: pd.DataFrame) -> pd.Series:
    """:func:`_label`, row by row."""
    def name() -> pd.Series:  # text, read only where a task's type says nothing
        return frame["name"].astype(TEXT)

    label = None
    if "type" in frame.columns:
        typ = frame["type"].astype(TEXT)
        generic = _generic(typ)
        # every task typed (Ascend): the type column itself, whose codes others share
        label = typ if not generic.any() else typ.where(~generic, name())
    if label is None:
        label = name()
    if "op_name" in frame.columns:
        label = frame["op_name"].astype(TEXT).where(frame["op_name"].notna(), label)
    return label.fillna("")


def _source(profile: Any, columns: Sequence[str] | None = None, split: bool = False
            ) -> tuple[pd.DataFrame, str]:
    """Rows to price: device tasks with shapes, else host operators with shapes.

    ``columns``: keep only these (and the :data:`PMU_RATIOS` columns); default all.
    ``split``: device tasks without the :data:`_KEY_ONLY` and :data:`_CODED_KEYS` columns
    (:func:`_outside_keys` codes them on the whole table).
    """
    def narrow(frame: pd.DataFrame) -> pd.DataFrame:
        if columns is None:
            return frame
        return frame[[c for c in frame.columns if c in columns or c in PMU_RATIOS]]

    k = table(profile, "kernels")
    if not k.empty and has_values(k, "input_shapes") and has_values(k, "dur_us"):
        if columns is not None:  # the rows the other operator analyses take out too
            if not split:
                return tasks_in_scope(k, False, columns), "kernels"
            # the pricing keys no reader reads per task are coded by _outside_keys, and the
            # PMU ratios come as their two row maxima
            inside = [c for c in columns if c not in _KEY_ONLY + _CODED_KEYS]
            rows = tasks_in_scope(k, False, inside, pmu=False, coded=_BY_CODE)
            pmu = _pmu_in_scope(k)
            if pmu is not None:
                rows = with_columns(rows, _pmu_compute=pmu[0], _pmu_memory=pmu[1])
            return rows, "kernels"
        keep = scope_rows(k, False)  # the tasks in scope of the other operator analyses
        return (k if keep is None else k[keep]), "kernels"
    o = table(profile, "ops")
    if not o.empty and has_values(o, "input_shapes") and has_values(o, "dur_us"):
        return narrow(o).dropna(subset=["dur_us"]), "ops"
    return pd.DataFrame(), ""


def _leaf_ops(o: pd.DataFrame, kinds: pd.Series) -> pd.Series:
    """Mask of the modelled host operators to price, each FLOP and microsecond once.

    Host operators nest (``aten::linear`` > ``aten::matmul`` > ``aten::mm``; a fused
    attention operator calls small element-wise helpers). On each (rank, thread), with
    operators in start order (an enclosing one first), a modelled operator is dropped when
    an enclosing modelled operator is of a heavier kind (:data:`~.registry.PRIORITY`), and an
    enclosing operator is dropped when it contains one of the same or a heavier kind.
    """
    m = o[kinds.notna()].assign(_kind=kinds[kinds.notna()])
    if m.empty:
        return pd.Series(False, index=o.index)
    m["_end"] = m["start_us"] + m["dur_us"]
    keys = [c for c in ("rank", "thread") if c in m.columns]
    m = m.sort_values([*keys, "start_us", "_end"], ascending=[True] * len(keys) + [True, False],
                      kind="mergesort")
    keep = dict.fromkeys(m.index, True)
    lane = m[keys].astype(TEXT).fillna("").agg("/".join, axis=1) if keys else \
        pd.Series("", index=m.index)
    stack: list[tuple[float, Any, int]] = []
    current = None
    for idx, ln, start, end, kind in zip(m.index, lane, m["start_us"], m["_end"], m["_kind"],
                                         strict=True):
        if ln != current:
            stack, current = [], ln
        while stack and stack[-1][0] <= start:
            stack.pop()
        prio = PRIORITY[str(kind)]
        if any(p > prio for _, _, p in stack):
            keep[idx] = False
        else:
            for _, anc, p in stack:
                if p <= prio:
                    keep[anc] = False
        stack.append((end, idx, prio))
    out = pd.Series(False, index=o.index)
    out[[i for i, k in keep.items() if k]] = True
    return out


def operator_costs(profile: Any, causal: bool = True, backward_factor: float = 2.5
                   ) -> pd.DataFrame:
    """Per-call cost of every priced device task (or host operator): the rows behind
    :func:`operator_efficiency`.

    Returns
    -------
    DataFrame
        The source rows (``kernels``, or ``ops`` for a profile without device tasks; for
        ``ops`` only the innermost modelled operators) with ``label``, ``kind``, ``flops``
        and ``bytes`` (the row's share of its operator call's, by time), ``call_flops`` and
        ``call_bytes`` (the call's), ``op_call``, ``call_first``, ``dtype`` (of the first
        input) and ``causal``; ``kind`` is NA where no model applies.
        ``attrs["source"]`` names the table.
    """
    if is_lazy(profile):  # priced per rank on the rank's worker
        out = per_rank_in_steps(profile, operator_costs, causal, backward_factor)
        out.attrs["source"] = "kernels" if "kernel" in " ".join(map(str, out.columns)) else ""
        return out
    return shared("operator_costs", (profile,), (causal, backward_factor),
                  lambda: _operator_costs(profile, causal, backward_factor))


#: The columns of the priced rows that :func:`operator_efficiency` and the chain searches
#: read; they price narrower rows than the full table. The PMU ratios of device tasks come
#: as their row maxima (:data:`PMU_MAXIMA`), not as six columns.
_NARROW = ("rank", "step", "name", "type", "op_name", "op_id", "stream", "thread", "start_us",
           "dur_us", "category", "input_shapes", "input_dtypes", "output_shapes",
           "output_dtypes", "output_formats", "concrete_inputs")
#: Pricing keys that no reader of :func:`narrow_costs`' rows reads task by task: on device
#: tasks they are coded on the whole table and read for the distinct calls only, instead of
#: copying their text for every task in scope (about 70 MB on a million Ascend tasks).
_KEY_ONLY = ("output_shapes", "output_dtypes", "output_formats", "concrete_inputs")
#: Columns of :func:`narrow_costs`' rows that every reader reads by code or compares with
#: one value (the names: the main kernel of each group; the category: memory tasks):
#: categoricals where the table's row ids are known.
_BY_CODE = ("name", "category")
#: Pricing keys the readers of :func:`narrow_costs` read per operator call, not as text
#: per task: coded on the whole table like :data:`_KEY_ONLY` and kept in the rows as
#: categoricals (one or two bytes per task instead of its text).
_CODED_KEYS = ("input_shapes", "input_dtypes")


def narrow_costs(profile: Any, causal: bool = True, backward_factor: float = 2.5
                  ) -> pd.DataFrame:
    """:func:`operator_costs` of an eager profile with only the :data:`_NARROW` columns,
    and of the price columns only the rows' shares (``flops``, ``bytes``), ``call_first``,
    ``kind``, ``dtype`` and ``causal`` (no ``call_flops``, ``call_bytes``, ``op_call``)."""
    return shared("operator_costs_narrow", (profile,), (causal, backward_factor),
                  lambda: _operator_costs(profile, causal, backward_factor, _NARROW,
                                          split=True))


def _pmu_in_scope(kernels: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`pmu_maxima` of the device tasks in scope (worked out on the whole table,
    then the tasks in scope kept): two columns instead of the six ratios taken out."""
    both = pmu_maxima(kernels)
    keep = scope_rows(kernels, False)
    if both is None or keep is None:
        return both
    return both[0][keep], both[1][keep]


def _outside_keys(kernels: pd.DataFrame) -> dict[str, tuple[np.ndarray, pd.Series]]:
    """The :data:`_KEY_ONLY` and :data:`_CODED_KEYS` columns of the tasks in scope, by code.

    Each is coded on the whole table (once per :func:`shared_results` block) and the codes
    of the tasks in scope kept: (code of each task in scope, text of each code).
    """
    keep = scope_rows(kernels, False)
    out = {}
    for c in _KEY_ONLY + _CODED_KEYS:
        if c not in kernels.columns:
            continue
        text = kernels[c].astype(TEXT)
        data = getattr(text.array, "_pa_array", None)
        ids = ids_of(data) if data is not None else None
        values = values_of(data) if data is not None else None
        if ids is not None and values is not None:  # the cache's ids and their text
            codes, uniq = ids, pd.Series(values, dtype=TEXT)
        else:
            codes, uniq = shared_factorize(text, use_na_sentinel=False)
            uniq = pd.Series(uniq, dtype=TEXT)
        out[c] = (codes if keep is None else codes[keep], uniq)
    return out


def _operator_costs(profile: Any, causal: bool, backward_factor: float,
                    columns: Sequence[str] | None = None, split: bool = False
                    ) -> pd.DataFrame:
    """:func:`operator_costs`; ``columns`` and ``split`` as :func:`_source`'s."""
    rows, source = _source(profile, columns, split)
    outside = _outside_keys(table(profile, "kernels")) if split and source == "kernels" \
        else {}
    cols = {"kind": TEXT, "flops": "float64", "bytes": "float64", "dtype": TEXT,
            "causal": TEXT}
    if rows.empty:
        out = empty_frame(cols, "no input shapes in this profile (Ascend kernel_details "
                                "Input Shapes, or PyTorch record_shapes=True)")
        out.attrs["source"] = ""
        return out
    rows = rows.assign(label=_label(rows))
    if source == "ops":
        rows = rows[_leaf_ops(rows, _per_label(rows["label"], kind_of)).to_numpy()]
    keys = ["label"] + [c for c in ("input_shapes", "input_dtypes", "output_shapes",
                                    "output_dtypes", "output_formats", "concrete_inputs")
                        if c in rows.columns]
    fast = _price_by_code(rows, keys, cols, causal, backward_factor,
                          call_ids=columns is not None, outside=outside)
    if fast is not None:
        fast = with_columns(fast, **{c: categorical_of(*outside[c]) for c in _CODED_KEYS
                                     if c in outside})
        fast = _spread_over_calls(fast, whole=columns is None)
        fast.attrs["source"] = source
        return fast
    if outside:  # the merge below needs every key as a column
        return _operator_costs(profile, causal, backward_factor, columns)
    uniq = rows[keys].astype(TEXT).drop_duplicates()
    priced = [_price(r._asdict(), causal, backward_factor)
              for r in uniq.itertuples(index=False)]
    table_ = pd.DataFrame(priced, columns=list(cols), index=uniq.index)
    table_ = pd.concat([uniq.reset_index(drop=True), table_.reset_index(drop=True)], axis=1)
    merged = rows.astype({c: TEXT for c in keys}).merge(table_, on=keys, how="left")
    merged = _spread_over_calls(merged.astype({c: d for c, d in cols.items()}))
    merged.attrs["source"] = source
    return merged


def _spread_over_calls(rows: pd.DataFrame, whole: bool = True) -> pd.DataFrame:
    """Each operator call's price counted once, spread over its rows by time.

    Rows with the same (``rank``, ``op_id``) are the kernels of one operator call; a row
    without ``op_id`` is a call of its own. A call's FLOPs and bytes go to its non-memory
    rows in proportion to their duration (memsets and copies take none; a call of memory
    tasks only shares by duration, and one without durations evenly). Without ``whole``
    (:func:`narrow_costs`, whose readers read a row's share and the calls' first rows)
    the call's own price and number (``call_flops``, ``call_bytes``, ``op_call``) are left
    out: three million-row columns fewer.
    """
    n = len(rows)
    # no op_id column: no task is linked to an operator call (no array of NaN built)
    op_id = pd.to_numeric(rows["op_id"], errors="coerce").to_numpy(
        np.float64, na_value=np.nan) if "op_id" in rows.columns else None
    linked = ~np.isnan(op_id) if op_id is not None else None
    call_flops = rows["flops"].to_numpy(np.float64, na_value=np.nan)
    call_bytes = rows["bytes"].to_numpy(np.float64, na_value=np.nan)
    if op_id is None or linked is None or not linked.any():
        # every row a call of its own (Ascend tasks, host operators): its share is
        # x / x = 1 whichever rule below applies, so the prices are the call's
        first = np.ones(n, dtype=bool)
        if not whole:  # the rows' own price columns are the shares
            return with_columns(rows, call_first=first)
        # call_flops / call_bytes may be views of rows' price columns, which the result
        # replaces: both callers hand over a frame of their own, so no copy is needed
        return with_columns(rows, flops=call_flops * 1.0, bytes=call_bytes * 1.0,
                            call_flops=call_flops, call_bytes=call_bytes,
                            op_call=np.arange(n, dtype=np.int64), call_first=first)
    if "rank" in rows.columns:
        rank, _ = pd.factorize(rows["rank"], use_na_sentinel=False)
    else:
        rank = np.zeros(n, dtype=np.int64)
    key = np.where(linked, 0, -1 - np.arange(n, dtype=np.int64)).astype(np.int64)
    if linked.any():
        ids, _ = pd.factorize(op_id[linked])
        key[linked] = rank[linked].astype(np.int64) * (int(ids.max()) + 1) + ids
    call, _ = pd.factorize(key)
    n_calls = int(call.max()) + 1 if n else 0
    dur = rows["dur_us"].to_numpy(np.float64, na_value=np.nan) if "dur_us" in rows.columns \
        else np.ones(n)
    dur = np.where(np.isfinite(dur) & (dur > 0), dur, 0.0)
    memory = rows["category"].eq("memory").fillna(False).to_numpy(bool) \
        if "category" in rows.columns else np.zeros(n, dtype=bool)
    weight = np.where(memory, 0.0, dur)
    rows_per_call = np.bincount(call, minlength=n_calls).astype(np.float64)
    total_w = np.bincount(call, weight, n_calls)
    total_d = np.bincount(call, dur, n_calls)
    # non-memory time, else any time, else evenly
    share = np.where(total_w[call] > 0, weight / np.where(total_w > 0, total_w, 1)[call],
                     np.where(total_d[call] > 0, dur / np.where(total_d > 0, total_d, 1)[call],
                              1.0 / rows_per_call[call]))
    first = np.zeros(n, dtype=bool)
    first[first_rows(call)] = True
    if not whole:
        return with_columns(rows, flops=call_flops * share, bytes=call_bytes * share,
                            call_first=first)
    return with_columns(rows, flops=call_flops * share, bytes=call_bytes * share,
                        call_flops=call_flops, call_bytes=call_bytes,
                        op_call=call, call_first=first)


def _price(d: dict[str, Any], causal: bool, backward_factor: float) -> tuple[Any, ...]:
    """(kind, flops, bytes, dtype, causal) of one distinct call (see :func:`cost_of`)."""
    got = cost_of(d["label"], d.get("input_shapes"), d.get("input_dtypes"),
                  d.get("output_shapes"), d.get("output_dtypes"), d.get("output_formats"),
                  d.get("concrete_inputs"), causal, backward_factor)
    dts = split_args(d.get("input_dtypes"))
    dt = next((x for x in dts if np.isfinite(dtype_bytes(x))), "")
    if got is None:
        return (pd.NA, np.nan, np.nan, dt, pd.NA)
    c, causal_txt = got
    return (c.kind, c.flops, c.bytes, dt, causal_txt or pd.NA)


def _price_by_code(rows: pd.DataFrame, keys: list[str], cols: dict[str, str], causal: bool,
                   backward_factor: float, call_ids: bool = False,
                   outside: dict[str, tuple[np.ndarray, pd.Series]] | None = None
                   ) -> pd.DataFrame | None:
    """:func:`operator_costs`' table without a merge: each distinct call priced once.

    The key columns are coded (missing values form a key of their own, as in the merge),
    each distinct combination is priced once and the prices are spread back by code.
    Gives the rows in order with a fresh index and the key columns as text, as the
    left merge does. None when a combined code could overflow or a priced column
    already exists (the caller then merges). ``call_ids`` adds ``_call``: the distinct
    call of each row, numbered in order of first appearance. ``outside``: keys that are not
    columns of ``rows`` (:func:`_outside_keys`), priced but not returned.
    """
    outside = outside or {}
    if any(c in rows.columns for c in cols):
        return None
    text = rows.astype({c: TEXT for c in keys})
    code = np.zeros(len(text), dtype=np.int64)
    span = 1.0
    for c in keys:
        part, uniq = shared_factorize(text[c], use_na_sentinel=False)
        span *= max(len(uniq), 1)
        if span >= 2.0**62:
            return None
        code *= max(len(uniq), 1)  # in place: no new million-row array per key
        code += part
    for part, uniq in outside.values():
        span *= max(len(uniq), 1)
        if span >= 2.0**62:
            return None
        code *= max(len(uniq), 1)
        code += part
    # distinct calls numbered in order of first appearance, and the first row of each
    if span <= 4 * len(code) + 1024:
        inverse, first = first_appearance(code)
    else:
        inverse, _ = pd.factorize(code)
        first = first_rows(inverse)
    distinct = take_rows(text[keys], first)
    distinct = distinct.assign(**{c: uniq.array.take(part[first].astype(np.int64))
                                  for c, (part, uniq) in outside.items()})
    priced = [_price(d._asdict(), causal, backward_factor)
              for d in distinct.itertuples(index=False)]
    table_ = typed(pd.DataFrame(priced, columns=list(cols)), cols)
    out = text.reset_index(drop=True)
    take = inverse.ravel()
    # each price column is the small table's column taken by code (no Python object per
    # row); the numbers as numpy arrays handed over uncopied
    out = with_columns(out, **{c: _price_column(table_[c], d, take, coded=call_ids)
                               for c, d in cols.items()})
    return with_columns(out, _call=take) if call_ids else out


def _price_column(prices: pd.Series, dtype: str, take: np.ndarray, coded: bool) -> Any:
    """One price column of the distinct calls spread over the rows (``take``: the call of
    each row).

    Numbers as a numpy array; text (kind, dtype, causal) as text, or with ``coded`` (the
    rows :func:`narrow_costs` keeps for the analyses) as a categorical over the few
    distinct prices: one byte per row instead of a string.
    """
    if dtype == "float64":
        return prices.to_numpy(np.float64)[take]
    if not coded:
        return take_array(prices.array, take)
    codes, uniq = pd.factorize(prices, use_na_sentinel=True)
    small = codes.astype(np.int8 if len(uniq) < 127 else np.int32)
    return pd.Categorical.from_codes(small[take], dtype=pd.CategoricalDtype(
        pd.Index(uniq, dtype=dtype)))


def _per_label(labels: pd.Series, func: Any) -> pd.Series:
    """``labels.map(func)``, calling ``func`` once per distinct label."""
    codes, uniq = shared_factorize(labels, use_na_sentinel=False)
    mapped = np.array([func(u) for u in uniq] + [None], dtype=object)
    return pd.Series(mapped[codes], index=labels.index, dtype=object)

