"""The Operators tab's element-wise chains: the runs the advisor's ``elementwise_chains``
finding counts, grouped by their operators, with their time, calls and kernels.

The finding ("Chains of memory-bound element-wise kernels move the same data several
times") sends the user to the Operators tab; this table is what it names there. It is
:func:`perfkit.analysis.elementwise_chains` under the advisor's conventions
(:data:`perfkit.advisor.context.ASSUMPTIONS`: chains of ``min_chain`` kernels or more, a
fused kernel at ``kernel_efficiency`` of the memory roofline, on the job's hardware), over
the steps whose device tasks were recorded in full, per rank and step as the advisor
divides it. Where the attention finding counts unfused attention chains, their kernels are
in no chain here, as in the finding (``without_attention``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from .. import analysis as A
from ..advisor.context import ASSUMPTIONS
from ..analysis._util import n_step_pairs, table
from ..analysis.recorded import recorded_pairs
from ..format import counted, share_text, time_text
from .markup import frame_html, note

__all__ = ["CHAINS_TITLE", "FUSED_PATTERNS", "step_pairs", "chain_groups", "chains_html"]

#: The known fusion patterns of :func:`perfkit.analysis.unfused_savings` that are element-wise
#: chains too: the advisor counts their saving once, in the unfused-operators finding.
FUSED_PATTERNS = {"rmsnorm_decomposed": "RMSNorm", "rotary_small_ops": "rotary embedding",
                  "silu_mul_not_swiglu": "SwiGLU"}
#: The title of the table (the words the finding's "where to look" points to).
CHAINS_TITLE = "Element-wise chains one fused kernel could replace"


def step_pairs(profile: Any) -> int:
    """The (rank, step) pairs a chain's time summed over the profile is divided by, as the
    advisor divides it (:meth:`perfkit.advisor.context.Context.per_recorded_step`): those
    whose device tasks were recorded in full where the profile says, else every (rank,
    step) of the step breakdown (a row of no step is not one where others have a step),
    else those of the device tasks (:func:`perfkit.analysis._util.n_step_pairs`)."""
    steps = A.step_breakdown(profile)
    recorded = recorded_pairs(steps) if len(steps) else None
    if recorded:
        return recorded
    if steps.empty:
        return n_step_pairs(table(profile, "kernels"))
    pairs = steps[["rank", "step"]].drop_duplicates()
    stepped = pairs["step"].notna().to_numpy(bool)
    return max(1, int((pairs[stepped] if stepped.any() else pairs).shape[0]))


def chain_groups(chains: pd.DataFrame, pairs: int) -> pd.DataFrame:
    """The chains of :func:`perfkit.analysis.elementwise_chains` grouped by their
    operators (``names``), the largest saving first.

    Columns: ``names``; ``kernels`` (in each chain, the operators' count);
    ``chains_per_step`` (chains of these operators / ``pairs``); ``total_us`` and
    ``saving_us`` (summed over the group's chains / ``pairs``: per rank and step);
    ``share`` (of the saving of every chain).
    """
    cols = ["names", "kernels", "chains_per_step", "total_us", "saving_us", "share"]
    if chains.empty:
        return pd.DataFrame(columns=cols)
    g = chains.groupby("names", sort=False).agg(
        kernels=("kernels", "first"), chains=("kernels", "size"),
        total_us=("total_us", "sum"), saving_us=("saving_us", "sum")).reset_index()
    whole = float(g["saving_us"].sum())
    g = g.assign(chains_per_step=g["chains"] / pairs, total_us=g["total_us"] / pairs,
                 saving_us=g["saving_us"] / pairs,
                 share=g["saving_us"] / whole if whole > 0 else float("nan"))
    g["names"] = g["names"].astype(str)
    return g.sort_values(["saving_us", "names"], ascending=[False, True],
                         kind="mergesort")[cols].reset_index(drop=True)


def chains_html(profile: Any, hardware: Any, without_attention: bool, one_rank: bool,
                patterns: Iterable[str] = (), max_rows: int = 10) -> str:
    """The element-wise chains of ``profile`` (the tasks of its steps recorded in full): the
    table of :func:`chain_groups`, then sentences with their count, time and saving per
    step and what the saving assumes; ``""`` when there is none.

    ``hardware`` is the job's (the roofline the saving is priced on; None: the profiled
    device, :func:`perfkit.analysis.infer_hardware`); ``one_rank`` says "per step"
    rather than "per rank and step"; ``patterns`` are those of the unfused chains table
    (:func:`perfkit.analysis.unfused_savings`), whose fusions (:data:`FUSED_PATTERNS`)
    the finding's saving leaves out, as the unfused-operators finding counts them. The
    copy kernels are in no chain (``without_copies``), as in the finding: the copies
    finding counts their time.
    """
    patterns = list(patterns)
    if hardware is None:
        hardware, _why = A.infer_hardware(profile)
        if hardware is None:
            return ""
    min_chain, eff = int(ASSUMPTIONS["min_chain"]), float(ASSUMPTIONS["kernel_efficiency"])
    chains = A.elementwise_chains(profile, hardware, min_chain=min_chain,
                                  kernel_efficiency=eff, without_attention=without_attention,
                                  without_copies=True)
    if chains.empty:
        return ""
    pairs = step_pairs(profile)
    groups = chain_groups(chains, pairs)
    per = "per step" if one_rank else "per rank and step"
    over = "over the steps" if one_rank else "over the ranks and steps"
    total = float(groups["total_us"].sum())
    saving = float(groups["saving_us"].sum())
    head = (f"{counted(len(chains), 'chain')} of {min_chain} or more element-wise kernels "
            f"in a row {over}, {time_text(total)} of device time {per}.")
    save = (f"One fused kernel per chain, moving its largest member's data once at "
            f"{share_text(eff, 0)} of the memory roofline of {hardware.name}, would save "
            f"{time_text(saving)} {per}.")
    said = [head, save]
    if without_attention:
        said.append("The scale, mask and dropout kernels of the unfused attention chains are "
                    "in none of these chains: the attention finding counts their time.")
    if "copies" in map(str, patterns):
        said.append("The copy kernels are in none of these chains: the copies finding counts "
                    "their time.")
    known = [FUSED_PATTERNS[p] for p in dict.fromkeys(map(str, patterns))
             if p in FUSED_PATTERNS]
    if known:
        said.append("The element-wise chains finding counts this saving less that of the "
                    f"unfused {' and '.join(known)} chains above, which the unfused-operators "
                    "finding counts.")
    table_html = frame_html(
        groups, f"{CHAINS_TITLE} ({per})", columns=list(groups.columns),
        headers={"names": "operators in the chain", "kernels": "kernels per chain",
                 "chains_per_step": "chains", "total_us": "time", "saving_us": "saving",
                 "share": "share of the saving"},
        scope={"chains_per_step": per, "total_us": per, "saving_us": per},
        max_rows=max_rows)
    return table_html + "".join(note(s) for s in said)
