"""One streaming pass over a MindSpore IR dump, into column lists and then frames.

:func:`_lines` decodes the file line by line with a length limit (:data:`MAX_LINE_BYTES`),
refusing NUL bytes and non-UTF-8 text where they are met; :class:`_Reader` keeps the current
subgraph and node and moves each finished node into column lists (no per-row dicts);
:func:`_node_frame` and :func:`_param_frame` turn those into the frames of
:class:`perfkit.io.ir.graph.IRGraph`, with the columns :data:`NODE_COLUMNS` and
:data:`PARAMETER_COLUMNS`.
"""

from __future__ import annotations

import gzip
import sys
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from ...errors import ProfileError
from .lines import _PARAM, _SUBGRAPH, _parse_node, _parse_outputs, _parse_param

__all__ = ["MAX_LINE_BYTES", "NODE_COLUMNS", "PARAMETER_COLUMNS"]


MAX_LINE_BYTES = 16 << 20
"""A longer line cannot be part of an IR dump: the read stops there with an error."""


#: Columns of :attr:`perfkit.io.ir.graph.IRGraph.nodes`, in order.
NODE_COLUMNS = (
    "graph", "node_id", "debug_name", "op", "instance_name", "scope", "inputs", "params",
    "output_dtypes", "output_shapes", "in_strategy", "recompute", "prim_recompute",
    "cnode_recompute", "duplicated", "recompute_sub_graph", "recompute_id",
    "need_cse_after_recompute", "checkpoint", "recompute_comm_op", "micro", "unique_id",
    "forward_comm_node_unique_id", "forward_unique_id", "group", "rank_size", "rank_list",
    "line",
)

#: Columns of :attr:`perfkit.io.ir.graph.IRGraph.parameters`, in order.
PARAMETER_COLUMNS = ("graph", "param_id", "name", "dtype", "shape", "is_parameter",
                     "has_default", "line")


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
