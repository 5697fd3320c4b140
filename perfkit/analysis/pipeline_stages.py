"""The pipeline stage of each rank, and what a given or derived layout leaves unsaid.

:func:`stage_of_ranks` reads the stages from what the caller gives, the job's layout or
the profile's own groups; :func:`stage_notes` says where that membership and the loaded
ranks disagree (a rank given that is not loaded, a loaded rank in no stage, ranks that do
not divide into ``pp`` equal stages), which :func:`~perfkit.analysis.cluster.slow_ranks`
and :func:`~perfkit.analysis.cluster.stage_balance` add to their notes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from ..errors import InvalidArgumentError
from ..format import ranges_text
from ._frames import distinct, is_lazy
from ._util import table
from .layout import recorded_stages

__all__ = ["stage_of_ranks", "stage_notes"]


def _ranks(ranks: Sequence[int]) -> str:
    """``"rank 9"``, ``"ranks 3, 5-7"``."""
    return f"rank{'s' if len(ranks) > 1 else ''} {ranges_text(ranks)}"


def stage_of_ranks(cluster: Any, stages: Mapping[int, int] | Sequence[Sequence[int]] | None
                   = None, parallel: Any = None) -> pd.Series:
    """Pipeline stage of each rank (Series indexed by rank; empty when unknown).

    Taken, in this order, from ``stages`` (``{rank: stage}`` or a list of rank lists, one
    per stage), from ``parallel`` (``pp`` stages: msprof-analyze's ``stage`` rows where
    they are ``pp`` stages, :func:`perfkit.analysis.layout.recorded_stages`, else
    ``world_size / pp`` consecutive ranks, the Megatron/MindSpore default order), from
    msprof-analyze's ``stage`` rows alone when ``parallel`` is not given (its 16-rank
    ``cluster_analysis_output`` records two stages: without them ``stage_balance`` was
    empty and ``slow_ranks`` held stage 0's 150 ms of exposed communication against stage
    1's 35 ms), or from ``meta.groups`` entries whose ``group_name`` contains ``pp`` (the
    position of a rank in its pp group is its stage).
    """
    steps = table(cluster, "steps")
    if is_lazy(steps):
        steps = distinct(steps, ["rank"])
    ranks = sorted(set(steps["rank"].dropna().astype(int).tolist()))
    if stages is not None:
        if isinstance(stages, Mapping):
            return pd.Series({int(r): int(st) for r, st in stages.items()}, dtype="int64")
        pairs = [(int(r), i) for i, rs in enumerate(stages) for r in rs]
        twice = sorted({r for r, _ in pairs if sum(q == r for q, _ in pairs) > 1})
        if twice:
            raise InvalidArgumentError("stages", "a rank may be in one stage only; "
                                       f"{_ranks(twice)} in more", stages)
        return pd.Series(dict(pairs), dtype="int64")
    if parallel is not None and getattr(parallel, "pp", 1) > 1:
        recorded = recorded_stages(cluster)
        if len(recorded) == parallel.pp:
            return stage_of_ranks(cluster, recorded)
        world = getattr(parallel, "world_size", None) or (max(ranks) + 1 if ranks else 0)
        per = max(1, world // parallel.pp)
        return pd.Series({r: min(r // per, parallel.pp - 1) for r in ranks}, dtype="int64")
    recorded = recorded_stages(cluster) if parallel is None else []
    if recorded:
        return stage_of_ranks(cluster, recorded)
    groups = getattr(getattr(cluster, "meta", None), "groups", {}) or {}
    found: dict[int, int] = {}
    for info in groups.values():
        if not isinstance(info, Mapping):
            continue
        name = str(info.get("group_name", "")).lower()
        if "pp" in name.split("_") or name in ("pp", "pipeline"):
            for i, r in enumerate(info.get("global_ranks", []) or []):
                found[int(r)] = i
    return pd.Series(found, dtype="int64")


def stage_notes(loaded: Iterable[Any], stage: pd.Series, stages: Any = None,
                parallel: Any = None) -> list[str]:
    """What :func:`stage_of_ranks` left unsaid for the ``loaded`` ranks: ranks of the given
    ``stages`` that are not loaded, loaded ranks in no stage (left out of the comparison),
    and, for stages derived from ``parallel``, ranks that do not divide into ``pp`` equal
    stages (the last stage takes the rest)."""
    have = sorted({int(r) for r in loaded})
    if stage.empty or not have:
        return []
    out = []
    placed = {int(r) for r in stage.index}
    if stages is not None:
        absent = sorted(placed - set(have))
        if absent:
            out.append(f"stages: {_ranks(absent)} of the stages given "
                       f"{'is' if len(absent) == 1 else 'are'} not loaded")
    unplaced = sorted(set(have) - placed)
    if unplaced:
        out.append(f"stages: {_ranks(unplaced)} {'is' if len(unplaced) == 1 else 'are'} "
                   "in no stage, and left out")
    pp = getattr(parallel, "pp", 1)
    if stages is None and pp > 1 and len(have) % pp:
        sizes = stage.value_counts().sort_index()
        out.append(f"stages: {len(have)} ranks do not divide into pp={pp} equal stages; "
                   "taken in order, " + ", ".join(f"stage {int(k)} holds {int(v)}"
                                                  for k, v in sizes.items()))
    return out
