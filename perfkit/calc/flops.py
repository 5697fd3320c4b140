"""FLOPs of a training step, MFU and HFU.

Conventions (all parameters, never hidden):

* Only GEMMs count, 2 FLOPs per multiply-add (``A(m,n) @ B(n,p)`` costs ``2mnp``).
  Softmax, norms and element-wise work are left out, as in every source below.
* Backward = 2 x forward (``dX`` and ``dW``), so fwd + bwd = 3 x forward.
* ``causal=False`` (default) counts the full ``s x s`` score matrix, as the papers and the
  seed guide do; ``causal=True`` halves the ``QK^T`` and ``score.V`` terms as Megatron-LM
  has done since 2025 (``training.py``, "causal mask"). Causal MFU is lower for the same run.
* ``convention`` says how the FLOPs are counted:

  - ``"exact"`` (default): the model's real GEMMs (gated MLP, GQA, MLA, MoE routed and
    shared experts, dense-first layers, router, logits);
  - ``"seed"``: the seed guide's closed form ``72·b·L·s·h²·[corr + s/(6h) + v/(12hL)]``
    with ``corr = (60 + 12/q)/72``, which assumes a ``4h`` two-GEMM MLP whatever the model
    has (+0.4 % for Llama2-7B's real MLP);
  - ``"6N"``: the parameter count, ``6N`` per token (``2N`` forward), the "C = 6ND" of
    Kaplan et al. 2020 and EleutherAI's Transformer Math 101; full recompute makes it
    ``8N`` (:func:`hardware_flops`);
  - ``"palm"``: PaLM's App. B, ``6N + 12·L·H·Q·T`` per token (``H`` heads, ``Q`` head size,
    ``T`` sequence length: the attention-core GEMMs the parameter count misses).

  ``N`` is the number of parameters a token touches: ``model.num_parameters()`` for a dense
  model (embedding included, as PaLM counts it), ``model.num_active_parameters()`` for a
  MoE; ``num_parameters=`` replaces it for models whose parameters are not all in the
  layer table (extra position weights, adapters) or to use a published figure.
* ``count_router=False`` leaves out the MoE router GEMM (``2·h·E`` per token and MoE
  layer), as Megatron-LM's ``num_floating_point_operations`` does.

Sources: Narayanan et al. 2021 (eq. 3); Korthikanti et al. 2022 (App. A, Table 5);
MindSpore "Large Model Performance Optimization Guide" (perf_optimize.md, the seed);
Chowdhery et al. 2022 (PaLM, App. B, MFU/HFU and ``6N + 12LHQT``); Megatron-LM
``megatron/training/training.py`` ``num_floating_point_operations`` (MoE without router).
See docs/calculators.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..errors import InvalidArgumentError, check_choice, check_positive
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
    "forward_flops_from_widths",
]

#: FLOPs conventions: per-GEMM counts first, then the parameter-count ones.
CONVENTIONS = ("exact", "seed", "6N", "palm")
_PARAMETER_CONVENTIONS = ("6N", "palm")
SELECTIVE_MODES = ("strict", "korthikanti")
LAYER_KINDS = ("average", "dense", "moe")


def _attention_parts(model: ModelSpec, causal: bool) -> tuple[float, float, float]:
    """Forward FLOPs per token of (QKV projections, attention core, output projection)."""
    h, s = model.hidden_size, model.seq_length
    if model.is_mla:
        a, dqk, dv = model.num_attention_heads, model.qk_head_dim, model.value_head_dim
        rank_q, rank_kv = model.q_lora_rank, model.kv_lora_rank
        q_weights = h * a * dqk if rank_q is None else h * rank_q + rank_q * a * dqk
        kv_weights = h * (rank_kv + model.qk_rope_head_dim) \
            + rank_kv * a * (model.head_dim + dv)
        qkv = 2.0 * (q_weights + kv_weights)
        core = 2.0 * s * a * (dqk + dv) * (0.5 if causal else 1.0)
        return qkv, core, 2.0 * a * dv * h
    qw, kvw = model.attention_width, model.kv_width
    qkv = 2.0 * h * (qw + 2 * kvw)
    core = 4.0 * s * qw * (0.5 if causal else 1.0)
    return qkv, core, 2.0 * qw * h


def _layer_parts(model: ModelSpec, causal: bool, convention: str, count_router: bool,
                 moe: bool) -> dict[str, float]:
    h = model.hidden_size
    qkv, core, projection = _attention_parts(model, causal)
    experts = 0.0
    if convention == "seed":
        mlp, router = 16.0 * h * h, 0.0
    elif moe:
        gemms = 3 if model.mlp == "gated" else 2
        experts = 2.0 * gemms * h * model.moe_ffn_hidden_size * model.moe_top_k
        mlp = experts
        if model.num_shared_experts:
            mlp += 2.0 * gemms * h * model.shared_ffn_hidden_size \
                * model.num_shared_experts
        router = 2.0 * h * model.num_experts if count_router else 0.0
    else:
        gemms = 3 if model.mlp == "gated" else 2
        mlp, router = 2.0 * gemms * h * model.ffn_hidden_size, 0.0
    total = qkv + core + projection + mlp + router
    return {"qkv": qkv, "core": core, "projection": projection, "mlp": mlp,
            "router": router, "experts": experts, "total": total}


def _check_convention(convention: str, num_parameters: float | None) -> None:
    check_choice("convention", convention, CONVENTIONS)
    if num_parameters is not None and convention not in _PARAMETER_CONVENTIONS:
        raise InvalidArgumentError("num_parameters", "is used only by the parameter-count "
                                   "conventions '6N' and 'palm'", num_parameters)


def layer_forward_flops(model: ModelSpec, causal: bool = False, convention: str = "exact",
                        count_router: bool = True, layer: str = "average") -> dict[str, float]:
    """Forward FLOPs of one transformer layer *per token*, by part.

    Returns ``{"qkv", "core", "projection", "mlp", "router", "experts", "total"}``, with

    * ``qkv = 2h·(a + 2g)·d`` — seed: ``(2 + 4/q)·h²`` when ``a·d = h``; with MLA the
      low-rank query and key/value projections (``2·`` their weights);
    * ``core = 4·s·a·d`` (``QK^T`` and ``score·V``, 2·s·h each), halved if ``causal``;
      MLA: ``2·s·a·(d + d_r) + 2·s·a·d_v``;
    * ``projection = 2·(a·d_v)·h``;
    * ``mlp = 2·h·f·k`` with ``k = 2`` GEMMs (GPT) or 3 (gated); for a MoE layer the
      ``moe_top_k`` routed experts of ``moe_ffn_hidden_size`` plus every shared expert;
      the ``"seed"`` convention uses ``16h²`` (a ``4h`` GPT MLP) instead;
    * ``router = 2·h·E`` for a MoE layer (0 with ``count_router=False``, as Megatron);
    * ``experts``: the routed-expert part of ``mlp`` (what expert parallelism moves).

    ``layer``: ``"moe"`` or ``"dense"`` for one kind of layer; ``"average"`` (default) the
    mean over the model's layers (``first_dense_layers`` dense ones and the MoE rest),
    which is every layer for a model whose layers are all alike. The parameter-count
    conventions have no per-layer parts: use :func:`forward_flops` with them.
    """
    model = as_model(model)
    check_choice("convention", convention, CONVENTIONS)
    check_choice("layer", layer, LAYER_KINDS)
    if convention in _PARAMETER_CONVENTIONS:
        raise InvalidArgumentError("convention", "a parameter-count convention has no "
                                   "per-layer parts; use forward_flops or model_flops",
                                   convention)
    if not model.is_moe or layer == "dense":
        return _layer_parts(model, causal, convention, count_router, False)
    if layer == "moe" or not model.first_dense_layers:
        return _layer_parts(model, causal, convention, count_router, True)
    dense = _layer_parts(model, causal, convention, count_router, False)
    moe = _layer_parts(model, causal, convention, count_router, True)
    nd, L = model.first_dense_layers, model.num_layers
    return {k: (nd * dense[k] + (L - nd) * moe[k]) / L for k in dense}


def _layers_forward(model: ModelSpec, causal: bool, convention: str,
                    count_router: bool) -> float:
    """Forward FLOPs per token of all the transformer layers."""
    if model.is_moe and model.first_dense_layers:
        nd = model.first_dense_layers
        dense = _layer_parts(model, causal, convention, count_router, False)["total"]
        moe = _layer_parts(model, causal, convention, count_router, True)["total"]
        return nd * dense + (model.num_layers - nd) * moe
    layer = _layer_parts(model, causal, convention, count_router, model.is_moe)["total"]
    return model.num_layers * layer


def _logits_forward_per_token(model: ModelSpec) -> float:
    return 2.0 * model.hidden_size * model.vocab_size


def _parameter_count(model: ModelSpec, num_parameters: float | None) -> float:
    if num_parameters is not None:
        return float(check_positive("num_parameters", num_parameters))
    return float(model.num_active_parameters() if model.is_moe else model.num_parameters())


def _core_all_layers(model: ModelSpec, causal: bool) -> float:
    """Attention-core forward FLOPs per token of all layers: PaLM's ``4·L·H·Q·T``."""
    return model.num_layers * _attention_parts(model, causal)[1]


def flops_table(model: ModelSpec, micro_batch_size: int = 1, causal: bool = False,
                count_router: bool = True) -> pd.DataFrame:
    """The seed's module-by-module FLOPs table for one micro-batch of ``b`` sequences.

    Columns: ``part`` (attention / mlp / lm_head), ``module``, ``gemm`` (the shapes
    multiplied), ``per`` ("layer", "model", and for a MoE model with dense first layers
    "MoE layer" / "dense layer"), ``forward_flops`` (of one layer or of the model head,
    for ``b·s`` tokens), ``fwd_bwd_flops`` (3 x forward) and ``formula`` (the closed form
    in the seed's notation). For the seed's GPT layer the rows sum to
    ``(20 + 4/q)·b·s·h² + 4·b·s²·h`` per layer plus ``2·b·s·h·v`` for the head.
    """
    model = as_model(model)
    b = check_positive("micro_batch_size", micro_batch_size)
    h, s, v = model.hidden_size, model.seq_length, model.vocab_size
    a, g, d = model.num_attention_heads, model.num_kv_heads, model.head_dim
    f = model.moe_ffn_hidden_size if model.is_moe else model.ffn_hidden_size
    causal_factor = 0.5 if causal else 1.0
    k = model.moe_top_k if model.is_moe else 1
    causal_note = " / 2 (causal)" if causal else ""
    if model.is_mla:
        qkv, core, projection = _attention_parts(model, causal)
        dqk, dv = model.qk_head_dim, model.value_head_dim
        rows = [
            ("attention", "query, key, value (MLA)",
             f"latent ranks q {model.q_lora_rank}, kv {model.kv_lora_rank}", b * s * qkv,
             "2·b·s·(MLA projection weights)"),
            ("attention", "QK^T", f"[{b},{a},{s},{dqk}] x [{b},{a},{dqk},{s}]",
             2 * b * a * s * s * dqk * causal_factor, "2·b·s²·a·(d+d_r)" + causal_note),
            ("attention", "score·V", f"[{b},{a},{s},{s}] x [{b},{a},{s},{dv}]",
             2 * b * a * s * s * dv * causal_factor, "2·b·s²·a·d_v" + causal_note),
            ("attention", "attention projection", f"[{b},{s},{a * dv}] x [{a * dv},{h}]",
             b * s * projection, "2·b·s·a·d_v·h"),
        ]
    else:
        rows = [
            ("attention", "query, key, value", f"[{b},{s},{h}] x [{h},{(a + 2 * g) * d}]",
             2 * b * s * h * (a + 2 * g) * d, "(2+4/q)·b·s·h²"),
            ("attention", "QK^T", f"[{b},{a},{s},{d}] x [{b},{a},{d},{s}]",
             2 * b * a * s * s * d * causal_factor, "2·b·s²·h" + causal_note),
            ("attention", "score·V", f"[{b},{a},{s},{s}] x [{b},{a},{s},{d}]",
             2 * b * a * s * s * d * causal_factor, "2·b·s²·h" + causal_note),
            ("attention", "attention projection", f"[{b},{s},{a * d}] x [{a * d},{h}]",
             2 * b * s * a * d * h, "2·b·s·h²"),
        ]
    pers = ["layer"] * len(rows)
    mixed = model.is_moe and model.first_dense_layers > 0
    mlp_per = "MoE layer" if mixed else "layer"
    moe = f" x top-{k}" if model.is_moe else ""
    gated = model.mlp == "gated"
    names = ("MLP mapping", "MLP gate", "MLP projection") if gated \
        else ("MLP mapping", "MLP projection")
    closed = "2·b·s·h·ĥ" if gated else "2·b·s·h·f (8·b·s·h² for f=4h)"
    for name in names:
        shape = f"[{b},{s},{f}] x [{f},{h}]" if name == "MLP projection" \
            else f"[{b},{s},{h}] x [{h},{f}]"
        rows.append(("mlp", name, shape + moe, 2 * b * s * h * f * k, closed))
        pers.append(mlp_per)
    if model.is_moe and model.num_shared_experts:
        fs, ns = model.shared_ffn_hidden_size, model.num_shared_experts
        for name in names:
            rows.append(("mlp", f"shared experts: {name}", f"[{b},{s},{h}] x [{h},{fs}]"
                         f" x {ns}", 2 * b * s * h * fs * ns, "2·b·s·h·f_shared"))
            pers.append(mlp_per)
    if model.is_moe and count_router:
        rows.append(("mlp", "router", f"[{b},{s},{h}] x [{h},{model.num_experts}]",
                     2 * b * s * h * model.num_experts, "2·b·s·h·E"))
        pers.append(mlp_per)
    if mixed:
        fd = model.ffn_hidden_size
        for name in names:
            rows.append(("mlp", f"dense {name}", f"[{b},{s},{h}] x [{h},{fd}]",
                         2 * b * s * h * fd, closed))
            pers.append("dense layer")
    table = pd.DataFrame(rows, columns=["part", "module", "gemm", "forward_flops", "formula"])
    table.insert(3, "per", pers)
    head = pd.DataFrame([{"part": "lm_head", "module": "lmHead projection",
                          "gemm": f"[{b},{s},{h}] x [{h},{v}]", "per": "model",
                          "forward_flops": 2 * b * s * h * v, "formula": "2·b·s·h·v"}])
    table = pd.concat([table, head], ignore_index=True)
    table["forward_flops"] = table["forward_flops"].astype("float64")
    table["fwd_bwd_flops"] = 3.0 * table["forward_flops"]
    return table


def forward_flops(model: ModelSpec, tokens: float, causal: bool = False,
                  convention: str = "exact", count_router: bool = True,
                  num_parameters: float | None = None) -> float:
    """Forward FLOPs for ``tokens`` tokens.

    Per-GEMM conventions: ``tokens·(Σ_layers layer_total + 2·h·V)``. ``"6N"``:
    ``tokens·2N``; ``"palm"``: ``tokens·(2N + 4·L·H·Q·T)`` (halved core with ``causal``).
    """
    model = as_model(model)
    _check_convention(convention, num_parameters)
    tokens = check_positive("tokens", tokens)
    if convention in _PARAMETER_CONVENTIONS:
        per_token = 2.0 * _parameter_count(model, num_parameters)
        if convention == "palm":
            per_token += _core_all_layers(model, causal)
        return tokens * per_token
    layers = _layers_forward(model, causal, convention, count_router)
    return tokens * (layers + _logits_forward_per_token(model))


def forward_flops_from_widths(tokens: float, num_layers: int, hidden_size: int,
                              attention_width: int, kv_width: int, ffn_hidden_size: int,
                              vocab_size: int, seq_length: int, mlp: str = "gated",
                              causal: bool = False) -> float:
    """Forward FLOPs of a dense decoder whose head count is unknown, from its widths.

    The ``"exact"`` convention of :func:`forward_flops` needs the heads only through the
    projection widths: ``a·d`` (query, ``attention_width``) and ``g·d`` (key/value,
    ``kv_width``). A profile in BSH / SBH layout shows those widths but not how they split into
    heads, so this is the same count without :class:`~perfkit.specs.ModelSpec`::

        per layer and token: 2h·(a·d + 2·g·d) + 4·s·a·d·(½ if causal) + 2·a·d·h
                             + 2·k·h·f   (k = 3 gated, 2 GPT)
        total = tokens · (L · per_layer + 2·h·V)

    Equal to ``forward_flops(model, tokens, causal)`` of any dense model with those widths
    (tests/test_flops.py checks it on presets).
    """
    for name, value in (("num_layers", num_layers), ("hidden_size", hidden_size),
                        ("attention_width", attention_width), ("kv_width", kv_width),
                        ("ffn_hidden_size", ffn_hidden_size), ("vocab_size", vocab_size),
                        ("seq_length", seq_length)):
        check_positive(name, value)
    check_choice("mlp", mlp, ("gated", "gpt"))
    tokens = check_positive("tokens", tokens)
    h, qw, kvw = float(hidden_size), float(attention_width), float(kv_width)
    per_layer = (2.0 * h * (qw + 2 * kvw) + 4.0 * seq_length * qw * (0.5 if causal else 1.0)
                 + 2.0 * qw * h + 2.0 * (3 if mlp == "gated" else 2) * h * ffn_hidden_size)
    return tokens * (num_layers * per_layer + 2.0 * h * vocab_size)


def model_flops(model: ModelSpec, tokens: float, causal: bool = False,
                convention: str = "exact", count_router: bool = True,
                num_parameters: float | None = None) -> float:
    """Model FLOPs (fwd + bwd, no recompute) for ``tokens`` tokens: 3 x forward.

    With ``convention="seed"`` and ``tokens = b·s`` this is the seed's
    ``72·b·L·s·h²·[corr + s/(6h) + v/(12hL)]``; for GPT-3 175B it equals Narayanan/
    Korthikanti's ``72·B·s·L·h²·(1 + s/(6h) + V/(12hL))`` exactly. ``"6N"`` gives
    ``6N`` per token, ``"palm"`` PaLM's ``6N + 12·L·H·Q·T``.
    """
    return 3.0 * forward_flops(model, tokens, causal, convention, count_router,
                               num_parameters)


def hardware_flops(model: ModelSpec, tokens: float, recompute: str = "none",
                   selective_mode: str = "strict", causal: bool = False,
                   full_recompute_layers: int | Sequence[int] | None = None,
                   convention: str = "exact", count_router: bool = True,
                   num_parameters: float | None = None, selective_core: bool = True) -> float:
    """FLOPs the hardware executes, recompute included, for ``tokens`` tokens.

    ``model_flops`` plus, per token:

    * each fully recomputed layer: one more layer forward (the logits are never
      recomputed) — the seed's ``4/3·corr + 4/3·s/(6h)`` and Narayanan's eq. (3); with
      dense-first MoE models the average layer (:func:`layer_forward_flops`). Under the
      parameter-count conventions a fully recomputed layer repeats ``1/L`` of the whole
      forward, so full recompute of every layer gives ``8N`` per token for ``"6N"``
      (Transformer Math 101) and ``8N + 16·L·H·Q·T`` for ``"palm"``;
    * each selectively recomputed layer, ``selective_mode="strict"``: one more forward of
      the attention core, ``4·s·h`` — the seed's ``4/3·s/(6h)`` term;
      ``"korthikanti"``: ``12·s·h``, the only accounting that reproduces the HFU values of
      Korthikanti et al. 2022, Table 5 (``1 + s/(3h)``). Beware: when three attention-core
      forwards outweigh a layer's forward (``s > 3h`` for a GPT layer) this convention
      counts more for selective than for full recompute, as the paper's formulas do.
      ``"6N"`` has no attention-core term, so selective recompute adds nothing there.

    ``recompute``: ``"none"``, ``"selective"`` (every layer not fully recomputed is
    selective) or ``"full"``. ``full_recompute_layers``: how many layers *of the whole
    model* are fully recomputed, or a per-stage list that is summed (note that
    ``ParallelConfig.recompute_layers`` given as an int counts *per stage*: pass
    ``parallel.full_recompute_layers_per_stage(model)``); default all layers for
    ``"full"``, none otherwise.

    ``selective_core``: whether a selectively recomputed layer runs its attention core
    again (Korthikanti's selective recompute, the default). Pass False where selective
    recompute redoes element-wise work only: the MLP activation (SiLU and Mul, the
    seed's ``select_recompute``), or an attention that is fused (flash: it keeps no
    ``s²`` tensors to drop). Element-wise work adds no matrix FLOPs, so such layers add
    nothing; :attr:`perfkit.ActivationModel.recomputes_attention_core` says which a job's
    accounting is.
    """
    model = as_model(model)
    check_choice("recompute", recompute, ("none", "selective", "full"))
    check_choice("selective_mode", selective_mode, SELECTIVE_MODES)
    base = model_flops(model, tokens, causal, convention, count_router, num_parameters)
    full = full_layer_count(model, recompute, full_recompute_layers)
    selective = model.num_layers - full if recompute == "selective" and selective_core else 0
    factor = 1.0 if selective_mode == "strict" else 3.0
    if convention in _PARAMETER_CONVENTIONS:
        core = _attention_parts(model, causal)[1] if convention == "palm" else 0.0
        forward = forward_flops(model, 1, causal, convention, count_router, num_parameters)
        return base + tokens * (full / model.num_layers * forward
                                + selective * core * factor)
    parts = layer_forward_flops(model, causal, convention, count_router)
    core_extra = parts["core"] * factor
    return base + tokens * (full * parts["total"] + selective * core_extra)


def flops_per_token(model: ModelSpec, causal: bool = False, convention: str = "exact",
                    count_router: bool = True, num_parameters: float | None = None) -> float:
    """Model FLOPs (forward + backward) per token: ``model_flops(model, 1)``, i.e.
    ``3 · forward FLOPs per token`` (the backward twice the forward), the forward counting
    every matrix product ``2·m·n·k`` of a layer, the attention's ``s × s`` products
    (halved with ``causal``) and the output head (Narayanan et al. 2021, eq. 3, without
    recompute; Chinchilla's ``6N`` is ``convention="6N"``). See the module docstring."""
    return model_flops(model, 1, causal, convention, count_router, num_parameters)


def mfu(model: ModelSpec, tokens_per_second_per_device: float,
        peak_flops: float | Hardware, causal: bool = False, dtype: str | None = None,
        convention: str = "exact", count_router: bool = True,
        num_parameters: float | None = None) -> float:
    """Model FLOPs utilisation, a fraction in [0, ∞).

    ``MFU = flops_per_token · tokens/s per device / peak`` — the same as the seed's
    ``FLOPs / (StepTime · HardwareCapacity)`` with FLOPs per device per step (PaLM App. B;
    Korthikanti §6.3). ``peak_flops`` is FLOP/s or a :class:`Hardware` (its ``dtype``).
    ``tokens_per_second_per_device`` must be per *device*: divide by all devices, not by
    the data-parallel size (see :func:`~perfkit.calc.throughput.tokens_per_second_per_device`).
    ``convention``, ``count_router``, ``num_parameters``: see the module docstring (PaLM's
    own MFU is ``convention="palm"``).
    """
    tps = check_positive("tokens_per_second_per_device", tokens_per_second_per_device)
    per_token = flops_per_token(model, causal, convention, count_router, num_parameters)
    return per_token * tps / peak_of(peak_flops, dtype)


def hfu(model: ModelSpec, tokens_per_second_per_device: float,
        peak_flops: float | Hardware, recompute: str = "none",
        selective_mode: str = "strict", causal: bool = False,
        full_recompute_layers: int | Sequence[int] | None = None, dtype: str | None = None,
        convention: str = "exact", count_router: bool = True,
        num_parameters: float | None = None, selective_core: bool = True) -> float:
    """Hardware FLOPs utilisation: like :func:`mfu` with recompute FLOPs counted.

    ``HFU = hardware_flops(model, 1, ...) · tokens/s per device / peak``: the FLOPs the
    devices run, the forward of every recomputed layer (or selectively recomputed part)
    added to :func:`flops_per_token` (PaLM, Chowdhery et al. 2022, App. B; Korthikanti et
    al. 2022, §6.3 and Table 5). See :func:`hardware_flops` for ``recompute``,
    ``selective_mode``, ``full_recompute_layers`` and ``selective_core``.
    """
    tps = check_positive("tokens_per_second_per_device", tokens_per_second_per_device)
    per_token = hardware_flops(model, 1, recompute, selective_mode, causal, full_recompute_layers,
                               convention, count_router, num_parameters, selective_core)
    return per_token * tps / peak_of(peak_flops, dtype)


def implied_peak_flops(model: ModelSpec, tokens_per_second_per_device: float,
                       mfu_value: float, causal: bool = False,
                       convention: str = "exact", count_router: bool = True,
                       num_parameters: float | None = None) -> float:
    """The device peak FLOP/s that a published (throughput, MFU) pair implies.

    ``peak = flops_per_token · tokens/s per device / MFU`` (:func:`mfu` solved for the
    peak; the FLOPs as :func:`flops_per_token`, Narayanan et al. 2021). Use it to find
    which peak a paper or guide divided by: the seed's Llama2-13B case (2,562 tokens/s
    per device at MFU 55.4 %) implies about 400 TFLOP/s.
    """
    tps = check_positive("tokens_per_second_per_device", tokens_per_second_per_device)
    value = check_positive("mfu_value", mfu_value)
    per_token = flops_per_token(model, causal, convention, count_router, num_parameters)
    return per_token * tps / value
