"""Activation memory per layer and per pipeline stage, under four published conventions.

``convention=`` picks whose numbers to reproduce (all bytes, 16-bit activations):

* ``"seed"`` (default) — Korthikanti et al. 2022, Table 2, as printed in the seed's
  "Dynamic Memory" table (GPT layer, 1-byte dropout masks), or the same tensor-by-tensor
  bookkeeping redone for the real layer (:class:`ActivationModel`), times the micro-batches
  in flight on **each** stage as MindFormers SAPP counts them (``compute_activation_nums``:
  stage ``s`` holds ``p − s``, capped at ``m``). No embedding or output-layer terms.
* ``"korthikanti"`` — the paper's own accounting: Table 2 per layer and, for the first
  stage, ``L`` layers' worth (``p`` micro-batches × ``L/p`` layers; §4, pipeline
  parallelism) times the interleaving factor ``1 + (p−1)/(p·v)`` — what its Fig. 1
  plots. Unlike ``"seed"`` it is not capped by the number of micro-batches and describes
  the first stage only.
* ``"megatron"`` — Megatron-LM ``theoretical_memory_usage.py`` (see
  :mod:`perfkit.calc.megatron`): ``s·b·h·(18 + 4f/h)/t`` per layer with SP and selective
  recompute, ``s·b·h·(10 + 24/t)`` otherwise (whatever the recompute), plus its
  embedding terms (``8·s·b·p`` token ids, ``s·b·h·p`` dropout), the output layer when
  ``p = 1``, ``min(1, m/p)`` without interleaving, and ×1.05 off the SP path.
* ``"llm-analysis"`` — llm-analysis 0.2.2 (see :mod:`perfkit.calc.llm_analysis`):
  FlashAttention by default (no ``s²`` tensors, ``4·a·s·b`` softmax statistics), fp32
  layer-norm inputs, no MLP dropout mask, ``L ×`` per layer whatever ``p`` is, plus the
  logits ``2·s·b·V/t`` and a final norm.

Where they differ for GPT-3 175B (``s = 2048``, ``a = 96``, no parallelism): Table 2 gives
``34 + 5as/h = 114`` ``sbh`` per layer; llm-analysis without flash attention and with
softmax dropout ``37 + 5as/h`` (4-byte norms +4, no MLP dropout mask −1), with its flash
default ``41·sbh + 8asb``; Megatron's no-SP path ``10 + 24 = 34`` (no ``s²`` term at
all) ×1.05.

With context parallelism (``cp``) each rank holds ``s/cp`` tokens; attention scores are
those of the local queries against all ``s`` keys (Megatron-LM's context-parallel guide:
activation memory shrinks by the CP degree). Expert parallelism leaves the per-rank
activation bytes unchanged under balanced routing (each rank receives on average the
``k·b·s/cp`` expert inputs it sends).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from ..errors import (
    InvalidArgumentError,
    check_choice,
    check_positive_int,
)
from ..specs import ModelSpec, ParallelConfig
from ._common import as_model
from .activation_model import ELEMENT_BYTES, ActivationModel
from .activation_output import output_bytes
from .llm_analysis import llm_analysis_activation_extra, llm_analysis_activation_per_layer
from .megatron import megatron_activation_bytes, megatron_activation_per_layer
from .pipeline import in_flight_micro_batches
from .recompute_ops_memory import op_dropped_terms

__all__ = [
    "ACTIVATION_CONVENTIONS",
    "ELEMENT_BYTES",
    "ActivationBreakdown",
    "ActivationModel",
    "activation_per_layer",
    "activation_memory",
]

#: Values of ``convention=`` in :func:`activation_per_layer` and :func:`activation_memory`.
ACTIVATION_CONVENTIONS = ("seed", "korthikanti", "megatron", "llm-analysis")
@dataclass(frozen=True)
class ActivationBreakdown:
    """Activation memory of one pipeline stage (the peak one unless a stage was asked).

    Attributes
    ----------
    formula : str
        The per-layer rule used for layers that are not fully recomputed (the row of the
        seed's dynamic-memory table under ``convention="seed"``).
    per_layer_bytes : float
        Bytes one layer keeps for one micro-batch under that rule.
    full_recompute_layer_bytes : float
        Bytes a fully recomputed layer keeps (its input, ``2sbh``, ``/t`` with SP).
    stage : int
        The pipeline stage described (0-based).
    layers_on_stage, full_recompute_layers : int
    in_flight : float
        Micro-batches whose activations the stage holds at its peak (averaged over its
        virtual chunks, so Megatron's ``p·(1 + (p−1)/(p·v))`` for stage 0).
    total_bytes : float
    per_stage_bytes : tuple of float
        ``total_bytes`` of every stage, for comparison (only the first stage's under the
        conventions that describe the first stage only).
    convention : str
        ``"seed"``, ``"korthikanti"``, ``"megatron"`` or ``"llm-analysis"``.
    extra_bytes : float
        Terms outside the transformer layers that the convention adds (embedding, output
        layer, final norm); 0 for ``"korthikanti"``, and for ``"seed"`` unless the
        activation model counts the logits (``logits_bytes``, the last stage only).
    """

    formula: str
    per_layer_bytes: float
    full_recompute_layer_bytes: float
    stage: int
    layers_on_stage: int
    full_recompute_layers: int
    in_flight: float
    total_bytes: float
    per_stage_bytes: tuple[float, ...]
    convention: str = "seed"
    extra_bytes: float = 0.0

    def to_frame(self) -> pd.DataFrame:
        """One row per pipeline stage: ``stage``, ``bytes``, ``GB`` and ``GiB``."""
        frame = pd.DataFrame({"stage": range(len(self.per_stage_bytes)),
                              "bytes": self.per_stage_bytes})
        frame["GB"] = frame["bytes"] / 1e9
        frame["GiB"] = frame["bytes"] / 2**30
        return frame

    def as_dict(self) -> dict[str, object]:
        """Plain dict of the fields."""
        return asdict(self)


def _check_convention(convention: str, activation_model: ActivationModel | None,
                      recompute_ops: tuple[str, ...] | None = None) -> None:
    check_choice("convention", convention, ACTIVATION_CONVENTIONS)
    if recompute_ops is not None and convention in ("megatron", "llm-analysis"):
        raise InvalidArgumentError("convention", f"the {convention!r} convention has no "
                                   "per-op terms: op-level recompute (recompute_ops) is "
                                   "counted under 'seed' or 'korthikanti'", convention)
    if activation_model is not None and convention in ("korthikanti", "megatron"):
        raise InvalidArgumentError("activation_model", f"the {convention!r} convention has "
                                   "its own fixed accounting; leave activation_model out",
                                   activation_model)


def activation_per_layer(model: ModelSpec, micro_batch_size: int = 1, tp: int = 1,
                         sequence_parallel: bool = False, recompute: str = "none",
                         activation_model: ActivationModel | None = None,
                         convention: str = "seed", cp: int = 1,
                         recompute_ops: tuple[str, ...] | None = None,
                         ) -> tuple[float, str]:
    """Bytes of activations one layer keeps for one micro-batch, and the rule used.

    With the default ``convention="seed"`` and ``ActivationModel()`` this is the seed's
    dynamic-memory table (Korthikanti et al. 2022, Table 2), ``a`` heads, ``t`` = tp:

    ===============================  =============================
    no parallelism                   ``sbh·(34 + 5as/h)``
    tensor parallel                  ``sbh·(10 + 24/t + 5as/(ht))``
    tensor + sequence parallel       ``sbh·(34 + 5as/h)/t``
    tensor parallel + selective      ``sbh·(10 + 24/t)``
    tensor + sequence + selective    ``34·sbh/t``
    full recompute                   ``2·sbh`` (``/t`` with sequence parallel)
    ===============================  =============================

    The table counts, per layer, ``10sbh`` that tensor parallelism leaves whole
    (attention and MLP inputs ``2+2``, two norm inputs ``2+2``, two dropout masks
    ``1+1``) and ``24sbh + 5as²b`` that it splits (Q, K, V ``2+2+2``, projection input
    ``2``, MLP activation input and output ``8+8``, softmax ``2as²b``, its dropout mask
    ``as²b`` and output ``2as²b``). ``ActivationModel(accounting="tensors")`` applies the
    same bookkeeping to the actual model (see :class:`ActivationModel`).

    ``convention="korthikanti"`` gives the same table rows; ``"megatron"`` and
    ``"llm-analysis"`` their own per-layer figures (see the module docstring). ``cp``
    splits the sequence: ``s`` becomes ``s/cp`` except as the key length of the scores.

    ``recompute_ops`` (with ``recompute="selective"``, ``"seed"`` and ``"korthikanti"``
    conventions): op-level selective recompute instead of the activation model's
    ``selective`` kinds: the layer keeps the ``recompute="none"`` bytes less the tensors
    those ops make, ``sbh·(R − R_ops + (S − S_ops)/t)`` (all ``/t`` with sequence
    parallelism), ``R``/``S`` the terms kept whole / split by tensor parallelism and
    ``R_ops``/``S_ops`` the ops' own (Korthikanti et al. 2022 Table 2 tensor by tensor,
    :func:`perfkit.calc.recompute_ops.op_dropped_terms`).
    """
    model = as_model(model)
    check_choice("recompute", recompute, ("none", "selective", "full"))
    _check_convention(convention, activation_model, recompute_ops)
    cp = check_positive_int("cp", cp)
    if convention == "megatron":
        par = ParallelConfig(tp=tp, sequence_parallel=sequence_parallel and tp > 1,
                             micro_batch_size=micro_batch_size, recompute=recompute, cp=cp)
        name = "megatron, SP + selective" if par.sequence_parallel and recompute == \
            "selective" else "megatron, without SP (10 + 24/t)"
        return megatron_activation_per_layer(model, par), name
    if convention == "llm-analysis":
        am = ActivationModel.llm_analysis() if activation_model is None else activation_model
        nbytes = llm_analysis_activation_per_layer(
            model, micro_batch_size, tp, sequence_parallel and tp > 1, recompute,
            flash_attention=am.flash_attention, softmax_dropout=bool(am.dropout),
            layernorm_bytes=am.norm_bytes, cp=cp)
        return nbytes, f"llm-analysis, {recompute}"
    am = ActivationModel() if activation_model is None else activation_model
    s, h, a = model.seq_length, model.hidden_size, model.num_attention_heads
    b, t = float(micro_batch_size), float(tp)
    sbh = s * b * h if cp == 1 else s / cp * b * h
    sp = sequence_parallel and tp > 1
    if recompute == "full":  # the layer's input only
        kept = (am.element_bytes if am.input_bytes is None else am.input_bytes) * sbh
        return (kept / t, "full recompute, sequence parallel") if sp \
            else (kept, "full recompute")
    selective = recompute == "selective"
    by_ops = selective and recompute_ops is not None
    if by_ops and convention == "korthikanti":
        am = ActivationModel()
    if am.accounting == "table" or convention == "korthikanti":
        replicated, split = 10.0, 24.0
        s2 = 0.0 if selective and not by_ops else 5.0 * a * s / h
    else:
        replicated, split, s2 = _tensor_accounting(model, am, selective and not by_ops)
    if by_ops:
        whole, part = op_dropped_terms(model, am, tuple(recompute_ops))
        replicated, split = replicated - whole, split - part
    total = sbh * (replicated + split + s2) / t if sp else sbh * (replicated + (split + s2) / t)
    accounting = "table" if convention == "korthikanti" else am.accounting
    name = _row_name(tp > 1, sp, selective, accounting)
    return total, (f"{name}, ops {', '.join(recompute_ops)}" if by_ops else name)


def _tensor_accounting(model: ModelSpec, am: ActivationModel,
                       selective: bool) -> tuple[float, float, float]:
    """(kept whole by TP, split by TP, attention-core) bytes per ``s·b·h``.

    The table's 16-bit tensors are counted at ``2·e/2 = e`` bytes per element with
    ``e = am.element_bytes``; norm inputs at ``am.norm_bytes``, dropout masks at 1 and
    flash attention's statistics at 4, whatever ``e``.
    """
    s, h, a = model.seq_length, model.hidden_size, model.num_attention_heads
    e = am.element_bytes / 2.0  # the 16-bit table's tensors scaled to the run's type
    dropout = (model.mlp == "gpt") if am.dropout is None else am.dropout
    q = model.gqa_ratio
    if model.is_moe:
        f = (model.moe_ffn_hidden_size * model.moe_top_k
             + model.shared_ffn_hidden_size * model.num_shared_experts) / h
    else:
        f = model.ffn_hidden_size / h
    gated = model.mlp == "gated"
    # attention and MLP inputs, two norm inputs, two dropout masks (1 byte per element)
    replicated = 2.0 * e + 2.0 * e + 2.0 * am.norm_bytes + (2.0 if dropout else 0.0)
    if am.unfused_norm:  # each norm's x·rsqrt(mean x² + eps), kept by its weight multiply
        replicated += 2.0 * am.norm_bytes
    if not model.is_mla and model.attention_width == h:
        attention = (2.0 + 4.0 / q + 2.0) * e
    else:  # Q, K, V and the projection input at their real widths
        g, dqk, dv = model.num_kv_heads, model.qk_head_dim, model.value_head_dim
        attention = 2.0 * e * (a * dqk + g * dqk + g * dv + a * dv) / h
    if am.unfused_rotary and model.position_embedding == "rope":  # rotated Q and K
        attention += 2.0 * e * (a + model.num_kv_heads) * model.qk_head_dim / h
    mlp = (8.0 if gated else 4.0) * f * e
    if selective and "mlp_activation" in am.selective:
        mlp -= (4.0 if gated else 2.0) * f * e
    if am.flash_attention:
        s2 = 4.0 * a / h
    elif selective and "attention_core" in am.selective:
        s2 = 0.0
    else:  # softmax output, and with dropout its mask (1 byte) and output
        s2 = (2.0 * e + ((1.0 + 2.0 * e) if dropout else 0.0)) * a * s / h
    return replicated, attention + mlp, s2


def _row_name(tensor: bool, sequence: bool, selective: bool, accounting: str) -> str:
    """The seed-table row a configuration falls in, e.g. 'tensor parallel + selective'."""
    parts = ["tensor + sequence parallel" if sequence else "tensor parallel"] if tensor else []
    if selective:
        parts.append("selective recompute")
    name = " + ".join(parts) or "no parallelism"
    return name if accounting == "table" else f"{name} (tensor accounting)"


def activation_memory(model: ModelSpec, parallel: ParallelConfig, stage: int | None = None,
                      less_memory: bool = False,
                      activation_model: ActivationModel | None = None,
                      convention: str = "seed") -> ActivationBreakdown:
    """Activation bytes held by a pipeline stage at its peak.

    ``convention="seed"`` (default):
    ``total = Σ_chunks in_flight[chunk, stage] · layers_per_chunk · per_layer``, where
    fully recomputed layers (``parallel.recompute_layers``, or all with
    ``recompute="full"``) keep ``2sbh`` and the others the row of
    :func:`activation_per_layer` for ``parallel.recompute`` (with ``"full"`` and an
    explicit list, the layers not listed keep everything, as in ``hardware_flops``).
    In-flight micro-batches follow
    :func:`~perfkit.calc.pipeline.in_flight_micro_batches` (1F1B stage ``s`` holds
    ``p − s``; interleaving adds Megatron's ``1 + (p−1)/(p·v)`` on stage 0; capped at
    ``num_micro_batches``). With ``stage=None`` the stage with the largest total is
    reported. Embedding and loss activations are not included unless
    ``activation_model.logits_bytes`` is set: the last stage then adds its output layer and
    loss for one micro-batch (:func:`perfkit.calc.activation_output.output_bytes`, in
    ``extra_bytes``). ``activation_model`` chooses the per-layer accounting (default: the
    seed's table).

    ``"korthikanti"``, ``"megatron"`` and ``"llm-analysis"`` describe the first stage
    only (``stage`` must be None or 0; ``per_stage_bytes`` has that one value): see the
    module docstring for their formulas. ``parallel.cp`` splits the sequence.
    """
    model = as_model(model)
    parallel.validate(model)
    _check_convention(convention, activation_model, parallel.recompute_ops)
    if convention != "seed":
        if stage not in (None, 0):
            raise InvalidArgumentError("stage", f"the {convention!r} convention describes "
                                       "the first pipeline stage only", stage)
        return _first_stage_convention(model, parallel, activation_model, convention)
    p, v = parallel.pp, parallel.vpp
    mode = "selective" if parallel.recompute == "selective" else "none"
    per_layer, formula = activation_per_layer(model, parallel.micro_batch_size, parallel.tp,
                                              parallel.sequence_parallel, mode,
                                              activation_model, cp=parallel.cp,
                                              recompute_ops=parallel.recompute_ops)
    full_bytes, _ = activation_per_layer(model, parallel.micro_batch_size, parallel.tp,
                                         parallel.sequence_parallel, "full", activation_model,
                                         cp=parallel.cp)
    layers = parallel.layers_per_stage(model)
    full_layers = parallel.full_recompute_layers_per_stage(model)
    if parallel.recompute == "full" and parallel.recompute_layers is None:
        formula = "full recompute"
    inflight = in_flight_micro_batches(p, parallel.num_micro_batches, v, less_memory)
    totals = []
    for s in range(p):
        n, nf = layers[s], full_layers[s]
        avg_layer = ((n - nf) * per_layer + nf * full_bytes) / n
        totals.append(float(inflight[:, s].sum() * (n / v) * avg_layer))
    # the last stage's output layer and loss, one micro-batch (0 unless logits_bytes)
    am = activation_model or ActivationModel()
    output = output_bytes(model, parallel.micro_batch_size, parallel.tp,
                          parallel.sequence_parallel, parallel.cp,
                          logits_bytes=am.logits_bytes, norm_bytes=am.norm_bytes,
                          element_bytes=am.element_bytes, unfused_norm=am.unfused_norm)
    totals[-1] += output
    if stage is None:
        stage = int(np.argmax(totals))
    elif not 0 <= stage < p:
        raise InvalidArgumentError("stage", f"must be in 0..{p - 1}", stage)
    return ActivationBreakdown(
        formula=formula, per_layer_bytes=per_layer, full_recompute_layer_bytes=full_bytes,
        stage=stage, layers_on_stage=layers[stage], full_recompute_layers=full_layers[stage],
        in_flight=float(inflight[:, stage].sum() / v), total_bytes=totals[stage],
        per_stage_bytes=tuple(totals), extra_bytes=output if stage == p - 1 else 0.0)


def _first_stage_convention(model: ModelSpec, parallel: ParallelConfig,
                            activation_model: ActivationModel | None,
                            convention: str) -> ActivationBreakdown:
    p, v, L = parallel.pp, parallel.vpp, model.num_layers
    b, t, sp, cp = (parallel.micro_batch_size, parallel.tp, parallel.sequence_parallel,
                    parallel.cp)
    layers = parallel.layers_per_stage(model)[0]
    full_layers = parallel.full_recompute_layers_per_stage(model)[0]
    mode = "selective" if parallel.recompute == "selective" else "none"
    if convention == "megatron":
        parts = megatron_activation_bytes(model, parallel)
        per_layer = megatron_activation_per_layer(model, parallel)
        name = "megatron, SP + selective" if sp and parallel.recompute == "selective" \
            else "megatron, without SP (10 + 24/t) x 1.05"
        extra = (parts["embedding"] * parts["pipeline_factor"] + parts["output"]) \
            * parts["overhead_factor"]
        return ActivationBreakdown(
            formula=name, per_layer_bytes=per_layer, full_recompute_layer_bytes=per_layer,
            stage=0, layers_on_stage=layers, full_recompute_layers=0,
            in_flight=p * parts["pipeline_factor"], total_bytes=parts["total"],
            per_stage_bytes=(parts["total"],), convention=convention, extra_bytes=extra)
    if convention == "llm-analysis":
        am = ActivationModel.llm_analysis() if activation_model is None else activation_model
        rec = parallel.recompute if parallel.recompute_layers is None else mode
        kwargs = dict(flash_attention=am.flash_attention, softmax_dropout=bool(am.dropout),
                      layernorm_bytes=am.norm_bytes, cp=cp)
        per_layer = llm_analysis_activation_per_layer(model, b, t, sp, rec, ep=parallel.ep,
                                                      **kwargs)
        full = llm_analysis_activation_per_layer(model, b, t, sp, "full", ep=parallel.ep,
                                                 **kwargs)
        extra = llm_analysis_activation_extra(model, b, t, sp, rec, am.norm_bytes, cp)
        total = L * per_layer + extra
        return ActivationBreakdown(
            formula=f"llm-analysis, {rec}", per_layer_bytes=per_layer,
            full_recompute_layer_bytes=full, stage=0, layers_on_stage=layers,
            full_recompute_layers=full_layers if rec == "full" else 0, in_flight=float(p),
            total_bytes=total, per_stage_bytes=(total,), convention=convention,
            extra_bytes=extra)
    # Korthikanti et al. 2022: the first stage holds p micro-batches of L/p layers, i.e.
    # L layers' worth, times the interleaving factor (§4 and Fig. 1); no m cap.
    per_layer, formula = activation_per_layer(model, b, t, sp, mode, convention=convention,
                                              cp=cp, recompute_ops=parallel.recompute_ops)
    full_bytes, _ = activation_per_layer(model, b, t, sp, "full", convention=convention,
                                         cp=cp)
    if parallel.recompute == "full" and parallel.recompute_layers is None:
        formula = "full recompute"
    avg_layer = ((layers - full_layers) * per_layer + full_layers * full_bytes) / layers
    penalty = 1 + (p - 1) / (p * v) if v > 1 else 1.0
    total = p * layers * avg_layer * penalty
    return ActivationBreakdown(
        formula=formula, per_layer_bytes=per_layer, full_recompute_layer_bytes=full_bytes,
        stage=0, layers_on_stage=layers, full_recompute_layers=full_layers,
        in_flight=p * penalty, total_bytes=total, per_stage_bytes=(total,),
        convention=convention)
