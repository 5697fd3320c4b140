"""The IR nodes read for the check: each node's decoder layer, cell path and operator
names from its scope, and whether it belongs to a communication-recompute pattern.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:  # the type only; analyses never read files
    from ...io.ir.graph import IRGraph
from .patterns import _OP_SEGMENT, _SNAKE, VIRTUAL_OPS

__all__ = []


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
