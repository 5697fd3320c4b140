"""How the job keeps its activations, as the profile shows it: the memory theory's accounting.

A layer's activation memory (:func:`perfkit.calc.activation_memory`) depends most on the
attention kernel. Computed apart (q·kᵀ, softmax, ·v), attention keeps its ``s × s`` scores
for the backward pass: the seed's table (Korthikanti et al. 2022, Table 2), ``5·a·s/h`` of
the layer's ``34 + 5·a·s/h`` bytes per token and hidden unit, most of a layer at s = 4096.
A fused (flash) attention kernel keeps none, only its softmax statistics; the layer's other
tensors are then counted one by one for the model (:class:`perfkit.calc.ActivationModel`
``"tensors"``: grouped-query K and V, a gated MLP, dropout, the norms' input type), as
:func:`perfkit.plan.calibrate` counts them. The attention and norm operators are read by
:func:`perfkit.analysis.shapes.read_model`; dropout shows in the operators' names.
"""

from __future__ import annotations

from typing import Any

from ..analysis._frames import is_lazy
from ..analysis._util import table, text_matches
from ..analysis.operators.tokens import TOKENS
from ..calc.activation import ActivationModel
from .fields import FieldValue

__all__ = ["ACTIVATIONS", "read_activations", "activation_text"]

#: Where :func:`read_activations` puts its reading (in :attr:`perfkit.Job.observed`).
ACTIVATIONS = "activation_model"
#: Operator names of dropout (the pattern search's dropout token).
_DROPOUT = dict(TOKENS)["O"]


def read_activations(profile: Any, reading: Any, mlp: str | None) -> FieldValue:
    """The :class:`~perfkit.calc.ActivationModel` the profile shows, with what was read.

    ``reading``: the :class:`~perfkit.analysis.shapes.fields.ShapeReading` of the profile
    (``flash_attention``, ``norm_fp32``); ``mlp``: the MLP kind read (a gated MLP's
    selective recompute drops its SiLU and product outputs, MindFormers' ``select_recompute``).
    """
    flash = reading.get("flash_attention")
    attention = reading.details.get("flash_attention", "")
    if not flash:
        why = attention if flash is False else f"{attention}: the attention is not known"
        return FieldValue(ActivationModel(), "profile" if flash is False else "default",
                          f"{why}; activations by the seed's table (the scores kept)")
    dropout = _has_dropout(profile)
    fp32 = bool(reading.get("norm_fp32"))
    seen = "not read (a lazy cluster)" if dropout is None else \
        "kernels seen" if dropout else "none"
    model = ActivationModel("tensors", flash_attention=True, dropout=bool(dropout),
                            norm_bytes=4.0 if fp32 else 2.0,
                            selective=("mlp_activation",) if mlp == "gated"
                            else ("attention_core",))
    return FieldValue(model, "profile", f"{attention}; dropout {seen}; "
                      f"{reading.details.get('norm_fp32', 'norm inputs not read')}: "
                      "activations counted tensor by tensor")


def _has_dropout(profile: Any) -> bool | None:
    """Whether any device task (else host operator) is a dropout, by name (None: a lazy
    cluster, whose names are not read for this)."""
    if is_lazy(profile):
        return None
    for name in ("kernels", "ops"):
        frame = table(profile, name)
        if not frame.empty and "name" in frame.columns:
            return bool(text_matches(frame["name"], f"(?i){_DROPOUT}").any())
    return False


def activation_text(model: ActivationModel) -> str:
    """How ``model`` counts activations, in a few words for a page or ``perfkit info``."""
    if not model.flash_attention:
        return "the seed's table (attention scores kept)"
    extras = [w for w, on in (("dropout masks", model.dropout),
                              ("fp32 norm inputs", model.norm_bytes == 4.0)) if on]
    return ("fused attention, no scores kept: tensor by tensor"
            + (f" ({', '.join(extras)})" if extras else ""))
