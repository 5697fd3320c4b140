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
"""

from __future__ import annotations

import gzip
import re
import sys
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from ..errors import ProfileError, boundary
from ._common import check_file

__all__ = ["IRGraph", "load_ir", "COMMUNICATION_OPS", "NODE_COLUMNS", "PARAMETER_COLUMNS",
           "MAX_LINE_BYTES"]

MAX_LINE_BYTES = 16 << 20
"""A longer line cannot be part of an IR dump: the read stops there with an error."""

#: Primitive names treated as collective or point-to-point communication.
COMMUNICATION_OPS = frozenset({
    "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "AllToAll", "AlltoAll",
    "AlltoAllV", "AllToAllV", "NeighborExchange", "NeighborExchangeV2", "Send", "Receive",
    "Reduce", "BatchISendIRecv", "CollectiveScatter", "CollectiveGather", "Barrier",
    "MicroStepAllGather", "MiniStepAllGather", "MatmulAllReduce", "AllGatherMatmul",
    "MatmulReduceScatter", "DistCommAllReduce", "DistCommAllGather", "DistCommReduceScatter",
})

#: Columns of :attr:`IRGraph.nodes`, in order.
NODE_COLUMNS = (
    "graph", "node_id", "debug_name", "op", "instance_name", "scope", "inputs", "params",
    "output_dtypes", "output_shapes", "in_strategy", "recompute", "prim_recompute",
    "cnode_recompute", "duplicated", "recompute_sub_graph", "recompute_id",
    "need_cse_after_recompute", "checkpoint", "recompute_comm_op", "micro", "unique_id",
    "forward_comm_node_unique_id", "forward_unique_id", "group", "rank_size", "rank_list",
    "line",
)

#: Columns of :attr:`IRGraph.parameters`, in order.
PARAMETER_COLUMNS = ("graph", "param_id", "name", "dtype", "shape", "is_parameter",
                     "has_default", "line")

_NODE_HEAD = re.compile(
    r"^\s+(?:(?P<id>%\d+)\((?P<dbg>[^)]*)\)\s*=\s*|(?=[^%\s]))"  # "%14(name) = " or "Return"
    r"(?P<op>(?:call )?[^\s(]+)\((?P<rest>.*)$")
_ATTR_GROUP = re.compile(
    r"\)\s+(?=\{instance name:|primitive_attrs: \{|cnode_attrs: \{|cnode_primal_attrs: \{|"
    r"\{in_strategy:)")
_GROUP_START = re.compile(r"(\{instance name:|primitive_attrs: \{|cnode_attrs: \{|"
                          r"cnode_primal_attrs: \{|\{in_strategy:)")
_BOOL = re.compile(r"\b(recompute|duplicated|need_cse_after_recompute|checkpoint|"
                   r"recompute_comm_op): Bool\((\d)\)")
_INT = re.compile(r"\b(recompute_sub_graph|recompute_id|micro|rank_size|src_rank|dest_rank|"
                  r"sr_tag): [IU]\d+\((-?\d+)\)")
_STR = re.compile(r"\b(unique_id|forward_comm_node_unique_id|forward_unique_id|group|"
                  r"group_ranks): \"([^\"]*)\"")
_STRATEGY = re.compile(r"in_strategy: (\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))")
_RANK_LIST = re.compile(r"\b(?:rank_list|group_rank_ids|rank_ids): [\[(]([-\d,\s]*)[\])]")
_INSTANCE = re.compile(r"\{instance name: ([^}]*)\}")
_INPUT_REF = re.compile(r"%(\d+|para\d+_[^\s,()]+)")
_TENSOR = re.compile(r"Tensor\[(\w+)\](?:\*\d+)?\]?, \(([^()]*)\)")
_TUPLE_SHAPE = re.compile(r"Tensor\[(\w+)\](?:\*(\d+))?\]?, TupleShape\(((?:\([^()]*\),?\s*)*)\)")
_PARAM = re.compile(r"^\s*%(?P<id>para\d+)_(?P<name>[^:\s]+): <(?P<abs>[^>]*)>(?P<tail>.*)$")
_SUBGRAPH = re.compile(r"^subgraph @([^\s(]+)")
_SHAPE_IN = re.compile(r"\(([^()]*)\)")


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


# --------------------------------------------------------------------------------------
# line parsers
# --------------------------------------------------------------------------------------

def _split_call(rest: str) -> tuple[str, str]:
    """Split the text after ``op(`` into the argument text and the attribute text."""
    m = _ATTR_GROUP.search(rest)
    if m is not None:
        return rest[:m.start()], rest[m.end():]
    end = rest.rfind(")")
    if end < 0:
        raise ValueError("no closing parenthesis after the arguments")
    return rest[:end], rest[end + 1:]


def _attr_groups(text: str) -> dict[str, str]:
    """Slice the attribute text into its named groups (primitive_attrs, cnode_attrs ...)."""
    groups: dict[str, str] = {}
    marks = list(_GROUP_START.finditer(text))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        key = m.group(1).strip("{: ")
        groups[key] = groups.get(key, "") + text[m.start():end]
    return groups


def _parse_node(line: str, graph: str | None, lineno: int) -> dict[str, Any]:
    m = _NODE_HEAD.match(line)
    if m is None:
        raise ValueError("expected '%N(name) = Op(args) ...'")
    args, attr_text = _split_call(m.group("rest"))
    op = m.group("op")
    if op.startswith("call "):  # a call of another subgraph: "call @name(args)"
        op = op[len("call "):]
    if op.startswith("PrimFunc_"):
        op = op[len("PrimFunc_"):]
    row: dict[str, Any] = {
        "graph": graph, "node_id": m.group("id") or op, "debug_name": m.group("dbg"),
        "op": sys.intern(op), "line": lineno,
    }
    refs = _INPUT_REF.findall(args)
    row["inputs"] = tuple("%" + r for r in refs if r[0].isdigit())
    row["params"] = tuple(r.split("_", 1)[1] for r in refs if r.startswith("para"))
    inst = _INSTANCE.search(attr_text)
    row["instance_name"] = sys.intern(inst.group(1).strip()) if inst else None
    groups = _attr_groups(attr_text)
    for key, value in _BOOL.findall(groups.get("cnode_primal_attrs", "")
                                    + groups.get("primitive_attrs", "")):
        row.setdefault("prim_" + key if key == "recompute" else key, value == "1")
    for key, value in _BOOL.findall(groups.get("cnode_attrs", "")):
        row["cnode_" + key if key == "recompute" else key] = value == "1"
    for key, value in _INT.findall(attr_text):
        row.setdefault(key, int(value))
    for key, value in _STR.findall(attr_text):
        row.setdefault(key, value)
    strategy = _STRATEGY.search(attr_text)
    row["in_strategy"] = strategy.group(1) if strategy else None
    ranks = _RANK_LIST.search(attr_text)
    if ranks:
        row["rank_list"] = tuple(int(x) for x in re.split(r"[,\s]+", ranks.group(1)) if x)
    elif "group_ranks" in row:
        row["rank_list"] = tuple(int(x) for x in re.split(r"[-,\s]+", row["group_ranks"]) if x)
    cnode, prim = row.get("cnode_recompute"), row.get("prim_recompute")
    row["recompute"] = cnode if cnode is not None else prim
    return row


def _parse_outputs(text: str) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]:
    """Output dtypes and shapes from a ``: (<inputs>) -> (<outputs>)`` line."""
    body = text.strip()
    if not body.startswith(": (") or not body.endswith(")"):
        raise ValueError("expected ': (<inputs>) -> (<outputs>)'")
    _, sep, out = body.rpartition(") -> (")
    if not sep:  # a Return node prints only the value it returns
        out = body[3:-1]
    dtypes: list[str] = []  # dtype names repeat: interned below
    shapes: list[tuple[int, ...]] = []
    for m in _TUPLE_SHAPE.finditer(out):
        for inner in _SHAPE_IN.findall(m.group(3)):
            dtypes.append(m.group(1))
            shapes.append(_shape(inner))
    if not shapes:
        for m in _TENSOR.finditer(out):
            dtypes.append(m.group(1))
            shapes.append(_shape(m.group(2)))
    return tuple(sys.intern(d) for d in dtypes), tuple(shapes)


def _shape(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.replace(" ", "").split(",") if x)


def _parse_param(m: re.Match[str], graph: str | None, lineno: int) -> dict[str, Any]:
    abstract = m.group("abs")
    dtype = re.search(r"Tensor\[(\w+)\]", abstract)
    shape = re.search(r"\], \(([^()]*)\)", abstract)
    return {"graph": graph, "param_id": "%" + m.group("id"), "name": m.group("name"),
            "dtype": dtype.group(1) if dtype else None,
            "shape": _shape(shape.group(1)) if shape else None,
            "is_parameter": "is_parameter" in abstract,
            "has_default": "has_default" in m.group("tail"), "line": lineno}


# --------------------------------------------------------------------------------------
# the streaming reader
# --------------------------------------------------------------------------------------

def _open_binary(path: Path) -> BinaryIO:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Lines decoded one by one, so a bad byte is reported with its line number.

    Each line is read with a length limit, so memory stays bounded whatever the file holds.
    """
    lineno = 0
    try:
        with _open_binary(path) as fh:
            while True:
                raw = fh.readline(MAX_LINE_BYTES + 1)
                if not raw:
                    return
                lineno += 1
                if b"\x00" in raw:
                    raise ProfileError(path, "binary data (NUL bytes): the file is damaged or "
                                       "zero-padded; expected a MindSpore IR dump (text)",
                                       line=lineno)
                if len(raw) > MAX_LINE_BYTES:
                    raise ProfileError(path, f"line longer than {MAX_LINE_BYTES >> 20} MiB: "
                                       "not a MindSpore IR dump", line=lineno)
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ProfileError(path, f"not UTF-8 text ({exc.reason})",
                                       line=lineno) from exc
                yield lineno, line.removeprefix("\ufeff") if lineno == 1 else line
    except (OSError, EOFError, zlib.error) as exc:
        raise ProfileError(path, f"cannot read: {exc}", line=lineno or None) from exc


class _Reader:
    """State of one pass over a dump: the current subgraph and the node being filled."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.columns: dict[str, list[Any]] = {col: [] for col in NODE_COLUMNS}
        self.params: list[dict[str, Any]] = []
        self.attrs: dict[str, str] = {}
        self.entry: str | None = None
        self.graph: str | None = None
        self.section = ""
        self.current: dict[str, Any] | None = None
        self.saw_subgraph = False
        self.opened_at = 0
        self.subgraphs = 0
        self.declared: int | None = None

    def feed(self, lineno: int, line: str) -> None:
        if line.startswith("      # In file") or line.startswith("      # Corresponding"):
            return
        if (line.startswith("  %") and not line.startswith("  %para")) \
                or line.startswith("  Return("):
            self._node(lineno, line)
        elif line.startswith("      : "):
            self._types(lineno, line)
        elif line.startswith(("      # Fullname with scope: (", "      # Scope: (")):
            if self.current is not None and "scope" not in self.current:
                self.current["scope"] = sys.intern(line.strip().split(": (", 1)[1][:-1])
        else:
            self._other(lineno, line)

    def _node(self, lineno: int, line: str) -> None:
        if self.graph is None:
            raise ProfileError(self.path, "node line outside any 'subgraph @...' block",
                               line=lineno)
        self.flush()
        try:
            self.current = _parse_node(line, self.graph, lineno)
        except (ValueError, IndexError) as exc:
            raise ProfileError(self.path, f"{exc}; found {line.strip()[:120]!r}",
                               line=lineno) from exc

    def flush(self) -> None:
        """Move the finished node into the column lists (no per-row dicts are kept)."""
        if self.current is not None:
            row = self.current
            for col, values in self.columns.items():
                values.append(row.get(col))
            self.current = None

    def _types(self, lineno: int, line: str) -> None:
        if self.current is None:
            raise ProfileError(self.path, "type line ': (...) -> (...)' without a node before it",
                               line=lineno)
        if "output_shapes" in self.current:
            return  # kernel-graph dumps add device-format and kernel-type lines: keep the first
        try:
            dtypes, shapes = _parse_outputs(line)
        except ValueError as exc:
            raise ProfileError(self.path, f"{exc}; found {line.strip()[:120]!r}",
                               line=lineno) from exc
        self.current["output_dtypes"], self.current["output_shapes"] = dtypes, shapes

    def _other(self, lineno: int, line: str) -> None:
        stripped = line.strip()
        m = _PARAM.match(line) if stripped.startswith("%para") else None
        if m is not None:
            self.params.append(_parse_param(m, self.graph, lineno))
            return
        sub = _SUBGRAPH.match(line)
        if sub is not None:
            self.flush()
            self.graph, self.saw_subgraph = sub.group(1), True
            self.opened_at = lineno
            self.subgraphs += 1
        elif line.startswith("}"):
            self.flush()
            self.graph = None if self.section != "jit" else self.graph
            self.section = ""
        elif stripped.startswith("# IR entry: @"):
            self.entry = stripped[len("# IR entry: @"):]
        elif stripped.startswith("# Total subgraphs:"):
            count = stripped[len("# Total subgraphs:"):].strip()
            self.declared = int(count) if count.isdigit() and len(count) < 10 else None
        elif stripped == "# Attrs:":
            self.section = "attrs"
        elif stripped.startswith("jit config {"):
            self.section = "jit"
        elif stripped.startswith("#") or not stripped:
            if not stripped and self.section == "attrs":
                self.section = ""
        elif self.section == "attrs" and ":" in stripped:
            key, _, value = stripped.partition(":")
            self.attrs[key.strip()] = value.strip()


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


def _fill_ranks(columns: dict[str, list[Any]], groups: Mapping[str, Sequence[int]]) -> None:
    known = {str(k): tuple(int(r) for r in v) for k, v in groups.items()}
    ranks = columns["rank_list"]
    for i, group in enumerate(columns["group"]):
        if ranks[i] is None and group in known:
            ranks[i] = known[group]


_BOOL_COLS = ("recompute", "prim_recompute", "cnode_recompute", "duplicated",
              "need_cse_after_recompute", "checkpoint", "recompute_comm_op")
_INT_COLS = ("recompute_sub_graph", "recompute_id", "micro", "rank_size", "line")


def _node_frame(data: dict[str, list[Any]]) -> pd.DataFrame:
    """Columns converted one at a time, each list dropped once converted (lower peak)."""
    columns: dict[str, Any] = {}
    for col in NODE_COLUMNS:
        values = data.pop(col)
        if col in ("inputs", "params", "output_dtypes", "output_shapes"):
            values = [() if v is None else v for v in values]
            columns[col] = pd.Series(values, dtype=object)
        elif col in _BOOL_COLS:
            columns[col] = pd.Series(values, dtype="boolean")
        elif col in _INT_COLS:
            columns[col] = pd.Series(values, dtype="Int64")
        elif col in ("graph", "op", "instance_name"):
            columns[col] = pd.Series(values, dtype="category")
        else:
            columns[col] = pd.Series(values)
        del values
    return pd.DataFrame(columns, copy=False)


def _param_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(PARAMETER_COLUMNS))
    frame["line"] = frame["line"].astype("Int64")
    return frame
