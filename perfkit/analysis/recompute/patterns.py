"""The recompute configuration and its patterns: what ``select_recompute``,
``select_comm_recompute`` and ``recompute`` may hold (a pattern list, a dict, per-stage counts),
and how a MindFormers pattern matches the cells of a decoder layer (:func:`match_pattern`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import InvalidArgumentError

if TYPE_CHECKING:  # the type only; analyses never read files
    pass

__all__ = ["match_pattern", "LAYOUT_OPS", "VIRTUAL_OPS", "DEFAULT_SELECT_PATTERNS",
           "DEFAULT_COMM_PATTERNS", "FULL_LAYER_SHARE"]


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
