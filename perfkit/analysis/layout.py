"""The parallel layout a profile shows: communication groups, their kinds and sizes.

Profilers record no dp / tp / pp degrees; they record communication groups
(``reference/formats.md`` §1.14):

* torch_npu and MindSpore write ``parallel_group_info`` into ``profiler_metadata.json``:
  one entry per HCCL communicator with the ``group_name`` the framework gave it
  (Megatron / MindSpeed: ``dp``, ``tp``, ``pp``, ``cp``, ``ep``, ...) and its
  ``global_ranks``;
* PyTorch 2.x Kineto traces carry ``distributedInfo.pg_config``: every process group with
  its ``pg_desc`` and ``ranks``;
* without either, ``communication_matrix.json`` still numbers each group's members
  (local ranks ``0 .. size-1``), and the collectives used in a group say what it is for.

Loaders put the first two into ``meta.groups``; :func:`communication_groups` turns them
(or the matrix) into one row per group with its kind, and :func:`group_sizes` reduces them
to one size per kind with the evidence for each.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from .._text_dtype import TEXT
from ..format import counted
from ._frames import collect, table_columns
from ._util import table
from .collectives import comm_op_type
from .recorded import recorded_tasks

__all__ = ["GROUP_COLUMNS", "KINDS", "group_kind", "communication_groups", "group_sizes",
           "stage_of_ranks", "collectives_by_group", "p2p_sends_per_step",
           "recorded_strategy", "recorded_stages"]

#: Columns of :func:`communication_groups`.
GROUP_COLUMNS = {"group": TEXT, "name": TEXT, "kind": TEXT, "size": "Int64",
                 "ranks": "object", "source": TEXT}

#: Group kinds, in the order of the layout (``world`` is the default group of all ranks).
KINDS = ("dp", "tp", "pp", "cp", "ep", "world")

_KIND_PATTERNS = (
    ("ep", r"(?:^|[_\-\s])(?:ep|expert\w*|moe\w*)(?:$|[_\-\s])|expert"),
    ("cp", r"(?:^|[_\-\s])(?:cp|context\w*)(?:$|[_\-\s])|context_parallel"),
    ("pp", r"(?:^|[_\-\s])(?:pp|pipe\w*)(?:$|[_\-\s])|pipeline"),
    ("tp", r"(?:^|[_\-\s])(?:tp|mp|tensor\w*|model_parallel\w*)(?:$|[_\-\s])|tensor"),
    ("dp", r"(?:^|[_\-\s])(?:dp|data\w*)(?:$|[_\-\s])|data_parallel"),
    ("world", r"default|world|global|hccl_world_group"),
)


def group_kind(name: Any) -> str | None:
    """The layout kind of a group name (``"dp"``, ``"tp"``, ...), None when unknown.

    Names are matched as words, case-insensitively: ``dp``, ``data_parallel``,
    ``DATA_PARALLEL_GROUP`` are data parallel; ``tp``, ``mp``, ``tensor_model_parallel``
    tensor parallel; ``pp``, ``pipeline`` pipeline; ``cp``, ``context`` context parallel;
    ``ep``, ``expert`` expert parallel; ``default_pg``, ``hccl_world_group`` the whole
    world. A name mixing kinds (``dp_cp``, ``tp_ep``) gets the first of ep, cp, pp, tp, dp
    it names, which is the wider group's partner; such groups are listed but not used for
    a size when a plain group of that kind exists.
    """
    if name is None or (isinstance(name, float) and np.isnan(name)):
        return None
    text = str(name).strip().lower()
    if not text:
        return None
    for kind, rx in _KIND_PATTERNS:
        if re.search(rx, text):
            return kind
    return None


def _from_meta(groups: dict[str, Any], source: str) -> list[dict[str, Any]]:
    rows = []
    for key, g in groups.items():
        if not isinstance(g, dict):
            continue
        ranks = sorted({int(r) for r in g.get("global_ranks") or [] if str(r).lstrip("-")
                        .isdigit()})
        name = g.get("group_name") or key
        rows.append({"group": str(key), "name": str(name), "kind": group_kind(name),
                     "size": len(ranks) if ranks else pd.NA, "ranks": ranks,
                     "source": source})
    return rows


def _from_matrix(profile: Any) -> list[dict[str, Any]]:
    """Groups seen only in ``comm_matrix``: size from the highest local rank of a link."""
    present = table_columns(profile, "comm_matrix")
    if "src_local" not in present or "group" not in present:
        return []
    matrix = table(profile, "comm_matrix")
    cols = [c for c in ("group", "src_local", "dst_local", "rank") if c in matrix.columns]
    m = collect(matrix, cols)
    m = m.dropna(subset=["group"])
    rows = []
    kinds = collectives_by_group(profile)
    for group, part in m.groupby("group", sort=True):
        local = pd.concat([part["src_local"], part["dst_local"]]).dropna()
        if local.empty:
            continue
        size = int(local.max()) + 1
        used = kinds.get(str(group), set())
        kind = None
        if used and used <= {"send", "receive", "sendrecv"}:
            kind = "pp"
        rows.append({"group": str(group), "name": str(group), "kind": kind, "size": size,
                     "ranks": sorted(int(r) for r in part["rank"].dropna().unique()),
                     "source": "communication_matrix.json (local ranks 0.."
                               f"{size - 1}; collectives: {', '.join(sorted(used)) or '?'})"})
    return rows


def communication_groups(profile: Any) -> pd.DataFrame:
    """Every communication group of the profile, with its kind and size.

    Parameters
    ----------
    profile : Profile or Cluster

    Returns
    -------
    DataFrame
        :data:`GROUP_COLUMNS`: ``group`` (the communicator / process-group id), ``name``
        (what the framework called it), ``kind`` (:func:`group_kind`; NA when the name says
        nothing), ``size`` (members), ``ranks`` (global ranks as listed, or the loaded
        ranks that use the group when only the matrix knows it) and ``source`` (where it
        was read). Empty when the profile records no group.
    """
    meta = profile.meta
    fmt = str(meta.source_format)
    if meta.groups:
        source = ("distributedInfo.pg_config" if fmt == "kineto"
                  else "profiler_metadata.json parallel_group_info")
        rows = _from_meta(meta.groups, source)
    else:
        rows = _from_matrix(profile)
    if not rows:
        return pd.DataFrame({c: pd.Series([], dtype=d) for c, d in GROUP_COLUMNS.items()})
    frame = pd.DataFrame(rows)
    for col, dtype in GROUP_COLUMNS.items():
        if dtype != "object":
            frame[col] = frame[col].astype(dtype)
    return frame[list(GROUP_COLUMNS)].sort_values(["kind", "group"], kind="mergesort",
                                                   na_position="last").reset_index(drop=True)


def group_sizes(groups: pd.DataFrame) -> dict[str, tuple[int, str]]:
    """One size per kind, with the sentence that says where it comes from.

    Groups whose name mixes kinds (``dp_cp``) are skipped when a plain group of the kind
    exists. When groups of one kind have different sizes the most common size is taken
    and the sentence says so.

    Returns
    -------
    dict
        ``{kind: (size, evidence)}`` for the kinds present.
    """
    out: dict[str, tuple[int, str]] = {}
    if groups.empty:
        return out
    known = groups.dropna(subset=["kind", "size"])
    for kind, part in known.groupby("kind", sort=False):
        names = part["name"].astype(str)
        plain = part[names.str.lower().str.fullmatch(r"[a-z]+(?:_pg|_group)?")]
        use = plain if len(plain) else part
        sizes = use["size"].astype(int)
        size = int(sizes.mode().iloc[0])
        example = use.iloc[int(np.argmax(sizes.to_numpy() == size))]
        text = (f"{use['source'].iloc[0]}: {counted(len(use), 'group')} named "
                f"{', '.join(sorted(set(use['name'].astype(str))))!s} of {size} ranks "
                f"(e.g. {list(example['ranks'])[:8]})")
        if sizes.nunique() > 1:
            text += f"; sizes differ ({sorted(set(sizes))}), the most common is taken"
        out[str(kind)] = (size, text)
    return out


def stage_of_ranks(groups: pd.DataFrame) -> dict[int, int]:
    """Pipeline stage of each rank: its position in its ``pp`` group's ascending ranks."""
    out: dict[int, int] = {}
    for ranks in groups.loc[groups["kind"] == "pp", "ranks"]:
        for i, r in enumerate(sorted(ranks)):
            out[int(r)] = i
    return out


def collectives_by_group(profile: Any, steps: pd.DataFrame | None = None
                         ) -> dict[str, set[str]]:
    """The collective kinds (:func:`~perfkit.analysis.collectives.comm_op_type`) used in
    each group of ``comm_ops``; with ``steps`` (a ``steps`` table that marks
    ``tasks_recorded``), only in the steps whose device tasks were recorded in full
    (:func:`~perfkit.analysis.recorded.recorded_tasks`)."""
    if "group" not in table_columns(profile, "comm_ops"):
        return {}
    ops = table(profile, "comm_ops")
    if steps is not None:
        ops = recorded_tasks(ops, steps)[0]
    pairs = collect(ops, ["group", "name"])
    pairs = pairs.dropna().drop_duplicates()
    pairs = pairs.assign(kind=comm_op_type(pairs["name"]))
    return {str(g): set(p["kind"]) for g, p in pairs.groupby("group", sort=False)}


def recorded_strategy(profile: Any) -> dict[str, Any]:
    """The parallel strategy a legacy MindSpore profile records in its metadata.

    MindSpore 2.0-2.3 writes ``parallel_mode``, the pipeline ``stage_num`` and the
    ``rank_size`` (loaders put them in ``meta.extra["parallel"]``). Returns that dict (with
    ``source``, the file it came from), or ``{}``.
    """
    metas = [profile.meta] + [p.meta for p in getattr(profile, "profiles", []) or []]
    for meta in metas:
        info = (meta.extra or {}).get("parallel")
        if isinstance(info, dict) and info:
            return dict(info)
    return {}


def p2p_sends_per_step(profile: Any) -> pd.DataFrame:
    """Point-to-point sends of each rank per step (the pipeline's activation transfers).

    Returns
    -------
    DataFrame
        ``rank``, ``step``, ``sends`` (``comm_ops`` named like a send, see
        :func:`~perfkit.analysis.collectives.comm_op_type`).
    """
    cols = ["rank", "step", "name"]
    if any(c not in table_columns(profile, "comm_ops") for c in cols):
        return pd.DataFrame({"rank": [], "step": [], "sends": []})
    ops = table(profile, "comm_ops")
    ops = collect(ops, cols)
    sends = ops[comm_op_type(ops["name"]).to_numpy() == "send"]
    out = sends.groupby(["rank", "step"]).size().rename("sends").reset_index()
    return out


def recorded_stages(profile: Any) -> list[list[int]]:
    """The pipeline stages msprof-analyze wrote as ``stage`` rows, in order of first rank.

    ``cluster_step_trace_time.csv`` has a row of ``Type`` ``stage`` per pipeline stage
    (the loader keeps them in ``meta.extra["stage_steps"]``), its ``Index`` the stage's
    ranks, e.g. ``"(0, 1, 2, 3)"``. msprof-analyze builds a stage by joining the
    collective groups that hold at most one rank of each point-to-point chain, so the
    ranks that pass activations to each other fall in different stages.

    Returns
    -------
    list of list of int
        The stages' ranks (one list per stage, ascending), or ``[]`` unless there are at
        least two stages of equal size that share no rank (anything else is not a
        pipeline layout, and is not guessed at).
    """
    metas = [profile.meta] + [p.meta for p in getattr(profile, "profiles", []) or []]
    rows = next((m.extra["stage_steps"] for m in metas
                 if isinstance((m.extra or {}).get("stage_steps"), list)), [])
    stages: set[tuple[int, ...]] = set()
    for row in rows:
        text = str(row.get("ranks", "") if isinstance(row, dict) else "")
        ranks = [int(n) for n in re.findall(r"\d+", text)]
        if not ranks or re.sub(r"[\d\s,()\[\]]", "", text):
            return []  # an Index that is not a list of ranks: the rows are not understood
        stages.add(tuple(sorted(set(ranks))))
    ordered = sorted(stages)
    members = [r for st in ordered for r in st]
    if (len(ordered) < 2 or len(members) != len(set(members))
            or len({len(st) for st in ordered}) != 1):
        return []
    return [list(st) for st in ordered]
