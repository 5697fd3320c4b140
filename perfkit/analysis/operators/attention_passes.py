"""Forward against backward attention tasks: the evidence of recompute.

:func:`recompute_evidence` counts, per rank, the attention tasks of each direction; their
ratio is about 1 without recompute and about 2 with full recompute.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._frames import is_lazy, per_rank
from .._util import empty_frame, table, take_rows, typed
from ..compare import class_codes
from .scope import _LANES, _scope

__all__ = ["recompute_evidence"]


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
        out = typed(out, cols).reset_index(drop=True)
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
    return typed(g, cols).reset_index(drop=True)
