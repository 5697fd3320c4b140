"""Chains a fused kernel would replace: runs of element-wise kernels, unfused attention.

Both searches walk the priced rows of :mod:`~.costs` in execution order on each (rank,
stream) — host thread for a profile without device tasks — and price what one fused
kernel would take on the hardware.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...errors import InvalidArgumentError
from ...format import counted
from ...specs import Hardware
from .._cluster_steps import per_rank_in_steps
from .._frames import is_lazy
from .._order import stable_order
from .._shared import shared, shared_factorize
from .._tasks import scope_lanes
from .._util import (
    add_note,
    empty_frame,
    noted_no_step,
    one_value,
    ranks_noted_no_step,
    table,
    take_rows,
    typed,
    value_changes,
    without_no_step_note,
)
from .chains_bmm import _bmm_triples, _parsed, may_hold_bmm_attention
from .costs import first_rows, narrow_costs
from .hardware import infer_hardware
from .tensors import peak_key

__all__ = ["elementwise_chains", "attention_chains", "attention_chain_gemms",
           "may_hold_bmm_attention"]

#: Kinds that form an element-wise chain (normalisations and reductions end a chain: their
#: fusions are the named patterns of :data:`perfkit.analysis.operators.PATTERNS`).
_CHAIN_KINDS = ("elementwise",)


def _ordered(profile: Any, columns: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """Priced rows in execution order per (rank, stream or thread), and where each lane
    begins in that order.

    Only ``columns`` (those present) are taken, besides ``rank``; the order is found on
    the sort keys alone and shared by the callers of one :func:`shared_results` block.
    """
    rows, order, new_lane = shared("ordered", (profile,), (), lambda: _order(profile))
    if rows.empty:
        return pd.DataFrame(), new_lane
    cols = list(dict.fromkeys(["rank", *[c for c in columns if c in rows.columns]]))
    return take_rows(rows[cols], order).reset_index(drop=True), new_lane


def _order(profile: Any) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The priced rows, the positions that put them in execution order per (rank, lane),
    and whether each row (in that order) begins a lane.

    The lanes are the streams (the host threads of a profile without device tasks),
    ordered as their texts; where the rows are the tasks in scope and the streams' texts
    sort as their numbers, that is the order the analyses of task sequences share
    (:func:`~perfkit.analysis._tasks.scope_lanes`), lane starts included.
    """
    rows = narrow_costs(profile)
    none = np.zeros(0, dtype=np.int64)
    if rows.empty or "start_us" not in rows.columns:
        return pd.DataFrame(), none, np.zeros(0, dtype=bool)
    if _as_the_streams(rows):
        lanes = scope_lanes(table(profile, "kernels"))
        order = np.arange(len(rows)) if lanes.positions is None else lanes.positions
        return rows, order, lanes.lane_start(len(rows))
    lane = "stream" if "stream" in rows.columns and rows["stream"].notna().any() else "thread"
    if lane not in rows.columns:
        rows = rows.assign(thread=0)
    # the lane ordered as its text ("" when missing), coded per distinct value: ``_lane``
    # is the rank of the lane's text among the lanes' texts
    code, uniq = shared_factorize(rows[lane], use_na_sentinel=True)
    missing = bool((code < 0).any())
    code = np.where(code < 0, len(uniq), code) if missing else code
    text = np.array([*pd.Series(uniq, dtype=object).astype(str), ""], dtype=str)
    _, text_rank = np.unique(text, return_inverse=True)
    lanes_ = text_rank.ravel().astype(np.int64)[code]
    if "rank" not in rows.columns:
        rows = rows.assign(rank=0)
    keys = pd.DataFrame({"rank": rows["rank"].array, "_lane": lanes_,
                         "start_us": rows["start_us"].to_numpy()})
    order = stable_order(keys, ["rank", "_lane", "start_us"])
    order = np.arange(len(rows)) if order is None else order
    return rows, order, np.r_[True, _lane_changes(rows["rank"], lanes_, order)]


def _as_the_streams(rows: pd.DataFrame) -> bool:
    """Whether the lanes' order is the tasks in scope's (rank, stream, start) order.

    So when the rows are the device tasks in scope (:func:`narrow_costs` of a kernels
    table), every task has a stream, and the streams' texts sort as their numbers do
    (streams 2 and 3, not 2 and 10).
    """
    if rows.attrs.get("source") != "kernels" or "stream" not in rows.columns or \
            not pd.api.types.is_integer_dtype(rows["stream"].dtype):
        return False
    stream = rows["stream"]
    if not len(stream) or stream.isna().any():
        return False
    numbers = np.sort(pd.unique(stream.to_numpy(np.int64)))  # hashed: a few streams
    return bool((np.argsort(numbers.astype(str), kind="stable") == np.arange(len(numbers))
                 ).all())


def elementwise_chains(profile: Any, hardware: Hardware | None = None, min_chain: int = 3,
                       kernel_efficiency: float = 0.7, without_attention: bool = False,
                       without_copies: bool = False) -> pd.DataFrame:
    """Runs of consecutive element-wise kernels (memory-bound by nature).

    On each (rank, stream) (host thread for a profile without device tasks), a run is at
    least ``min_chain`` priced element-wise kernels in a row (a normalisation, reduction,
    GEMM or attention kernel ends it). With ``without_attention``, the kernels that the
    unfused attention chains of :func:`attention_chains` count (a scale, mask or dropout
    between their products and softmax) end a run too, and are in none: a fused attention
    kernel replaces them, and their time is that finding's. With ``without_copies``, the
    copy kernels (token ``T`` of :func:`~perfkit.analysis.operators.kernel_tokens`, what
    the ``copies`` pattern of :func:`~perfkit.analysis.operators.unfused_patterns` counts
    whole) end a run and are in none, so that a copy's time is counted once. One fused
    kernel would move about the data of the run's largest member once, at
    ``kernel_efficiency`` of the memory bandwidth:
    ``fused_us = max(bytes) / (kernel_efficiency · bandwidth)`` and
    ``saving_us = max(0, total_us - fused_us)``.

    Returns
    -------
    DataFrame
        One row per run: ``rank``, ``kernels``, ``total_us``, ``fused_us``, ``saving_us``,
        ``names`` (the operators, ``" > "``-joined). Empty without shapes or hardware.
        The device tasks read are those in scope
        (:func:`~perfkit.analysis._tasks.scope_rows`): a task of no step (launched before
        the trace began) is left out where other tasks have one, with a note.
    """
    cols = {"rank": "Int64", "kernels": "int64", "total_us": "float64", "fused_us": "float64",
            "saving_us": "float64", "names": TEXT}
    if hardware is None:
        hardware, why = infer_hardware(profile)
        if hardware is None:
            return empty_frame(cols, why)
    if isinstance(min_chain, bool) or not isinstance(min_chain, int) or min_chain < 2:
        raise InvalidArgumentError("min_chain", "must be a whole number >= 2", min_chain)
    if not 0 < kernel_efficiency <= 1:
        raise InvalidArgumentError("kernel_efficiency", "must be in (0, 1]", kernel_efficiency)
    if is_lazy(profile):  # streams never span ranks: each rank on its worker
        # the tasks of no step left out as the whole cluster leaves them out
        return ranks_noted_no_step(typed(per_rank_in_steps(profile, elementwise_chains,
                                                           hardware, min_chain,
                                                           kernel_efficiency,
                                                           without_attention, without_copies,
                                                           noted=True),
                                         cols),
                                   table(profile, "kernels"))
    rows, order, new_lane = shared("ordered", (profile,), (), lambda: _order(profile))
    if rows.empty:
        return empty_frame(cols, "no input shapes in this profile")
    mem = _chain_kind(profile)
    if without_attention:  # the attention chains' own kernels: that finding's time
        mem = mem & ~_in_attention(profile)
    if without_copies:  # the copies pattern's time
        mem = mem & ~_copy_rows(profile)
    # the rows in execution order are read as arrays taken in that order, and only the
    # element-wise rows' durations and sizes (no frame of every row in order)
    brk = ~mem | new_lane | ~np.r_[False, mem[:-1]]
    at = np.flatnonzero(mem)  # the element-wise rows, in run order
    if not len(at):
        return empty_frame(cols, "no element-wise operator")
    # each run is a block of consecutive element-wise rows: summed block by block (a run
    # never spans two ranks, so its first row gives the rank). An element-wise row starts
    # a run where it breaks one (a new lane, or a row of another kind before it)
    lo = np.flatnonzero(brk[at])
    hi = np.r_[lo[1:], len(at)]
    dur = rows["dur_us"].to_numpy(np.float64, na_value=np.nan)[order[at]]
    size = rows["bytes"].to_numpy(np.float64, na_value=np.nan)[order[at]]
    total = np.add.reduceat(np.nan_to_num(dur, nan=0.0), lo)
    biggest = np.maximum.reduceat(np.where(np.isnan(size), -np.inf, size), lo)
    keep = hi - lo >= min_chain
    lo, hi, total, biggest = lo[keep], hi[keep], total[keep], biggest[keep]
    out = pd.DataFrame({"rank": rows["rank"].array.take(order[at[lo]]), "kernels": hi - lo,
                        "total_us": total,
                        "max_bytes": np.where(np.isneginf(biggest), np.nan, biggest)})
    # names of the runs kept: the labels of each run's rows, by code
    codes, text = _ordered_codes(profile, "label", at)
    out["names"] = _joined_runs(codes, text, lo, hi)
    out["fused_us"] = out["max_bytes"] / (kernel_efficiency * hardware.memory_bandwidth) * 1e6
    out["saving_us"] = (out["total_us"] - out["fused_us"]).clip(lower=0)
    return _noted(typed(out, cols), profile, rows)


def _in_attention(profile: Any) -> np.ndarray:
    """Whether each :func:`_ordered` row is one that :func:`attention_chains` counts: inside
    a chain, not a copy."""
    rows, spans, counted_ = _attention_found(profile)
    inside = np.zeros(len(rows), dtype=bool)
    for a, b in spans:
        inside[a:b + 1] = True
    return inside & counted_


def _copy_rows(profile: Any) -> np.ndarray:
    """Whether each :func:`_ordered` row is a copy kernel (token ``T``), as the copies
    pattern of :func:`~perfkit.analysis.operators.unfused_patterns` reads it.

    A row's token depends on its type and name alone: it is decided once per distinct
    label on the rows in table order (:func:`~perfkit.analysis.operators.tokens.token_is`)
    and the answers put in execution order, rather than taking the type and name text of
    every row in that order (a million strings on the benchmark rank).
    """
    from ..operators.tokens import token_is

    rows, order, _ = shared("ordered", (profile,), (), lambda: _order(profile))
    if rows.empty or "name" not in rows.columns:
        return np.zeros(0 if rows.empty else len(order), dtype=bool)
    return token_is(rows[[c for c in ("type", "name") if c in rows.columns]], "T")[order]


def _noted(out: pd.DataFrame, profile: Any, rows: pd.DataFrame) -> pd.DataFrame:
    """``out`` with the note of the device tasks of no step left out of the priced rows
    (:func:`~perfkit.analysis._util.noted_no_step`), where the rows are device tasks."""
    if rows.attrs.get("source") != "kernels":
        return out
    return noted_no_step(out, table(profile, "kernels"))


def _lane_changes(rank: pd.Series, lane: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``value_changes(rank, lane)`` of the rows taken in ``order`` (length n - 1).

    The ranks and lanes are whole numbers: compared as numbers, missing ranks equal to
    each other and to no number (as ``value_changes`` codes them).
    """
    lane = lane[order]
    out = lane[1:] != lane[:-1]
    if one_value(rank):  # a rank's own tasks: only the lanes change
        return out
    if pd.api.types.is_integer_dtype(rank.dtype) or pd.api.types.is_float_dtype(rank.dtype):
        missing = rank.isna().to_numpy(bool)[order]
        values = rank.to_numpy(np.float64, na_value=0.0)[order]
        out |= (missing[1:] != missing[:-1]) | (~missing[1:] & (values[1:] != values[:-1]))
        return out
    return out | value_changes(pd.Series(rank.array.take(order)))


def _chain_kind(profile: Any) -> np.ndarray:
    """Whether each :func:`_ordered` row is of a :data:`_CHAIN_KINDS` kind.

    The kind is a price, the same for every row of a distinct call (``_call``): it is
    read once per call instead of once per task.
    """
    rows, order, _ = shared("ordered", (profile,), (), lambda: _order(profile))
    if "_call" not in rows.columns:
        return rows["kind"].isin(list(_CHAIN_KINDS)).fillna(False).to_numpy(bool)[order]
    call = rows["_call"].to_numpy(np.int64)
    per_call = pd.Series(rows["kind"].array.take(first_rows(call)))
    return per_call.isin(list(_CHAIN_KINDS)).fillna(False).to_numpy(bool)[call[order]]


def _ordered_codes(profile: Any, column: str, at: np.ndarray | None = None
                   ) -> tuple[np.ndarray, list[str]]:
    """Codes of ``column`` of the :func:`_ordered` rows (of those at positions ``at`` of
    that order only, when given), and the text of each code.

    Coded on the priced rows (codes the pricing shares) and put in order, instead of
    taking the text column in order and coding it again.
    """
    rows, order, _ = shared("ordered", (profile,), (), lambda: _order(profile))
    codes, uniq = shared_factorize(rows[column], use_na_sentinel=False)
    return codes[order if at is None else order[at]], \
        pd.Series(uniq, dtype=TEXT).astype(str).tolist()


def _joined_runs(codes: np.ndarray, text: list[str], lo: np.ndarray, hi: np.ndarray
                 ) -> Any:
    """``" > ".join(text[c] for c in codes[a:b])`` for each run ``[a, b)`` of ``lo``/``hi``,
    as a ``string`` array.

    Runs repeat (every layer runs the same chain), so each distinct sequence of codes is
    joined once (runs of one length are stacked and deduplicated as rows) and the runs
    take their text from the few joined ones: no Python string per run to convert.
    """
    joined: list[str] = []
    which = np.zeros(len(lo), dtype=np.int64)
    lengths = hi - lo
    base = max(len(text), 1)
    for length in np.unique(lengths):
        sel = np.flatnonzero(lengths == length)
        seqs = codes[lo[sel][:, None] + np.arange(length)].astype(np.int64)
        if length * np.log2(base) < 62:  # each sequence as one integer (digits in base)
            inverse, _ = pd.factorize(seqs @ base ** np.arange(length, dtype=np.int64))
            uniq = seqs[first_rows(inverse)]
        else:
            uniq, inverse = np.unique(seqs, axis=0, return_inverse=True)
        which[sel] = len(joined) + inverse.ravel()
        joined.extend(" > ".join([text[c] for c in row]) for row in uniq.tolist())
    return pd.array(joined, dtype=TEXT).take(which)


def attention_chains(profile: Any, hardware: Hardware | None = None,
                     kernel_efficiency: float = 0.7) -> pd.DataFrame:
    """Attention computed as matmul, softmax (dropout), matmul instead of a fused kernel.

    The chains are :func:`~perfkit.analysis.operators.attention_spans.attention_spans` of
    the priced rows in execution order, as the ``softmax_dropout_matmul`` rows of
    :func:`perfkit.analysis.operators.unfused_patterns` find them: batched ``q·kᵀ`` (3-D or 4-D),
    softmax, ``·v`` bmm of matching shapes where the rows carry shapes, else the letter
    pattern of :data:`perfkit.analysis.operators.PATTERNS`; each from the first product's
    first kernel to the second's last on the lane. Only ranks with no fused-attention
    kernel are searched; a backward chain may have other matrix products between its
    members (a graph's schedule: the projections' gradients). A chain's ``kernels``,
    ``total_us`` and ``flops`` leave out its copy kernels (``.contiguous()`` of ``v``,
    counted by the copies pattern) and, in a chain found by shapes, the rows that are not
    its own (:func:`~perfkit.analysis.shapes.bmm_attention.foreign_rows`: other matrix
    products, the transposes of another attention's ``q``, ``k``, ``v``). A fused kernel
    does the chain's matrix FLOPs without writing the score matrix:
    ``fused_us = FLOPs of the chain's GEMMs / (kernel_efficiency · peak)``;
    ``saving_us = max(0, total_us - fused_us)``; NaN where the FLOPs cannot be read.

    Returns
    -------
    DataFrame
        ``rank``, ``kernels``, ``total_us``, ``flops``, ``fused_us``, ``saving_us``.
    """
    cols = {"rank": "Int64", "kernels": "int64", "total_us": "float64", "flops": "float64",
            "fused_us": "float64", "saving_us": "float64"}
    if hardware is None:
        hardware, why = infer_hardware(profile)
        if hardware is None:
            return empty_frame(cols, why)
    if is_lazy(profile):
        # the tasks of no step left out as the whole cluster leaves them out
        out = typed(per_rank_in_steps(profile, attention_chains, hardware,
                                      kernel_efficiency, noted=True), cols)
        if out.empty:  # no chain: no note of them, as the eager search has it
            return without_no_step_note(out)
        return ranks_noted_no_step(out, table(profile, "kernels"))
    rows, spans, counted_ = _attention_found(profile)
    if not spans:
        return empty_frame(cols, "no unfused attention chain"
                           if not rows.empty else "no input shapes in this profile")
    found = []
    dur = rows["dur_us"].to_numpy(float)
    flops = rows["flops"].where(rows["kind"] == "gemm", 0.0).to_numpy(float)  # NaN: unread
    dts = rows["dtype"].astype(TEXT).fillna("")
    unpriced = 0
    for a, b in spans:
        key = peak_key(dts.iloc[a]) or hardware.default_dtype
        peak = hardware.peak(key if key in hardware.peak_flops else None)
        mine = counted_[a:b + 1]
        fl = float(flops[a:b + 1][mine].sum())
        if not fl > 0:  # a product not priced: no fused kernel's time, no saving known
            unpriced, fl = unpriced + 1, float("nan")
        fused = fl / (kernel_efficiency * peak) * 1e6
        tot = float(dur[a:b + 1][mine].sum())
        found.append((rows["rank"].iloc[a], int(mine.sum()), tot, fl, fused,
                      0.0 if tot < fused else tot - fused))  # NaN stays NaN
    out = typed(pd.DataFrame(found, columns=list(cols)), cols)
    if unpriced:
        out = add_note(out, f"{counted(unpriced, 'attention chain')} not priced: the FLOPs "
                            "of the matrix products could not be read (their shapes or data "
                            "types are not recorded), so a fused kernel's time is not known")
    return _noted(out, profile, rows)


def attention_chain_gemms(profile: Any) -> pd.DataFrame:
    """The GEMM calls inside the chains of :func:`attention_chains`, per operator and shapes.

    What the unfused-attention finding already counts: the GEMM rule leaves these calls
    out of its groups (:func:`~perfkit.analysis.efficiency.operator_efficiency` groups,
    keyed alike). A chain's GEMM rows are its priced rows of kind ``gemm``; ``count`` is
    their operator calls (first rows, ``call_first``), as the efficiency table counts
    them, and ``total_us`` their summed durations.

    Returns
    -------
    DataFrame
        ``key`` (the operator label), ``input_shapes``, ``input_dtypes`` (missing as
        ``""``), ``count``, ``total_us``, one row per group holding such calls.
    """
    cols = {"key": TEXT, "input_shapes": TEXT, "input_dtypes": TEXT,
            "count": "int64", "total_us": "float64"}
    if is_lazy(profile):
        return typed(per_rank_in_steps(profile, attention_chain_gemms), cols)
    rows, spans, _ = _attention_found(profile)
    if not spans:
        return empty_frame(cols, "no unfused attention chain")
    gemm = _in_attention(profile) & rows["kind"].eq("gemm").fillna(False).to_numpy(bool)
    if not gemm.any():
        return empty_frame(cols, "no GEMM in the attention chains")
    every, order, _ = shared("ordered", (profile,), (), lambda: _order(profile))
    at = order[np.flatnonzero(gemm)]  # those rows among the priced rows
    got = pd.DataFrame({c: pd.Series(every[c].array.take(at), dtype=TEXT).fillna("")
                        if c in every.columns else "" for c in ("label", "input_shapes",
                                                                "input_dtypes")})
    first = every["call_first"].to_numpy(bool)[at] if "call_first" in every.columns \
        else np.ones(len(at), dtype=bool)
    got = got.assign(count=first.astype(np.int64),
                     total_us=every["dur_us"].to_numpy(np.float64, na_value=np.nan)[at])
    out = got.groupby(["label", "input_shapes", "input_dtypes"], sort=False).agg(
        count=("count", "sum"), total_us=("total_us", "sum")).reset_index()
    return typed(out.rename(columns={"label": "key"}), cols)


def _attention_found(profile: Any) -> tuple[pd.DataFrame, list[tuple[int, int]], np.ndarray]:
    """The ordered rows :func:`attention_chains` reads, its chains on the ranks without a
    fused-attention kernel (first and last row), and whether each row is counted (not a
    copy); once per :func:`shared_results` block."""
    return shared("attention_found", (profile,), (), lambda: _find_attention(profile))


def _find_attention(profile: Any) -> tuple[pd.DataFrame, list[tuple[int, int]], np.ndarray]:
    """:func:`_attention_found`."""
    from ..operators import PATTERNS, kernel_tokens
    from ..operators.attention_spans import attention_spans

    shaped = may_hold_bmm_attention(profile)
    rows, new_lane = _ordered(profile, ("type", "name", "dur_us", "flops", "kind", "dtype",
                                        *(("label", "input_shapes") if shaped else ())))
    if rows.empty:
        return rows, [], np.zeros(0, dtype=bool)
    tok = kernel_tokens(rows).to_numpy()
    if not (tok == "F").any():  # both searches need a softmax
        return rows, [], tok != "T"
    flash = set(rows.loc[tok == "Z", "rank"].dropna().tolist())
    sep = np.where(new_lane, "|", "")
    text_tokens = np.char.add(sep.astype(str), tok.astype(str))
    row_of = np.repeat(np.arange(len(rows)), np.char.str_len(text_tokens))
    text = "".join(text_tokens.tolist())
    letter = [(int(row_of[m.start()]), int(row_of[m.end() - 1]))
              for m in re.finditer(PATTERNS["softmax_dropout_matmul"][0], text)]
    triples, foreign = _bmm_triples(rows, new_lane) if shaped else ([], None)
    label_of, shapes_of = _row_reader(profile, "label"), _row_reader(profile, "input_shapes")
    spans = attention_spans(letter, triples, label_of,
                            lambda i: _parsed(shapes_of(i)))
    rank = rows["rank"]
    spans = [(a, b) for a, b in spans if rank.iloc[a] not in flash]
    counted_ = tok != "T"  # copies: the copies pattern's time
    if foreign is not None and len(foreign):  # rows a graph ran between a chain's members
        counted_[foreign] = False
    return rows, spans, counted_


def _row_reader(profile: Any, column: str) -> Any:
    """``column`` of the :func:`_ordered` row at a position, read one row at a time (the
    few letter matches), without taking the column in order; NA where it is absent."""
    rows, order, _ = shared("ordered", (profile,), (), lambda: _order(profile))
    if column not in rows.columns:
        return lambda i: pd.NA
    values = rows[column]
    return lambda i: values.iloc[int(order[i])]
