"""The operators whose input shapes tell the model, read from the canonical tables.

:func:`shape_records` keeps the operators a reader needs (attention, matrix products,
embeddings, loss, norms, activations, rotary, MoE), each with its kind, shapes, data types
and whether it runs in the backward pass; :func:`parse_shapes` reads a shapes text.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._frames import collect, is_lazy_frame, table_columns
from .._util import distinct_rows, table

__all__ = ["shape_records", "parse_shapes", "DTYPE_NAMES", "ATTENTION_PATTERNS",
           "FUSED_ATTENTION", "VLLM_ATTENTION", "EXPANDED_SOFTMAX_BACKWARD",
           "with_expanded_softmax_backward"]

#: Input data types as the profilers write them -> the calculators' dtype names.
DTYPE_NAMES = {
    "dt_bf16": "bf16", "bf16": "bf16", "bfloat16": "bf16", "c10::bfloat16": "bf16",
    "dt_float16": "fp16", "float16": "fp16", "fp16": "fp16", "c10::half": "fp16",
    "half": "fp16", "float": "fp32", "dt_float": "fp32", "float32": "fp32", "fp32": "fp32",
    "dt_float32": "fp32", "double": "fp64", "float64": "fp64",
    "float8_e4m3fn": "fp8", "c10::float8_e4m3fn": "fp8", "dt_float8_e4m3fn": "fp8",
}

#: Matrix products: a MatMul type (MindSpore's name without scope), a PyTorch product, or a
#: torch_npu kernel name ``<aclnn launcher>_<implementation>_<kernel type>`` whose launcher
#: is a product's and whose own type, the last part, is a MatMul
#: (``aclnnMm_MatMulCommon_MatMulV2``). The launcher alone is not enough: a product's
#: launcher also runs a ``MemSet`` (``aclnnMm_MatMulCommon_MemSet``), and may run a
#: ``TransData`` or a ``Cast``, which are no products.
_GEMM = re.compile(r"(?i)^(?:(?:batch)?mat_?mul\w*|aten::(?:mm|addmm|bmm|baddbmm|linear))$"
                   r"|^aclnn(?:Mm|Addmm|Matmul|BatchMatMul|Bmm)_(?:\w+_)?(?:batch)?mat_?mul"
                   r"[^_]*$")
#: Names of attention operators: forward and backward, per profiler.
ATTENTION_PATTERNS = {
    "fwd": r"(?i)^(?:FlashAttentionScore|PromptFlashAttention\w*|FusedInferAttentionScore\w*"
           r"|aten::scaled_dot_product_attention|npu::npu_fusion_attention"
           # what a GPU kernel's launching operator is called (q, k, v as b, heads, s, d)
           r"|aten::_scaled_dot_product_(?:flash|efficient|cudnn)_attention(?:_for_cpu)?"
           r"|aten::_cudnn_attention_forward"
           # the kernels' own launchers, q, k, v as (b, s, heads, d): _BSND
           r"|aten::_(?:flash|efficient)_attention_forward"
           # vLLM's attention layer, q, k, v as (tokens, heads, d): VLLM_ATTENTION
           r"|vllm::unified_attention(?:_with_output)?)$",
    "bwd": r"(?i)^(?:FlashAttentionScoreGrad|npu::npu_fusion_attention_grad"
           r"|aten::_scaled_dot_product_\w+_backward|aten::_(?:flash|efficient|cudnn)"
           r"_attention_backward)$",
}
#: Attention operators computed fused (flash attention and its kin): the ``s × s`` scores
#: are never written to memory, so they are not kept for the backward pass either.
FUSED_ATTENTION = re.compile(r"(?i)flash|efficient_attention|cudnn_attention|fusion_attention"
                             r"|FusedInferAttention|unified_attention")
#: vLLM's attention operator (``vllm/attention/layer.py``): its layer views the query as
#: ``(tokens, heads, head size)`` and the key and value as ``(tokens, key/value heads,
#: head size)`` before the call, the tokens of every sequence of the batch packed together
#: (TND); the backend behind it (FlashAttention, FlashInfer, TensorRT-LLM's fmha, Triton)
#: is fused and reads the earlier tokens' keys and values from the paged KV cache.
VLLM_ATTENTION = re.compile(r"(?i)^vllm::unified_attention(?:_with_output)?$")
#: Attention operators whose q, k, v are (batch, sequence, heads, head size), where the
#: others of :data:`ATTENTION_PATTERNS` take (batch, heads, sequence, head size): PyTorch's
#: ``_flash_attention_forward`` / ``_efficient_attention_forward`` (and their backward),
#: which ``_scaled_dot_product_*_attention`` calls after transposing.
_BSND = re.compile(r"(?i)^aten::_(?:flash|efficient)_attention_(?:forward|backward)$")
_EMBED = re.compile(r"(?i)^(?:GatherV2|Gather|aten::embedding|EmbeddingLookup)$")
_LOSS = re.compile(r"(?i)^(?:SoftmaxCrossEntropyWithLogits|SparseSoftmaxCrossEntropyWithLogits"
                   r"|aten::cross_entropy_loss|aten::_log_softmax|CrossEntropyLoss)$")
#: The log-softmax of :data:`_LOSS`: a loss's first half, but also a model's output head
#: (log-probabilities for a custom loss) or a classifier's prediction; it is a loss call
#: only inside one or right before :data:`_NLL` (``F.nll_loss(F.log_softmax(x), y)``).
#: On torch_npu the kernel's type is ``LogSoftmaxV2`` (its name
#: ``aclnnLogSoftmax_LogSoftmaxAiCore_LogSoftmaxV2``); its backward, ``LogSoftmaxGrad``,
#: is not matched.
_LOG_SOFTMAX = re.compile(r"(?i)^(?:aten::_?log_softmax|LogSoftmax(?:V2)?"
                          r"|aclnnLogSoftmax_\w*_LogSoftmax(?:V2)?)$")
#: The negative log-likelihood loss, the second half of a cross entropy (forward only):
#: ``aten::nll_loss``, or on torch_npu the ``NLLLoss`` kernel
#: (``aclnnNLLLoss_NLLLossAiCore_NLLLoss``; not its ``MemSet``, nor ``NLLLossGrad``).
_NLL = re.compile(r"(?i)^(?:aten::nll_loss(?:_nd|2d)?(?:_forward)?|NLLLoss"
                  r"|aclnnNLLLoss_\w*_NLLLoss)$")
_ROTARY = re.compile(r"(?i)rotary|RotaryMul|rope")
_LAYERNORM = re.compile(r"(?i)layer_?norm")
_RMSNORM = re.compile(r"(?i)rms_?norm|^aten::rsqrt$|^Rsqrt$")
_GATED_ACT = re.compile(r"(?i)^(?:Swish|Silu|SiLU|SwiGlu|aten::silu|aten::silu_)$")
_PLAIN_ACT = re.compile(r"(?i)^(?:Gelu\w*|FastGelu\w*|aten::gelu|Relu|aten::relu)$")
_MOE = re.compile(r"(?i)GroupedMatmul|MoeGating|MoeInitRouting|MoeFinalizeRouting|moe_")
_GRAD = re.compile(r"(?i)grad|backward|^Gradients/")
_BATCH_MATMUL = re.compile(r"(?i)^batch_?mat_?mul\w*$")
#: Softmax operators: the middle of an attention computed as 3-D batched products
#: (:mod:`~perfkit.analysis.shapes.bmm_attention`). Ascend's ``ScaledMaskedSoftmax``
#: (Megatron's fused scale, mask and softmax on torch_npu) takes the scores as
#: ``(b, a, S, S)`` and the mask second.
_SOFTMAX = re.compile(r"(?i)^(?:aten::_?softmax|aten::_safe_softmax|Softmax(?:V2)?"
                      r"|ScaledMaskedSoftmax)$")
#: The label of the rows of a softmax's backward that MindSpore expands into element-wise
#: operators (``Expand/_SoftmaxBackward/Mul-op1``, ``.../ReduceSum-op0``, ``.../Sub-op0``):
#: one softmax backward (:func:`_label`).
EXPANDED_SOFTMAX_BACKWARD = "_SoftmaxBackward"
#: The softmax's backward: the middle of such an attention's backward. PyTorch's
#: ``aten::_softmax_backward_data``; on Ascend the ``SoftmaxGrad`` kernel (``SoftmaxGradExt``
#: of MindSpore) and the fused scale-mask-softmax's ``ScaledMaskedSoftmaxGrad``;
#: MindSpore's expanded one (:data:`EXPANDED_SOFTMAX_BACKWARD`).
_SOFTMAX_BACKWARD = re.compile(r"(?i)^(?:aten::_softmax_backward_data|SoftmaxGrad(?:V2|Ext)?"
                               r"|ScaledMaskedSoftmaxGrad(?:V2)?)$"
                               rf"|^{EXPANDED_SOFTMAX_BACKWARD}$")
#: A row of MindSpore's expanded softmax backward: its scope names it.
_IN_SOFTMAX_BACKWARD = re.compile(r"(?:^|/)_SoftmaxBackward/")


_OP_SUFFIX = re.compile(r"-op\d+$")
#: The labels whose rows :func:`shape_records` keeps.
_KEPT_LABELS = (_GEMM, _EMBED, _LOSS, _LOG_SOFTMAX, _NLL, _ROTARY, _LAYERNORM, _RMSNORM,
                _GATED_ACT, _PLAIN_ACT, _MOE, *(re.compile(p) for p in ATTENTION_PATTERNS.values()),
                _BATCH_MATMUL,
                _SOFTMAX, _SOFTMAX_BACKWARD)


def _per_name(values: pd.Series, func: Any) -> pd.Series:
    """``values.map(func)`` as a text column, ``func`` called once per distinct text.

    A profile repeats a few thousand operator names over up to a million rows; the text
    work runs on the distinct ones and is spread back by code (missing stays missing).
    """
    codes, uniq = pd.factorize(values, use_na_sentinel=True)
    done = np.array([func(u) for u in np.asarray(uniq, dtype=object)] + [pd.NA],
                    dtype=object)
    return pd.Series(pd.array(done[codes], dtype=TEXT), index=values.index)


def _matches(values: pd.Series, *patterns: re.Pattern[str]) -> np.ndarray:
    """Whether each text matches any of ``patterns`` (``re.search``; missing: False),
    tested once per distinct text."""
    codes, uniq = pd.factorize(values, use_na_sentinel=True)
    hit = np.array([any(rx.search(u) for rx in patterns) if isinstance(u, str) else False
                    for u in np.asarray(uniq, dtype=object)] + [False], dtype=bool)
    return hit[codes]


def _label(frame: pd.DataFrame) -> pd.Series:
    """The operator kind of each row: the operator that launched it (``op_name``, GPU
    kernels: their names, ``nvjet_sm90_...``, do not say what they compute), else its
    ``type`` when the profile has one, else the name without a MindSpore scope
    (``Default/MatMul-op3`` -> ``MatMul``). The element-wise rows of a softmax backward that
    MindSpore expands (``Expand/_SoftmaxBackward/Mul-op1``) are that softmax backward
    (:data:`EXPANDED_SOFTMAX_BACKWARD`)."""
    name = frame["name"].astype(TEXT).fillna("")
    label = _per_name(name, lambda text: _OP_SUFFIX.sub("", text.rsplit("/", 1)[-1]))
    if "type" in frame.columns:
        typ = frame["type"].astype(TEXT)
        label = typ.where(typ.notna() & (typ != ""), label)
    if "op_name" in frame.columns:
        op = frame["op_name"].astype(TEXT)
        label = op.where(op.notna() & (op != ""), label)
    return with_expanded_softmax_backward(label, name).fillna("")


def _kept(frame: pd.DataFrame) -> np.ndarray:
    """Whether each row is an operator :func:`shape_records` keeps: its label
    (:func:`_label`) is one of :data:`_KEPT_LABELS`, or it has no ``type`` of its own and
    its name is a matrix product (a kernel's own type, where the profile records one, says
    whether it is a product; its name only where it does not).

    What is kept depends only on a row's ``name``, ``type`` and ``op_name``; a profile
    repeats a few hundred of those triples over up to a million rows, so the labels are
    worked out on one row of each distinct triple and spread back by code, and only the
    rows kept are ever copied."""
    cols = [c for c in ("name", "type", "op_name") if c in frame.columns]
    if frame.empty or "name" not in cols:
        return np.zeros(len(frame), dtype=bool)
    inverse, first = distinct_rows(frame, cols)
    one = frame[cols].take(first)
    untyped = one["type"].astype(TEXT).fillna("").eq("").to_numpy(bool) \
        if "type" in one.columns else np.ones(len(one), dtype=bool)
    label = _label(one)
    keep = (_matches(one["name"].astype(str), _GEMM) & untyped) | \
        _matches(label.astype(str), *_KEPT_LABELS)
    return keep[inverse]


def with_expanded_softmax_backward(label: pd.Series, name: pd.Series) -> pd.Series:
    """``label`` with the rows of a softmax backward that MindSpore expands into
    element-wise operators (their ``name`` under a ``_SoftmaxBackward/`` scope:
    ``Expand/_SoftmaxBackward/Mul-op1``) labelled :data:`EXPANDED_SOFTMAX_BACKWARD`, one
    softmax backward; the names are tested once per distinct text."""
    expanded = _matches(name, _IN_SOFTMAX_BACKWARD)
    if not expanded.any():
        return label
    return label.where(~expanded, EXPANDED_SOFTMAX_BACKWARD)


def parse_shapes(text: Any) -> list[tuple[int, ...]]:
    """Input shapes text (``"2,128,1024;1024,512;"``, quotes allowed) as tuples; an
    empty entry (a scalar, ``NoShape``) is ``()``."""
    if text is None or (isinstance(text, float) and np.isnan(text)) or text is pd.NA:
        return []
    out = []
    for part in str(text).strip().strip('"').split(";"):
        dims = [d.strip() for d in part.strip().strip('"').split(",") if d.strip()]
        try:
            out.append(tuple(int(d) for d in dims))
        except ValueError:
            out.append(())
    return out


def shape_records(profile: Any, ranks: list[int] | None = None,
                  tables: tuple[str, ...] | None = None) -> tuple[pd.DataFrame, str]:
    """The operators whose shapes matter to the model, from ``kernels`` or ``ops``.

    Parameters
    ----------
    profile : Profile or Cluster
    ranks : list of int, optional
        Only these ranks (a big cluster needs one rank per pipeline stage).
    tables : tuple of str, optional
        The tables to try, in order (default ``("kernels", "ops")``: the first with shapes).

    Returns
    -------
    (DataFrame, str)
        Rows ``rank``, ``step``, ``start_us``, ``end_us`` (NA where the table has no
        durations), ``name``, ``label`` (type, or the name
        without scope), ``input_shapes``, ``input_dtypes``, ``output_shapes`` (NA where the
        profile records none), ``backward`` (the name says it is a gradient), ``lane``
        (the stream of a kernel, the host thread of an operator; NA where the table has
        neither), sorted by rank and start; and the table they came from
        (``"kernels"`` or ``"ops"``, ``""`` when neither has shapes).
    """
    for name in (tables or ("kernels", "ops")):
        rows = _records_of(profile, name, ranks)
        if rows is not None:
            return rows, name
    return pd.DataFrame(columns=["rank", "step", "start_us", "end_us", "name", "label",
                                 "input_shapes", "input_dtypes", "output_shapes",
                                 "backward", "lane"]), ""


def _records_of(profile: Any, name: str, ranks: list[int] | None) -> pd.DataFrame | None:
    """:func:`shape_records` of one table (None when it has no shapes)."""
    present = table_columns(profile, name)
    if "input_shapes" not in present:
        return None
    frame = table(profile, name)
    lane = "stream" if name == "kernels" else "thread"
    cols = [c for c in ("rank", "step", "start_us", "dur_us", "name", "type", "op_name",
                        "input_shapes", "input_dtypes", "output_shapes", "op_id", "thread",
                        lane) if c in present]
    cols = list(dict.fromkeys(cols))

    def shaped(f: Any, ranks: list[int] | None = ranks) -> Any:
        ok = ~f["input_shapes"].isna()
        if ranks is not None:
            ok &= f["rank"].isin(ranks)
        return ok

    def wanted(f: Any) -> Any:
        if is_lazy_frame(f):
            return shaped(f) & f.map_partitions(_kept, meta=("kept", bool))
        return shaped(f).to_numpy(bool) & _kept(f)

    rows = collect(frame, cols, where=wanted)
    if rows.empty:  # no operator kept: this table has shapes, or the next one is read
        any_shape = shaped(frame).any()
        if not (any_shape.compute() if is_lazy_frame(frame) else any_shape):
            return None
    rows = rows.copy()
    rows["label"] = _label(rows).to_numpy()
    for col in ("input_dtypes", "output_shapes"):
        if col not in rows.columns:
            rows[col] = pd.Series(pd.NA, index=rows.index, dtype=TEXT)
    rows["backward"] = _matches(rows["name"].astype(TEXT), _GRAD)
    rows["lane"] = rows[lane].astype(TEXT) if lane in rows.columns else \
        pd.Series(pd.NA, index=rows.index, dtype=TEXT)
    # when each operator ends: a host operator run inside another (a loss inside the loss
    # call that wraps it) is told by its span
    rows["end_us"] = (rows["start_us"] + rows["dur_us"]).astype("Float64") \
        if "dur_us" in rows.columns else pd.Series(pd.NA, index=rows.index, dtype="Float64")
    rows = rows.sort_values(["rank", "start_us"], kind="mergesort").reset_index(drop=True)
    if "op_id" in rows.columns:
        # GPU kernels: one row per launching operator (a cuDNN attention or a split-K
        # product launches several kernels, all with the operator's shapes)
        call = rows[["rank", "op_id"]]
        rows = rows[call["op_id"].isna().to_numpy(bool)
                    | ~call.duplicated().to_numpy(bool)].reset_index(drop=True)
    _mark_after_gradients(rows)
    _mark_autograd_launches(rows, profile, name)
    return rows.drop(columns=[c for c in ("op_id", "thread", "stream", "dur_us")
                              if c in rows.columns])


def _mark_after_gradients(rows: pd.DataFrame) -> None:
    """MindSpore graphs: a kept operator at or after the step's first ``Gradients/``
    matrix product belongs to the backward pass. Expanded operators
    (``Expand/_MatMulExt/BatchMatMul-op3``) carry no scope of their own, but a graph runs
    its forward pass first. (Small ``Gradients/`` element-wise operators may be scheduled
    early, so only the products mark the start of the backward pass.)"""
    names = rows["name"].astype(TEXT).fillna("")
    grads = rows[names.str.startswith("Gradients/").to_numpy(bool)
                 & rows["label"].astype(str).str.contains(_GEMM).to_numpy(bool)]
    if grads.empty:
        return
    first = grads.groupby(["rank", "step"])["start_us"].min()
    key = pd.MultiIndex.from_arrays([rows["rank"], rows["step"]])
    start = first.reindex(key).to_numpy(np.float64)
    later = ~np.isnan(start) & (rows["start_us"].to_numpy(np.float64) >= start)
    rows["backward"] = rows["backward"].to_numpy(bool) | later


_AUTOGRAD = "autograd::engine::evaluate_function"


def _mark_autograd_launches(rows: pd.DataFrame, profile: Any, source: str) -> None:
    """PyTorch: an operator run by the autograd engine belongs to the backward pass.

    The engine wraps each backward function in an ``autograd::engine::evaluate_function:
    MmBackward0`` host event, and the products it runs inside are plain ``aten::mm``: the
    names alone cannot tell them from the forward ones. A row is marked when its host
    operator (the operator itself for host rows, the launching operator ``op_id`` for GPU
    kernels) starts inside such an event on its thread.
    """
    if not {"name", "thread", "start_us", "dur_us"} <= set(table_columns(profile, "ops")):
        return
    ops = table(profile, "ops")
    engine = collect(ops, ["rank", "thread", "start_us", "dur_us"], where=lambda f: f[
        "name"].astype(TEXT).str.startswith(_AUTOGRAD).fillna(False))
    if engine.empty:
        return
    if source == "kernels" and "op_id" in rows.columns and \
            "external_id" in table_columns(profile, "ops"):
        ids = rows["op_id"].dropna().unique().tolist()
        launch = collect(ops, ["rank", "external_id", "thread", "start_us"],
                         where=lambda f: f["external_id"].isin(ids))
        launch = launch.dropna().drop_duplicates(["rank", "external_id"])
        at = rows[["rank", "op_id"]].merge(
            launch, how="left", left_on=["rank", "op_id"], right_on=["rank", "external_id"])
    elif source == "ops" and "thread" in rows.columns:
        at = rows[["rank", "thread", "start_us"]]
    else:
        return
    inside = np.zeros(len(rows), dtype=bool)
    point_rank = at["rank"].to_numpy(np.float64, na_value=np.nan)
    point_thread = at["thread"].to_numpy(np.float64, na_value=np.nan)
    point = at["start_us"].to_numpy(np.float64, na_value=np.nan)
    for (rank, thread), ev in engine.groupby(["rank", "thread"]):
        ev = ev.sort_values("start_us", kind="mergesort")
        begin = ev["start_us"].to_numpy(np.float64)
        reach = np.maximum.accumulate((ev["start_us"] + ev["dur_us"]).to_numpy(np.float64))
        mine = np.flatnonzero((point_rank == rank) & (point_thread == thread))
        last = np.searchsorted(begin, point[mine], side="right") - 1  # last event begun
        inside[mine] = (last >= 0) & (point[mine] < reach[np.maximum(last, 0)])
    rows["backward"] = rows["backward"].to_numpy(bool) | inside
