"""Rank sources grouped into runs by their facts: :func:`group_runs`.

The rules (the profiler and framework, the world size, time, ranks, step numbering) are
set out in :mod:`perfkit.io.detect.runs`, which exports every name of this module under its old
path; the facts come from :mod:`perfkit.io.detect.run_facts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .run_facts import SourceFacts

__all__ = ["group_runs", "RUN_GAP_S"]

RUN_GAP_S = 600.0
"""Seconds between two starts that separate runs when the files' ends are not known.

The ranks of one job start their profilers within the same few steps (seconds apart);
separate runs of a tuning session are minutes to days apart."""

_OVERLAP_SLACK_NS = 1_000_000_000
"""A file starting less than this after the run's last end still belongs to it (clocks of
different hosts disagree by up to a fraction of a second)."""


def group_runs(facts: Sequence[SourceFacts]) -> list[list[int]]:
    """Positions of ``facts`` grouped into runs, the runs in start order.

    See :mod:`perfkit.io.detect.runs` for the rules. Positions keep their order inside a run.
    """
    keys: dict[tuple[Any, ...], list[int]] = {}
    for i, f in enumerate(facts):
        keys.setdefault((f.platform, f.framework), []).append(i)
    flat: list[list[int]] = []
    for members in keys.values():
        for same_world in _by_world(members, facts):
            for in_time in _by_time(same_world, facts):
                for distinct_ranks in _by_rank(in_time, facts):
                    flat.extend(g for g in _by_steps(distinct_ranks, facts) if g)

    def first(g: list[int]) -> tuple[int, int, int]:
        starts = [facts[i].start_ns for i in g if facts[i].start_ns is not None]
        return (0 if starts else 1, min(starts) if starts else 0, min(g))
    return sorted((sorted(g) for g in flat), key=first)


def _by_world(members: list[int], facts: Sequence[SourceFacts]) -> list[list[int]]:
    worlds = sorted({facts[i].world_size for i in members if facts[i].world_size})
    if len(worlds) <= 1:
        return [members]
    out = {w: [i for i in members if facts[i].world_size == w] for w in worlds}
    unknown = [i for i in members if not facts[i].world_size]
    # a file that does not say its world size joins the group it overlaps in time, else
    # the first one
    for i in unknown:
        target = next((w for w, g in out.items() if _overlaps(i, g, facts)), worlds[0])
        out[target].append(i)
    return [sorted(g) for g in out.values()]


def _overlaps(i: int, group: list[int], facts: Sequence[SourceFacts]) -> bool:
    f = facts[i]
    if f.start_ns is None:
        return False
    for j in group:
        g = facts[j]
        if g.start_ns is None:
            continue
        a0, a1 = f.start_ns, f.end_ns if f.end_ns is not None else f.start_ns
        b0, b1 = g.start_ns, g.end_ns if g.end_ns is not None else g.start_ns
        if a0 <= b1 + _OVERLAP_SLACK_NS and b0 <= a1 + _OVERLAP_SLACK_NS:
            return True
        if (f.end_ns is None or g.end_ns is None) and abs(a0 - b0) <= RUN_GAP_S * 1e9:
            return True
    return False


def _by_time(members: list[int], facts: Sequence[SourceFacts]) -> list[list[int]]:
    timed = sorted((i for i in members if facts[i].start_ns is not None),
                   key=lambda i: facts[i].start_ns)  # type: ignore[arg-type,return-value]
    untimed = [i for i in members if facts[i].start_ns is None]
    runs: list[list[int]] = []
    last_end: int | None = None
    last_start: int | None = None
    ends_known = True
    for i in timed:
        f = facts[i]
        start = int(f.start_ns)  # type: ignore[arg-type]
        if runs:
            if ends_known and f.end_ns is not None and last_end is not None:
                new = start > last_end + _OVERLAP_SLACK_NS
            elif _no_evidence(f):  # near in start time only: no evidence of one job
                new = True
            else:
                new = last_start is not None and start - last_start > RUN_GAP_S * 1e9
            if new:
                runs.append([])
                last_end, ends_known = None, True
        else:
            runs.append([])
        runs[-1].append(i)
        last_start = start
        if f.end_ns is None:
            ends_known = False
        else:
            last_end = f.end_ns if last_end is None else max(last_end, f.end_ns)
    if untimed:
        if runs:
            runs[0].extend(untimed)  # nothing tells them apart: with the first run
        else:
            runs.append(untimed)
    return runs


def _no_evidence(f: SourceFacts) -> bool:
    """A source that says nothing of a job (no rank id, no world size; not a Kineto trace,
    whose ranks the names number) and whose end is not known: a start near another's is
    no evidence that both are one job (three MindSpore CPU runs started seconds apart),
    so it starts a run of its own."""
    return f.rank is None and not f.world_size and f.platform == "ascend" and \
        f.together is None


def _by_rank(members: list[int], facts: Sequence[SourceFacts]) -> list[list[int]]:
    """A rank seen twice starts another run (files in start order).

    Sources written together (:attr:`SourceFacts.together`: the ranks of one legacy
    folder) move as one: they join the first run that has none of their ranks.
    """
    order = sorted(members, key=lambda i: (facts[i].start_ns is None, facts[i].start_ns or 0,
                                           i))
    units: list[list[int]] = []
    by_key: dict[str, list[int]] = {}
    for i in order:
        key = facts[i].together
        if key is None:
            units.append([i])
        elif key in by_key:
            by_key[key].append(i)
        else:
            by_key[key] = [i]
            units.append(by_key[key])
    runs: list[list[int]] = []
    seen: list[set[int]] = []
    for unit in units:
        mine = {facts[i].rank for i in unit if facts[i].rank is not None}
        for run, ranks in zip(runs, seen, strict=True):
            if not ranks & mine:
                run.extend(unit)
                ranks |= mine
                break
        else:
            runs.append(list(unit))
            seen.append(set(mine))
    return runs


def _by_steps(members: list[int], facts: Sequence[SourceFacts]) -> list[list[int]]:
    """Ranks whose recorded steps share no number with the others' are another run."""
    with_steps = [i for i in members if facts[i].steps]
    if len(with_steps) < 2:
        return [members]
    groups: list[tuple[set[int], list[int]]] = []
    for i in with_steps:
        mine = set(facts[i].steps)
        for steps, g in groups:
            if steps & mine:
                steps |= mine
                g.append(i)
                break
        else:
            groups.append((set(mine), [i]))
    if len(groups) == 1:
        return [members]
    out = [g for _, g in groups]
    out[0].extend(i for i in members if not facts[i].steps)
    return out
