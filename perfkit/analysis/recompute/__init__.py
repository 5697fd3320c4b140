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

One module a job, every name re-exported here: :mod:`~perfkit.analysis.recompute.patterns`
(the configuration and :func:`match_pattern`), :mod:`~perfkit.analysis.recompute.nodes` (the
IR nodes' layer, cells and names), :mod:`~perfkit.analysis.recompute.check`
(:func:`recompute_check`) and :mod:`~perfkit.analysis.recompute.scopes`
(:func:`recompute_scopes`).
"""

from __future__ import annotations

from .check import (  # noqa: F401 - private names are imported from here too
    _DIAG_COLUMNS,
    _KEEPS_INPUT,
    RecomputeCheck,
    _breaks_chain,
    _diagnose,
    _full_layers,
    _layer_summary,
    _match_rows,
    _neighbour_row,
    _summary_row,
    _unmarked_rows,
    recompute_check,
)
from .nodes import (  # noqa: F401 - private names are imported from here too
    _annotate,
    _comm_flag,
    _op_names,
    _scope_parts,
)
from .patterns import (  # noqa: F401 - private names are imported from here too
    _OP_SEGMENT,
    _PIECE_SEP,
    _SNAKE,
    DEFAULT_COMM_PATTERNS,
    DEFAULT_SELECT_PATTERNS,
    FULL_LAYER_SHARE,
    LAYOUT_OPS,
    VIRTUAL_OPS,
    _as_spec,
    _compile,
    _count_for_stage,
    _pattern_dict,
    _Spec,
    match_pattern,
)
from .scopes import (  # noqa: F401 - private names are imported from here too
    RECOMPUTE_SCOPE,
    SCOPE_COLUMNS,
    _named_tasks,
    recompute_scopes,
)

__all__ = ["RecomputeCheck", "recompute_check", "recompute_scopes", "match_pattern", "LAYOUT_OPS",
           "VIRTUAL_OPS", "DEFAULT_SELECT_PATTERNS", "DEFAULT_COMM_PATTERNS", "FULL_LAYER_SHARE",
           "SCOPE_COLUMNS", "RECOMPUTE_SCOPE"]
