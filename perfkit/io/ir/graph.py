"""MindSpore IR text dumps (``*.ir`` written with ``MS_DEV_SAVE_GRAPHS``) -> :class:`IRGraph`.

A dump lists the graph's parameters (``%para3_model.layers.0.wq.weight: <Ref[Tensor[...]],
(shape), ...>``) and then, inside ``subgraph @name(...) { ... }``, one block per CNode::

      %14(equiv_16877_x) = PrimFunc_MatMul(%12, %13, Bool(0)) {instance name: matmul}
          primitive_attrs: {...} cnode_attrs: {...} cnode_primal_attrs: {...}   (same line)
          : (<input abstracts>) -> (<Tensor[Float16], (4096, 512)>)
          # Fullname with scope: (Default/network-.../wq-Linear/MatMul-op0)
          # In file ...                                                 (zero or more)

The reader walks the file line by line and keeps only the parsed fields, so memory does not
grow with the size of the source-location comments that make up most of a large dump.
Files ending in ``.gz`` are read through gzip.

Damaged input is refused, never read as complete: a binary or zero-padded file by its first
and last bytes before it is read, a NUL byte or a line longer than :data:`MAX_LINE_BYTES`
where it is met, and a dump whose last ``subgraph`` block is not closed (a truncated file)
at its end.

This module holds the result (:class:`IRGraph`) and the entry point (:func:`load_ir`); one
line's grammar is :mod:`perfkit.io.ir.lines`, the streaming pass :mod:`perfkit.io.ir.reader`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ...errors import ProfileError, boundary
from .._common import check_file
from .reader import (
    MAX_LINE_BYTES,
    NODE_COLUMNS,
    PARAMETER_COLUMNS,
    _fill_ranks,
    _lines,
    _node_frame,
    _param_frame,
    _Reader,
)

__all__ = ["IRGraph", "load_ir", "COMMUNICATION_OPS", "NODE_COLUMNS", "PARAMETER_COLUMNS",
           "MAX_LINE_BYTES"]


#: Primitive names treated as collective or point-to-point communication.
COMMUNICATION_OPS = frozenset({
    "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "AllToAll", "AlltoAll",
    "AlltoAllV", "AllToAllV", "NeighborExchange", "NeighborExchangeV2", "Send", "Receive",
    "Reduce", "BatchISendIRecv", "CollectiveScatter", "CollectiveGather", "Barrier",
    "MicroStepAllGather", "MiniStepAllGather", "MatmulAllReduce", "AllGatherMatmul",
    "MatmulReduceScatter", "DistCommAllReduce", "DistCommAllGather", "DistCommReduceScatter",
})


@dataclass
class IRGraph:
    """A parsed MindSpore IR dump.

    Attributes
    ----------
    path : str
        The file read.
    nodes : pandas.DataFrame
        One row per CNode, columns :data:`NODE_COLUMNS`:

        ``graph`` (subgraph name), ``node_id`` (``"%14"``; ``"Return"`` for a return node),
        ``debug_name`` (the text in brackets after the id), ``op`` (callee with any
        ``PrimFunc_`` prefix removed; ``@name`` for a call of a subgraph), ``instance_name``,
        ``scope`` (the ``Fullname with scope`` text; dumps of early passes print only the
        cell path, ``# Scope: (...)``, which is kept the same way), ``inputs`` (tuple of
        node ids such as ``"%12"`` among the arguments), ``params`` (tuple of parameter
        names among the arguments), ``output_dtypes`` and ``output_shapes`` (tuples, one
        entry per output tensor), ``in_strategy`` (text as printed), the recompute
        attributes ``recompute`` (the effective flag: the CNode attribute when present,
        else the primitive one), ``prim_recompute``, ``cnode_recompute``, ``duplicated``,
        ``recompute_sub_graph``, ``recompute_id``, ``need_cse_after_recompute``,
        ``checkpoint``, ``recompute_comm_op`` (set by ``select_comm_recompute``);
        ``micro``, ``unique_id``, ``forward_comm_node_unique_id``, ``forward_unique_id``;
        for communication nodes ``group``, ``rank_size`` and
        ``rank_list`` (a tuple when the dump prints the ranks); ``line`` (1-based line of
        the node in the file).
        Flags are pandas nullable booleans (NA when the dump does not print them).
    parameters : pandas.DataFrame
        One row per ``%para`` line, columns :data:`PARAMETER_COLUMNS`; ``shape`` is a tuple.
    attrs : dict
        The ``# Attrs:`` block of the header (name -> text).
    entry : str or None
        The ``# IR entry:`` subgraph name.
    """

    path: str
    nodes: pd.DataFrame
    parameters: pd.DataFrame
    attrs: dict[str, str] = field(default_factory=dict)
    entry: str | None = None

    @property
    def communication(self) -> pd.DataFrame:
        """Communication nodes (``op`` in :data:`COMMUNICATION_OPS`) with group and ranks.

        Columns: graph, node_id, op, instance_name, scope, group, rank_size, rank_list,
        output_shapes, output_dtypes, unique_id, forward_unique_id, line.
        """
        cols = ["graph", "node_id", "op", "instance_name", "scope", "group", "rank_size",
                "rank_list", "output_shapes", "output_dtypes", "unique_id",
                "forward_unique_id", "line"]
        mask = self.nodes["op"].isin(COMMUNICATION_OPS)
        return self.nodes.loc[mask, cols].reset_index(drop=True)

    def node(self, node_id: str, graph: str | None = None) -> pd.Series:
        """The row of one node, e.g. ``graph.node("%14")``."""
        rows = self.nodes[self.nodes["node_id"] == node_id]
        if graph is not None:
            rows = rows[rows["graph"] == graph]
        if rows.empty:
            raise KeyError(f"{self.path}: no node {node_id}")
        return rows.iloc[0]

    def consumers(self) -> pd.DataFrame:
        """Edges ``(graph, src, dst)``: node ``dst`` takes node ``src`` as an input."""
        nodes = self.nodes[["graph", "node_id", "inputs"]].explode("inputs").dropna()
        return nodes.rename(columns={"inputs": "src", "node_id": "dst"})[
            ["graph", "src", "dst"]].reset_index(drop=True)

    def __repr__(self) -> str:
        return (f"IRGraph({self.path!r}: {len(self.nodes)} nodes, "
                f"{len(self.parameters)} parameters, "
                f"{int(self.nodes['op'].isin(COMMUNICATION_OPS).sum())} communication)")


@boundary(ProfileError, path_arg="path", what="a MindSpore IR dump")
def load_ir(path: str | Path, groups: Mapping[str, Sequence[int]] | None = None) -> IRGraph:
    """Parse a MindSpore IR text dump into an :class:`IRGraph`.

    Parameters
    ----------
    path : str or Path
        A ``.ir`` file written with ``MS_DEV_SAVE_GRAPHS=1/2/3`` (or ``save_graphs`` in a
        MindFormers config), optionally gzip-compressed (``.gz``).
    groups : mapping of str to sequence of int, optional
        Ranks of communication groups (``{"pair_group": [0, 1]}``), used for the
        ``rank_list`` of communication nodes whose dump line does not print the ranks
        (CPU dumps print only the group name and, for sub-groups, ``rank_size``).

    Returns
    -------
    IRGraph
        ``nodes`` (one row per CNode), ``parameters``, ``attrs``, ``entry``, and the
        ``communication`` view.

    Raises
    ------
    perfkit.ProfileError
        The file is missing, not text, truncated (its last ``subgraph`` block is not
        closed), has no ``subgraph`` block, or a node or type line does not follow the dump
        grammar; the message names the file and the line. Nothing else is raised.

    Notes
    -----
    The file is read once, line by line; ``# In file`` source-location comments are
    skipped without being parsed, so memory holds only the table being built.
    """
    path = Path(path)
    if not path.is_file():
        raise ProfileError(path, "no such file" if not path.is_dir() else
                           "is a folder; expected a MindSpore IR dump (.ir) file")
    check_file(path, "a MindSpore IR dump", text=path.suffix != ".gz", holes=True)
    reader = _Reader(path)
    last = 0
    for lineno, line in _lines(path):
        try:
            reader.feed(lineno, line)
        except ProfileError as exc:
            if line.endswith("\n"):
                raise
            raise ProfileError(path, f"the file ends mid-line (truncated): {exc.problem}",
                               line=lineno) from exc
        last = lineno
    reader.flush()
    if not reader.saw_subgraph:
        raise ProfileError(path, "not a MindSpore IR dump: no 'subgraph @name(...) {' line "
                           "found")
    if reader.graph is not None:
        raise ProfileError(path, f"file ends inside 'subgraph @{reader.graph}' (opened at line "
                           f"{reader.opened_at}) without its closing '}}': the dump is "
                           "truncated", line=last)
    if reader.declared is not None and reader.subgraphs < reader.declared:
        raise ProfileError(path, f"the header declares {reader.declared} subgraphs but the file "
                           f"holds {reader.subgraphs}: the dump is truncated", line=last)
    if groups:
        _fill_ranks(reader.columns, groups)
    return IRGraph(path=str(path), nodes=_node_frame(reader.columns),
                   parameters=_param_frame(reader.params), attrs=reader.attrs,
                   entry=reader.entry)
