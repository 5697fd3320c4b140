"""Convolution: forward, input and weight gradients (PyTorch ``aten::convolution*``, Ascend
``Conv2D`` / ``Conv2DBackpropInput`` / ``Conv2DBackpropFilter``, depthwise).

``2 · N·spatial_out · weight_elements`` FLOPs (:func:`perfkit.calc.op_cost.conv_cost`).
``C_out`` comes from the output's layout: Ascend ``NC1HWC0`` (5-D: ``C1·C0``) and
``NDC1HWC0`` (6-D), ``NHWC`` / ``NDHWC`` (last), else ``NCHW`` (dim 1); the format is the
recorded ``Output Formats`` when known, else the operator's framework decides (an Ascend
5-D or 6-D output is fractal). A PyTorch forward without a recorded output takes the
output size from the stride, padding and dilation among its ``Concrete Inputs``
(:data:`STRIDE_PAD_DILATION_ARGS`).
"""

from __future__ import annotations

from ...calc import op_cost as oc
from .perf_model import Call, PerfModel, Priced
from .tensors import ints

__all__ = ["ConvModel", "CONV", "STRIDE_PAD_DILATION_ARGS"]

#: Positions of stride, padding and dilation among ``aten::convolution``'s arguments.
STRIDE_PAD_DILATION_ARGS = (3, 4, 5)


class ConvModel(PerfModel):
    """``2·N·spatial_out·C_out·C_in/groups·k_1·…`` FLOPs; the gradients twice that."""

    kind = "conv"
    pattern = (r"^(aten::)?(_?convolution|convolution_backward|cudnn_convolution"
               r"|mkldnn_convolution)$|^conv[123]d(backprop(input|filter))?(d|v\d+)?$"
               r"|^depthwiseconv2d")
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
        dy, x, w = ins[0], ins[1], ins[2]
        cout = w[0][0]
        bso = oc.numel(dy[0]) // max(cout, 1)
        return oc.conv_cost(bso, oc.numel(w[0]), oc.numel(x[0]), oc.numel(dy[0]),
                            x[1], backward=True)
    elif outs and len(ins) >= 2:
        w, o = ins[1], outs[0]
    elif low.startswith("aten::") and len(ins) >= 2:  # output from stride/padding
        x, w = ins[0], ins[1]
        nsp = len(x[0]) - 2
        try:
            stride, pad, dil = (ints(call.concrete[i], nsp) for i in STRIDE_PAD_DILATION_ARGS)
        except (IndexError, ValueError):
            return None
        spatial = [(x[0][2 + i] + 2 * pad[i] - dil[i] * (w[0][2 + i] - 1) - 1) // stride[i] + 1
                   for i in range(nsp)]
        out_el = x[0][0] * w[0][0] * oc.numel(spatial)
        return oc.conv_cost(x[0][0] * oc.numel(spatial), oc.numel(w[0]), oc.numel(x[0]),
                            out_el, x[1])
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


#: The model instance the registry uses.
CONV = ConvModel()
