"""The parallel layout a profile shows: world size, dp / tp / pp / cp / ep, vpp, sharding.

Read from the communication groups (``parallel_group_info`` of torch_npu / MindSpore,
Kineto's ``pg_config``, or the communication matrix: :mod:`perfkit.analysis.layout`), or
from the parallel strategy a MindSpore profile records when it lists no group; vpp from
the first stage's pipeline sends per step; optimizer sharding and sequence parallelism
from the collectives each group runs. Where no pipeline group gives pp but the step table
measures a pipeline bubble, pp is the count of msprof-analyze's pipeline ``stage`` rows, or,
without them, pp > 1 is said and its size left unread (:func:`read_pipeline_bubble`): 1
stays as a placeholder, never as a reading.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..analysis import layout as L
from ..analysis.recorded import recorded_steps_text, recorded_tasks
from ..analysis.steps import step_breakdown
from ..errors import PerfkitError
from ..format import counted, listed, plural, time_text
from ..io.canonical.comm_words import comm_words_of
from .fields import FieldValue, Readings
from .recorded_steps import over_recorded, recorded_steps_table

__all__ = ["read_layout", "read_vpp", "first_stage_sends", "read_sharding", "read_pipeline_bubble",
           "PIPELINE_BUBBLE", "PIPELINE_STAGES", "PP_UNREAD"]

#: The reading of :func:`read_pipeline_bubble` (kept in :attr:`perfkit.Job.observed`):
#: the largest per-rank pipeline bubble in µs per step, and what was read.
PIPELINE_BUBBLE = "pipeline_bubble"
#: The ranks of each pipeline stage where msprof-analyze's ``stage`` rows give pp (kept in
#: :attr:`perfkit.Job.observed`): a tuple of rank tuples, stage 0 first.
PIPELINE_STAGES = "pipeline_stages"
#: What the one-line descriptions of a job add to a placeholder pp.
PP_UNREAD = "pp not read: a pipeline bubble is measured, so pp > 1"


def read_layout(profile: Any, out: Readings) -> pd.DataFrame:
    """Put ``world_size``, ``tp``, ``pp``, ``cp``, ``ep`` and ``dp``; return the groups."""
    meta = profile.meta
    put = out.put
    groups = L.communication_groups(profile)
    sizes = L.group_sizes(groups)
    loaded = list(getattr(profile, "ranks", None) or [meta.rank])
    world_src = []
    world = meta.world_size
    if world:
        how = {"kineto": "distributedInfo",
               "mindspore_legacy": "MindSpore's rank_size",
               "cluster_analysis_output": "the highest rank msprof-analyze's cluster files "
                                          "name, plus one"}.get(
            str(meta.source_format), "the ranks of the communication groups")
        world_src.append(f"{world} ({how})")
    if not groups.empty:
        members = {r for rs in groups["ranks"] for r in rs}
        biggest = int(groups["size"].dropna().max()) if groups["size"].notna().any() else 0
        cand = max([len(members), biggest] + ([world] if world else []))
        if cand != world:
            world_src.append(f"{cand} (members of the largest group)")
        world = cand
    unknown = _unknown_kinds(groups, world)
    if not world:
        world = len(loaded)
        world_src.append(f"{world} (the ranks loaded; no group or world size recorded)")
        put("world_size", world, "; ".join(world_src), "default")
    elif unknown and not meta.world_size and _from_matrix(groups):
        put("world_size", world,
            f"at least {world}: the largest communication group links local ranks 0.."
            f"{world - 1} in communication_matrix.json; {world} assumed, as the world size "
            "is not recorded, the loaded ranks' links need not reach every rank, and "
            f"unnamed groups of {listed(unknown, 'or')} ranks leave the layout unknown",
            "default")
    else:
        put("world_size", world, "world size " + "; ".join(world_src))
    have_groups = not groups.empty
    group_text = _group_text(groups)
    whole = _unnamed_world(groups, world)
    strategy = {} if have_groups else L.recorded_strategy(profile)
    if strategy.get("rank_size") and out["world_size"].source == "default":
        put("world_size", strategy["rank_size"],
            f"{strategy['source']}: rank_size {strategy['rank_size']}")
        world = strategy["rank_size"]
    for kind in ("tp", "pp", "cp", "ep"):
        if kind in sizes:
            put(kind, sizes[kind][0], sizes[kind][1])
        elif have_groups and unknown:
            put(kind, 1, f"1 assumed: no group is named {kind}, and the {group_text} include "
                         f"unnamed groups of {listed(unknown, 'or')} ranks whose kind the "
                         f"profile does not say (one may be the {kind} group)", "default")
        elif have_groups and whole:
            holds = plural(len(groups), "includes", "include")
            put(kind, 1, f"1 assumed: no group is named {kind}, and the {group_text} "
                         f"{holds} an unnamed group of all {world} ranks whose kind the "
                         f"profile does not say (it may be the {kind} group as well as the "
                         "data-parallel one)", "default")
        elif have_groups:
            put(kind, 1, f"no {kind} group among the {group_text}")
        elif kind == "pp" and strategy.get("stage_num"):
            put("pp", strategy["stage_num"], f"{strategy['source']}: stage_num "
                                             f"{strategy['stage_num']} (pipeline stages)")
        elif kind == "tp" and _data_parallel_mode(strategy):
            put("tp", 1, f"{strategy['source']}: parallel mode "
                         f"{strategy['parallel_mode']} (no model parallelism)")
        elif strategy and kind in ("cp", "ep"):
            put(kind, 1, f"{strategy['source']}: parallel mode "
                         f"{strategy.get('parallel_mode', '?')}, no {kind}: 1 assumed",
                "default")
        else:
            put(kind, 1, "no communication groups recorded: 1 assumed", "default")
    tp, pp, cp = out["tp"].value, out["pp"].value, out["cp"].value
    if "dp" in sizes:
        put("dp", sizes["dp"][0], sizes["dp"][1])
    elif strategy and world % (tp * pp * cp) == 0:
        how = (f"{strategy['source']}: rank_size {world} / stage_num {pp}"
               f" (parallel mode {strategy.get('parallel_mode', '?')})")
        put("dp", world // (tp * pp * cp), how,
            "profile" if out["tp"].source == "profile" else "default")
    elif have_groups and world % (tp * pp * cp) == 0:
        kinds = set(groups["kind"].dropna())
        unnamed = groups[groups["kind"].isna()]
        smaller = sorted({int(n) for n in unnamed["size"].dropna() if int(n) < world})
        if smaller:
            put("dp", world // (tp * pp * cp),
                f"the {group_text} include unnamed groups of {listed(smaller, 'or')} ranks "
                "whose kind "
                f"(dp, tp, ...) the profile does not say: world {world} / (tp {tp} × pp "
                f"{pp}) assumed", "default")
        elif kinds <= {"world"} and whole:
            put("dp", world // (tp * pp * cp),
                f"the {group_text} {plural(len(groups), 'names', 'name')} no "
                f"tensor/pipeline group, but {plural(len(groups), 'its', 'their')} unnamed "
                f"group of all {world} ranks may be one: every rank counted as a data-parallel "
                f"replica (world {world}), assumed", "default")
        elif kinds <= {"world"}:
            put("dp", world // (tp * pp * cp),
                f"the {group_text} {plural(len(groups), 'holds', 'hold')} no "
                "tensor/pipeline group: every rank is a "
                f"data-parallel replica (world {world})")
        else:
            put("dp", world // (tp * pp * cp), f"world {world} / (tp {tp} × pp {pp}"
                + (f" × cp {cp}" if cp > 1 else "") + ") with no dp group listed")
    else:
        put("dp", max(1, world // (tp * pp * cp)),
            "no communication groups recorded: "
            + (f"all {world} ranks counted" if world != 1 else "the one rank counted")
            + " as data parallel (tp = pp = 1 assumed)", "default")
    _at_least_the_groups(meta, out, world)
    _expert_parallel_unread(profile, out)
    read_pipeline_bubble(profile, out)
    return groups


#: Communication families of expert-parallel token dispatch and combine
#: (:func:`perfkit.io.canonical.categories.comm_family`).
EXPERT_FAMILIES = frozenset({"deepep"})


def _expert_parallel_unread(profile: Any, out: Readings) -> None:
    """Where ep stays an assumed 1 but the run's kernels dispatch tokens to experts
    (DeepEP), the job says so among its problems: dp and its traffic are then priced as
    if no rank held experts (the DeepSeek trace: dp 64, 35 s of dp traffic in ``plan``)."""
    ep = out.get("ep")
    if ep is None or ep.source != "default" or ep.value != 1:
        return
    comm = profile.comm_ops if hasattr(profile, "comm_ops") else None
    if comm is None or not hasattr(comm, "columns") or "family" not in comm.columns \
            or not len(comm):
        return
    seen = sorted(EXPERT_FAMILIES & set(comm["family"].dropna().astype(str)))
    if not seen:
        return
    out["ep"] = FieldValue(1, "default", ep.detail, (
        f"the run's {', '.join(seen)} kernels dispatch tokens to experts on other ranks, "
        "so it is expert-parallel (ep > 1), but no group records ep's size: ep 1 is "
        "assumed, and dp and its traffic are priced as if every rank held every expert "
        "(give ep: perfkit plan --ep N, or Job.with_overrides(ep=N))"))


def read_pipeline_bubble(profile: Any, out: Readings) -> None:
    """Read pp from msprof-analyze's stage rows, or say pp > 1, where pp was not read but
    the step table measures a pipeline bubble.

    The bubble (``bubble_us`` of :func:`perfkit.analysis.step_breakdown`, the time a rank
    waits in pipeline receives) exists only with pipeline parallelism, but its size does
    not give the number of stages. msprof-analyze's ``stage`` rows of
    ``cluster_step_trace_time.csv`` do (:func:`perfkit.analysis.layout.recorded_stages`):
    it documents them as the pipeline stages and builds them from the point-to-point
    transfers, putting ranks that pass activations to each other in different stages.
    Where those rows split exactly the ranks of the step table, and all of the world,
    into two or more stages of equal size, pp is their count (source ``profile``),
    :data:`PIPELINE_STAGES` records their ranks and dp becomes world / (tp × pp × cp).
    Otherwise pp keeps the placeholder 1 with source ``default`` and a detail that says
    so, and dp's detail says it is smaller. Either way :data:`PIPELINE_BUBBLE` records
    the largest bubble. Nothing changes where pp was read.
    """
    if out["pp"].source != "default" or out["pp"].value != 1:
        return
    try:
        steps = step_breakdown(profile)
    except PerfkitError:
        return
    if steps.empty or "bubble_us" not in steps.columns:
        return
    per = steps.groupby("rank")["bubble_us"].median().astype("float64")
    waiting = per[per > 0]
    if waiting.empty:
        return
    worst = waiting.idxmax()
    seen = (f"the step table measures a pipeline bubble (time waiting in pipeline "
            f"receives) on {len(waiting)} of {counted(len(per), 'rank')}, up to "
            f"{time_text(float(waiting.max()))} per step (rank {worst}): the job is "
            "pipelined, pp > 1")
    out[PIPELINE_BUBBLE] = FieldValue(float(waiting.max()), "profile", seen)
    world, dp = out["world_size"].value, out["dp"]
    if _read_stages(profile, out, seen, {int(r) for r in per.index}, world):
        return
    out.put("pp", 1, f"not read: {seen}, but no pipeline group or stage count is "
                     "recorded to give its size; 1 is a placeholder, not a reading",
            "default")
    rest = out["tp"].value * out["cp"].value  # dp × tp × pp × cp = world, with pp ≥ 2
    if dp.value and world and dp.value * rest == world:
        out.put("dp", dp.value, f"{dp.detail}; the measured pipeline bubble shows pp > 1, "
                                f"so dp is at most {world // (2 * rest)}", dp.source)


def _read_stages(profile: Any, out: Readings, seen: str, ranks: set[int],
                 world: int | None) -> bool:
    """Put ``pp``, :data:`PIPELINE_STAGES` and ``dp`` from msprof-analyze's ``stage`` rows
    when they split ``ranks``, the whole world, into stages of equal size; say whether."""
    stages = L.recorded_stages(profile)
    members = {r for st in stages for r in st}
    if not stages or members != ranks or len(members) != world:
        return False
    pp = len(stages)
    rows = listed([f"{st[0]}..{st[-1]}" if st == list(range(st[0], st[-1] + 1))
                   else ", ".join(map(str, st)) for st in stages])
    out.put("pp", pp, f"cluster_step_trace_time.csv: {counted(pp, 'stage row')} (Type "
                      f"stage) of {len(stages[0])} ranks each, ranks {rows}: msprof-analyze's "
                      "pipeline stages, which it builds so that ranks passing activations to "
                      f"each other fall in different stages; and {seen}")
    out[PIPELINE_STAGES] = FieldValue(tuple(tuple(st) for st in stages), "profile",
                                      f"the ranks of the {counted(pp, 'stage row')} of "
                                      "cluster_step_trace_time.csv, in order of first rank")
    tp, cp = out["tp"], out["cp"]
    if world % (tp.value * pp * cp.value):
        return True
    assumed = [(k, f) for k, f in (("tp", tp), ("cp", cp))
               if f.source == "default" and f.value == 1]
    why = assumed[0][1].detail.removesuffix(": 1 assumed") if assumed else ""
    out.put("dp", world // (tp.value * pp * cp.value),
            f"world {world} / (tp {tp.value} × pp {pp}"
            + (f" × cp {cp.value}" if cp.value > 1 else "") + ")"
            + (f", with {listed([k for k, _ in assumed])} taken as 1 ({why})"
               if assumed else ""),
            "default" if assumed else "profile")
    return True


def _at_least_the_groups(meta: Any, out: Readings, world: int) -> None:
    """Put ``world_size`` = dp × tp × pp × cp where that is more than ``world`` and the
    profile does not record its world size (it was counted from the loaded ranks' own
    groups: rank 0 of dp 2 × pp 2 alone lists ranks 0, 1 and 2)."""
    declared = (meta.world_size and (meta.extra or {}).get("world_size_from") != "groups")
    if declared or out["world_size"].source != "profile":
        return
    sizes = {k: int(out[k].value) for k in ("dp", "tp", "pp", "cp")}
    product = sizes["dp"] * sizes["tp"] * sizes["pp"] * sizes["cp"]
    if product > world:
        parts = " × ".join(f"{k} {v}" for k, v in sizes.items() if k != "cp" or v > 1)
        whose = "the loaded rank lists" if meta.rank is not None else "the loaded ranks list"
        out.put("world_size", product,
                f"{parts} (the sizes of the communication groups; {whose} {world} ranks in "
                f"{'its' if meta.rank is not None else 'their'} groups)")


def _unknown_kinds(groups: pd.DataFrame, world: int | None) -> list[int]:
    """Sizes of the unnamed groups larger than one rank and smaller than the world: a tp,
    pp, cp or ep group may be among them, so the absence of a named one proves nothing."""
    if groups.empty or not world:
        return []
    unnamed = groups.loc[groups["kind"].isna(), "size"].dropna()
    return sorted({int(n) for n in unnamed if 1 < int(n) < world})


def _unnamed_world(groups: pd.DataFrame, world: int | None) -> bool:
    """Whether an unnamed group holds every rank of a world of several: it is the
    data-parallel group when tp = pp = cp = ep = 1, but as well the tp (or pp, cp, ep)
    group of a job whose one model-parallel dimension spans the world, so the absence of
    a named group of that kind proves nothing."""
    if groups.empty or not world or world < 2:
        return False
    unnamed = groups.loc[groups["kind"].isna(), "size"].dropna()
    return any(int(n) == world for n in unnamed)


def _from_matrix(groups: pd.DataFrame) -> bool:
    """Whether the groups were read from the communication matrix, whose sizes are the
    highest local rank a loaded rank links to, plus one: lower bounds."""
    return bool(len(groups)) and bool(
        groups["source"].astype(str).str.startswith("communication_matrix").all())


def _group_text(groups: pd.DataFrame) -> str:
    """``"the 6 communication groups (communication_matrix.json)"`` without its ``the``:
    one group keeps its source's details, several only the file they come from."""
    if groups.empty:
        return ""
    source = str(groups["source"].iloc[0])
    if len(groups) > 1:
        source = source.split(" (", 1)[0]
    return f"{counted(len(groups), 'communication group')} ({source})"


def _data_parallel_mode(strategy: dict[str, Any]) -> bool:
    mode = str(strategy.get("parallel_mode", "")).lower().replace("-", "_")
    return mode in ("data_parallel", "stand_alone")


def first_stage_sends(profile: Any, stage_of: dict[int, int]
                      ) -> tuple[pd.DataFrame, pd.DataFrame | None, bool]:
    """The pipeline sends per step of the first stage's ranks, the ``steps`` table's
    marks of the steps recorded in full (None where it marks none), and whether any of
    those ranks' sends were left out as fragments of steps.

    Returns
    -------
    tuple
        :func:`perfkit.analysis.layout.p2p_sends_per_step` of the ranks of stage 0 in
        ``stage_of`` (``rank``, ``step``, ``sends``), kept to the steps whose device tasks
        were recorded in full where the marks say some were not (a fragment of a step
        holds a fraction of its sends), the marks, and whether the first stage's ranks
        had sends that none of their steps recorded in full keeps.
    """
    sends = L.p2p_sends_per_step(profile)
    first = [r for r, s in stage_of.items() if s == 0]
    sends = sends[sends["rank"].isin(first)] if len(sends) else sends
    marks = recorded_steps_table(profile)
    dropped = False
    if len(sends) and marks is not None:
        sends = recorded_tasks(sends, marks)[0]
        dropped = sends.empty
    return sends, marks, dropped


def read_vpp(profile: Any, put: Any, pp: int, m: int | None, stage_of: dict[int, int]
             ) -> None:
    """Put ``vpp``: m·(2·vpp − 1) pipeline sends per step on the first stage.

    The first stage sends each micro-batch's activations forward once per model chunk
    (m·vpp) and its gradients back once per chunk but the first (m·(vpp − 1)): Megatron-LM's
    interleaved schedule (Narayanan et al. 2021, "Efficient Large-Scale Language Model
    Training on GPU Clusters", section 2.2). The sends per step are the most frequent count
    over the first stage's (rank, step) pairs, among the steps whose device tasks were
    recorded in full where the ``steps`` table marks some that were not
    (:mod:`~perfkit.job.recorded_steps`): a fragment of a step holds a fraction of its
    sends. Where no such step is left, or m is unknown, vpp is 1 assumed with the reason.
    """
    if pp == 1:
        put("vpp", 1, "pp = 1: no virtual stages")
        return
    sends, marks, dropped = first_stage_sends(profile, stage_of)
    over = over_recorded(marks)
    if dropped:
        put("vpp", 1, "the first stage's pipeline sends are not counted: its ranks have "
                      "no step whose device tasks were recorded in full, and a fragment "
                      "of a step holds a fraction of its sends (device tasks recorded "
                      f"for {recorded_steps_text(marks)}): 1 assumed", "default")
        return
    if not m or sends.empty:
        unknown = [w for w, gone in (("the first stage's pipeline sends", sends.empty),
                                     ("the micro-batches per step", not m)) if gone]
        put("vpp", 1, f"{listed(unknown)} are unknown: 1 assumed", "default")
        return
    per = int(sends["sends"].mode().iloc[0])
    # first stage: m·v forward sends (every chunk) + m·(v − 1) backward (not chunk 0)
    v2 = per / m + 1
    if v2 % 2 or v2 < 2:
        put("vpp", 1, f"{per} pipeline sends per step on the first stage{over} do not fit "
                      f"m·(2·vpp − 1) with m = {m}: 1 assumed", "default")
        return
    put("vpp", int(v2 // 2), f"{comm_words_of(profile).source}: {per} pipeline sends per "
                             f"step on the first stage{over} = m·(2·vpp − 1) with m = {m}")


def read_sharding(profile: Any, put: Any, groups: pd.DataFrame, dp: int, tp: int) -> None:
    """Put ``optimizer_shard`` and ``sequence_parallel`` from the collectives of the dp
    and tp groups.

    A reduce-scatter or all-gather in the group (Megatron's distributed optimizer,
    MindSpore's optimizer parallel; sequence parallelism in the tp group) is read from any
    step: it ran. That the group *only* runs other kinds (all-reduce: no sharding) is read
    over the steps whose device tasks were recorded in full where the ``steps`` table marks
    some that were not (:mod:`~perfkit.job.recorded_steps`), and the evidence says over
    which: a fragment of a step may stop before its reduce-scatters and all-gathers. Where
    the group's collectives are recorded only in such fragments, the value is assumed
    (1, off) with the reason.
    """
    marks = recorded_steps_table(profile)
    used = L.collectives_by_group(profile)
    whole = used if marks is None else L.collectives_by_group(profile, marks)
    kinds = {str(g): (None if pd.isna(k) else str(k))
             for g, k in zip(groups["group"], groups["kind"], strict=False)}
    if len(kinds) == 1 and not any(kinds.values()) and dp > 1:
        kinds = dict.fromkeys(kinds, "dp")  # the one unnamed group is the dp group

    def kinds_of(group: str, by_group: dict[str, set[str]]) -> set[str]:
        return set().union(*[v for g, v in by_group.items() if kinds.get(g) == group]
                           or [set()])

    dp_ops, dp_whole = kinds_of("dp", used), kinds_of("dp", whole)
    tp_ops, tp_whole = kinds_of("tp", used), kinds_of("tp", whole)
    over = over_recorded(marks)
    if dp == 1:
        put("optimizer_shard", 1, "dp = 1: nothing to shard over")
    elif dp_ops & _SHARDED:
        put("optimizer_shard", dp, "gradients reduce-scattered and parameters all-gathered "
                                   f"in the dp group ({', '.join(sorted(dp_ops))}): "
                                   f"optimizer state sharded over dp = {dp}")
    elif dp_whole:
        put("optimizer_shard", 1, f"the dp group only runs {', '.join(sorted(dp_whole))}"
                                  f"{over}: no sharding")
    elif dp_ops:
        put("optimizer_shard", 1, _only_in_fragments("dp", dp_ops, marks) + ": 1 assumed",
            "default")
    else:
        put("optimizer_shard", 1, "no data-parallel collectives recorded: 1 assumed",
            "default")
    if tp == 1:
        put("sequence_parallel", False, "tp = 1: sequence parallelism needs tp > 1")
    elif tp_ops & _SHARDED:
        put("sequence_parallel", True, "the tp group runs all-gather / reduce-scatter "
                                       "(sequence parallelism)")
    elif tp_whole:
        put("sequence_parallel", False, f"the tp group only runs "
                                        f"{', '.join(sorted(tp_whole))}{over}")
    elif tp_ops:
        put("sequence_parallel", False, _only_in_fragments("tp", tp_ops, marks)
            + ": off assumed", "default")
    else:
        put("sequence_parallel", False, "no tensor-parallel collectives recorded: off "
                                        "assumed", "default")


#: The collective kinds that shard: the optimizer state over dp, the activations over tp.
_SHARDED = frozenset({"reducescatter", "allgather"})


def _only_in_fragments(group: str, ops: set[str], marks: pd.DataFrame | None) -> str:
    """Why the ``group``'s collectives ``ops``, recorded only in steps whose device tasks
    were not recorded in full, do not say that it shards nothing."""
    return (f"the {group} group's collectives ({', '.join(sorted(ops))}) are recorded only "
            "in steps whose device tasks were not recorded in full (device tasks recorded "
            f"for {recorded_steps_text(marks) if marks is not None else 'every step'}), and "
            "a fragment of a step may stop before its reduce-scatters and all-gathers")
