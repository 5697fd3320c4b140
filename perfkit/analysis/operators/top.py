"""The top operators by total device time: :func:`top_operators`.

Grouped by operator type, task name or (name, input shapes), with count, total, mean,
extremes, share, per-step figures, the AI CPU flag and the duration-weighted bound; an
eager table is grouped here (:func:`_top_of`), a lazy one on the workers
(:func:`_lazy_top`), and both finish alike (:func:`_top_finish`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...errors import InvalidArgumentError
from .._cluster_steps import in_cluster_steps
from .._frames import (
    aggregate,
    any_values,
    compute_all,
    is_lazy,
    is_lazy_frame,
    transform,
    with_position,
)
from .._util import (
    add_note,
    empty_frame,
    has_values,
    in_steps,
    n_step_pairs,
    noted_no_step,
    notes_of,
    table,
    typed,
)
from ..recorded import RECORDED, covered_text, recorded_tasks, unrecorded_text
from .bound import bound_labels, pipe_ratios
from .host import host_tasks
from .scope import _effective_type, _scope

__all__ = ["top_operators", "TOP_COLUMNS"]


_BY = {"type": ["type"], "name": ["name"], "name_shapes": ["name", "input_shapes"]}

TOP_COLUMNS: dict[str, str | pd.StringDtype] = {
    "key": TEXT, "type": TEXT, "name": TEXT, "input_shapes": TEXT,
    "core": TEXT, "category": TEXT, "count": "int64", "total_us": "float64",
    "mean_us": "float64", "max_us": "float64", "min_us": "float64", "share": "float64",
    "per_step_us": "float64", "calls_per_step": "float64", "ai_cpu": "boolean",
    "bound": TEXT,
}


def top_operators(profile: Any, by: str = "type", n: int | None = 20,
                  include_communication: bool = False, recorded_only: bool = True
                  ) -> pd.DataFrame:
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
    recorded_only : bool
        True (default): only the steps whose device tasks were recorded in full count (see
        below), none when no step was. False: every device task recorded counts, the
        steps recorded only in part too; where the ``steps`` table marks such a step,
        ``count``, ``total_us``, ``mean_us`` and ``share`` are over the tasks recorded and
        ``per_step_us`` and ``calls_per_step`` are NA (a part of a step is not a step's
        figure), with a note naming those steps (what the Operators tab shows when no
        step was recorded in full: ``ascend/msinsight-pt-gpt3-old``'s step 2).

    Returns
    -------
    DataFrame
        :data:`TOP_COLUMNS`: ``key`` (the group label), ``type``/``name``/``input_shapes``
        (the grouping values; of the others, the first task's in the table's order: an
        example, not the most common), ``core``, ``category``,
        ``count``, ``total_us`` (both summed over every rank and step in scope),
        ``mean_us``, ``max_us``, ``min_us`` (per call), ``share`` (of the device time in
        scope), ``per_step_us`` and ``calls_per_step`` (per rank and step: the total and
        the count divided by the number of (rank, step) pairs, so that ``per_step_us =
        calls_per_step × mean_us``; only the steps whose device tasks were recorded in
        full count, in the sum as in the division, with a note, where the ``steps`` table
        says which: :func:`~perfkit.analysis.recorded.recorded_tasks`), ``ai_cpu``
        (runs on the Ascend AI CPU), ``bound`` (the verdict of
        :func:`~perfkit.analysis.operators.bound.operator_bound`, by the same rule, on the
        group's duration-weighted pipe ratios; NA without PMU columns). Sorted by
        ``total_us``.
        A lazy cluster is aggregated on the workers (sums may differ from the eager ones
        in the last bits).
    """
    if by not in _BY:
        raise InvalidArgumentError("by", f"must be one of {tuple(_BY)}", by)
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer))
                          or n < 1):
        raise InvalidArgumentError("n", "must be a whole number >= 1, or None for every row",
                                   n)
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
        # each rank's tasks of no step are left out where they lie (_scope), under the
        # cluster's rule (in_cluster_steps: where any rank has steps), noted here
        stepped_all = table(in_cluster_steps(profile), "kernels")
        kept, why = recorded_tasks(stepped_all, table(profile, "steps"))
        if why and not recorded_only:
            kept, why = stepped_all, _partial_note(table(profile, "steps"), None)
        out = noted_no_step(_lazy_top(kept, by, n, include_communication), kept)
        out = _withhold_per_step(out) if why and not recorded_only else out
        return add_note(out, why) if why else out
    if kernels.empty or not has_values(kernels, "dur_us"):
        return empty_frame(TOP_COLUMNS, "the profile has no device tasks (kernels table)")
    steps = table(profile, "steps")
    kept, why = recorded_tasks(kernels, steps)
    partial = bool(why) and not recorded_only
    if partial:  # every task recorded, the steps recorded in part too
        kept = kernels
    else:  # the other steps hold no task: none left out, but the figures are over those
        why = why or (covered_text(steps) if RECORDED in steps.columns else None)
    stepped = in_steps(kept)
    out = _top_of(stepped, by, n, include_communication)
    if partial:
        out = _withhold_per_step(out)
        why = _partial_note(steps, len(stepped))
    if stepped is not kept:
        out = add_note(out, notes_of(stepped)[-1])
    return add_note(out, why) if why else out


def _withhold_per_step(out: pd.DataFrame) -> pd.DataFrame:
    """``out`` with its figures per step NA (:func:`top_operators`, ``recorded_only``
    False, where a step's tasks were recorded only in part)."""
    out = out.copy()
    out[["per_step_us", "calls_per_step"]] = np.nan
    return out


def _partial_note(steps: pd.DataFrame, n_tasks: int | None) -> str:
    """The note of :func:`top_operators` over every task recorded (``recorded_only``
    False): which steps' tasks were recorded only in part, and that the figures are
    totals over the tasks recorded."""
    if is_lazy_frame(steps):  # a lazy cluster's: one row per rank and step, read whole
        (steps,) = compute_all(steps[[c for c in ("rank", "step", RECORDED)
                                      if c in steps.columns]])
    tasks = "the device tasks recorded" if n_tasks is None else \
        f"the {n_tasks:,} device task{'s' if n_tasks != 1 else ''} recorded"
    return (f"the device tasks of {unrecorded_text(steps)} were recorded only in part: "
            f"totals over {tasks}, theirs included; no figures per step, as a part of a "
            "step is not a step's figure")


def _top_of(kernels: pd.DataFrame, by: str, n: int | None, include_communication: bool
            ) -> pd.DataFrame:
    """:func:`top_operators` of an eager tasks table."""
    k = _scope(kernels, include_communication)
    keys = _BY[by]
    k = k.assign(type=_effective_type(k), **_bound_weights(k))
    if "input_shapes" not in k.columns:
        k = k.assign(input_shapes=pd.Series(pd.NA, index=k.index, dtype=TEXT))
    grp = k.groupby([k[c].fillna("") for c in keys], sort=False)
    out = grp.agg(count=("dur_us", "size"), total_us=("dur_us", "sum"),
                  mean_us=("dur_us", "mean"), max_us=("dur_us", "max"),
                  min_us=("dur_us", "min"))
    firsts = {c: (c, "first") for c in ("type", "name", "input_shapes", "core", "category")
              if c not in keys and c in k.columns}
    if firsts:
        out = out.join(grp.agg(**firsts))
    cores = k["core"].astype(TEXT).fillna("") if "core" in k.columns else None
    if cores is not None:
        out["ai_cpu"] = cores.eq("AI_CPU").groupby([k[c].fillna("") for c in keys],
                                                   sort=False).any()
    else:
        out["ai_cpu"] = False
    out["bound"] = _group_bound(grp[["_cw", "_mw", "_wd"]].sum())
    out = out.reset_index()
    return _top_finish(out, keys, float(k["dur_us"].sum()), n_step_pairs(k), n)


def _top_rows(kernels: pd.DataFrame, by: str, include_communication: bool) -> pd.DataFrame:
    """Tasks in scope with what :func:`top_operators` groups and aggregates (row-wise)."""
    k = _scope(kernels, include_communication)
    k = k.assign(type=_effective_type(k), **_bound_weights(k))
    if "input_shapes" not in k.columns:
        k = k.assign(input_shapes=pd.Series(pd.NA, index=k.index, dtype=TEXT))
    cores = k["core"].astype(TEXT).fillna("") if "core" in k.columns else \
        pd.Series("", index=k.index, dtype=TEXT)
    k = k.assign(_aicpu=cores.eq("AI_CPU").astype("int64"))
    return k.assign(**{f"_k_{c}": k[c].astype(TEXT).fillna("") for c in _BY[by]})


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
            "_cw": ["sum"], "_mw": ["sum"], "_wd": ["sum"], **{c: ["first"] for c in firsts}}
    a = aggregate(k, kcols, spec)
    a = a.sort_values("_pos_min", kind="mergesort")
    out = a.rename(columns={**{kc: c for kc, c in zip(kcols, keys, strict=True)},
                            "dur_us_size": "count", "dur_us_sum": "total_us",
                            "dur_us_max": "max_us", "dur_us_min": "min_us",
                            **{f"{c}_first": c for c in firsts}}).set_index(keys)
    out["mean_us"] = out["total_us"] / out["count"]
    out["ai_cpu"] = out["_aicpu_sum"] > 0
    out["bound"] = _group_bound(out.rename(columns={"_cw_sum": "_cw", "_mw_sum": "_mw",
                                                    "_wd_sum": "_wd"}))
    out = out.drop(columns=["_pos_min", "_aicpu_sum", "_cw_sum", "_mw_sum", "_wd_sum"]
                   ).reset_index()
    return _top_finish(out, keys, float(out["total_us"].sum()), n_step_pairs(k), n)


def _bound_weights(k: pd.DataFrame) -> dict[str, pd.Series]:
    """Per task, its pipe ratios times its duration (``_cw``, ``_mw``) and the duration
    they are known over (``_wd``), 0 where unknown: summed per group, they give the
    group's duration-weighted ratios, which :func:`_group_bound` labels."""
    c, m = pipe_ratios(k)
    known = (c.notna() & m.notna()).to_numpy()
    dur = k["dur_us"].to_numpy(np.float64, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        return {"_cw": pd.Series(np.where(known, c.to_numpy() * dur, 0.0), index=k.index),
                "_mw": pd.Series(np.where(known, m.to_numpy() * dur, 0.0), index=k.index),
                "_wd": pd.Series(np.where(known, dur, 0.0), index=k.index)}


def _group_bound(sums: pd.DataFrame) -> pd.Series:
    """Each group's bound from its weighted sums (``_cw``, ``_mw``, ``_wd``): the rule of
    :func:`~perfkit.analysis.operators.bound.operator_bound`, on the same ratios."""
    wd = sums["_wd"].where(sums["_wd"] > 0)
    return bound_labels(sums["_cw"] / wd, sums["_mw"] / wd, sums.index)


def _top_finish(out: pd.DataFrame, keys: list[str], total: float, pairs: int,
                n: int | None) -> pd.DataFrame:
    """Shares, labels, order and dtypes of :func:`top_operators` from its group sums."""
    out["share"] = out["total_us"] / total if total > 0 else np.nan
    out["per_step_us"] = out["total_us"] / pairs
    out["calls_per_step"] = out["count"] / pairs
    out["key"] = out[keys].astype(TEXT).agg(" | ".join, axis=1) if len(keys) > 1 \
        else out[keys[0]].astype(TEXT)
    out = out.sort_values("total_us", ascending=False, kind="mergesort")
    if n is not None:
        out = out.head(n)
    for col, dtype in TOP_COLUMNS.items():
        if col not in out.columns:
            out[col] = pd.Series(pd.NA, index=out.index, dtype=dtype) if dtype != "float64" \
                else np.nan
    out = typed(out, TOP_COLUMNS).reset_index(drop=True)
    for c in keys:
        out[c] = out[c].replace("", pd.NA)
    return out
