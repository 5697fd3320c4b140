"""The check itself: patterns configured, nodes marked and clones carried out, per pattern
and per decoder layer (:func:`recompute_check`), with the marked nodes whose neighbour breaks
the recompute chain.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:  # the type only; analyses never read files
    from ...io.ir.graph import IRGraph
from .nodes import _annotate
from .patterns import (
    _PIECE_SEP,
    FULL_LAYER_SHARE,
    LAYOUT_OPS,
    _as_spec,
    _compile,
    _count_for_stage,
    _Spec,
    match_pattern,
)

__all__ = ["RecomputeCheck", "recompute_check"]


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
        ``suggested_pattern``, ``explanation``; empty, a note in ``attrs["notes"]`` says
        what was looked at.
    layers : pandas.DataFrame
        One row per decoder layer: ``layer``, ``forward_ops``, ``marked_ops``,
        ``duplicated_ops``, ``clones``, ``recompute_scope_ops`` (ops under a recomputed
        cell), ``observed`` ("full" when at least 90 % of the layer's forward operators are
        marked or under a recomputed cell, "selective" when some are, else "none") and
        ``configured`` (same words, from the configuration given; NA without one).
        ``attrs["notes"]`` says where the layers hold unequal numbers of forward
        operators (by more than :data:`UNEVEN_LAYERS`): the graph's scopes, not the
        model, then decide which layer some operators count in.
    """

    patterns: pd.DataFrame
    matches: pd.DataFrame
    diagnosis: pd.DataFrame
    layers: pd.DataFrame

    def to_frame(self) -> pd.DataFrame:
        """The per-pattern summary (:attr:`patterns`)."""
        return self.patterns


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
    out = pd.DataFrame(rows, columns=_DIAG_COLUMNS)
    if out.empty:  # said as the graph's, not as "nothing in this profile"
        out.attrs["notes"] = [
            "no problem found in the graph: every marked operator that was not cloned "
            "lacks no neighbour a pattern could add, and every operator a pattern matched "
            "was marked" if len(stuck) or not matches.empty else
            "no problem found in the graph: no operator is marked for recompute, and no "
            "pattern given matches one"]
    return out


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
                     "explanation": f"pattern '{rec.pattern}' selects {rec.path}, but {why}."})
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
                f"Add '{suggestion}' to select_recompute.")}


#: Layers whose forward operator counts differ by more than this share are noted as
#: uneven (the scopes, not the model, decide which layer an operator is counted in).
UNEVEN_LAYERS = 0.1


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
    out = pd.DataFrame(rows, columns=["layer", "forward_ops", "marked_ops", "duplicated_ops",
                                      "clones", "recompute_scope_ops", "observed",
                                      "configured"])
    counts = out["forward_ops"]
    if len(counts) > 1 and counts.max() > (1 + UNEVEN_LAYERS) * counts.min():
        out.attrs["notes"] = [
            "the layers hold unequal numbers of forward operators ("
            + ", ".join(f"layer {int(r.layer)}: {int(r.forward_ops)}" for r in out.itertuples())
            + "): where the model's layers are alike, the graph's scopes put some "
            "operators under another layer (MindSpore's cell reuse names a reused block's "
            "operators after its first layer); the per-layer figures follow the scopes"]
    return out
