"""Which IR dump and which select_recompute patterns notebook 06 checks, and whose they are.

The notebook starts on the bundled case (:data:`BUNDLED_DUMP` with the MindFormers guide's
patterns, :data:`BUNDLED_PATTERNS`); ``perfkit report --notebook 06 --ir FILE --config
job.yaml`` gives it the user's dump and the ``recompute_config`` of the user's MindFormers
YAML (:func:`perfkit.read_mindformers_config`). :func:`ir_case` picks, and says in one
sentence which it checks, so a page never presents the user's graph as the guide's case,
nor the guide's case as the user's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .overview import bundled_ir

__all__ = ["BUNDLED_DUMP", "BUNDLED_PATTERNS", "IRCase", "ir_case", "with_suggested",
           "bundled_fixed_config"]

#: The bundled dump the notebook starts on: a two-layer Llama whose select_recompute marks
#: the MLP's Mul but makes no clone (``data/ir/README.md``).
BUNDLED_DUMP = "silu_mul.ir"

#: The guide's ``recompute_config`` for it: layer 0 fully recomputed, SiLU and Mul selected.
BUNDLED_PATTERNS: Mapping[str, Any] = {
    "recompute": [1],
    "select_recompute": [r"feed_forward\.mul", r"feed_forward\.w1\.activation"]}


@dataclass(frozen=True)
class IRCase:
    """What the check reads: the dump, the ``recompute_config``, and in words whose.

    Attributes
    ----------
    dump : str
        The IR dump's path.
    recompute_config : mapping
        What :func:`perfkit.analysis.recompute_check` takes as ``select_recompute``.
    bundled : bool
        Whether the dump is the bundled example (then the notebook's reading of its rows
        applies).
    sentence : str
        Which dump and patterns, and where they come from.
    """

    dump: str
    recompute_config: Mapping[str, Any]
    bundled: bool
    sentence: str


def _yaml_of(config: Any) -> Path | None:
    """The first MindFormers YAML among ``config`` (a path or a list of paths), or None."""
    items = config if isinstance(config, Sequence) and not isinstance(config, str) else \
        [config]
    return next((Path(str(c)) for c in items if c is not None
                 and str(c).lower().endswith((".yaml", ".yml"))), None)


def ir_case(dump: str | Path, recompute_config: Mapping[str, Any] | None = None,
            config: Any = None) -> IRCase:
    """The dump and patterns the recompute check of notebook 06 reads.

    Parameters
    ----------
    dump : str or Path
        The notebook's ``IR_DUMP``.
    recompute_config : mapping, optional
        The notebook's ``RECOMPUTE_CONFIG`` (default :data:`BUNDLED_PATTERNS`), used where
        ``config`` holds no MindFormers YAML.
    config : str, Path or list, optional
        The notebook's ``CONFIG``: the ``recompute_config`` of its first MindFormers YAML
        wins (:func:`perfkit.read_mindformers_config`, its ``extras``).

    Returns
    -------
    IRCase

    Raises
    ------
    perfkit.ConfigFileError
        A YAML that cannot be read (the message names the file and line).
    """
    from ..io.logs.config import read_mindformers_config

    path = Path(dump).expanduser()
    bundled = path.resolve() == bundled_ir(BUNDLED_DUMP).resolve()
    yaml = _yaml_of(config)
    if yaml is not None:
        chosen: Mapping[str, Any] = read_mindformers_config(yaml)[2]["recompute_config"]
        whose = f"the recompute_config of {yaml.name}"
    else:
        chosen = dict(recompute_config if recompute_config is not None else BUNDLED_PATTERNS)
        whose = ("the guide's patterns (SiLU and Mul selected, layer 0 fully recomputed)"
                 if chosen == dict(BUNDLED_PATTERNS) else "the patterns given")
    graph = (f"the bundled example {BUNDLED_DUMP} (the MindFormers guide's case: a Llama "
             "layer selects its MLP's SiLU and Mul, yet memory does not drop)" if bundled
             else f"your IR dump {path.name} ({path.parent})")
    return IRCase(str(path), chosen, bundled, f"Checked: {graph}, against {whose}.")


def with_suggested(recompute_config: Mapping[str, Any], diagnosis: Any) -> dict[str, Any]:
    """``recompute_config`` with the diagnosis's suggested patterns added to its
    ``select_recompute`` (:func:`perfkit.analysis.recompute_check`'s ``diagnosis``,
    column ``suggested_pattern``): a list gains them; a dict of pattern → per-stage counts
    gains them with the most layers any of its patterns selects on each stage; ``True``
    (MindFormers' defaults) or nothing becomes the list of them."""
    extra = [str(p) for p in diagnosis["suggested_pattern"].dropna().unique()]
    out = dict(recompute_config)
    select = out.get("select_recompute")
    if isinstance(select, Mapping):
        counts = [list(v) for v in select.values() if isinstance(v, Sequence)]
        most: Any = [max(c) for c in zip(*counts, strict=True)] if counts else True
        out["select_recompute"] = {**select, **{p: most for p in extra if p not in select}}
    elif isinstance(select, Sequence) and not isinstance(select, str):
        out["select_recompute"] = [*select, *(p for p in extra if p not in select)]
    else:
        out["select_recompute"] = extra
    return out


def bundled_fixed_config() -> dict[str, Any]:
    """The patterns of the bundled case's second dump (``silu_mul_reshape.ir.gz``): the
    guide's (:data:`BUNDLED_PATTERNS`) with those its first dump's diagnosis suggests."""
    from ..analysis.recompute.check import recompute_check
    from ..io.ir.graph import load_ir

    check = recompute_check(load_ir(bundled_ir(BUNDLED_DUMP)), BUNDLED_PATTERNS)
    return with_suggested(BUNDLED_PATTERNS, check.diagnosis)
