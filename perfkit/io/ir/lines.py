"""One line of a MindSpore IR dump parsed: a CNode, its output types, a parameter.

The grammar of the lines :mod:`perfkit.io.ir.graph` reads (see its docstring for a sample):
:func:`_parse_node` reads ``%14(name) = Op(args) {instance name: ...} primitive_attrs: {...}
cnode_attrs: {...}`` into one row of :data:`perfkit.io.ir.graph.NODE_COLUMNS`,
:func:`_parse_outputs` the ``: (<inputs>) -> (<outputs>)`` line under it and
:func:`_parse_param` a ``%para`` line. A line off the grammar raises ``ValueError``; the
reader (:mod:`perfkit.io.ir.reader`) turns it into a ProfileError naming the file and line.
"""

from __future__ import annotations

import re
import sys
from typing import Any

__all__: list[str] = []  # private to the IR reader


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
    """``"4, 64"`` as ``(4, 64)``; a dimension that is not a whole number (``-1`` for a
    dynamic one is) is refused as what it is, not as Python's int() message."""
    dims = [x for x in text.replace(" ", "").split(",") if x]
    if not all(d.lstrip("-").isdigit() for d in dims):
        raise ValueError(f"expected a shape of whole numbers, found ({text.strip()})")
    return tuple(int(x) for x in dims)


def _parse_param(m: re.Match[str], graph: str | None, lineno: int) -> dict[str, Any]:
    abstract = m.group("abs")
    dtype = re.search(r"Tensor\[(\w+)\]", abstract)
    shape = re.search(r"\], \(([^()]*)\)", abstract)
    return {"graph": graph, "param_id": "%" + m.group("id"), "name": m.group("name"),
            "dtype": dtype.group(1) if dtype else None,
            "shape": _shape(shape.group(1)) if shape else None,
            "is_parameter": "is_parameter" in abstract,
            "has_default": "has_default" in m.group("tail"), "line": lineno}
