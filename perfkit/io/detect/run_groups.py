"""Group the rank sources found in a folder into runs (:func:`runs_of`), each checked for
a rank claimed twice (:func:`check_unique`); number a folder's traces by their names
(:func:`suffix_ranks`). The rules are those of docs/loading.md, "Separate runs in one
folder" and "A folder of several profiles"."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ...errors import ProfileError
from .._common import rank_from_name, suffix_number
from . import nested
from .exports_twice import one_export_each
from .runs import SourceFacts, group_runs, source_facts
from .sources import RankSource

__all__ = ["runs_of", "check_unique", "suffix_ranks", "SKIPPED"]


def suffix_ranks(sources: list[RankSource]) -> list[RankSource]:
    """Kineto files without a rank, named ``..._0``, ``..._1`` ... ``..._{n-1}`` in one
    folder: those numbers are their ranks (a set of pids or job ids is not 0..n-1)."""
    by_dir: dict[str, list[int]] = {}
    for i, s in enumerate(sources):
        if s.fmt == "kineto" and s.rank is None:
            by_dir.setdefault(str(Path(s.path).parent), []).append(i)
    out = list(sources)
    for members in by_dir.values():
        nums = [suffix_number(Path(sources[i].path).name) for i in members]
        if None in nums or sorted(nums) != list(range(len(nums))):  # type: ignore[type-var]
            continue
        for i, n in zip(members, nums, strict=True):
            out[i] = dataclasses.replace(
                sources[i], rank=n,
                rank_from=f"the file names (numbered _0 .. _{len(nums) - 1} in one folder)")
    return out


SKIPPED = ("unreadable", "not_a_trace")
"""Sources that are no rank: files that are not traces, folders that cannot be examined."""


def runs_of(root: Path, sources: list[RankSource], layout: bool = False) -> nested.Members:
    """Group a folder's rank sources into runs, each checked for duplicate ranks: each
    run's sources and their facts, in start order.

    ``layout``: the sources come from a parent folder's scan; only those of one layout
    (format and depth, :func:`nested.layout_parts`) can be ranks of one job. The sources
    set aside (files that are not traces, folders that cannot be examined) go with the
    runs of their folder (:func:`_aside_runs`), not with every run.
    """
    sources = one_export_each(suffix_ranks(sources))
    real = [s for s in sources if s.fmt not in SKIPPED]
    aside = [s for s in sources if s.fmt in SKIPPED]
    facts = [source_facts(s) for s in real] if len(real) > 1 else \
        [source_facts(s, read=False) for s in real]
    parts = nested.layout_parts(root, real) if layout else [list(range(len(real)))]
    groups = []
    for part in parts:
        found = group_runs([facts[i] for i in part]) if len(part) > 1 else \
            [list(range(len(part)))]
        groups.extend([part[j] for j in g] for g in found)
    if len(parts) > 1:
        groups.sort(key=lambda g: nested.start_key(([], [facts[i] for i in g])))
    owners = _aside_runs(aside, [[real[i] for i in g] for g in groups])
    members: nested.Members = []
    for k, g in enumerate(groups):
        mine = [s for s, runs in zip(aside, owners, strict=True) if k in runs]
        checked = check_unique(root, [real[i] for i in g] + mine)
        by_path = {real[i].path: facts[i] for i in g}
        fs = [dataclasses.replace(by_path[s.path], rank=s.rank) if s.path in by_path
              else SourceFacts(s.fmt, rank=s.rank) for s in checked]
        members.append((checked, fs))
    return members


def _aside_runs(aside: list[RankSource], runs: list[list[RankSource]]) -> list[set[int]]:
    """For each source set aside, the runs (positions in ``runs``) it goes with.

    Those with a rank in its folder or below; among them, those holding the rank its name
    gives (``parallel_strategy_1.json``: rank 1), when one does. A file whose folder holds
    no rank of any run (a folder of side files alone) goes with none. With a single run
    (or none but these), everything goes with it.
    """
    if len(runs) <= 1:
        return [{0} for _ in aside]
    out: list[set[int]] = []
    for s in aside:
        where = Path(s.path).parent
        near = {k for k, run in enumerate(runs)
                if any(where == Path(r.path) or where in Path(r.path).parents for r in run)}
        rank = s.rank if s.fmt == "unreadable" else rank_from_name(Path(s.path).name,
                                                                   suffix=True)
        holding = {k for k in near if any(r.rank == rank for r in runs[k])}
        out.append(holding if rank is not None and holding else near)
    return out


def check_unique(parent: Path, sources: list[RankSource]) -> list[RankSource]:
    seen: dict[int, RankSource] = {}
    unknown = 0
    out = []
    for s in sources:
        if s.rank is None:
            unknown += 1
            out.append(s)
            continue
        if s.rank in seen:
            raise ProfileError(parent, f"two profiles claim rank {s.rank}: {seen[s.rank].path} "
                               f"and {s.path}; expected one folder or file per rank")
        seen[s.rank] = s
        out.append(s)
    # ranks unknown before parsing get the numbers no other source uses, in name order
    # (an unreadable folder keeps none: it is reported by its path)
    free = (r for r in range(10**9) if r not in seen)
    real = [s for s in out if s.fmt not in SKIPPED]
    how = "its position (the only profile read)" if len(real) == 1 else \
        "its position (the numbers no other profile uses, in name order)"
    out = [s if s.rank is not None or s.fmt in SKIPPED
           else dataclasses.replace(s, rank=next(free), rank_from=s.rank_from or how)
           for s in out]
    return sorted(out, key=lambda s: s.rank if s.rank is not None else -1)
