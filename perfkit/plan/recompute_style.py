"""A full recompute whose style no measured run showed: whether :func:`perfkit.plan.predict`
must assume one, and the note that says what the other style gives.

Two styles rerun a fully recomputed layer (:data:`perfkit.calc.rates.RECOMPUTE_STYLES`):
``"all"`` its whole forward, ``"needed"`` only what the backward reads. A prediction
whose layout recomputes layers in full, with neither the style given nor a calibrating
run that recomputed in full, prices the calibration's style and says what the other
gives (docs/planner.md, "Which layers and ops are recomputed").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..calc.rates import RECOMPUTE_STYLE_MIN_SHARE
from ..errors import InvalidArgumentError, ParallelConfigError
from ..format import signed_share_text
from ..specs import ModelSpec, ParallelConfig

__all__ = ["STYLE_NOTE", "style_unknown", "style_note"]

#: What each recompute style reruns, and which frameworks run it (docs/planner.md).
_STYLE_WORDS = {
    "all": "each layer's whole forward (Megatron-LM, reentrant torch.utils.checkpoint)",
    "needed": "only what the backward reads (MindSpore graph mode, non-reentrant "
              "torch.utils.checkpoint: not the MLP output projection)",
}


def style_unknown(job: Any, model: ModelSpec, parallel: ParallelConfig,
                   overrides: Mapping[str, Any] | None) -> bool:
    """Whether the layout recomputes layers in full with a style nobody measured: neither
    given in ``overrides`` nor read from a calibrating run that recomputed in full
    (:data:`~perfkit.calc.rates.RECOMPUTE_STYLE_MIN_SHARE` of its layers)."""
    if overrides and "recompute_style" in overrides:
        return False
    if not sum(parallel.full_recompute_layers_per_stage(model)):
        return False
    run = getattr(job, "parallel", None)
    run_model = getattr(job, "model", None)
    if run is None or run_model is None:
        return True
    try:
        share = sum(run.full_recompute_layers_per_stage(run_model)) / run_model.num_layers
    except (InvalidArgumentError, ParallelConfigError, ZeroDivisionError):
        return True
    return share < RECOMPUTE_STYLE_MIN_SHARE


#: How :func:`predict`'s note of an assumed recompute style begins.
STYLE_NOTE = "full recompute timed as rerunning"


def style_note(style: str, step: float, alt: float) -> str:
    """The note of a full recompute whose style was assumed: the step the other style
    gives, and how to ask for it."""
    other = "needed" if style == "all" else "all"
    return (f"{STYLE_NOTE} {_STYLE_WORDS[style]}, which no measured "
            f"run showed; rerunning {_STYLE_WORDS[other]} gives {alt * 1e3:,.1f} ms "
            f"({signed_share_text(alt / step - 1)}): overrides={{'recompute_style': "
            f"'{other}'}}")
