"""Operators matched across two runs: by normalised name, input shape and call position.

A device task of run A is matched with one of run B when both have the same normalised
name (:func:`normalise_name`), the same input shapes, and the same call position: the
k-th call of that (name, shape) in its (rank, step) in order of start. Per matched
(name, shape), each side's time is the time of its matched calls per (rank, step); the
calls of one side beyond the other's count (a kernel that ran more often, or only in one
run) are listed as unmatched rows. Times per (rank, step): the sum over the steps whose
device tasks were recorded in full divided by their number of (rank, step) pairs, as
:func:`perfkit.analysis.compare_profiles` counts them.

Between vendors (an Ascend profile against a CUDA one) the names never match and every
row is unmatched; the comparison by kernel kind (``kinds``) is the one to read then.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from .._text_dtype import TEXT
from ..analysis._util import in_steps, n_step_pairs, table
from ..analysis.recorded import recorded_tasks

__all__ = ["normalise_name", "call_table", "match_operators", "OPERATOR_COLUMNS"]

#: Columns of :func:`match_operators`.
OPERATOR_COLUMNS = ("name", "shape", "a_ms", "b_ms", "delta_ms", "matched", "a_calls",
                    "b_calls")

# "Default/network/.../MatMul-op123" -> "matmul"; "MatMul_17" -> "matmul"
_SCOPE = re.compile(r"^.*/")
_SUFFIX = re.compile(r"(?:[-_]+(?:op)?\d+)+$")


def normalise_name(name: Any) -> str:
    """A task's name without what differs between two runs of the same operator: the
    scope path before the last ``/`` (MindSpore's full names; not in a C++ signature), a
    trailing instance number (``-op123``, ``_17``, HCCL's ``__264_0_1``), surrounding
    blanks and letter case."""
    text = "" if not isinstance(name, str) else name.strip()
    if "(" not in text and "<" not in text:  # a scope path, not a C++ signature
        text = _SCOPE.sub("", text)
    return _SUFFIX.sub("", text).lower()


def call_table(profile: Any) -> pd.DataFrame:
    """One row per (normalised name, shape, call position): ``us`` per (rank, step).

    Returns
    -------
    DataFrame
        Columns ``name``, ``shape`` (the ``input_shapes`` text, ``""`` where unknown),
        ``call`` (0-based position among the calls of that name and shape in its (rank,
        step), by start time) and ``us`` (summed duration over the recorded steps / their
        (rank, step) pairs). Empty where the profile has no device tasks.
    """
    kernels, _ = recorded_tasks(table(profile, "kernels"), table(profile, "steps"))
    if kernels.empty or "dur_us" not in kernels.columns:
        return pd.DataFrame(columns=["name", "shape", "call", "us"])
    k = in_steps(kernels).dropna(subset=["dur_us"])
    pairs = n_step_pairs(k)
    names = k["name"].astype(TEXT).fillna("")
    norm = {u: normalise_name(u) for u in names.unique()}
    shape = (k["input_shapes"].astype(TEXT).fillna("") if "input_shapes" in k.columns
             else pd.Series("", index=k.index, dtype=TEXT))
    frame = pd.DataFrame({
        "rank": k["rank"].to_numpy() if "rank" in k.columns else 0,
        "step": k["step"].to_numpy() if "step" in k.columns else 0,
        "start": k["start_us"].to_numpy() if "start_us" in k.columns else np.arange(len(k)),
        "name": names.map(norm).to_numpy(dtype=object),
        "shape": shape.to_numpy(dtype=object),
        "dur": k["dur_us"].to_numpy(dtype="float64")})
    frame = frame.sort_values(["rank", "step", "start"], kind="mergesort")
    frame["call"] = frame.groupby(["rank", "step", "name", "shape"], dropna=False).cumcount()
    out = frame.groupby(["name", "shape", "call"], sort=False)["dur"].sum() / pairs
    return out.rename("us").reset_index()


def match_operators(a: Any, b: Any, work_scale: float = 1.0) -> pd.DataFrame:
    """Operators of two profiles matched (module docstring), largest change first.

    Parameters
    ----------
    a, b : Profile or Cluster
    work_scale : float
        Factor on B's times (A's work per step / B's), as in
        :func:`perfkit.compare.verdict.step_verdict`.

    Returns
    -------
    DataFrame
        :data:`OPERATOR_COLUMNS`: per (name, shape) the matched calls' time per step of each
        side in ms (``matched`` True), and per side the calls without a match (``matched``
        False, the other side's time None); ``delta_ms`` = B − A (an unmatched side counts
        0); ``a_calls`` / ``b_calls`` the call positions of that row (calls per step of the
        rank and step with the most). Sorted by
        |delta_ms|, largest first.
    """
    ca, cb = call_table(a), call_table(b)
    cb = cb.assign(us=cb["us"] * work_scale)
    both = ca.merge(cb, on=["name", "shape", "call"], how="outer", suffixes=("_a", "_b"),
                    indicator=True)
    rows = []
    for (name, shape), g in both.groupby(["name", "shape"], sort=False):
        hit = g[g["_merge"] == "both"]
        if len(hit):
            rows.append(_row(name, shape, hit["us_a"].sum(), hit["us_b"].sum(), True,
                             len(hit), len(hit)))
        only_a = g[g["_merge"] == "left_only"]
        if len(only_a):
            rows.append(_row(name, shape, only_a["us_a"].sum(), None, False, len(only_a), 0))
        only_b = g[g["_merge"] == "right_only"]
        if len(only_b):
            rows.append(_row(name, shape, None, only_b["us_b"].sum(), False, 0, len(only_b)))
    out = pd.DataFrame(rows, columns=list(OPERATOR_COLUMNS))
    if out.empty:
        return out
    order = out["delta_ms"].abs().sort_values(ascending=False, kind="mergesort").index
    return out.loc[order].reset_index(drop=True)


def _row(name: str, shape: str, a_us: float | None, b_us: float | None, matched: bool,
         a_calls: int, b_calls: int) -> dict[str, Any]:
    a_ms = None if a_us is None else float(a_us) / 1e3
    b_ms = None if b_us is None else float(b_us) / 1e3
    return {"name": name, "shape": shape or None, "a_ms": a_ms, "b_ms": b_ms,
            "delta_ms": (b_ms or 0.0) - (a_ms or 0.0), "matched": matched,
            "a_calls": a_calls, "b_calls": b_calls}
