"""Attention: fused scaled-dot-product kernels (flash, memory-efficient, cuDNN, Ascend).

Layouts: 4-D ``q, k, v`` are ``(batch, heads, seq, dim)`` for PyTorch's
``_scaled_dot_product_*`` operators, ``(batch, seq, heads, dim)`` for ``_flash_attention_*``
/ ``_efficient_attention_*``; on Ascend (layout not recorded) the larger of dims 1 and 2
is the sequence. 3-D ``(batch, seq, hidden)`` / ``(seq, batch, hidden)``: the larger of
dims 0 and 1 is the sequence. A PyTorch backward operator's first input is the output
gradient, so ``q, k, v`` start at its second. flash-attn's variable-length kernels take
``(total tokens, heads, dim)``: they are priced as ``total / max_seqlen`` sequences of
``max_seqlen`` tokens (exact for packed sequences of one length, an upper bound otherwise).

Causal when the profile says so: PyTorch's ``Concrete Inputs`` hold ``is_causal`` at the
position :data:`CAUSAL_ARG` gives for each operator (``custom_mask_type`` at
:data:`MASK_TYPE_ARG` for the memory-efficient kernels); else the caller's ``causal``
(default True: training of decoder LLMs). FLOPs and bytes:
:func:`perfkit.calc.op_cost.attention_cost`.
"""

from __future__ import annotations

import re

from ...calc import op_cost as oc
from .perf_model import Call, PerfModel, Priced, is_backward

__all__ = ["AttentionModel", "ATTENTION", "CAUSAL_ARG", "MASK_TYPE_ARG", "VARLEN_MAX_SEQ_ARG"]

#: Position of ``is_causal`` among the operator's arguments (PyTorch ``Concrete Inputs``,
#: 0-based), from each schema in PyTorch's ``aten/src/ATen/native/native_functions.yaml``
#: (checked against torch 2.5's ``torchgen/packaged``), and from flash-attn 2's
#: ``flash_attn_interface.py`` for the ``flash_attn::`` custom operators.
CAUSAL_ARG = {
    # _scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, ...)
    "aten::_scaled_dot_product_flash_attention": 4,
    # ..._for_cpu(query, key, value, dropout_p, is_causal, *, attn_mask, scale)
    "aten::_scaled_dot_product_flash_attention_for_cpu": 4,
    # ..._backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q,
    #              max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale)
    "aten::_scaled_dot_product_flash_attention_backward": 11,
    # ..._for_cpu_backward(grad_out, query, key, value, out, logsumexp, dropout_p, is_causal)
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": 7,
    # _scaled_dot_product_efficient_attention(query, key, value, attn_bias,
    #                                         compute_log_sumexp, dropout_p, is_causal, ...)
    "aten::_scaled_dot_product_efficient_attention": 6,
    # ..._backward(grad_out_, query, key, value, attn_bias, out, logsumexp, philox_seed,
    #              philox_offset, dropout_p, grad_input_mask, is_causal, *, scale)
    "aten::_scaled_dot_product_efficient_attention_backward": 11,
    # _scaled_dot_product_cudnn_attention(query, key, value, attn_bias, compute_log_sumexp,
    #                                     dropout_p, is_causal, return_debug_mask, *, scale)
    "aten::_scaled_dot_product_cudnn_attention": 6,
    # ..._backward(grad_out, query, key, value, out, logsumexp, philox_seed, philox_offset,
    #              attn_bias, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, ...)
    "aten::_scaled_dot_product_cudnn_attention_backward": 14,
    # what the cuDNN SDPA launches its kernels from (the bundled H100 traces):
    # _cudnn_attention_forward(query, key, value, attn_bias, cum_seq_q, cum_seq_k, max_q,
    #                          max_k, compute_log_sumexp, dropout_p, is_causal, ...)
    "aten::_cudnn_attention_forward": 10,
    # _cudnn_attention_backward(grad_out, query, key, value, out, logsumexp, philox_seed,
    #                           philox_offset, attn_bias, cum_seq_q, cum_seq_k, max_q, max_k,
    #                           dropout_p, is_causal, *, scale)
    "aten::_cudnn_attention_backward": 14,
    # _flash_attention_forward(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k,
    #                          dropout_p, is_causal, return_debug_mask, *, scale, ...)
    "aten::_flash_attention_forward": 8,
    # _flash_attention_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q,
    #                           cum_seq_k, max_q, max_k, dropout_p, is_causal, ...)
    "aten::_flash_attention_backward": 11,
    # flash-attn 2: _flash_attn_forward(q, k, v, dropout_p, softmax_scale, causal, ...)
    "flash_attn::_flash_attn_forward": 5,
    # _flash_attn_varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
    #                            max_seqlen_k, dropout_p, softmax_scale, causal, ...)
    "flash_attn::_flash_attn_varlen_forward": 9,
    # _flash_attn_backward(dout, q, k, v, out, softmax_lse, dq, dk, dv, dropout_p,
    #                      softmax_scale, causal, ...)
    "flash_attn::_flash_attn_backward": 11,
    # _flash_attn_varlen_backward(dout, q, k, v, out, softmax_lse, dq, dk, dv, cu_seqlens_q,
    #                             cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
    #                             softmax_scale, causal, ...)
    "flash_attn::_flash_attn_varlen_backward": 15,
}

#: Position of ``custom_mask_type`` (0: none, 1: causal from the top left, 2: from the
#: bottom right) of the memory-efficient kernels, which take no ``is_causal``.
MASK_TYPE_ARG = {
    # _efficient_attention_forward(query, key, value, bias, cu_seqlens_q, cu_seqlens_k,
    #                              max_seqlen_q, max_seqlen_k, dropout_p, custom_mask_type, ...)
    "aten::_efficient_attention_forward": 9,
    # _efficient_attention_backward(grad_out_, query, key, value, bias, out, cu_seqlens_q,
    #                               cu_seqlens_k, max_seqlen_q, max_seqlen_k, logsumexp,
    #                               dropout_p, philox_seed, philox_offset, custom_mask_type, ...)
    "aten::_efficient_attention_backward": 14,
}

#: Position of the longest query sequence of the variable-length kernels, whose 3-D
#: inputs are ``(total tokens, heads, dim)``.
VARLEN_MAX_SEQ_ARG = {"flash_attn::_flash_attn_varlen_forward": 5,
                      "flash_attn::_flash_attn_varlen_backward": 11}

#: Operators whose 4-D inputs are ``(batch, seq, heads, dim)``.
_BSND = re.compile(r"(aten::)?_(flash|efficient)_attention_(forward|backward)"
                   r"|flash_attn::_flash_attn_(forward|backward)")
#: Operators whose first input is the output gradient (q, k, v follow it).
_GRAD_FIRST = re.compile(r"^(aten|flash_attn)::.*backward")


class AttentionModel(PerfModel):
    """Forward ``4·b·h_q·s_q·s_k·d`` FLOPs (halved when causal), backward a multiple."""

    kind = "attention"
    pattern = (r"^(aten::)?_scaled_dot_product_(flash|efficient|cudnn)_attention"
               r"|^(aten::)?_(flash|efficient|cudnn)_attention_(forward|backward)"
               r"|^flash_attn::_flash_attn_(varlen_)?(forward|backward)$"
               r"|flashattentionscore|fusedinferattentionscore|promptflashattention"
               r"|increflashattention|npu_fusion_attention")
    priority = 5

    def cost(self, call: Call) -> Priced | None:
        label = call.label
        backward = is_backward(label)
        low = label.lower()
        torch_op = low.startswith(("aten::", "flash_attn::"))
        first = 1 if _GRAD_FIRST.match(low) else 0
        qkv = [t for t in call.ins[first:first + 3]]
        if len(qkv) < 3:
            return None
        (q, qb, _), (k, _, _), _v = qkv
        causal, causal_src = self.causal(call)
        if low in VARLEN_MAX_SEQ_ARG and len(q) == 3 and len(k) == 3:
            # (total tokens, heads, dim): taken as total / max_seqlen sequences of
            # max_seqlen tokens each (exact for packed sequences of one length; an upper
            # bound on the FLOPs otherwise, as the lengths are not recorded)
            cost = self._varlen(call, q, k, qb, causal, backward)
            if cost is None:
                return None
            return cost, f"{'yes' if causal else 'no'} ({causal_src})"
        if len(q) == 4 and len(k) == 4:
            if _BSND.match(low):
                bsnd = True
            elif torch_op:
                bsnd = False
            else:  # Ascend: layout not recorded; the sequence is the longer axis
                bsnd = q[1] > q[2]
            if bsnd:
                b, sq, h, d = q
                sk, hk = k[1], k[2]
            else:
                b, h, sq, d = q
                hk, sk = k[1], k[2]
            cost = oc.attention_cost(b, h, sq, sk, d, kv_heads=hk, causal=causal,
                                     backward=backward, backward_factor=call.backward_factor,
                                     elem_bytes=qb)
        elif len(q) == 3 and len(k) == 3:
            sq = max(q[0], q[1])
            b = q[0] * q[1] // sq
            sk = max(k[0], k[1])
            cost = oc.attention_cost(b, q[2], sq, sk, 1, kv_heads=k[2], causal=causal,
                                     backward=backward, backward_factor=call.backward_factor,
                                     elem_bytes=qb)
        else:
            return None
        return cost, f"{'yes' if causal else 'no'} ({causal_src})"

    @staticmethod
    def causal(call: Call) -> tuple[bool, str]:
        """Whether the call is causal, and who said so (``"profile"`` or ``"assumed"``)."""
        low = call.label.lower()
        concrete = call.concrete
        pos = CAUSAL_ARG.get(low)
        if pos is not None and pos < len(concrete) and concrete[pos] in ("True", "False"):
            return concrete[pos] == "True", "profile"
        pos = MASK_TYPE_ARG.get(low)
        if pos is not None and pos < len(concrete) and concrete[pos].strip().isdigit():
            return int(concrete[pos]) != 0, "profile"
        return call.causal, "assumed"

    @staticmethod
    def _varlen(call: Call, q: tuple[int, ...], k: tuple[int, ...], qb: float, causal: bool,
                backward: bool) -> oc.OpCost | None:
        pos = VARLEN_MAX_SEQ_ARG[call.label.lower()]
        try:
            max_q, max_k = (int(float(call.concrete[pos + i])) for i in (0, 1))
        except (IndexError, ValueError):
            return None
        if max_q <= 0 or max_k <= 0:
            return None
        seqs = max(1, q[0] // max_q)
        return oc.attention_cost(seqs, q[1], max_q, max_k, q[2], kv_heads=k[1], causal=causal,
                                 backward=backward, backward_factor=call.backward_factor,
                                 elem_bytes=qb)


#: The model instance the registry uses.
ATTENTION = AttentionModel()
