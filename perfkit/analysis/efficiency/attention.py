"""Attention: fused scaled-dot-product kernels (flash, memory-efficient, cuDNN, Ascend).

Layouts: 4-D ``q, k, v`` are ``(batch, heads, seq, dim)`` for PyTorch's
``_scaled_dot_product_*`` operators, ``(batch, seq, heads, dim)`` for ``_flash_attention_*``
/ ``_efficient_attention_*``; on Ascend (layout not recorded) the larger of dims 1 and 2
is the sequence. 3-D ``(batch, seq, hidden)`` / ``(seq, batch, hidden)``: the larger of
dims 0 and 1 is the sequence. A PyTorch backward operator's first input is the output
gradient, so ``q, k, v`` start at its second.

Causal when the profile says so: PyTorch's ``Concrete Inputs`` hold ``is_causal`` at the
position :data:`CAUSAL_ARG` gives for each operator; else the caller's ``causal``
(default True: training of decoder LLMs). FLOPs and bytes:
:func:`perfkit.calc.op_cost.attention_cost`.
"""

from __future__ import annotations

import re

from ...calc import op_cost as oc
from .perf_model import Call, PerfModel, Priced, is_backward

__all__ = ["AttentionModel", "ATTENTION", "CAUSAL_ARG"]

#: Position of ``is_causal`` among the operator's arguments (PyTorch ``Concrete Inputs``).
CAUSAL_ARG = {
    "aten::_scaled_dot_product_flash_attention": 4,
    "aten::_scaled_dot_product_flash_attention_for_cpu": 4,
    "aten::_scaled_dot_product_flash_attention_backward": 8,
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": 7,
    "aten::_scaled_dot_product_efficient_attention": 6,
    "aten::_scaled_dot_product_efficient_attention_backward": 9,
    "aten::_scaled_dot_product_cudnn_attention": 7,
    "aten::_flash_attention_forward": 7,
    "aten::_flash_attention_backward": 11,
}

#: Operators whose 4-D inputs are ``(batch, seq, heads, dim)``.
_BSND = re.compile(r"(aten::)?_(flash|efficient)_attention_(forward|backward)")


class AttentionModel(PerfModel):
    """Forward ``4·b·h_q·s_q·s_k·d`` FLOPs (halved when causal), backward a multiple."""

    kind = "attention"
    pattern = (r"^(aten::)?_scaled_dot_product_(flash|efficient|cudnn)_attention"
               r"|^(aten::)?_(flash|efficient)_attention_(forward|backward)"
               r"|flashattentionscore|fusedinferattentionscore|promptflashattention"
               r"|increflashattention|npu_fusion_attention")
    priority = 5

    def cost(self, call: Call) -> Priced | None:
        label = call.label
        backward = is_backward(label)
        torch_op = label.lower().startswith("aten::")
        first = 1 if (backward and torch_op) else 0
        qkv = [t for t in call.ins[first:first + 3]]
        if len(qkv) < 3:
            return None
        (q, qb, _), (k, _, _), _v = qkv
        causal, causal_src = self.causal(call)
        if len(q) == 4 and len(k) == 4:
            low = label.lower()
            if _BSND.match(low):
                bsnd = True
            elif low.startswith("aten::"):
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
        pos = CAUSAL_ARG.get(call.label.lower())
        concrete = call.concrete
        if pos is not None and pos < len(concrete) and concrete[pos] in ("True", "False"):
            return concrete[pos] == "True", "profile"
        return call.causal, "assumed"


#: The model instance the registry uses.
ATTENTION = AttentionModel()
