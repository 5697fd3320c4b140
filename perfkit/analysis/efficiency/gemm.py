"""GEMM: matrix multiplications (``aten::mm`` / ``bmm`` / ``addmm``, Ascend ``MatMul``).

``m, n`` come from the output shape when recorded, ``k`` from the first operand
(``elements / (batch·m)``), so transposed operands need no attribute; without an output
shape the operands' matching dimension is ``k``. The bias of ``addmm`` / ``baddbmm`` /
``addbmm`` (their first input) is skipped. FLOPs and bytes:
:func:`perfkit.calc.op_cost.gemm_cost`.
"""

from __future__ import annotations

import math
import re

from ...calc import op_cost as oc
from .perf_model import Call, PerfModel, Priced

__all__ = ["GemmModel", "GEMM"]

#: Operators whose first input is a bias added to the product.
_WITH_BIAS = re.compile(r"(?i)^(aten::)?(addmm|baddbmm|addbmm)$")


class GemmModel(PerfModel):
    """``C[b, m, n] = A[b, m, k] @ B[b, k, n]``: ``2·b·m·n·k`` FLOPs."""

    kind = "gemm"
    pattern = (r"^(aten::)?(mm|addmm|bmm|baddbmm|addbmm|_scaled_mm)$"
               r"|^(aten::)?(batch)?mat_?mul(v\d+)?$|^gemm(v\d+)?$|^quantbatchmatmul(v\d+)?$")
    priority = 3

    def cost(self, call: Call) -> Priced | None:
        c = _gemm(call)
        return (c, "") if c is not None else None


def _gemm(call: Call) -> oc.OpCost | None:
    ins, outs = call.ins, call.outs
    if _WITH_BIAS.match(call.label) and ins:
        ins = ins[1:]
    mats = [t for t in ins if len(t[0]) >= 2]
    if len(mats) < 2:
        return None
    (a, ab, _), (b, bb, _) = mats[0], mats[1]
    out = next((t for t in outs if len(t[0]) >= 2), None)
    batch_a = oc.numel(a[:-2])
    if out is not None:
        o = out[0]
        m, n, batch = o[-2], o[-1], oc.numel(o[:-2])
        ea = oc.numel(a[-2:])
        if m > 0 and ea % m == 0 and (ea // m) in (a[-1], a[-2]):
            k = ea // m
        else:  # hardware (fractal) layout: k² = |A|·|B| / |C| per batch
            k = int(round(math.sqrt(oc.numel(a) * oc.numel(b[-2:]) / max(oc.numel(o), 1)
                                    * max(batch, 1))))
        return oc.gemm_cost(m, n, k, max(batch, 1), ab, bb, out[1], b_batched=len(b) > 2)
    if a[-1] == b[-2]:
        m, k, n = a[-2], a[-1], b[-1]
    elif a[-1] == b[-1]:
        m, k, n = a[-2], a[-1], b[-2]
    elif a[-2] == b[-2]:
        m, k, n = a[-1], a[-2], b[-1]
    elif a[-2] == b[-1]:
        m, k, n = a[-1], a[-2], b[-2]
    else:
        return None
    batch = max(batch_a, oc.numel(b[:-2]), 1)
    return oc.gemm_cost(m, n, k, batch, ab, bb, ab, b_batched=len(b) > 2)


#: The model instance the registry uses.
GEMM = GemmModel()
