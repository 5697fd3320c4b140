"""Per-layer memories fitted to measured stage peaks (SAPP ``compute_memory``).

:func:`decompose_memory` solves SAPP's linear model of a stage's peak memory for the
parameter and activation memory of one layer, the head, the tail and (when SAPP would fit
it) a constant; it names the unknowns the observations cannot separate.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...errors import InvalidArgumentError, PerfkitWarning

__all__ = ["decompose_memory"]


def decompose_memory(observations: pd.DataFrame | Sequence[Mapping[str, Any]],
                     recompute_types: Sequence[str] = ("none", "full"),
                     fit_constant: bool | None = None,
                     underdetermined: str = "raise") -> dict[str, float | bool]:
    """Per-layer memories from measured stage peaks (SAPP ``compute_memory``).

    Each observation is one stage of a dry run: ``pp``, ``stage`` (0-based), ``layers``
    (body layers on the stage) and, per recompute type ``r``, ``layers_<r>`` (how many of
    them use it; the rest use "none"), plus ``peak`` (measured peak memory). SAPP's model::

        peak = layers·mem_param + (pp − stage)·Σ_r layers_r·mem_act_r [+ constant]
               (+ head if stage == 0) (+ tail if stage == pp − 1)

    **The constant** is fitted only when SAPP fits it (``ComputeMemory.
    _compute_memories_layers_`` in ``toolkit/pipeline_balance/utils/compute_memory.py``):
    with at least ``len(recompute_types) + 4`` observed stages ("Enabled const memory
    component because enough stages were given") and layer counts that are not all equal
    ("The number of layer per stage cannot be the same for all stages when const
    component is enabled"). Otherwise it is 0 and, as in SAPP, the head and the tail
    absorb it. ``fit_constant=True``/``False`` overrides the rule.

    **The system is checked before it is solved**: when its rank is below the number of
    unknowns — too few stages, a recompute type no stage uses, equal layer counts with a
    constant, ``pp = 1`` (head and tail on one stage) — the unknowns it cannot separate
    are named. ``underdetermined="raise"`` (default) raises
    :class:`~perfkit.errors.InvalidArgumentError`; ``"warn"`` issues a
    :class:`~perfkit.errors.PerfkitWarning` and returns NaN for those unknowns and the
    exact values of the others. A full-rank system is solved exactly
    (``numpy.linalg.solve``) when square, in the least-squares sense otherwise.

    Returns ``mem_param``, ``mem_act_<r>`` per type, ``constant``, ``head``, ``tail``,
    ``residual`` (the root-mean-square misfit) and ``constant_fitted``.
    """
    if underdetermined not in ("raise", "warn"):
        raise InvalidArgumentError("underdetermined", "must be 'raise' or 'warn'",
                                   underdetermined)
    frame = pd.DataFrame(list(observations)) if not isinstance(observations, pd.DataFrame) \
        else observations
    needed = {"pp", "stage", "layers", "peak"}
    missing = needed - set(frame.columns)
    if missing:
        raise InvalidArgumentError("observations", f"missing columns {sorted(missing)}")
    if fit_constant is None:
        fit_constant = (len(frame) >= len(recompute_types) + 4
                        and frame["layers"].nunique() > 1)
    names = ["mem_param", *[f"mem_act_{r}" for r in recompute_types],
             *(["constant"] if fit_constant else []), "head", "tail"]
    rows = []
    for _, o in frame.iterrows():
        inflight = o["pp"] - o["stage"]
        counts = {r: float(o.get(f"layers_{r}", 0.0) or 0.0) for r in recompute_types
                  if r != "none"}
        counts["none"] = o["layers"] - sum(counts.values())
        rows.append([o["layers"], *[inflight * counts.get(r, 0.0) for r in recompute_types],
                     *([1.0] if fit_constant else []),
                     float(o["stage"] == 0), float(o["stage"] == o["pp"] - 1)])
    a = np.array(rows, dtype=float)
    y = frame["peak"].to_numpy(dtype=float)
    rank = int(np.linalg.matrix_rank(a))
    sol = np.linalg.lstsq(a, y, rcond=None)[0]
    if rank < a.shape[1]:
        vt = np.linalg.svd(a)[2]
        null = vt[rank:]  # directions the observations cannot see
        free = [name for name, weight in zip(names, np.abs(null).max(axis=0), strict=True)
                if weight > 1e-9]
        message = (f"{len(frame)} stage observations determine only {rank} of the "
                   f"{a.shape[1]} unknowns ({', '.join(names)}); not determined: "
                   f"{', '.join(free)}. Add dry-run stages (different stage ids, layer "
                   "counts and recompute mixes), or drop recompute types that no stage "
                   "uses.")
        if underdetermined == "raise":
            raise InvalidArgumentError("observations", message)
        warnings.warn(PerfkitWarning(message), stacklevel=2)
        sol = np.where(np.isin(names, free), np.nan, sol)
    elif a.shape[0] == a.shape[1]:
        sol = np.linalg.solve(a, y)
    out: dict[str, float | bool] = dict(zip(names, map(float, sol), strict=True))
    if not fit_constant:
        out["constant"] = 0.0
    known = ~np.isnan(sol)
    fitted = a[:, known] @ sol[known]
    out["residual"] = float(np.sqrt(np.mean((fitted - y) ** 2))) if known.all() \
        else float("nan")
    out["constant_fitted"] = bool(fit_constant)
    return out
