"""Check recompute settings against what a MindSpore IR graph actually did.

A recompute setting can be *configured* (a ``select_recompute`` pattern names an operator),
*marked* (the CNode carries ``recompute: Bool(1)``) and *carried out* (the recompute pass
cloned the node into the backward graph; the clone carries ``duplicated: Bool(1)`` and the
same ``recompute_id`` as the forward node). :func:`recompute_check` lines the three up, per
pattern and per decoder layer, and explains the common gap between the last two: a marked
node whose neighbour (typically a Reshape between SiLU, Mul and MatMul) is not recomputed,
so the pass has nothing worth cloning.

Pattern matching follows MindFormers (``LayerSetting.set_pattern_recompute``): a pattern is
split on the two characters ``\\.``; each piece but the last must ``re.fullmatch`` the name of
a child cell, walking down from the decoder layer; the last piece must fully match either an
operator attribute of the cell reached (the operator is marked) or a child cell (every
operator inside it is marked). In the IR the cell names come from the scope
(``.../layers-CellList/3-LLamaDecodeLayer/feed_forward-FeedForward/w1-Linear/MatMul-op0``
gives layer 3, cells ``feed_forward``, ``w1``); the operator's attribute name is the
``instance name`` when the dump prints one, and the lower-cased operator type otherwise
(MindSpore >= 2.3 often omits or mislabels instance names of generated primitives, so both
are tried).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import InvalidArgumentError
from ._frames import is_lazy, per_rank
from ._shared import shared_factorize
from ._util import (
    empty_frame,
    has_values,
    n_step_pairs,
    nan_as_zero,
    one_value,
    table,
    take_rows,
    typed,
)

if TYPE_CHECKING:  # the type only; analyses never read files
    from ..io.ir import IRGraph

__all__ = ["RecomputeCheck", "recompute_check", "recompute_scopes", "match_pattern",
           "LAYOUT_OPS", "VIRTUAL_OPS", "DEFAULT_SELECT_PATTERNS", "DEFAULT_COMM_PATTERNS",
           "FULL_LAYER_SHARE", "SCOPE_COLUMNS", "RECOMPUTE_SCOPE"]

#: Operators that only move or re-type data: cheap to recompute, and the usual break in a
#: recompute chain.
LAYOUT_OPS = frozenset({"Reshape", "ExpandDims", "Squeeze", "Flatten", "Transpose", "Cast",
                        "BroadcastTo", "StridedSlice", "Contiguous", "View"})
#: Graph plumbing that is never an operator of interest.
VIRTUAL_OPS = frozenset({"Load", "UpdateState", "Depend", "MakeTuple", "TupleGetItem",
                         "Return", "StopGradient", "Partial", "Switch", "make_tuple",
                         "tuple_getitem", "Assign", "AssignAdd"})

#: Share of a layer's forward operators that must be marked (or sit under a recomputed cell)
#: for the layer to count as fully recomputed; the cell's output node is never marked.
FULL_LAYER_SHARE = 0.9
#: What MindFormers (legacy models such as Llama) selects for ``select_recompute: True``.
DEFAULT_SELECT_PATTERNS = (r"feed_forward\.mul", r"feed_forward\.w1\.activation\.silu")
#: What MindFormers selects for ``select_comm_recompute: True``.
DEFAULT_COMM_PATTERNS = (r".*\.norm",)

_PIECE_SEP = r"\."
_OP_SEGMENT = re.compile(r"-op\d+$")
_SNAKE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True)
class RecomputeCheck:
    """Result of :func:`recompute_check`.

    Attributes
    ----------
    patterns : pandas.DataFrame
        One row per pattern: ``pattern``, ``kind`` ("select" or "comm"), ``layers``
        (configured layer numbers), ``matched``, ``marked``, ``duplicated``,
        ``marked_not_duplicated``, ``matched_not_marked``.
    matches : pandas.DataFrame
        One row per (pattern, forward node): ``pattern``, ``kind``, ``layer``, ``node_id``,
        ``op``, ``instance_name``, ``path`` (layer-relative ``cell.cell.op``), ``configured``
        (the layer is one the pattern applies to), ``marked``, ``duplicated``.
    diagnosis : pandas.DataFrame
        One row per finding: ``layer``, ``node_id``, ``op``, ``path``, ``problem``
        ("neighbour_not_recomputed" or "not_marked"), ``neighbour_id``, ``neighbour_op``,
        ``neighbour_path``, ``direction`` ("input" or "output" of the node),
        ``suggested_pattern``, ``explanation``.
    layers : pandas.DataFrame
        One row per decoder layer: ``layer``, ``forward_ops``, ``marked_ops``,
        ``duplicated_ops``, ``clones``, ``recompute_scope_ops`` (ops under a recomputed
        cell), ``observed`` ("full" when at least 90 % of the layer's forward operators are
        marked or under a recomputed cell, "selective" when some are, else "none") and
        ``configured`` (same words, from the configuration given; NA without one).
    """

    patterns: pd.DataFrame
    matches: pd.DataFrame
    diagnosis: pd.DataFrame
    layers: pd.DataFrame

    def to_frame(self) -> pd.DataFrame:
        """The per-pattern summary (:attr:`patterns`)."""
        return self.patterns


# --------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Spec:
    select: dict[str, Any]
    comm: dict[str, Any]
    full: Any  # bool, per-stage list, or None when not configured


def _as_spec(select_recompute: Any) -> _Spec:
    if select_recompute is None:
        return _Spec({}, {}, None)
    if isinstance(select_recompute, str):
        return _Spec({select_recompute: True}, {}, None)
    if isinstance(select_recompute, Mapping) and (
            {"recompute", "select_recompute", "select_comm_recompute"} & set(select_recompute)):
        cfg = select_recompute
        return _Spec(_pattern_dict(cfg.get("select_recompute"), "select_recompute",
                                   DEFAULT_SELECT_PATTERNS),
                     _pattern_dict(cfg.get("select_comm_recompute"), "select_comm_recompute",
                                   DEFAULT_COMM_PATTERNS),
                     cfg.get("recompute"))
    return _Spec(_pattern_dict(select_recompute, "select_recompute", DEFAULT_SELECT_PATTERNS),
                 {}, None)


def _pattern_dict(value: Any, name: str, defaults: Sequence[str]) -> dict[str, Any]:
    """Pattern -> per-stage setting, read the way MindFormers' ``_format_recompute_dict`` does.

    A list of patterns applies each to every layer; a dict gives each pattern its own
    per-stage counts; ``True`` or a list of per-stage counts applies MindFormers' default
    patterns (``defaults``) with that setting.
    """
    if value is None or value is False:
        return {}
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        if all(isinstance(v, str) for v in value):
            return {v: True for v in value}
        return {p: list(value) for p in defaults}
    if value is True:
        return {p: True for p in defaults}
    raise InvalidArgumentError(name, "must be a list of patterns, a dict pattern -> "
                               "per-stage layer counts, a bool or per-stage counts", value)


def _count_for_stage(value: Any, stage: int, n_layers: int, name: str) -> int:
    """Layers of this stage a per-stage setting covers (MindFormers counts from the first)."""
    if value is True:
        return n_layers
    if value is False or value is None:
        return 0
    if isinstance(value, bool):
        return n_layers if value else 0
    if isinstance(value, int):
        return min(value, n_layers)
    if isinstance(value, Sequence) and not isinstance(value, str):
        if stage >= len(value):
            raise InvalidArgumentError("stage", f"{name} lists {len(value)} stages", stage)
        item = value[stage]
        if isinstance(item, Sequence) and not isinstance(item, str):  # interleaved chunks
            return min(sum(n_layers if v is True else int(v) for v in item), n_layers)
        return _count_for_stage(item, 0, n_layers, name)
    raise InvalidArgumentError(name, "per-stage entries must be bools or whole numbers", value)


def _compile(pattern: str) -> list[re.Pattern[str]]:
    try:
        return [re.compile(p) for p in pattern.split(_PIECE_SEP)]
    except re.error as exc:
        raise InvalidArgumentError("select_recompute", f"bad regular expression ({exc})",
                                   pattern) from exc


def match_pattern(pattern: str | Sequence[re.Pattern[str]], cells: Sequence[str],
                  names: Iterable[str]) -> bool:
    """Whether a MindFormers pattern selects an operator.

    Parameters
    ----------
    pattern : str or list of compiled pieces
        E.g. ``r"feed_forward\\.w1\\.activation"``.
    cells : sequence of str
        Cell attribute names from the decoder layer down to the operator's cell,
        e.g. ``["feed_forward", "w1", "activation"]``.
    names : iterable of str
        Names the operator may have as an attribute of its cell (instance name, type).

    Returns
    -------
    bool
        True when the pieces walk the cells and the last one fully matches either an
        operator name at the end of the walk or a cell on the way (a recomputed cell covers
        every operator inside it).
    """
    pieces = _compile(pattern) if isinstance(pattern, str) else list(pattern)
    if len(pieces) <= len(cells):
        return all(p.fullmatch(c) for p, c in zip(pieces, cells, strict=False))
    if len(pieces) == len(cells) + 1:
        if not all(p.fullmatch(c) for p, c in zip(pieces, cells, strict=False)):
            return False
        return any(pieces[-1].fullmatch(n) for n in names if n)
    return False


# --------------------------------------------------------------------------------------
# node annotation
# --------------------------------------------------------------------------------------

def _scope_parts(scope: Any) -> tuple[int | None, tuple[str, ...], bool, bool]:
    """(layer, cells below the layer, is backward, under a recomputed cell) from a scope."""
    if not isinstance(scope, str):
        return None, (), False, False
    in_recompute_cell = scope.startswith("recompute_")
    clean = scope[len("recompute_"):] if in_recompute_cell else scope
    is_grad = clean.startswith("Gradients/")
    segments = clean.split("/")
    # a full scope ends with the operator ("MatMul-op0"); a "# Scope:" line stops at the cell
    cell_end = len(segments) - 1 if _OP_SEGMENT.search(segments[-1]) else len(segments)
    for i, seg in enumerate(segments[:cell_end]):
        name = seg.partition("-")[0]
        if i > 0 and name.isdigit() and "-" in seg:
            cells = tuple(s.partition("-")[0] for s in segments[i + 1:cell_end])
            return int(name), cells, is_grad, in_recompute_cell
    return None, (), is_grad, in_recompute_cell


def _op_names(op: str, instance: Any) -> tuple[str, ...]:
    names = [op.lower(), _SNAKE.sub("_", op).lower()]
    if isinstance(instance, str) and instance:
        names.insert(0, instance)
    return tuple(dict.fromkeys(names))


def _annotate(graph: IRGraph) -> pd.DataFrame:
    nodes = graph.nodes
    parts = [_scope_parts(s) for s in nodes["scope"]]
    frame = pd.DataFrame({
        "graph": nodes["graph"], "node_id": nodes["node_id"], "op": nodes["op"],
        "instance_name": nodes["instance_name"],
        "layer": pd.array([p[0] for p in parts], dtype="Int64"),
        "cells": [p[1] for p in parts], "is_grad": [p[2] for p in parts],
        "in_recompute_cell": [p[3] for p in parts],
        "marked": nodes["recompute"].fillna(False).astype(bool),
        "comm_marked": _comm_flag(nodes),
        "is_clone": nodes["duplicated"].fillna(False).astype(bool),
        "recompute_id": nodes["recompute_id"], "inputs": nodes["inputs"],
    })
    frame["names"] = [_op_names(o, i) for o, i in zip(frame["op"], frame["instance_name"],
                                                       strict=True)]
    clones = frame[frame["is_clone"] & frame["recompute_id"].notna()]
    cloned = set(zip(clones["graph"], clones["recompute_id"].astype(int), strict=True))
    frame["duplicated"] = [
        (not c) and pd.notna(r) and (g, int(r)) in cloned
        for g, r, c in zip(frame["graph"], frame["recompute_id"], frame["is_clone"],
                           strict=True)]
    frame["forward"] = (~frame["is_grad"] & ~frame["is_clone"] & frame["layer"].notna()
                        & ~frame["op"].isin(VIRTUAL_OPS))
    frame["path"] = [".".join((*c, o.lower()))
                     for c, o in zip(frame["cells"], frame["op"], strict=True)]
    return frame


def _comm_flag(nodes: pd.DataFrame) -> pd.Series:
    """``select_comm_recompute`` marks communication primitives with recompute_comm_op."""
    flag = nodes["recompute_comm_op"] if "recompute_comm_op" in nodes.columns else \
        nodes["recompute"]
    return flag.fillna(False).astype(bool)


# --------------------------------------------------------------------------------------
# the check
# --------------------------------------------------------------------------------------

def recompute_check(graph: IRGraph, select_recompute: Any = None, *, stage: int = 0,
                    layout_ops: Iterable[str] = LAYOUT_OPS) -> RecomputeCheck:
    """Compare recompute patterns with the marks and clones found in an IR graph.

    Parameters
    ----------
    graph : IRGraph
        From :func:`perfkit.load_ir`; a dump taken after the recompute pass (for example
        the ``*_validate_*.ir`` file) shows the clones.
    select_recompute : list of str, dict, or MindFormers ``recompute_config`` mapping, optional
        Patterns as MindFormers writes them (``r"feed_forward\\.mul"``). A dict maps each
        pattern to per-stage layer counts (``{"feed_forward\\.mul": [20, 8]}``), as in
        ``select_recompute``'s dict form. A mapping with a ``recompute`` /
        ``select_recompute`` / ``select_comm_recompute`` key is read as a whole
        ``recompute_config`` (``recompute`` as bool or per-stage full-layer counts; fully
        recomputed layers skip the select patterns, as in MindFormers). ``True`` or a list
        of per-stage counts in place of patterns means MindFormers' defaults
        (:data:`DEFAULT_SELECT_PATTERNS`, :data:`DEFAULT_COMM_PATTERNS`). ``None``: no
        patterns; the diagnosis and the layer summary still use the marks in the graph.
    stage : int
        Pipeline stage the dump belongs to (picks the entry of per-stage lists). The layers
        found in the graph are taken as that stage's layers, in order.
    layout_ops : iterable of str
        Operator types that a diagnosis proposes to add to the recompute set.

    Returns
    -------
    RecomputeCheck
        ``patterns``, ``matches``, ``diagnosis`` and ``layers`` DataFrames.
    """
    spec = _as_spec(select_recompute)
    ann = _annotate(graph)
    fwd = ann[ann["forward"]]
    layer_ids = sorted(int(x) for x in fwd["layer"].dropna().unique())
    full_layers = _full_layers(spec.full, stage, layer_ids)
    match_rows, summary_rows = [], []
    for kind, patterns in (("select", spec.select), ("comm", spec.comm)):
        for pattern, counts in patterns.items():
            n = _count_for_stage(counts, stage, len(layer_ids), f"{kind} pattern {pattern!r}")
            layers = [x for x in layer_ids[:n] if x not in full_layers]
            rows = _match_rows(fwd, pattern, kind, set(layers))
            match_rows.extend(rows)
            summary_rows.append(_summary_row(pattern, kind, layers, rows))
    matches = pd.DataFrame(match_rows, columns=[
        "pattern", "kind", "layer", "node_id", "op", "instance_name", "path", "configured",
        "marked", "duplicated"])
    patterns_df = pd.DataFrame(summary_rows, columns=[
        "pattern", "kind", "layers", "matched", "marked", "duplicated",
        "marked_not_duplicated", "matched_not_marked"])
    diagnosis = _diagnose(ann, matches, frozenset(layout_ops))
    layers = _layer_summary(ann, layer_ids, spec, full_layers, stage)
    return RecomputeCheck(patterns=patterns_df, matches=matches, diagnosis=diagnosis,
                          layers=layers)


def _full_layers(full: Any, stage: int, layer_ids: list[int]) -> set[int]:
    n = _count_for_stage(full, stage, len(layer_ids), "recompute")
    return set(layer_ids[:n])


def _match_rows(fwd: pd.DataFrame, pattern: str, kind: str,
                layers: set[int]) -> list[dict[str, Any]]:
    pieces = _compile(pattern)
    cache: dict[tuple[tuple[str, ...], tuple[str, ...]], bool] = {}
    rows = []
    for rec in fwd.itertuples(index=False):
        key = (rec.cells, rec.names)
        if key not in cache:
            cache[key] = match_pattern(pieces, rec.cells, rec.names)
        if not cache[key]:
            continue
        marked = rec.comm_marked if kind == "comm" else rec.marked
        rows.append({"pattern": pattern, "kind": kind, "layer": int(rec.layer),
                     "node_id": rec.node_id, "op": rec.op, "instance_name": rec.instance_name,
                     "path": rec.path, "configured": int(rec.layer) in layers,
                     "marked": bool(marked), "duplicated": bool(rec.duplicated)})
    return rows


def _summary_row(pattern: str, kind: str, layers: list[int],
                 rows: list[dict[str, Any]]) -> dict[str, Any]:
    mine = [r for r in rows if r["configured"]]
    return {"pattern": pattern, "kind": kind, "layers": tuple(layers), "matched": len(mine),
            "marked": sum(r["marked"] for r in mine),
            "duplicated": sum(r["duplicated"] for r in mine),
            "marked_not_duplicated": sum(r["marked"] and not r["duplicated"] for r in mine),
            "matched_not_marked": sum(not r["marked"] for r in mine)}


_DIAG_COLUMNS = ["layer", "node_id", "op", "path", "problem", "neighbour_id", "neighbour_op",
                 "neighbour_path", "direction", "suggested_pattern", "explanation"]


def _diagnose(ann: pd.DataFrame, matches: pd.DataFrame,
              layout_ops: frozenset[str]) -> pd.DataFrame:
    fwd = ann[ann["forward"]].set_index(["graph", "node_id"], drop=False)
    consumers: dict[tuple[str, str], list[str]] = {}
    for g, nid, inputs in zip(fwd["graph"], fwd["node_id"], fwd["inputs"], strict=True):
        for src in inputs:
            consumers.setdefault((g, src), []).append(nid)
    wanted = set(matches.loc[matches["configured"], "node_id"]) if not matches.empty else set()
    wanted |= set(fwd.loc[fwd["marked"], "node_id"])
    rows: list[dict[str, Any]] = []
    stuck = fwd[fwd["marked"] & ~fwd["duplicated"]]
    for rec in stuck.itertuples(index=False):
        around = [(i, "input") for i in rec.inputs] + [
            (c, "output") for c in consumers.get((rec.graph, rec.node_id), [])]
        for nid, direction in around:
            key = (rec.graph, nid)
            if key not in fwd.index:
                continue
            nb = fwd.loc[key]
            if nb["marked"] or nb["op"] not in layout_ops or nb["layer"] != rec.layer:
                continue
            if _breaks_chain(fwd, consumers, nb, direction, wanted):
                rows.append(_neighbour_row(rec, nb, direction))
    rows.extend(_unmarked_rows(ann, matches))
    return pd.DataFrame(rows, columns=_DIAG_COLUMNS)


#: Operators whose backward keeps their inputs: an activation feeding them stays in memory.
_KEEPS_INPUT = frozenset({"MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt", "Dense",
                          "GroupedMatmul", "FlashAttentionScore"})


def _breaks_chain(fwd: pd.DataFrame, consumers: dict[tuple[str, str], list[str]],
                  nb: pd.Series, direction: str, wanted: set[str]) -> bool:
    """Whether an unrecomputed layout neighbour is what keeps the activation alive.

    An input-side neighbour matters when it sits between two operators meant for
    recompute (SiLU -> Reshape -> Mul); an output-side one when it feeds another of them or
    an operator whose backward keeps its input (Mul -> Reshape -> MatMul).
    """
    if direction == "input":
        return any(src in wanted for src in nb["inputs"])
    for dst in consumers.get((nb["graph"], nb["node_id"]), []):
        if dst in wanted or fwd.loc[(nb["graph"], dst), "op"] in _KEEPS_INPUT:
            return True
    return False


def _unmarked_rows(ann: pd.DataFrame, matches: pd.DataFrame) -> list[dict[str, Any]]:
    if matches.empty:
        return []
    in_cell = dict(zip(ann["node_id"], ann["in_recompute_cell"], strict=False))
    unmarked = matches[matches["configured"] & ~matches["marked"]
                       & (matches["kind"] == "select")]
    rows = []
    for rec in unmarked.drop_duplicates("node_id").itertuples(index=False):
        if in_cell.get(rec.node_id):
            why = ("it sits in a recomputed cell, yet its CNode carries recompute: Bool(0); "
                   "MindSpore leaves the node that produces a recomputed cell's output out "
                   "of the recompute set, so select the operators around it instead")
        else:
            why = ("the graph carries no recompute mark for it: the setting did not reach "
                   "this operator (check that this run used the configuration)")
        rows.append({"layer": rec.layer, "node_id": rec.node_id, "op": rec.op,
                     "path": rec.path, "problem": "not_marked",
                     "explanation": f"pattern {rec.pattern!r} selects {rec.path}, but {why}."})
    return rows


def _neighbour_row(rec: Any, nb: pd.Series, direction: str) -> dict[str, Any]:
    suggestion = _PIECE_SEP.join((*nb["cells"], nb["op"].lower()))
    where = "feeds" if direction == "input" else "consumes"
    return {"layer": int(rec.layer), "node_id": rec.node_id, "op": rec.op, "path": rec.path,
            "problem": "neighbour_not_recomputed", "neighbour_id": nb["node_id"],
            "neighbour_op": nb["op"], "neighbour_path": nb["path"], "direction": direction,
            "suggested_pattern": suggestion, "explanation": (
                f"{rec.op} {rec.node_id} ({rec.path}) is marked for recompute but was not "
                f"cloned; the {nb['op']} {nb['node_id']} ({nb['path']}) that {where} it is not "
                f"recomputed, so the activation between them stays in memory either way. "
                f"Add {suggestion!r} to select_recompute.")}


def _layer_summary(ann: pd.DataFrame, layer_ids: list[int], spec: _Spec,
                   full_layers: set[int], stage: int) -> pd.DataFrame:
    fwd = ann[ann["forward"]]
    clones = ann[ann["is_clone"]]
    selected = set()
    for counts in spec.select.values():
        selected |= set(layer_ids[:_count_for_stage(counts, stage, len(layer_ids), "select")])
    rows = []
    for layer in layer_ids:
        mine = fwd[fwd["layer"] == layer]
        n, marked = len(mine), int((mine["marked"] | mine["in_recompute_cell"]).sum())
        observed = "none" if marked == 0 else (
            "full" if marked >= FULL_LAYER_SHARE * n else "selective")
        configured: Any = pd.NA
        if spec.full is not None or spec.select:
            configured = ("full" if layer in full_layers else
                          "selective" if layer in selected else "none")
        rows.append({"layer": layer, "forward_ops": n, "marked_ops": int(mine["marked"].sum()),
                     "duplicated_ops": int(mine["duplicated"].sum()),
                     "clones": int((clones["layer"] == layer).sum()),
                     "recompute_scope_ops": int(mine["in_recompute_cell"].sum()),
                     "observed": observed, "configured": configured})
    return pd.DataFrame(rows, columns=["layer", "forward_ops", "marked_ops", "duplicated_ops",
                                       "clones", "recompute_scope_ops", "observed",
                                       "configured"])


# --------------------------------------------------------------------------------------
# recompute seen from the operator names of a profile (no IR)
# --------------------------------------------------------------------------------------

#: A scope segment of a MindSpore operator name that a ``Cell.recompute()`` puts in front
#: of the cell's scope (``recompute_Default/...``, ``Gradients/recompute_Default/...``).
RECOMPUTE_SCOPE = r"(?:^|/)recompute_"

#: Columns of :func:`recompute_scopes`.
SCOPE_COLUMNS: dict[str, str] = {
    "rank": "Int64", "source": "string", "tasks": "int64", "scoped_tasks": "int64",
    "forward_scoped_tasks": "int64", "scoped_names": "int64", "forward_scoped_us": "float64",
    "compute_us": "float64", "forward_scoped_share": "float64", "layers": "string",
    "scoped_layers": "string", "recompute": "string",
}


def recompute_scopes(profile: Any) -> pd.DataFrame:
    """Recompute seen in the operator names of a MindSpore profile, without the IR.

    ``Cell.recompute()`` (MindFormers' full recompute of a layer, or of a sub-cell) puts
    ``recompute_`` in front of the cell's scope, so every operator of a recomputed cell
    runs as ``recompute_Default/.../0-LLamaDecodeLayer/.../MatMul-op3`` (its gradient as
    ``Gradients/recompute_Default/...``). The device tasks (``kernels``), or on a CPU
    profile the host operators (``ops``), are read by name.

    Returns
    -------
    DataFrame
        One row per rank (:data:`SCOPE_COLUMNS`): ``source`` (the table read), ``tasks``
        (compute tasks), ``scoped_tasks`` (those under a ``recompute_`` scope),
        ``forward_scoped_tasks`` (not under ``Gradients/``), ``scoped_names`` (distinct
        operators under the scope), ``forward_scoped_us`` (their time per step: recomputing
        them costs about this again, once per micro-batch), ``compute_us`` (all compute time
        per step), ``forward_scoped_share`` (the ratio), ``layers`` and ``scoped_layers``
        (decoder layer numbers in the names, all and under the scope; empty when the names
        carry none), ``recompute`` ("full" when every layer seen has operators under the
        scope, "partial" when some do, "cells" when the names carry no layer number,
        "none" without the scope). Empty when the profile has no operator names.

    Notes
    -----
    The scope says which cells are *configured* for recompute. Selective recompute of
    single primitives (``select_recompute``) marks operators without changing their scope:
    it is seen only in the IR (:func:`recompute_check`). Per step = divided by the number of
    (rank, step) pairs of the tasks (1 without steps).
    """
    if is_lazy(profile):
        return per_rank(profile, recompute_scopes)
    source, frame, keep = _named_tasks(profile)
    if frame is None:
        return empty_frame(SCOPE_COLUMNS, "no device task or host operator names to read")
    # the names are read by code: each distinct name is matched once (a profile repeats a
    # few hundred names over a million tasks) and no task's text is copied
    code, uniq = shared_factorize(frame["name"], use_na_sentinel=True)
    text = pd.Series(uniq, dtype=object).astype("string").fillna("")
    text = pd.concat([text, pd.Series([""], dtype="string")], ignore_index=True)
    code = np.where(code < 0, len(text) - 1, code)  # a missing name reads as ""
    scoped_of = text.str.contains(RECOMPUTE_SCOPE, regex=True).to_numpy(bool)
    grad_of = text.str.startswith("Gradients/").to_numpy(bool)
    text = text.tolist()
    dur_all = frame["dur_us"].to_numpy(np.float64, na_value=np.nan)
    pair_cols = frame[[c for c in ("rank", "step") if c in frame.columns]]
    # one rank and one step throughout (a rank's profile of one step): one pair per rank,
    # without taking the columns out for the compute tasks
    one_pair = all(one_value(pair_cols[c]) for c in pair_cols.columns)
    one_rank = one_value(frame["rank"])  # a rank's own profile: no rank per task to read
    rank_key = None if one_rank else pd.to_numeric(frame["rank"], errors="coerce").to_numpy(
        np.float64, na_value=-1.0)
    if keep is not None:
        if one_rank:  # the other tasks counted apart (code len(text)): no copy of the rows
            code = np.where(keep, code, len(text))
        else:
            code, dur_all, rank_key = code[keep], dur_all[keep], rank_key[keep]
        if not one_pair:
            pair_cols = take_rows(pair_cols, keep)
    if rank_key is None:
        ranks, order, bounds = np.array([float(frame["rank"].iloc[0])]), None, [0, len(code)]
    else:
        ranks = np.sort(pd.unique(rank_key))  # the few ranks, without sorting every task
        order = None if len(ranks) < 2 else np.argsort(rank_key, kind="stable")
        bounds = np.searchsorted(rank_key[order] if order is not None else rank_key,
                                 ranks, side="left").tolist() + [len(rank_key)]
    fwd_of = scoped_of & ~grad_of
    rows = []
    for i, rank in enumerate(ranks.tolist()):
        rows_of = order[bounds[i]:bounds[i + 1]] if order is not None else slice(None)
        # tasks and time per distinct name (NaN durations left out, as nansum does), the
        # tasks apart of code len(text) dropped
        c = code[rows_of]
        count = np.bincount(c, minlength=len(text) + 1)[:len(text)]
        busy = np.bincount(c, nan_as_zero(dur_all[rows_of]),
                           len(text) + 1)[:len(text)]
        present = np.flatnonzero(count)  # codes seen
        pairs = 1 if one_pair else n_step_pairs(
            pair_cols if order is None else take_rows(pair_cols, rows_of))
        layer_of = {t: _scope_parts(t)[0] for t in {text[n] for n in present.tolist()}}
        layers = sorted({x for x in layer_of.values() if x is not None})
        scoped_names = {text[n] for n in present[scoped_of[present]].tolist()}
        scoped_layers = sorted({layer_of[n] for n in scoped_names if layer_of[n] is not None})
        scoped_tasks = int(count[scoped_of].sum())
        if not scoped_tasks:
            mode = "none"
        elif not layers:
            mode = "cells"
        else:
            mode = "full" if set(scoped_layers) == set(layers) else "partial"
        compute = float(busy.sum()) / pairs
        fwd_us = float(busy[fwd_of].sum()) / pairs
        rows.append({
            "rank": pd.NA if rank < 0 else int(rank), "source": source,
            "tasks": int(count.sum()), "scoped_tasks": scoped_tasks,
            "forward_scoped_tasks": int(count[fwd_of].sum()),
            "scoped_names": len(scoped_names), "forward_scoped_us": fwd_us,
            "compute_us": compute,
            "forward_scoped_share": fwd_us / compute if compute > 0 else np.nan,
            "layers": ",".join(map(str, layers)),
            "scoped_layers": ",".join(map(str, scoped_layers)), "recompute": mode})
    return typed(pd.DataFrame(rows, columns=list(SCOPE_COLUMNS)), SCOPE_COLUMNS)


def _named_tasks(profile: Any) -> tuple[str, pd.DataFrame | None, np.ndarray | None]:
    """The table to read names from, its columns read, and the mask of its compute tasks.

    ``kernels``, else the host ``ops``; the mask is None when the table has no category
    (every task counts). Nothing when no such table has a compute task.
    """
    for name in ("kernels", "ops"):
        frame = table(profile, name)
        if frame.empty or "name" not in frame.columns or not has_values(frame, "dur_us"):
            continue
        keep = None
        if "category" in frame.columns:
            keep = frame["category"].eq("compute").fillna(False).to_numpy(bool)
        frame = frame[[c for c in ("rank", "step", "name", "dur_us") if c in frame.columns]]
        if "rank" not in frame.columns:
            frame = frame.assign(rank=pd.NA)
        if keep is None or keep.any():
            return name, frame, None if keep is None or keep.all() else keep
    return "", None, None
