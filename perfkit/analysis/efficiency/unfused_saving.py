"""The unfused-pattern table with one saving for attention: the advisor's roofline one.

:func:`~perfkit.analysis.operators.unfused_patterns` prices every pattern as ``sum - max``
of an occurrence's kernels: the time left if the longest kernel stayed and the others
vanished. For unfused attention a better-founded figure exists, the one the advisor's
``attention_not_fused`` finding gives (:func:`~.chains.attention_chains`): the chains'
time less a fused kernel doing their matrix FLOPs at ``kernel_efficiency`` of the
hardware's peak. :func:`unfused_savings` puts that figure in the attention row, so that a
page showing both tells one answer, and says in ``saving_rule`` how each row's saving
was estimated.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...specs import Hardware
from ..operators.unfused import PATTERNS, UNFUSED_COLUMNS, unfused_patterns
from .chains import attention_chains
from .hardware import infer_hardware

__all__ = ["unfused_savings", "SAVING_RULE_COLUMNS"]

#: The pattern whose saving is the roofline one (the advisor's attention chains).
_ATTENTION = "softmax_dropout_matmul"

#: :data:`~perfkit.analysis.operators.UNFUSED_COLUMNS` and how the saving was estimated.
SAVING_RULE_COLUMNS: dict[str, str | pd.StringDtype] = {**UNFUSED_COLUMNS, "saving_rule": TEXT}

#: How ``saving_us`` is estimated where no FLOP model prices the fused kernel.
LONGEST_RULE = "longest kernel stays"
#: How ``saving_us`` is estimated for the patterns whose whole time goes (the copies).
WHOLE_RULE = "tasks go away"


def unfused_savings(profile: Any, hardware: Hardware | None = None,
                    kernel_efficiency: float = 0.7) -> pd.DataFrame:
    """:func:`~perfkit.analysis.operators.unfused_patterns` with the attention row priced
    on the roofline, as the advisor prices it.

    Parameters
    ----------
    profile : Profile or Cluster
    hardware : Hardware, optional
        The device whose peak prices the fused attention kernel; inferred from the
        profile when None (:func:`~.hardware.infer_hardware`).
    kernel_efficiency : float
        The share of the peak a fused kernel reaches (the advisor's assumption).

    Returns
    -------
    DataFrame
        :data:`SAVING_RULE_COLUMNS`: the summary of ``unfused_patterns`` where, on each
        rank whose ``softmax_dropout_matmul`` occurrences are the chains of
        :func:`~.chains.attention_chains` (as many), ``saving_us`` is their
        ``saving_us`` summed (chain time less a fused kernel at ``kernel_efficiency`` of
        the roofline) and ``saving_share`` is scaled alike; every other row keeps
        ``sum - max`` (the copies: their whole time). ``saving_rule`` says in a few words
        what each row's saving assumes; ``attrs["saving_notes"]`` says it in sentences
        (also among ``attrs["notes"]``).
    """
    uf = unfused_patterns(profile)
    notes: list[str] = []  # how the attention row was priced
    out = uf.assign(saving_rule=uf["pattern"].astype(TEXT).map(
        lambda p: WHOLE_RULE if PATTERNS.get(str(p), ("", "", ""))[2] == "all"
        else LONGEST_RULE).astype(TEXT))
    is_att = out["pattern"].astype(TEXT).eq(_ATTENTION).fillna(False).to_numpy(bool)
    if is_att.any():
        if hardware is None:
            hardware, _why = infer_hardware(profile)
        chains = attention_chains(profile, hardware, kernel_efficiency) \
            if hardware is not None else pd.DataFrame()
        if not chains.empty:  # the chains priced on the roofline (their FLOPs were read)
            chains = chains[chains["saving_us"].notna().to_numpy(bool)]
        if chains.empty:
            notes.append("the unfused attention's saving is its chains' time less their "
                         "longest kernel: " + ("the device is not known, so no roofline "
                                               "prices a fused kernel" if hardware is None
                                               else "no chain could be priced on the "
                                                    "roofline"))
        else:
            out = _priced(out, is_att, chains, hardware, kernel_efficiency, notes)
    out = out.sort_values("saving_us", ascending=False, kind="mergesort")
    out = out.astype({c: t for c, t in SAVING_RULE_COLUMNS.items() if c in out.columns})
    out = out.reset_index(drop=True)
    out.attrs["notes"] = [*uf.attrs.get("notes", []), *notes]
    out.attrs["saving_notes"] = notes
    return out


def _priced(out: pd.DataFrame, is_att: np.ndarray, chains: pd.DataFrame,
            hardware: Hardware, kernel_efficiency: float, notes: list[str]) -> pd.DataFrame:
    """``out`` with the attention rows' saving replaced by the chains' where each rank's
    count of chains is its count of occurrences."""
    out = out.copy()
    key = chains["rank"].astype("float64").fillna(-1.0)
    per_rank = chains.groupby(key.to_numpy(), sort=False).agg(
        n=("saving_us", "size"), saving=("saving_us", "sum"))
    rule = f"fused at {kernel_efficiency * 100:g} % of roofline"
    unmatched = 0
    for i in np.flatnonzero(is_att):
        r = out["rank"].iloc[i]
        k = -1.0 if pd.isna(r) else float(r)
        if k not in per_rank.index or int(per_rank.at[k, "n"]) != int(out["occurrences"].iloc[i]):
            unmatched += 1
            continue
        old, new = float(out["saving_us"].iloc[i]), float(per_rank.at[k, "saving"])
        share = float(out["saving_share"].iloc[i])
        out.iloc[i, out.columns.get_loc("saving_us")] = new
        out.iloc[i, out.columns.get_loc("saving_share")] = (
            share * new / old if old > 0 else np.nan)
        out.iloc[i, out.columns.get_loc("saving_rule")] = rule
    if unmatched < int(is_att.sum()):
        notes.append("the unfused attention's saving is the advisor's: the chains' time less "
                     "one fused kernel doing their matrix FLOPs at "
                     f"{kernel_efficiency * 100:g} % of the {hardware.name} peak; the other "
                     "patterns' is an occurrence's time less its longest kernel (the copies': "
                     "their whole time)")
    if unmatched:
        notes.append(f"on {unmatched} of the ranks the attention chains found by shapes are not "
                     "the pattern's occurrences, so their saving is the chains' time less "
                     "their longest kernel")
    return out
