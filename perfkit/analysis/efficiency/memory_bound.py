"""Memory-bound kinds: normalisations, reductions and element-wise operators.

Their time is the data they move: every tensor input read once and the output written
once (:mod:`perfkit.calc.op_cost`). The largest tensor argument is the one the formulas
count elements of.

* **Normalisation** (RMSNorm, LayerNorm): the hidden size is the largest tensor's last
  dimension; backward when the label says so (:func:`perfkit.calc.op_cost.norm_cost`).
* **Reduction** (sum, mean, softmax, ...): the output is the recorded one, else as large
  as the input for a softmax and one element per row otherwise
  (:func:`perfkit.calc.op_cost.reduction_cost`).
* **Element-wise**: the output is the recorded one, else the broadcast of the inputs;
  ``copy_`` writes its first argument without reading it; operators that only move data
  (copies, casts, concatenations, slices, fills: :data:`MOVES`) do no FLOP
  (:func:`perfkit.calc.op_cost.elementwise_cost`).
"""

from __future__ import annotations

import re

import numpy as np

from ...calc import op_cost as oc
from .perf_model import Call, PerfModel, Priced, is_backward
from .tensors import Tensor

__all__ = ["NormModel", "ReductionModel", "ElementwiseModel", "NORM", "REDUCTION",
           "ELEMENTWISE", "MOVES"]

#: Element-wise operators that move data without arithmetic (0 FLOPs per element).
MOVES = re.compile(r"copy|cast|tensormove|identity|transdata|transpose|concat|cat_?$|slice"
                   r"|fill|zero|oneslike|zeroslike|select$", re.IGNORECASE)


def _largest(call: Call) -> Tensor:
    """The tensor argument with the most elements (inputs, else outputs)."""
    return max(call.ins or call.outs, key=lambda t: oc.numel(t[0]))


def _in_bytes(call: Call) -> float:
    return float(sum(oc.numel(s) * b for s, b, _ in call.ins))


class NormModel(PerfModel):
    """RMSNorm / LayerNorm over the last dimension, BatchNorm over the channels (the
    second dimension of NCHW), forward or backward."""

    kind = "norm"
    pattern = r"rms_?norm|layer_?norm|^(aten::)?native_layer_norm|batch_?norm"
    priority = 2

    def cost(self, call: Call) -> Priced | None:
        main = _largest(call)
        label = call.label.lower()
        kind = "rms" if "rms" in label else "batch" if "batch" in label else "layer"
        if kind == "batch":
            hidden = main[0][1] if len(main[0]) > 1 else 1
        else:
            hidden = main[0][-1] if main[0] else 1
        return oc.norm_cost(oc.numel(main[0]), hidden, main[1], kind,
                            is_backward(call.label)), ""


class ReductionModel(PerfModel):
    """Sums, means, extrema and softmax: one FLOP per input element."""

    kind = "reduction"
    pattern = (r"softmax|^reduce(sum|mean|max|min|prod)|^(aten::)?(sum|mean|amax|amin"
               r"|norm|_softmax|_log_softmax|_softmax_backward_data"
               r"|_log_softmax_backward_data)$")
    priority = 1

    def cost(self, call: Call) -> Priced | None:
        main = _largest(call)
        outs = call.outs
        if outs:
            out_el, out_b = oc.numel(outs[0][0]), oc.numel(outs[0][0]) * outs[0][1]
        else:
            out_el = oc.numel(main[0]) if "softmax" in call.label.lower() else \
                oc.numel(main[0]) // max(main[0][-1] if main[0] else 1, 1)
            out_b = out_el * main[1]
        return oc.reduction_cost(oc.numel(main[0]), out_el, _in_bytes(call), out_b), ""


class ElementwiseModel(PerfModel):
    """Unary and binary operators, activations, casts, copies: one FLOP per output
    element (none for a pure data move)."""

    kind = "elementwise"
    pattern = (r"^(aten::)?(add|sub|mul|div|neg|silu|gelu|relu|sigmoid|tanh|exp|log"
               r"|rsqrt|sqrt|pow|reciprocal|abs|maximum|minimum|where|lerp|addcmul"
               r"|addcdiv|copy|fill|zero|clamp|square|silu_backward|gelu_backward"
               r"|threshold_backward|sigmoid_backward|tanh_backward|cat|masked_fill"
               r"|dropout|native_dropout|bitwise_and|eq|ne|lt|gt|le|ge)_?$"
               r"|^(adds|addn|muls|realdiv|cast|relugrad|gelugrad|fastgelu|fastgelugrad"
               r"|swish|swishgrad|silugrad|sigmoidgrad|tanhgrad|tensormove|identity"
               r"|zeroslike|oneslike|dropoutdomask|swiglu|swiglugrad|rotarymul"
               r"|rotarymulgrad|applyrotaryposemb|concatd|concat|stridedsliced"
               r"|stridedslice|slice|transpose|transdata|select|selectv2|less|greater"
               r"|equal|logicaland|logicalnot|maximum|minimum|exp|log|sqrt|rsqrt|pow"
               r"|square|neg|add|sub|mul|div|fill|sign|abs|relu|gelu|sigmoid|tanh)$")
    priority = 0

    def cost(self, call: Call) -> Priced | None:
        label, ins, outs = call.label, call.ins, call.outs
        main = _largest(call)
        in_bytes = _in_bytes(call)
        if outs:
            out_el = sum(oc.numel(s) for s, _, _ in outs)
            out_b = float(sum(oc.numel(s) * b for s, b, _ in outs))
        else:
            try:
                out_el = oc.numel(np.broadcast_shapes(*[s for s, _, _ in ins]))
            except ValueError:
                out_el = oc.numel(main[0])
            out_b = out_el * main[1]
            if label.lower().rstrip("_").endswith("copy") and len(ins) >= 2:
                in_bytes -= oc.numel(ins[0][0]) * ins[0][1]  # copy_ writes dst, never reads it
        fpe = 0.0 if MOVES.search(label) else 1.0
        return oc.elementwise_cost(out_el, max(in_bytes, 0.0), out_b, fpe), ""


#: The model instances the registry uses.
NORM = NormModel()
REDUCTION = ReductionModel()
ELEMENTWISE = ElementwiseModel()
