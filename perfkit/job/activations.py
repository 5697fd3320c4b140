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

from .._text_dtype import TEXT
from ..analysis._frames import is_lazy
from ..analysis._util import table, text_matches
from ..analysis.operators.tokens import TOKENS
from ..calc.activation import ELEMENT_BYTES, ActivationModel
from .fields import FieldValue

__all__ = ["ACTIVATIONS", "ATTENTION_KERNEL", "read_activations", "read_operator_extras",
           "activation_text"]

#: Where :func:`read_activations` puts its reading (in :attr:`perfkit.Job.observed`).
ACTIVATIONS = "activation_model"
#: Where the attention kernel's implementation read from the kernel names goes
#: (:func:`perfkit.analysis.operators.attention_kernel.read_attention_kernel`).
ATTENTION_KERNEL = "attention_implementation"
#: Operator names of dropout (the pattern search's dropout token).
_DROPOUT = dict(TOKENS)["O"]


def read_activations(profile: Any, reading: Any, mlp: str | None,
                     dtype: str | None = None, fused: str | None = None) -> FieldValue:
    """The :class:`~perfkit.calc.ActivationModel` the profile shows, with what was read.

    ``reading``: the :class:`~perfkit.analysis.shapes.fields.ShapeReading` of the profile
    (``flash_attention``, ``norm_fp32``); ``mlp``: the MLP kind read (a gated MLP's
    selective recompute drops its SiLU and product outputs, MindFormers' ``select_recompute``);
    ``dtype``: the data type the profile's GEMMs ran in. An fp32 run keeps its tensors
    at 4 bytes per element (``element_bytes=4``), which the seed's 16-bit table cannot
    say: they are then counted tensor by tensor, the scores kept without flash attention.
    ``fused``: what the kernel names show of a fused attention library
    (:func:`perfkit.analysis.operators.attention_kernel.read_attention_kernel`), which
    keeps no scores either: a trace without shapes (no attention kernel in the shape
    reading) whose kernels are FlashAttention-3's is read as flash attention, not as
    Korthikanti's table.
    """
    flash = reading.get("flash_attention")
    attention = reading.details.get("flash_attention", "")
    if not flash and fused:  # the names show a fused kernel the shapes did not
        flash, attention = True, f"{fused}: fused attention, the s × s scores are not kept"
    fp32_run = ELEMENT_BYTES.get(dtype or "") == 4.0
    if not flash and not fp32_run:
        why = attention if flash is False else f"{attention}: the attention is not known"
        return FieldValue(ActivationModel(), "profile" if flash is False else "default",
                          f"{why}; activations by Korthikanti's table (the scores kept)")
    dropout = _has_dropout(profile)
    fp32_norms = fp32_run or bool(reading.get("norm_fp32"))
    seen = "not read (a lazy cluster)" if dropout is None else \
        "kernels seen" if dropout else "none"
    element = 4.0 if fp32_run else 2.0
    extras, said = read_operator_extras(profile, reading, element)
    model = ActivationModel("tensors", flash_attention=bool(flash), dropout=bool(dropout),
                            norm_bytes=4.0 if fp32_norms else 2.0,
                            # without flash attention the scores are what selective
                            # recompute drops (Korthikanti's), as in the seed's table
                            selective=("mlp_activation",) if flash and mlp == "gated"
                            else ("attention_core",),
                            element_bytes=element, **extras)
    norms = "an fp32 run: every tensor 4 bytes per element" if fp32_run else \
        reading.details.get("norm_fp32", "norm inputs not read")
    if flash is None:  # an fp32 run whose attention is not known: the scores counted
        attention = f"{attention}: the attention is not known, its scores counted"
    return FieldValue(model, "default" if flash is None else "profile",
                      f"{attention}; dropout {seen}; {norms}{said}: activations counted "
                      "tensor by tensor")


def read_operator_extras(profile: Any, reading: Any,
                         element_bytes: float) -> tuple[dict[str, Any], str]:
    """What a PyTorch profile's operators (with their input shapes and types) show the
    layer and the loss keep beyond the fused kernels' tensors: the
    :class:`~perfkit.calc.ActivationModel` fields ``unfused_norm``, ``unfused_rotary``,
    ``input_bytes`` and ``logits_bytes``, and the words saying why.

    * ``unfused_norm``: an RMSNorm read from ``aten::rsqrt`` with no fused norm operator
      (``rms_norm``, ``layer_norm``) in the profile;
    * ``unfused_rotary``: an ``aten::cat`` of two equal 4-D halves of the head size (the
      rotate-half of a rotary embedding written in PyTorch);
    * ``input_bytes``: 4 when the ``aten::embedding`` table is fp32 in a 16-bit run
      (autocast: the embedding's output, hence the residual stream, is fp32);
    * ``logits_bytes``: an ``aten::_log_softmax`` over the vocabulary: fp32 in a 16-bit
      run keeps the 16-bit logits, their fp32 copy and its fp32 output (2 + 4 + 4);
      otherwise the logits and the output in the run's type (``2·element_bytes``).

    Empty (the fields' defaults) for a profile without operator input shapes.
    """
    ops = table(profile, "ops") if not is_lazy(profile) else None
    if ops is None or ops.empty or "input_shapes" not in ops.columns \
            or "input_dtypes" not in ops.columns:
        return {}, ""
    names = ops["name"].astype(TEXT).fillna("")
    out: dict[str, Any] = {}
    words: list[str] = []
    fused_norm = text_matches(names, r"(?i)rms_?norm|layer_?norm").any()
    if reading.get("norm") == "rmsnorm" and not fused_norm \
            and (names == "aten::rsqrt").any():
        out["unfused_norm"] = True
        words.append("RMSNorm as separate operators (aten::rsqrt)")
    head = reading.get("head_dim")
    cats = ops.loc[(names == "aten::cat").to_numpy(bool), "input_shapes"].dropna().unique()
    if head and any(_rotate_half(str(c), int(head)) for c in cats):
        out["unfused_rotary"] = True
        words.append("rotary embedding as separate operators (aten::cat of the half heads)")
    embed = ops.loc[(names == "aten::embedding").to_numpy(bool), "input_dtypes"].dropna()
    if element_bytes == 2.0 and len(embed) and _first_type(embed.iloc[0]) == "float":
        out["input_bytes"] = 4.0
        words.append("an fp32 embedding table (the residual stream fp32)")
    vocab = reading.get("vocab_size")
    lsm = ops.loc[text_matches(names, r"^aten::_?log_softmax$").to_numpy(bool),
                  ["input_shapes", "input_dtypes"]].dropna()
    for shapes, types in lsm.itertuples(index=False):
        dims = str(shapes).split(";")[0].split(",")
        if vocab and dims[-1].strip().isdigit() and int(dims[-1]) == int(vocab):
            up = element_bytes == 2.0 and _first_type(types) == "float"
            out["logits_bytes"] = 10.0 if up else 2.0 * element_bytes
            words.append("the loss's log-softmax over the vocabulary in "
                         + ("fp32 (the logits kept 2 + 4 + 4 bytes each)" if up else
                            f"the run's type ({out['logits_bytes']:g} bytes a logit)"))
            break
    return out, "".join(f"; {w}" for w in words)


def _first_type(types: Any) -> str:
    return str(types).split(";")[0].strip().lower()


def _rotate_half(shapes: str, head_dim: int) -> bool:
    """Whether a cat's input shapes (``"4,16,2048,64;4,16,2048,64;"``) are two equal 4-D
    halves of the head size."""
    parts = [p.strip("[] ") for p in shapes.strip("[];").split(";")]
    return len(parts) == 2 and parts[0] == parts[1] and len(parts[0].split(",")) == 4 \
        and parts[0].split(",")[-1].strip() == str(head_dim // 2)


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
    if model.accounting == "table":
        return "Korthikanti's table (attention scores kept)"
    fp32 = model.element_bytes == 4.0
    extras = [w for w, on in (("dropout masks", model.dropout),
                              ("fp32 tensors", fp32),
                              ("fp32 norm inputs", model.norm_bytes == 4.0 and not fp32),
                              ("unfused norms", model.unfused_norm),
                              ("unfused rotary", model.unfused_rotary),
                              ("fp32 residual", model.input_bytes == 4.0 and not fp32),
                              (f"logits {model.logits_bytes:g} B each", model.logits_bytes))
              if on]
    head = "fused attention, no scores kept" if model.flash_attention else \
        "attention scores kept"
    return f"{head}: tensor by tensor" + (f" ({', '.join(extras)})" if extras else "")
