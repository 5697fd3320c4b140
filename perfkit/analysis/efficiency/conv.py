"""Convolution: forward, input and weight gradients (PyTorch ``aten::convolution*``, Ascend
``Conv2D`` / ``Conv2DBackpropInput`` / ``Conv2DBackpropFilter``, depthwise).

``2 · N·spatial_out · weight_elements`` FLOPs (:func:`perfkit.calc.op_cost.conv_cost`).
``C_out`` comes from the output's layout: Ascend ``NC1HWC0`` (5-D: ``C1·C0``) and
``NDC1HWC0`` (6-D), ``NHWC`` / ``NDHWC`` (last), else ``NCHW`` (dim 1); the format is the
recorded ``Output Formats`` when known, else the operator's framework decides (an Ascend
5-D or 6-D output is fractal). A PyTorch forward without a recorded output
(``aten::convolution``, cuDNN's ``aten::cudnn_convolution``, MIOpen's
``aten::miopen_convolution``, oneDNN's ``aten::mkldnn_convolution``) takes the output
size from the stride, padding and dilation among its ``Concrete Inputs``, whose
positions differ per operator (:data:`CONV_ARGS`); ``aten::convolution_backward``
computes the gradients its ``output_mask`` asks for (:func:`_conv_backward`).
"""

from __future__ import annotations

import re

from ...calc import op_cost as oc
from .perf_model import Call, PerfModel, Priced
from .tensors import ints

__all__ = ["ConvModel", "CONV", "STRIDE_PAD_DILATION_ARGS", "CONV_ARGS", "OUTPUT_MASK_ARG"]

#: Positions of stride, padding and dilation among ``aten::convolution``'s arguments.
STRIDE_PAD_DILATION_ARGS = (3, 4, 5)

#: Positions of (stride, padding, dilation) among each PyTorch convolution's arguments,
#: from its schema in ``aten/src/ATen/native/native_functions.yaml``: ``convolution(input,
#: weight, bias, stride, padding, dilation, transposed, output_padding, groups)``;
#: ``cudnn_convolution(self, weight, padding, stride, dilation, groups, ...)`` (no bias);
#: ``miopen_convolution(self, weight, bias, padding, stride, dilation, groups, ...)`` and
#: ``mkldnn_convolution`` (the same order).
CONV_ARGS = {
    "aten::convolution": (3, 4, 5), "aten::_convolution": (3, 4, 5),
    "aten::cudnn_convolution": (3, 2, 4), "aten::miopen_convolution": (4, 3, 5),
    "aten::mkldnn_convolution": (4, 3, 5), "aten::miopen_depthwise_convolution": (4, 3, 5),
    "aten::cudnn_convolution_relu": (3, 4, 5), "aten::miopen_convolution_relu": (3, 4, 5),
}

#: ``convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
#: dilation, transposed, output_padding, groups, output_mask)``: ``output_mask`` says which
#: of (input gradient, weight gradient, bias gradient) the call computes.
OUTPUT_MASK_ARG = 10


class ConvModel(PerfModel):
    """``2·N·spatial_out·C_out·C_in/groups·k_1·…`` FLOPs; the gradients twice that."""

    kind = "conv"
    pattern = (r"^(aten::)?(_?convolution|convolution_backward|cudnn_convolution"
               r"|cudnn_convolution_relu|miopen_convolution|miopen_convolution_relu"
               r"|miopen_depthwise_convolution|mkldnn_convolution)$"
               r"|^conv[123]d(backprop(input|filter))?(d|v\d+)?$|^depthwiseconv2d")
    priority = 4

    def cost(self, call: Call) -> Priced | None:
        c = _conv(call)
        return (c, "") if c is not None else None


def _channels_out(out: tuple[int, ...], label: str, fmt: str = "") -> int | None:
    """Output channels of a convolution tensor (its layout from the format or the op)."""
    f = fmt.upper()
    ascend = not label.lower().startswith("aten::")
    if "NDC1HWC0" in f or (ascend and len(out) == 6):
        return out[2] * out[-1]
    if "NC1HWC0" in f or (ascend and len(out) == 5):
        return out[1] * out[-1]
    if f.startswith(("NHWC", "NDHWC")):
        return out[-1]
    if len(out) >= 3:
        return out[1]
    return None


def _conv(call: Call) -> oc.OpCost | None:
    label, ins, outs = call.label, call.ins, call.outs
    low = label.lower()
    if "backpropinput" in low and len(ins) >= 2 and outs:
        w, dy = ins[-2], ins[-1]
        o = dy
    elif "backpropfilter" in low and len(ins) >= 2 and outs:
        w, o = outs[0], ins[-1]
    elif low == "aten::convolution_backward" and len(ins) >= 3:
        return _conv_backward(call)
    elif outs and len(ins) >= 2:
        w, o = ins[1], outs[0]
    elif low in CONV_ARGS and len(ins) >= 2:  # output size from stride/padding/dilation
        return _torch_forward(call, CONV_ARGS[low])
    else:
        return None
    # o is the forward output (dy for the gradients): its layout is that of the op's output
    # for the forward only (the gradients' output formats describe dx / dw)
    out_formats = call.out_formats
    fmt = out_formats[0] if out_formats and o is outs[0] else ""
    cout = _channels_out(o[0], label, fmt)
    if not cout:
        return None
    bso = oc.numel(o[0]) // cout
    x_el = oc.numel(outs[0][0]) if "backpropinput" in low else oc.numel(ins[0][0])
    return oc.conv_cost(bso, oc.numel(w[0]), x_el, oc.numel(o[0]), o[1])


def _torch_forward(call: Call, positions: tuple[int, int, int]) -> oc.OpCost | None:
    """A PyTorch forward convolution (Kineto records no output): the output's spatial
    size from the stride, padding and dilation among its scalar arguments."""
    x, w = call.ins[0], call.ins[1]
    nsp = len(x[0]) - 2
    if nsp < 1 or len(w[0]) != len(x[0]) or _transposed(call, 6):
        return None
    try:
        stride, pad, dil = (ints(call.concrete[i], nsp) for i in positions)
    except (IndexError, ValueError):
        return None
    spatial = [(x[0][2 + i] + 2 * pad[i] - dil[i] * (w[0][2 + i] - 1) - 1) // stride[i] + 1
               for i in range(nsp)]
    if min(spatial) < 1:
        return None
    out_el = x[0][0] * w[0][0] * oc.numel(spatial)
    return oc.conv_cost(x[0][0] * oc.numel(spatial), oc.numel(w[0]), oc.numel(x[0]), out_el,
                        x[1])


def _transposed(call: Call, position: int) -> bool:
    """Whether ``aten::convolution`` / ``_convolution`` / ``convolution_backward`` say
    ``transposed=True`` (not priced: the formulas are those of a direct convolution)."""
    low = call.label.lower()
    if low not in ("aten::convolution", "aten::_convolution", "aten::convolution_backward"):
        return False
    return len(call.concrete) > position and call.concrete[position] == "True"


def _bools(text: str) -> list[bool]:
    """``"[True, False, True]"`` -> ``[True, False, True]``."""
    return [t == "True" for t in re.findall(r"True|False", text)]


def _conv_backward(call: Call) -> oc.OpCost | None:
    """``aten::convolution_backward``: the gradients its ``output_mask`` asks for.

    Each of the input and weight gradients is a convolution as large as the forward
    (``2·N·spatial_out·W`` FLOPs); the bias gradient sums the output gradient (one FLOP per
    element). Bytes: the output gradient, plus the weight and the input gradient for the
    input gradient, the input and the weight gradient for the weight gradient. Without a
    recorded mask both gradients are counted (PyTorch's default when the input and the
    weight require gradients).
    """
    dy, x, w = call.ins[0], call.ins[1], call.ins[2]
    if _transposed(call, 7):
        return None
    mask = _bools(call.concrete[OUTPUT_MASK_ARG]) if len(call.concrete) > OUTPUT_MASK_ARG \
        else []
    if len(mask) != 3:
        mask = [True, True, False]
    cout = w[0][0] if w[0] else 0
    if not cout:
        return None
    dy_el, x_el, w_el = oc.numel(dy[0]), oc.numel(x[0]), oc.numel(w[0])
    one = oc.conv_cost(dy_el // cout, w_el, x_el, dy_el, dy[1])  # one gradient's FLOPs
    flops = one.flops * (int(mask[0]) + int(mask[1])) + (dy_el if mask[2] else 0)
    moved = dy_el * dy[1]
    if mask[0]:
        moved += w_el * w[1] + x_el * x[1]
    if mask[1]:
        moved += x_el * x[1] + w_el * w[1]
    if mask[2]:
        moved += cout * dy[1]
    return oc.OpCost("conv", float(flops), float(moved))


#: The model instance the registry uses.
CONV = ConvModel()
