"""FLOPs of a training step, MFU and HFU.

Conventions (all parameters, never hidden):

* Only GEMMs count, 2 FLOPs per multiply-add (``A(m,n) @ B(n,p)`` costs ``2mnp``).
  Softmax, norms and element-wise work are left out, as in every source below.
* Backward = 2 x forward (``dX`` and ``dW``), so fwd + bwd = 3 x forward.
* ``causal=False`` (default) counts the full ``s x s`` score matrix, as the papers and the
  seed guide do; ``causal=True`` halves the ``QK^T`` and ``score.V`` terms as Megatron-LM
  has done since 2025 (``training.py``, "causal mask"). Causal MFU is lower for the same run.
* ``convention="exact"`` (default) counts the model's real GEMMs (gated MLP, GQA, MoE,
  logits). ``convention="seed"`` is the seed guide's closed form
  ``72·b·L·s·h²·[corr + s/(6h) + v/(12hL)]`` with ``corr = (60 + 12/q)/72``, which
  assumes a ``4h`` two-GEMM MLP whatever the model has (+0.4 % for Llama2-7B's real MLP).

Sources: Narayanan et al. 2021 (eq. 3); Korthikanti et al. 2022 (App. A, Table 5);
MindSpore "Large Model Performance Optimization Guide" (perf_optimize.md, the seed);
Chowdhery et al. 2022 (PaLM, App. B, MFU/HFU). See docs/calculators.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..errors import check_choice, check_positive
from ..specs import Hardware, ModelSpec
from ._common import as_model, full_layer_count, peak_of

__all__ = [
    "layer_forward_flops",
    "flops_table",
    "forward_flops",
    "model_flops",
    "hardware_flops",
    "flops_per_token",
    "mfu",
    "hfu",
    "implied_peak_flops",
]

CONVENTIONS = ("exact", "seed")
SELECTIVE_MODES = ("strict", "korthikanti")


def layer_forward_flops(model: ModelSpec, causal: bool = False,
                        convention: str = "exact") -> dict[str, float]:
    """Forward FLOPs of one transformer layer *per token*, by part.

    Returns ``{"qkv", "core", "projection", "mlp", "router", "total"}``, with

    * ``qkv = 2h·(a + 2g)·d`` — seed: ``(2 + 4/q)·h²`` when ``a·d = h``;
    * ``core = 4·s·a·d`` (``QK^T`` and ``score·V``, 2·s·h each), halved if ``causal``;
    * ``projection = 2·(a·d)·h``;
    * ``mlp = 2·h·f·k`` with ``k = 2`` GEMMs (GPT) or 3 (gated), times ``moe_top_k`` for
      MoE; the ``"seed"`` convention uses ``16h²`` (a ``4h`` GPT MLP) instead;
    * ``router = 2·h·E`` for MoE.
    """
    model = as_model(model)
    check_choice("convention", convention, CONVENTIONS)
    h, s = model.hidden_size, model.seq_length
    qw, kvw = model.attention_width, model.kv_width
    qkv = 2.0 * h * (qw + 2 * kvw)
    core = 4.0 * s * qw * (0.5 if causal else 1.0)
    projection = 2.0 * qw * h
    if convention == "seed":
        mlp, router = 16.0 * h * h, 0.0
    else:
        gemms = 3 if model.mlp == "gated" else 2
        f = model.moe_ffn_hidden_size if model.is_moe else model.ffn_hidden_size
        mlp = 2.0 * gemms * h * f * (model.moe_top_k if model.is_moe else 1)
        router = 2.0 * h * model.num_experts if model.is_moe else 0.0
    total = qkv + core + projection + mlp + router
    return {"qkv": qkv, "core": core, "projection": projection, "mlp": mlp,
            "router": router, "total": total}


def _logits_forward_per_token(model: ModelSpec) -> float:
    return 2.0 * model.hidden_size * model.vocab_size


def flops_table(model: ModelSpec, micro_batch_size: int = 1,
                causal: bool = False) -> pd.DataFrame:
    """The seed's module-by-module FLOPs table for one micro-batch of ``b`` sequences.

    Columns: ``part`` (attention / mlp / lm_head), ``module``, ``gemm`` (the shapes
    multiplied), ``per`` ("layer" or "model"), ``forward_flops`` (of one layer or of the
    model head, for ``b·s`` tokens), ``fwd_bwd_flops`` (3 x forward) and ``formula``
    (the closed form in the seed's notation). For the seed's GPT layer the rows sum to
    ``(20 + 4/q)·b·s·h² + 4·b·s²·h`` per layer plus ``2·b·s·h·v`` for the head.
    """
    model = as_model(model)
    b = check_positive("micro_batch_size", micro_batch_size)
    h, s, v = model.hidden_size, model.seq_length, model.vocab_size
    a, g, d = model.num_attention_heads, model.num_kv_heads, model.head_dim
    f = model.moe_ffn_hidden_size if model.is_moe else model.ffn_hidden_size
    causal_factor = 0.5 if causal else 1.0
    k = model.moe_top_k if model.is_moe else 1
    rows = [
        ("attention", "query, key, value", f"[{b},{s},{h}] x [{h},{(a + 2 * g) * d}]",
         2 * b * s * h * (a + 2 * g) * d, "(2+4/q)·b·s·h²"),
        ("attention", "QK^T", f"[{b},{a},{s},{d}] x [{b},{a},{d},{s}]",
         2 * b * a * s * s * d * causal_factor, "2·b·s²·h" + (" / 2 (causal)" if causal else "")),
        ("attention", "score·V", f"[{b},{a},{s},{s}] x [{b},{a},{s},{d}]",
         2 * b * a * s * s * d * causal_factor, "2·b·s²·h" + (" / 2 (causal)" if causal else "")),
        ("attention", "attention projection", f"[{b},{s},{a * d}] x [{a * d},{h}]",
         2 * b * s * a * d * h, "2·b·s·h²"),
    ]
    moe = f" x top-{k}" if model.is_moe else ""
    rows.append(("mlp", "MLP mapping", f"[{b},{s},{h}] x [{h},{f}]{moe}", 2 * b * s * h * f * k,
                 "2·b·s·h·ĥ" if model.mlp == "gated" else "2·b·s·h·f (8·b·s·h² for f=4h)"))
    if model.mlp == "gated":
        rows.append(("mlp", "MLP gate", f"[{b},{s},{h}] x [{h},{f}]{moe}", 2 * b * s * h * f * k,
                     "2·b·s·h·ĥ"))
    rows.append(("mlp", "MLP projection", f"[{b},{s},{f}] x [{f},{h}]{moe}",
                 2 * b * s * f * h * k,
                 "2·b·s·h·ĥ" if model.mlp == "gated" else "2·b·s·h·f (8·b·s·h² for f=4h)"))
    if model.is_moe:
        rows.append(("mlp", "router", f"[{b},{s},{h}] x [{h},{model.num_experts}]",
                     2 * b * s * h * model.num_experts, "2·b·s·h·E"))
    table = pd.DataFrame(rows, columns=["part", "module", "gemm", "forward_flops", "formula"])
    table.insert(3, "per", "layer")
    head = pd.DataFrame([{"part": "lm_head", "module": "lmHead projection",
                          "gemm": f"[{b},{s},{h}] x [{h},{v}]", "per": "model",
                          "forward_flops": 2 * b * s * h * v, "formula": "2·b·s·h·v"}])
    table = pd.concat([table, head], ignore_index=True)
    table["forward_flops"] = table["forward_flops"].astype("float64")
    table["fwd_bwd_flops"] = 3.0 * table["forward_flops"]
    return table


def forward_flops(model: ModelSpec, tokens: float, causal: bool = False,
                  convention: str = "exact") -> float:
    """Forward FLOPs for ``tokens`` tokens: ``tokens·(L·layer + 2·h·V)``."""
    model = as_model(model)
    tokens = check_positive("tokens", tokens)
    layer = layer_forward_flops(model, causal, convention)["total"]
    return tokens * (model.num_layers * layer + _logits_forward_per_token(model))


def model_flops(model: ModelSpec, tokens: float, causal: bool = False,
                convention: str = "exact") -> float:
    """Model FLOPs (fwd + bwd, no recompute) for ``tokens`` tokens: 3 x forward.

    With ``convention="seed"`` and ``tokens = b·s`` this is the seed's
    ``72·b·L·s·h²·[corr + s/(6h) + v/(12hL)]``; for GPT-3 175B it equals Narayanan/
    Korthikanti's ``72·B·s·L·h²·(1 + s/(6h) + V/(12hL))`` exactly.
    """
    return 3.0 * forward_flops(model, tokens, causal, convention)


def hardware_flops(model: ModelSpec, tokens: float, recompute: str = "none",
                   selective_mode: str = "strict", causal: bool = False,
                   full_recompute_layers: int | Sequence[int] | None = None,
                   convention: str = "exact") -> float:
    """FLOPs the hardware executes, recompute included, for ``tokens`` tokens.

    ``model_flops`` plus, per token:

    * each fully recomputed layer: one more layer forward (the logits are never
      recomputed) — the seed's ``4/3·corr + 4/3·s/(6h)`` and Narayanan's eq. (3);
    * each selectively recomputed layer, ``selective_mode="strict"``: one more forward of
      the attention core, ``4·s·h`` — the seed's ``4/3·s/(6h)`` term;
      ``"korthikanti"``: ``12·s·h``, the only accounting that reproduces the HFU values of
      Korthikanti et al. 2022, Table 5 (``1 + s/(3h)``). Beware: when three attention-core
      forwards outweigh a layer's forward (``s > 3h`` for a GPT layer) this convention
      counts more for selective than for full recompute, as the paper's formulas do.

    ``recompute``: ``"none"``, ``"selective"`` (every layer not fully recomputed is
    selective) or ``"full"``. ``full_recompute_layers``: how many layers *of the whole
    model* are fully recomputed, or a per-stage list that is summed (note that
    ``ParallelConfig.recompute_layers`` given as an int counts *per stage*: pass
    ``parallel.full_recompute_layers_per_stage(model)``); default all layers for
    ``"full"``, none otherwise.
    """
    model = as_model(model)
    check_choice("recompute", recompute, ("none", "selective", "full"))
    check_choice("selective_mode", selective_mode, SELECTIVE_MODES)
    base = model_flops(model, tokens, causal, convention)
    parts = layer_forward_flops(model, causal, convention)
    full = full_layer_count(model, recompute, full_recompute_layers)
    selective = model.num_layers - full if recompute == "selective" else 0
    core_extra = parts["core"] * (1.0 if selective_mode == "strict" else 3.0)
    return base + tokens * (full * parts["total"] + selective * core_extra)


def flops_per_token(model: ModelSpec, causal: bool = False, convention: str = "exact") -> float:
    """Model FLOPs (fwd + bwd) per token: ``model_flops(model, 1)``."""
    return model_flops(model, 1, causal, convention)


def mfu(model: ModelSpec, tokens_per_second_per_device: float,
        peak_flops: float | Hardware, causal: bool = False, dtype: str | None = None,
        convention: str = "exact") -> float:
    """Model FLOPs utilisation, a fraction in [0, ∞).

    ``MFU = flops_per_token · tokens/s per device / peak`` — the same as the seed's
    ``FLOPs / (StepTime · HardwareCapacity)`` with FLOPs per device per step (PaLM App. B;
    Korthikanti §6.3). ``peak_flops`` is FLOP/s or a :class:`Hardware` (its ``dtype``).
    ``tokens_per_second_per_device`` must be per *device*: divide by all devices, not by
    the data-parallel size (see :func:`~perfkit.calc.throughput.tokens_per_second_per_device`).
    """
    tps = check_positive("tokens_per_second_per_device", tokens_per_second_per_device)
    return flops_per_token(model, causal, convention) * tps / peak_of(peak_flops, dtype)


def hfu(model: ModelSpec, tokens_per_second_per_device: float,
        peak_flops: float | Hardware, recompute: str = "none",
        selective_mode: str = "strict", causal: bool = False,
        full_recompute_layers: int | Sequence[int] | None = None, dtype: str | None = None,
        convention: str = "exact") -> float:
    """Hardware FLOPs utilisation: like :func:`mfu` with recompute FLOPs counted.

    See :func:`hardware_flops` for ``recompute``, ``selective_mode`` and
    ``full_recompute_layers``.
    """
    tps = check_positive("tokens_per_second_per_device", tokens_per_second_per_device)
    per_token = hardware_flops(model, 1, recompute, selective_mode, causal, full_recompute_layers,
                               convention)
    return per_token * tps / peak_of(peak_flops, dtype)


def implied_peak_flops(model: ModelSpec, tokens_per_second_per_device: float,
                       mfu_value: float, causal: bool = False,
                       convention: str = "exact") -> float:
    """The device peak FLOP/s that a published (throughput, MFU) pair implies.

    ``peak = flops_per_token · tokens/s per device / MFU``. Use it to find which peak
    a paper or guide divided by.
    """
    tps = check_positive("tokens_per_second_per_device", tokens_per_second_per_device)
    value = check_positive("mfu_value", mfu_value)
    return flops_per_token(model, causal, convention) * tps / value
