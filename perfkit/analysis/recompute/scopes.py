"""Recompute seen from the operator names of a MindSpore profile, without the IR: the
``recompute_`` scope that ``Cell.recompute()`` puts in front of the cell's operators
(:func:`recompute_scopes`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._frames import is_lazy, per_rank
from .._shared import shared_factorize
from .._util import (
    empty_frame,
    has_values,
    n_step_pairs,
    nan_as_zero,
    one_value,
    table,
    take_rows,
    typed,
)

if TYPE_CHECKING:  # the type only; analyses never read files
    pass
from ..._text_dtype import TEXT
from .nodes import _scope_parts

__all__ = ["recompute_scopes", "SCOPE_COLUMNS", "RECOMPUTE_SCOPE"]


#: A scope segment of a MindSpore operator name that a ``Cell.recompute()`` puts in front
#: of the cell's scope (``recompute_Default/...``, ``Gradients/recompute_Default/...``).
RECOMPUTE_SCOPE = r"(?:^|/)recompute_"

#: Columns of :func:`recompute_scopes`.
SCOPE_COLUMNS: dict[str, str | pd.StringDtype] = {
    "rank": "Int64", "source": TEXT, "tasks": "int64", "scoped_tasks": "int64",
    "forward_scoped_tasks": "int64", "scoped_names": "int64", "forward_scoped_us": "float64",
    "compute_us": "float64", "forward_scoped_share": "float64", "layers": TEXT,
    "scoped_layers": TEXT, "recompute": TEXT,
}


def recompute_scopes(profile: Any) -> pd.DataFrame:
    """Recompute seen in the operator names of a MindSpore profile, without the IR.

    ``Cell.recompute()`` (MindFormers' full recompute of a layer, or of a sub-cell) puts
    ``recompute_`` in front of the cell's scope, so every operator of a recomputed cell
    runs as ``recompute_Default/.../0-LLamaDecodeLayer/.../MatMul-op3`` (its gradient as
    ``Gradients/recompute_Default/...``). The device tasks (``kernels``), or on a CPU
    profile the host operators (``ops``), are read by name.

    Returns
    -------
    DataFrame
        One row per rank (:data:`SCOPE_COLUMNS`): ``source`` (the table read), ``tasks``
        (compute tasks), ``scoped_tasks`` (those under a ``recompute_`` scope),
        ``forward_scoped_tasks`` (not under ``Gradients/``), ``scoped_names`` (distinct
        operators under the scope), ``forward_scoped_us`` (their time per step: recomputing
        them costs about this again, once per micro-batch), ``compute_us`` (all compute time
        per step), ``forward_scoped_share`` (the ratio), ``layers`` and ``scoped_layers``
        (decoder layer numbers in the names, all and under the scope; empty when the names
        carry none), ``recompute`` ("full" when every layer seen has operators under the
        scope, "partial" when some do, "cells" when the names carry no layer number,
        "none" without the scope). Empty when the profile has no operator names.

    Notes
    -----
    The scope says which cells are *configured* for recompute. Selective recompute of
    single primitives (``select_recompute``) marks operators without changing their scope:
    it is seen only in the IR (:func:`recompute_check`). Per step = divided by the number of
    (rank, step) pairs of the tasks (1 without steps).
    """
    if is_lazy(profile):
        return per_rank(profile, recompute_scopes)
    source, frame, keep = _named_tasks(profile)
    if frame is None:
        return empty_frame(SCOPE_COLUMNS, "no device task or host operator names to read")
    # the names are read by code: each distinct name is matched once (a profile repeats a
    # few hundred names over a million tasks) and no task's text is copied
    code, uniq = shared_factorize(frame["name"], use_na_sentinel=True)
    text = pd.Series(uniq, dtype=object).astype(TEXT).fillna("")
    text = pd.concat([text, pd.Series([""], dtype=TEXT)], ignore_index=True)
    code = np.where(code < 0, len(text) - 1, code)  # a missing name reads as ""
    scoped_of = text.str.contains(RECOMPUTE_SCOPE, regex=True).to_numpy(bool)
    grad_of = text.str.startswith("Gradients/").to_numpy(bool)
    text = text.tolist()
    dur_all = frame["dur_us"].to_numpy(np.float64, na_value=np.nan)
    pair_cols = frame[[c for c in ("rank", "step") if c in frame.columns]]
    # one rank and one step throughout (a rank's profile of one step): one pair per rank,
    # without taking the columns out for the compute tasks
    one_pair = all(one_value(pair_cols[c]) for c in pair_cols.columns)
    one_rank = one_value(frame["rank"])  # a rank's own profile: no rank per task to read
    rank_key = None if one_rank else pd.to_numeric(frame["rank"], errors="coerce").to_numpy(
        np.float64, na_value=-1.0)
    if keep is not None:
        if one_rank:  # the other tasks counted apart (code len(text)): no copy of the rows
            code = np.where(keep, code, len(text))
        else:
            code, dur_all, rank_key = code[keep], dur_all[keep], rank_key[keep]
        if not one_pair:
            pair_cols = take_rows(pair_cols, keep)
    if rank_key is None:
        ranks, order, bounds = np.array([float(frame["rank"].iloc[0])]), None, [0, len(code)]
    else:
        ranks = np.sort(pd.unique(rank_key))  # the few ranks, without sorting every task
        order = None if len(ranks) < 2 else np.argsort(rank_key, kind="stable")
        bounds = np.searchsorted(rank_key[order] if order is not None else rank_key,
                                 ranks, side="left").tolist() + [len(rank_key)]
    fwd_of = scoped_of & ~grad_of
    rows = []
    for i, rank in enumerate(ranks.tolist()):
        rows_of = order[bounds[i]:bounds[i + 1]] if order is not None else slice(None)
        # tasks and time per distinct name (NaN durations left out, as nansum does), the
        # tasks apart of code len(text) dropped
        c = code[rows_of]
        count = np.bincount(c, minlength=len(text) + 1)[:len(text)]
        busy = np.bincount(c, nan_as_zero(dur_all[rows_of]),
                           len(text) + 1)[:len(text)]
        present = np.flatnonzero(count)  # codes seen
        pairs = 1 if one_pair else n_step_pairs(
            pair_cols if order is None else take_rows(pair_cols, rows_of))
        layer_of = {t: _scope_parts(t)[0] for t in {text[n] for n in present.tolist()}}
        layers = sorted({x for x in layer_of.values() if x is not None})
        scoped_names = {text[n] for n in present[scoped_of[present]].tolist()}
        scoped_layers = sorted({layer_of[n] for n in scoped_names if layer_of[n] is not None})
        scoped_tasks = int(count[scoped_of].sum())
        if not scoped_tasks:
            mode = "none"
        elif not layers:
            mode = "cells"
        else:
            mode = "full" if set(scoped_layers) == set(layers) else "partial"
        compute = float(busy.sum()) / pairs
        fwd_us = float(busy[fwd_of].sum()) / pairs
        rows.append({
            "rank": pd.NA if rank < 0 else int(rank), "source": source,
            "tasks": int(count.sum()), "scoped_tasks": scoped_tasks,
            "forward_scoped_tasks": int(count[fwd_of].sum()),
            "scoped_names": len(scoped_names), "forward_scoped_us": fwd_us,
            "compute_us": compute,
            "forward_scoped_share": fwd_us / compute if compute > 0 else np.nan,
            "layers": ",".join(map(str, layers)),
            "scoped_layers": ",".join(map(str, scoped_layers)), "recompute": mode})
    return typed(pd.DataFrame(rows, columns=list(SCOPE_COLUMNS)), SCOPE_COLUMNS)


def _named_tasks(profile: Any) -> tuple[str, pd.DataFrame | None, np.ndarray | None]:
    """The table to read names from, its columns read, and the mask of its compute tasks.

    ``kernels``, else the host ``ops``; the mask is None when the table has no category
    (every task counts). Nothing when no such table has a compute task.
    """
    for name in ("kernels", "ops"):
        frame = table(profile, name)
        if frame.empty or "name" not in frame.columns or not has_values(frame, "dur_us"):
            continue
        keep = None
        if "category" in frame.columns:
            keep = frame["category"].eq("compute").fillna(False).to_numpy(bool)
        frame = frame[[c for c in ("rank", "step", "name", "dur_us") if c in frame.columns]]
        if "rank" not in frame.columns:
            frame = frame.assign(rank=pd.NA)
        if keep is None or keep.any():
            return name, frame, None if keep is None or keep.all() else keep
    return "", None, None
