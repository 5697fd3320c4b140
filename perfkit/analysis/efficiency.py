"""Operator efficiency from shapes: FLOPs, bytes, achieved rates and the roofline.

:func:`operator_efficiency` reads the input (and, where the profiler records them, output)
shapes and dtypes of every device task (Ascend ``kernel_details``: ``Input Shapes``,
``Input Data Types``, ``Output Shapes``; GPU kernels through the PyTorch operator that
launched them, Kineto ``Input Dims`` / ``Input type``), or of the host operators of a
profile without device tasks (a CPU-only PyTorch trace), and prices each call with the
per-kind models of :mod:`perfkit.calc.op_cost` (GEMM, attention, convolution,
normalisation, element-wise, reduction). Against a :class:`perfkit.Hardware` it gives the
roofline (Williams, Waterman, Patterson, CACM 2009):

``attainable(I) = min(peak_flops[dtype], I × memory_bandwidth)`` with ``I = FLOPs / bytes``;
an operator is **memory-bound** when ``I × bandwidth < peak`` (left of the ridge point
``peak / bandwidth``) and **compute-bound** otherwise. ``efficiency`` is the achieved rate
over that bound: ``achieved FLOP/s / attainable(I)`` (for a pure data-movement operator
with no FLOPs: ``achieved bytes/s / bandwidth``). The ideal time of one call is
``max(FLOPs / peak, bytes / bandwidth)``.

How shapes are read (conventions, documented in docs/analysis.md):

* GEMM ``m, n`` come from the output shape when recorded, ``k`` from the first operand
  (``elements / (batch·m)``), so transposed operands need no attribute; without an output
  shape the operands' matching dimension is ``k``. The bias of ``addmm`` / ``baddbmm`` (first
  input) is skipped.
* Attention: 4-D ``q, k, v`` are ``(batch, heads, seq, dim)`` for PyTorch's
  ``_scaled_dot_product_*`` operators, ``(batch, seq, heads, dim)`` for ``_flash_attention_*``
  / ``_efficient_attention_*``; on Ascend (layout not recorded) the larger of dims 1 and 2
  is the sequence. 3-D ``(batch, seq, hidden)`` / ``(seq, batch, hidden)``: the larger of
  dims 0 and 1 is the sequence. Causal when the profile says so (PyTorch ``Concrete
  Inputs`` ``is_causal``), else ``causal`` (default True: training of decoder LLMs).
* Convolution: ``2 · N·spatial_out · weight_elements``; ``C_out`` from the output's format
  (``NC1HWC0`` 5-D: ``C1·C0``; ``NCHW``: dim 1).
* Dtypes map to the hardware's peak keys (``DT_BF16`` -> ``bf16``, ``FLOAT16`` / ``half`` ->
  ``fp16``, ``FLOAT`` / ``float`` -> ``fp32`` ...); a dtype the hardware lists no peak for
  uses its ``default_dtype`` peak and says so in ``peak_dtype``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..calc import op_cost as oc
from ..errors import InvalidArgumentError
from ..specs import Hardware
from ._frames import is_lazy, per_rank
from ._util import (
    PMU_RATIOS,
    add_note,
    empty_frame,
    has_values,
    n_step_pairs,
    shared,
    shared_factorize,
    stable_order,
    table,
    take_array,
    take_rows,
    tasks_in_scope,
    value_changes,
)

__all__ = ["operator_efficiency", "operator_costs", "infer_hardware", "cost_of",
           "elementwise_chains", "attention_chains",
           "parse_shapes", "dtype_bytes", "peak_key", "kind_of", "EFFICIENCY_COLUMNS",
           "COST_COLUMNS"]

EFFICIENCY_COLUMNS: dict[str, str] = {
    "key": "string", "kind": "string", "name": "string", "input_shapes": "string",
    "input_dtypes": "string", "count": "int64", "total_us": "float64", "mean_us": "float64",
    "per_step_us": "float64", "flops": "float64", "bytes": "float64",
    "total_flops": "float64", "total_bytes": "float64", "achieved_tflops": "float64",
    "achieved_gbps": "float64", "intensity": "float64", "peak_dtype": "string",
    "peak_tflops": "float64", "bound_tflops": "float64", "ideal_us": "float64",
    "efficiency": "float64", "bound": "string", "causal": "string",
    "pmu_compute_ratio": "float64", "pmu_memory_ratio": "float64", "pmu_bound": "string",
}

COST_COLUMNS = ("kind", "flops", "bytes", "dtype", "causal")

# --------------------------------------------------------------------------- dtypes

_DTYPE_BYTES = {
    "bf16": 2, "bfloat16": 2, "c10::bfloat16": 2, "fp16": 2, "float16": 2, "half": 2,
    "c10::half": 2, "float": 4, "float32": 4, "fp32": 4, "double": 8, "float64": 8,
    "int8": 1, "uint8": 1, "bool": 1, "unsigned char": 1, "signed char": 1, "char": 1,
    "int16": 2, "uint16": 2, "short": 2, "int32": 4, "uint32": 4, "int": 4,
    "int64": 8, "uint64": 8, "long": 8, "long int": 8, "complex64": 8, "complex128": 16,
    "hf32": 4, "float8_e4m3fn": 1, "float8_e5m2": 1, "c10::float8_e4m3fn": 1,
    "c10::float8_e5m2": 1, "fp8": 1, "hifloat8": 1,
}
_PEAK_KEY = {"bf16": "bf16", "bfloat16": "bf16", "c10::bfloat16": "bf16", "fp16": "fp16",
             "float16": "fp16", "half": "fp16", "c10::half": "fp16", "float": "fp32",
             "float32": "fp32", "fp32": "fp32", "hf32": "fp32", "int8": "int8",
             "uint8": "int8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
             "c10::float8_e4m3fn": "fp8", "c10::float8_e5m2": "fp8", "fp8": "fp8",
             "hifloat8": "fp8"}


def _norm_dtype(name: Any) -> str:
    text = str(name).strip().strip('"').lower()
    return text[3:] if text.startswith("dt_") else text


def dtype_bytes(name: Any) -> float:
    """Bytes per element of a profiler dtype name (NaN for a non-tensor or unknown one).

    Accepts Ascend names (``DT_BF16``, ``FLOAT16``, ``FLOAT``, ``INT64``) and PyTorch's
    (``c10::BFloat16``, ``float``, ``long int``).
    """
    return float(_DTYPE_BYTES.get(_norm_dtype(name), np.nan))


def peak_key(name: Any) -> str | None:
    """The :attr:`perfkit.Hardware.peak_flops` key of a dtype (``None`` when unknown)."""
    return _PEAK_KEY.get(_norm_dtype(name))


def parse_shapes(text: Any) -> list[tuple[int, ...] | None]:
    """``"4,64;64,192;;"`` -> ``[(4, 64), (64, 192), None, None]`` (None: not a tensor).

    A scalar tensor is ``()``; a TensorList (``[...]``) or anything unreadable is None.
    """
    if text is None or (isinstance(text, float) and math.isnan(text)) or text is pd.NA:
        return []
    out: list[tuple[int, ...] | None] = []
    for part in str(text).strip().strip('"').split(";"):
        part = part.strip()
        if not part or "[" in part:
            out.append(None)
            continue
        try:
            out.append(tuple(int(x) for x in part.split(",") if x.strip() != ""))
        except ValueError:
            out.append(None)
    return out


def _split(text: Any) -> list[str]:
    if text is None or text is pd.NA or (isinstance(text, float) and math.isnan(text)):
        return []
    return [x.strip() for x in str(text).strip().strip('"').split(";")]


# --------------------------------------------------------------------------- kinds

#: (kind, regex on the operator label: Ascend type, PyTorch operator, or kernel name).
KIND_PATTERNS: tuple[tuple[str, str], ...] = (
    ("attention", r"^(aten::)?_scaled_dot_product_(flash|efficient|cudnn)_attention"
                  r"|^(aten::)?_(flash|efficient)_attention_(forward|backward)"
                  r"|flashattentionscore|fusedinferattentionscore|promptflashattention"
                  r"|increflashattention|npu_fusion_attention"),
    ("gemm", r"^(aten::)?(mm|addmm|bmm|baddbmm|addbmm|_scaled_mm)$"
             r"|^(batch)?mat_?mul(v\d+)?$|^gemm(v\d+)?$|^quantbatchmatmul(v\d+)?$"),
    ("conv", r"^(aten::)?(_?convolution|convolution_backward|cudnn_convolution"
             r"|mkldnn_convolution)$|^conv[123]d(backprop(input|filter))?(d|v\d+)?$"
             r"|^depthwiseconv2d"),
    ("norm", r"rms_?norm|layer_?norm|^(aten::)?native_layer_norm"),
    ("reduction", r"softmax|^reduce(sum|mean|max|min|prod)|^(aten::)?(sum|mean|amax|amin"
                  r"|norm|_softmax|_log_softmax|_softmax_backward_data"
                  r"|_log_softmax_backward_data)$"),
    ("elementwise", r"^(aten::)?(add|sub|mul|div|neg|silu|gelu|relu|sigmoid|tanh|exp|log"
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
                    r"|square|neg|add|sub|mul|div|fill|sign|abs|relu|gelu|sigmoid|tanh)$"),
)
_KIND_RE = [(k, re.compile(p, re.IGNORECASE)) for k, p in KIND_PATTERNS]

#: Element-wise operators that move data without arithmetic (0 FLOPs per element).
_MOVE = re.compile(r"copy|cast|tensormove|identity|transdata|transpose|concat|cat_?$|slice"
                   r"|fill|zero|oneslike|zeroslike|select$", re.IGNORECASE)
_BACKWARD = re.compile(r"grad|backward|bwd|backprop", re.IGNORECASE)

#: Position of ``is_causal`` among the operator's arguments (PyTorch ``Concrete Inputs``).
_CAUSAL_ARG = {
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


def kind_of(label: Any) -> str | None:
    """Model kind of an operator label (``None``: no model applies)."""
    text = str(label or "")
    for kind, rx in _KIND_RE:
        if rx.search(text):
            return kind
    return None


# --------------------------------------------------------------------------- one call

def _tensors(shapes: list[tuple[int, ...] | None], dtypes: list[str]
             ) -> list[tuple[tuple[int, ...], float, str]]:
    """(shape, bytes per element, dtype) of the tensor arguments, in order."""
    out = []
    for i, s in enumerate(shapes):
        if s is None:
            continue
        dt = dtypes[i] if i < len(dtypes) else ""
        b = dtype_bytes(dt)
        if not np.isfinite(b):
            continue
        out.append((s, b, dt))
    return out


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


def _gemm(label: str, ins: list, outs: list) -> oc.OpCost | None:
    if re.match(r"(?i)^(aten::)?(addmm|baddbmm|addbmm)$", label) and ins:
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


def _attention(label: str, ins: list, concrete: list[str], causal_default: bool,
               backward_factor: float) -> tuple[oc.OpCost, str] | None:
    backward = bool(_BACKWARD.search(label))
    torch_op = label.lower().startswith("aten::")
    first = 1 if (backward and torch_op) else 0
    qkv = [t for t in ins[first:first + 3]]
    if len(qkv) < 3:
        return None
    (q, qb, _), (k, _, _), _v = qkv
    causal_src = "assumed"
    causal = causal_default
    pos = _CAUSAL_ARG.get(label.lower())
    if pos is not None and pos < len(concrete) and concrete[pos] in ("True", "False"):
        causal, causal_src = concrete[pos] == "True", "profile"
    if len(q) == 4 and len(k) == 4:
        low = label.lower()
        if re.match(r"(aten::)?_(flash|efficient)_attention_(forward|backward)", low):
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
                                 backward=backward, backward_factor=backward_factor,
                                 elem_bytes=qb)
    elif len(q) == 3 and len(k) == 3:
        sq = max(q[0], q[1])
        b = q[0] * q[1] // sq
        sk = max(k[0], k[1])
        cost = oc.attention_cost(b, q[2], sq, sk, 1, kv_heads=k[2], causal=causal,
                                 backward=backward, backward_factor=backward_factor,
                                 elem_bytes=qb)
    else:
        return None
    return cost, f"{'yes' if causal else 'no'} ({causal_src})"


def _conv(label: str, ins: list, outs: list, out_formats: list[str],
          concrete: list[str]) -> oc.OpCost | None:
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
            stride, pad, dil = (_ints(concrete[i], nsp) for i in (3, 4, 5))
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
    fmt = out_formats[0] if out_formats and o is outs[0] else ""
    cout = _channels_out(o[0], label, fmt)
    if not cout:
        return None
    bso = oc.numel(o[0]) // cout
    x_el = oc.numel(outs[0][0]) if "backpropinput" in low else oc.numel(ins[0][0])
    return oc.conv_cost(bso, oc.numel(w[0]), x_el, oc.numel(o[0]), o[1])


def _ints(text: str, n: int) -> list[int]:
    vals = [int(x) for x in re.findall(r"-?\d+", text)]
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n:
        raise ValueError(text)
    return vals


def cost_of(label: str, input_shapes: Any, input_dtypes: Any, output_shapes: Any = None,
            output_dtypes: Any = None, output_formats: Any = None, concrete_inputs: Any = None,
            causal: bool = True, backward_factor: float = 2.5
            ) -> tuple[oc.OpCost, str] | None:
    """Price one call of operator ``label`` from its shapes and dtypes.

    Parameters
    ----------
    label : str
        Ascend operator type, PyTorch operator name (``aten::mm``), or kernel name.
    input_shapes, input_dtypes, output_shapes, output_dtypes, output_formats : str
        As in the ``kernels`` / ``ops`` tables (``"m,k;k,n"``, ``"DT_BF16;DT_BF16"``).
    concrete_inputs : str, optional
        PyTorch's recorded scalar arguments (``";;;0.;True"``): read for ``is_causal`` and
        the convolution's stride, padding and dilation.
    causal : bool
        Attention is causal when the profile does not say.
    backward_factor : float
        Attention backward FLOPs over forward (2.5: FlashAttention-2's five products, as
        PyTorch's ``flop_counter`` counts; 2.0: a backward that keeps the scores).

    Returns
    -------
    (OpCost, str) or None
        The cost and, for attention, whether it is causal and who said so
        (``"yes (profile)"``, ``"yes (assumed)"``); None when no model applies or the
        shapes do not fit the model.
    """
    kind = kind_of(label)
    if kind is None:
        return None
    dt_in = _split(input_dtypes)
    ins = _tensors(parse_shapes(input_shapes), dt_in)
    out_dt = _split(output_dtypes)
    outs = _tensors(parse_shapes(output_shapes), out_dt or dt_in[:1] * 8)
    concrete = _split(concrete_inputs)
    if not ins and not outs:
        return None
    if kind == "gemm":
        c = _gemm(label, ins, outs)
        return (c, "") if c is not None else None
    if kind == "attention":
        return _attention(label, ins, concrete, causal, backward_factor)
    if kind == "conv":
        c = _conv(label, ins, outs, _split(output_formats), concrete)
        return (c, "") if c is not None else None
    main = max(ins or outs, key=lambda t: oc.numel(t[0]))
    if kind == "norm":
        hidden = main[0][-1] if main[0] else 1
        return oc.norm_cost(oc.numel(main[0]), hidden, main[1],
                            "rms" if "rms" in label.lower() else "layer",
                            bool(_BACKWARD.search(label))), ""
    in_bytes = float(sum(oc.numel(s) * b for s, b, _ in ins))
    if kind == "reduction":
        if outs:
            out_el, out_b = oc.numel(outs[0][0]), oc.numel(outs[0][0]) * outs[0][1]
        else:
            out_el = oc.numel(main[0]) if "softmax" in label.lower() else \
                oc.numel(main[0]) // max(main[0][-1] if main[0] else 1, 1)
            out_b = out_el * main[1]
        return oc.reduction_cost(oc.numel(main[0]), out_el, in_bytes, out_b), ""
    # element-wise: the output is the recorded one, else the broadcast of the inputs
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
    fpe = 0.0 if _MOVE.search(label) else 1.0
    return oc.elementwise_cost(out_el, max(in_bytes, 0.0), out_b, fpe), ""


# --------------------------------------------------------------------------- rows

def _label(frame: pd.DataFrame) -> pd.Series:
    """Operator label of each row: GPU kernels' launching op, Ascend type, else the name."""
    name = frame["name"].astype("string")
    label = name
    if "type" in frame.columns:
        typ = frame["type"].astype("string")
        # generic per distinct type (missing ones too), spread back by code
        codes, uniq = shared_factorize(typ, use_na_sentinel=False)
        per_type = pd.Series(uniq, dtype="string")
        generic_u = (per_type.isna() | per_type.str.lower().isin(
            ["kernel", "gpu_memcpy", "gpu_memset", ""])).fillna(True).to_numpy(bool)
        generic = generic_u[codes]
        # every task typed (Ascend): the type column itself, whose codes others share
        label = typ if not generic.any() else typ.where(~generic, name)
    if "op_name" in frame.columns:
        label = frame["op_name"].astype("string").where(frame["op_name"].notna(), label)
    return label.fillna("")


def _source(profile: Any, columns: Sequence[str] | None = None
            ) -> tuple[pd.DataFrame, str]:
    """Rows to price: device tasks with shapes, else host operators with shapes.

    ``columns``: keep only these (and the :data:`PMU_RATIOS` columns); default all.
    """
    def narrow(frame: pd.DataFrame) -> pd.DataFrame:
        if columns is None:
            return frame
        return frame[[c for c in frame.columns if c in columns or c in PMU_RATIOS]]

    k = table(profile, "kernels")
    if not k.empty and has_values(k, "input_shapes") and has_values(k, "dur_us"):
        if columns is not None:  # the rows the other operator analyses take out too
            return tasks_in_scope(k, False, columns), "kernels"
        keep = k["dur_us"].notna().to_numpy(bool)
        if "category" in k.columns:
            keep = keep & k["category"].ne("communication").fillna(True).to_numpy(bool)
        return (k if keep.all() else k[keep]), "kernels"
    o = table(profile, "ops")
    if not o.empty and has_values(o, "input_shapes") and has_values(o, "dur_us"):
        return narrow(o).dropna(subset=["dur_us"]), "ops"
    return pd.DataFrame(), ""


#: When modelled host operators nest, the heavier kind is priced (a fused attention
#: operator, not the element-wise helpers it calls); of equal kinds, the innermost.
_PRIORITY = {"attention": 5, "conv": 4, "gemm": 3, "norm": 2, "reduction": 1,
             "elementwise": 0}


def _leaf_ops(o: pd.DataFrame, kinds: pd.Series) -> pd.Series:
    """Mask of the modelled host operators to price, each FLOP and microsecond once.

    Host operators nest (``aten::linear`` > ``aten::matmul`` > ``aten::mm``; a fused
    attention operator calls small element-wise helpers). On each (rank, thread), with
    operators in start order (an enclosing one first), a modelled operator is dropped when
    an enclosing modelled operator is of a heavier kind (:data:`_PRIORITY`), and an
    enclosing operator is dropped when it contains one of the same or a heavier kind.
    """
    m = o[kinds.notna()].assign(_kind=kinds[kinds.notna()])
    if m.empty:
        return pd.Series(False, index=o.index)
    m["_end"] = m["start_us"] + m["dur_us"]
    keys = [c for c in ("rank", "thread") if c in m.columns]
    m = m.sort_values([*keys, "start_us", "_end"], ascending=[True] * len(keys) + [True, False],
                      kind="mergesort")
    keep = dict.fromkeys(m.index, True)
    lane = m[keys].astype("string").fillna("").agg("/".join, axis=1) if keys else \
        pd.Series("", index=m.index)
    stack: list[tuple[float, Any, int]] = []
    current = None
    for idx, ln, start, end, kind in zip(m.index, lane, m["start_us"], m["_end"], m["_kind"],
                                         strict=True):
        if ln != current:
            stack, current = [], ln
        while stack and stack[-1][0] <= start:
            stack.pop()
        prio = _PRIORITY[str(kind)]
        if any(p > prio for _, _, p in stack):
            keep[idx] = False
        else:
            for _, anc, p in stack:
                if p <= prio:
                    keep[anc] = False
        stack.append((end, idx, prio))
    out = pd.Series(False, index=o.index)
    out[[i for i, k in keep.items() if k]] = True
    return out


def operator_costs(profile: Any, causal: bool = True, backward_factor: float = 2.5
                   ) -> pd.DataFrame:
    """Per-call cost of every priced device task (or host operator): the rows behind
    :func:`operator_efficiency`.

    Returns
    -------
    DataFrame
        The source rows (``kernels``, or ``ops`` for a profile without device tasks; for
        ``ops`` only the innermost modelled operators) with ``label``, ``kind``, ``flops``,
        ``bytes``, ``dtype`` (of the first input) and ``causal``; ``kind`` is NA where no
        model applies. ``attrs["source"]`` names the table.
    """
    if is_lazy(profile):  # priced per rank on the rank's worker
        out = per_rank(profile, operator_costs, causal, backward_factor)
        out.attrs["source"] = "kernels" if "kernel" in " ".join(map(str, out.columns)) else ""
        return out
    return shared("operator_costs", (profile,), (causal, backward_factor),
                  lambda: _operator_costs(profile, causal, backward_factor))


#: The columns of the priced rows that :func:`operator_efficiency` and the chain searches
#: read (besides the PMU ratio columns); they price narrower rows than the full table.
_NARROW = ("rank", "step", "name", "type", "op_name", "stream", "thread", "start_us", "dur_us",
           "category", "input_shapes", "input_dtypes", "output_shapes", "output_dtypes",
           "output_formats", "concrete_inputs")


def _narrow_costs(profile: Any, causal: bool = True, backward_factor: float = 2.5
                  ) -> pd.DataFrame:
    """:func:`operator_costs` of an eager profile with only the :data:`_NARROW` columns."""
    return shared("operator_costs_narrow", (profile,), (causal, backward_factor),
                  lambda: _operator_costs(profile, causal, backward_factor, _NARROW))


def _operator_costs(profile: Any, causal: bool, backward_factor: float,
                    columns: Sequence[str] | None = None) -> pd.DataFrame:
    rows, source = _source(profile, columns)
    cols = {"kind": "string", "flops": "float64", "bytes": "float64", "dtype": "string",
            "causal": "string"}
    if rows.empty:
        out = empty_frame(cols, "no input shapes in this profile (Ascend kernel_details "
                                "Input Shapes, or PyTorch record_shapes=True)")
        out.attrs["source"] = ""
        return out
    rows = rows.assign(label=_label(rows))
    if source == "ops":
        rows = rows[_leaf_ops(rows, _per_label(rows["label"], kind_of)).to_numpy()]
    keys = ["label"] + [c for c in ("input_shapes", "input_dtypes", "output_shapes",
                                    "output_dtypes", "output_formats", "concrete_inputs")
                        if c in rows.columns]
    fast = _price_by_code(rows, keys, cols, causal, backward_factor,
                          call_ids=columns is not None)
    if fast is not None:
        fast.attrs["source"] = source
        return fast
    uniq = rows[keys].astype("string").drop_duplicates()
    priced = [_price(r._asdict(), causal, backward_factor)
              for r in uniq.itertuples(index=False)]
    table_ = pd.DataFrame(priced, columns=list(cols), index=uniq.index)
    table_ = pd.concat([uniq.reset_index(drop=True), table_.reset_index(drop=True)], axis=1)
    merged = rows.astype({c: "string" for c in keys}).merge(table_, on=keys, how="left")
    merged = merged.astype({c: d for c, d in cols.items()})
    merged.attrs["source"] = source
    return merged


def _price(d: dict[str, Any], causal: bool, backward_factor: float) -> tuple[Any, ...]:
    """(kind, flops, bytes, dtype, causal) of one distinct call (see :func:`cost_of`)."""
    got = cost_of(d["label"], d.get("input_shapes"), d.get("input_dtypes"),
                  d.get("output_shapes"), d.get("output_dtypes"), d.get("output_formats"),
                  d.get("concrete_inputs"), causal, backward_factor)
    dts = _split(d.get("input_dtypes"))
    dt = next((x for x in dts if np.isfinite(dtype_bytes(x))), "")
    if got is None:
        return (pd.NA, np.nan, np.nan, dt, pd.NA)
    c, causal_txt = got
    return (c.kind, c.flops, c.bytes, dt, causal_txt or pd.NA)


def _price_by_code(rows: pd.DataFrame, keys: list[str], cols: dict[str, str], causal: bool,
                   backward_factor: float, call_ids: bool = False) -> pd.DataFrame | None:
    """:func:`operator_costs`' table without a merge: each distinct call priced once.

    The key columns are coded (missing values form a key of their own, as in the merge),
    each distinct combination is priced once and the prices are spread back by code.
    Gives the rows in order with a fresh index and the key columns as text, as the
    left merge does. None when a combined code could overflow or a priced column
    already exists (the caller then merges). ``call_ids`` adds ``_call``: the distinct
    call of each row, numbered in order of first appearance.
    """
    if any(c in rows.columns for c in cols):
        return None
    text = rows.astype({c: "string" for c in keys})
    code = np.zeros(len(text), dtype=np.int64)
    span = 1.0
    for c in keys:
        part, uniq = shared_factorize(text[c], use_na_sentinel=False)
        span *= max(len(uniq), 1)
        if span >= 2.0**62:
            return None
        code *= max(len(uniq), 1)  # in place: no new million-row array per key
        code += part
    inverse, _ = pd.factorize(code)  # distinct calls numbered in order of first appearance
    first = _first_rows(inverse)
    distinct = take_rows(text[keys], first)
    priced = [_price(d._asdict(), causal, backward_factor)
              for d in distinct.itertuples(index=False)]
    table_ = pd.DataFrame(priced, columns=list(cols)).astype(cols)
    out = text.reset_index(drop=True)
    take = inverse.ravel()
    # each price column is the small table's column taken by code (no Python object per row)
    out = out.assign(**{c: take_array(table_[c].array, take) for c in cols})
    return out.assign(_call=take) if call_ids else out


def _first_rows(codes: np.ndarray) -> np.ndarray:
    """First row of each code, for codes numbered in order of first appearance (factorize).

    Such a code first appears where it exceeds every code before it.
    """
    return np.flatnonzero(codes > np.maximum.accumulate(np.r_[-1, codes[:-1]]))


def _per_label(labels: pd.Series, func: Any) -> pd.Series:
    """``labels.map(func)``, calling ``func`` once per distinct label."""
    codes, uniq = shared_factorize(labels, use_na_sentinel=False)
    mapped = np.array([func(u) for u in uniq] + [None], dtype=object)
    return pd.Series(mapped[codes], index=labels.index, dtype=object)


# --------------------------------------------------------------------------- hardware

_GPU_NAMES = (("h200", "h200"), ("h100", "h100"), ("h800", "h100"), ("a100", "a100"),
              ("a800", "a100"))


def infer_hardware(profile: Any) -> tuple[Hardware | None, str]:
    """The profiled device as a :class:`perfkit.Hardware` preset, and how it was known.

    Ascend NPUs (``meta.device_type == "npu"``) are taken as the ``ascend-910b`` preset
    (the text exports do not name the SKU); GPUs by the model name Kineto records in
    ``deviceProperties`` (A100 / A800, H100 / H800, H200). Anything else: ``(None, why)``.
    """
    meta = getattr(profile, "meta", None)
    members = list(profile) if hasattr(profile, "ranks") else [profile]
    metas = [meta] + [getattr(p, "meta", None) for p in members[:1]]
    for m in metas:
        if m is None:
            continue
        if str(getattr(m, "device_type", "")).lower() == "npu":
            return Hardware.preset("ascend-910b"), ("Ascend NPU profile: the ascend-910b "
                                                    "preset (the export does not name the "
                                                    "SKU; pass hardware= for yours)")
        for dev in (getattr(m, "extra", None) or {}).get("devices", []) or []:
            low = str(dev).lower()
            for pat, preset in _GPU_NAMES:
                if pat in low:
                    return Hardware.preset(preset), f"device {dev!r} in the trace"
    return None, ("the profile does not say which device ran it (no GPU model in the "
                  "trace): pass hardware=perfkit.Hardware.preset(...) for the roofline")


# --------------------------------------------------------------------------- groups

def _pmu(frame: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    comp = [c for c in ("aic_mac_ratio", "aiv_vec_ratio") if c in frame.columns]
    mem = [c for c in ("aic_mte1_ratio", "aic_mte2_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio")
           if c in frame.columns]
    if not comp or not mem:
        nan = pd.Series(np.nan, index=frame.index)
        return nan, nan
    def row_max(cols: list[str]) -> pd.Series:  # NaN only where every column is
        values = [frame[c].to_numpy(np.float64, na_value=np.nan) for c in cols]
        return pd.Series(np.fmax.reduce(values) if len(values) > 1 else values[0],
                         index=frame.index)

    return row_max(comp), row_max(mem)


def _partial(profile: Any, by: str, causal: bool, backward_factor: float) -> pd.DataFrame:
    """Per-group sums of one profile (or eager cluster); combined by the caller."""
    rows = _narrow_costs(profile, causal, backward_factor)
    if rows.empty:
        return pd.DataFrame()
    key_col = "label" if by == "type" else "name"
    if "input_shapes" not in rows.columns:
        rows = rows.assign(input_shapes=pd.NA)
    if "input_dtypes" not in rows.columns:
        rows = rows.assign(input_dtypes=pd.NA)
    comp, mem = _pmu(rows)
    ok = comp.notna() & mem.notna()
    if by == "type" and "_call" in rows.columns:
        out = _partial_by_call(rows, comp, mem, ok)
    else:
        out = _partial_by_row(rows, key_col, comp, mem, ok)
    out["steps"] = n_step_pairs(rows)
    out["_unit"] = str(getattr(getattr(profile, "meta", None), "rank", None))
    out["_source"] = rows.attrs.get("source", "")
    return out


_PARTIAL_SUMS = ("count", "total_us", "pmu_us", "pmu_c", "pmu_m")
_PARTIAL_FIRSTS = ("flops", "bytes", "kind", "dtype", "causal")  # constant per call


def _partial_by_row(rows: pd.DataFrame, key_col: str, comp: pd.Series, mem: pd.Series,
                    ok: pd.Series) -> pd.DataFrame:
    """:func:`_partial`'s groups, every row grouped by its key, shapes and dtypes as text."""
    rows = rows.assign(
        _k=rows[key_col].astype("string").fillna(""),
        _s=rows["input_shapes"].astype("string").fillna(""),
        _d=rows["input_dtypes"].astype("string").fillna(""),
        _fl=rows["flops"], _by=rows["bytes"],
        _pt=rows["dur_us"].where(ok, 0.0), _pc=(comp * rows["dur_us"]).where(ok, 0.0),
        _pm=(mem * rows["dur_us"]).where(ok, 0.0))
    g = rows.groupby(["_k", "_s", "_d"], sort=False, dropna=False)
    out = g.agg(count=("dur_us", "size"), total_us=("dur_us", "sum"),
                flops=("_fl", "first"), bytes=("_by", "first"), kind=("kind", "first"),
                name=("name", "first"), dtype=("dtype", "first"), causal=("causal", "first"),
                pmu_us=("_pt", "sum"), pmu_c=("_pc", "sum"), pmu_m=("_pm", "sum"))
    return out.reset_index().rename(columns={"_k": "key", "_s": "input_shapes",
                                             "_d": "input_dtypes"})


def _partial_by_call(rows: pd.DataFrame, comp: pd.Series, mem: pd.Series, ok: pd.Series
                     ) -> pd.DataFrame:
    """:func:`_partial_by_row` by type, summed per distinct call first.

    A group (label, shapes, dtypes) is a set of whole calls (``_call`` of the priced
    rows), whose prices are constant: the rows are summed per call (integer codes), then
    the few calls are grouped as the rows would be. The name is the group's first
    non-missing one in row order, as ``first`` gives it.
    """
    call = rows["_call"].to_numpy(np.int64)
    dur = rows["dur_us"].to_numpy(np.float64, na_value=np.nan)
    okv = ok.to_numpy(bool)
    first = _first_rows(call)
    n_calls = len(first)

    def total(values: np.ndarray) -> np.ndarray:  # per call, missing values left out
        return np.bincount(call, np.where(np.isnan(values), 0.0, values), n_calls)

    sums = {"count": np.bincount(call, minlength=n_calls), "total_us": total(dur),
            "pmu_us": total(np.where(okv, dur, 0.0)),
            "pmu_c": total(np.where(okv, comp.to_numpy(np.float64) * dur, 0.0)),
            "pmu_m": total(np.where(okv, mem.to_numpy(np.float64) * dur, 0.0))}
    calls = take_rows(rows[["label", "input_shapes", "input_dtypes", "flops", "bytes",
                            "kind", "dtype", "causal", "name"]], first).reset_index(drop=True)
    calls.attrs = {}  # as a groupby's result: the rows' notes stay with the rows
    named = np.flatnonzero(rows["name"].notna().to_numpy(bool))
    name_at = np.full(len(first), len(call), dtype=np.int64)
    np.minimum.at(name_at, call[named], named)
    calls = calls.assign(
        _k=calls["label"].astype("string").fillna(""),
        _s=calls["input_shapes"].astype("string").fillna(""),
        _d=calls["input_dtypes"].astype("string").fillna(""),
        name=take_rows(rows[["name"]], np.minimum(name_at, len(call) - 1))["name"].array,
        _named=name_at < len(call), **{c: sums[c] for c in _PARTIAL_SUMS})
    calls["name"] = calls["name"].where(calls["_named"])
    keys = ["_k", "_s", "_d"]
    g = calls.groupby(keys, sort=False, dropna=False)
    out = g.agg(**{c: (c, "sum") for c in _PARTIAL_SUMS},
                **{c: (c, "first") for c in _PARTIAL_FIRSTS})
    # the name: the group's call whose first named row comes first
    by_name = calls.assign(_at=name_at).sort_values("_at", kind="mergesort")
    out["name"] = by_name.groupby(keys, sort=False, dropna=False)["name"].first()
    out = out[["count", "total_us", "flops", "bytes", "kind", "name", "dtype", "causal",
               "pmu_us", "pmu_c", "pmu_m"]]
    return out.reset_index().rename(columns={"_k": "key", "_s": "input_shapes",
                                             "_d": "input_dtypes"})


def operator_efficiency(profile: Any, hardware: Hardware | None = None, by: str = "type",
                        causal: bool = True, backward_factor: float = 2.5,
                        n: int | None = None) -> pd.DataFrame:
    """Per operator and input shapes: FLOPs, bytes, achieved rates, roofline and bound.

    Parameters
    ----------
    profile : Profile or Cluster
        Shapes come from the device tasks (Ascend ``kernel_details``, GPU kernels through
        their PyTorch operator); a profile without device tasks (a CPU-only PyTorch trace)
        is priced from its innermost host operators.
    hardware : perfkit.Hardware, optional
        The roofline's peaks. Default: the profiled device (:func:`infer_hardware`); when
        it is unknown the roofline columns are NA and a note says to pass one.
    by : {"type", "name"}
        Group by operator (Ascend type, PyTorch operator) or by kernel name, and always by
        input shapes and dtypes.
    causal : bool
        Attention is causal where the profile does not say (PyTorch records it).
    backward_factor : float
        Attention backward FLOPs over forward (2.5: FlashAttention-2's five products, as
        PyTorch's ``flop_counter`` counts; 2.0: a backward that keeps the scores).
    n : int, optional
        Keep the ``n`` groups with the most time.

    Returns
    -------
    DataFrame
        :data:`EFFICIENCY_COLUMNS`, one row per group, most time first: ``kind`` (NA
        where no model applies), ``count``, ``total_us`` (summed over ranks and steps),
        ``mean_us``, ``per_step_us`` (total / (rank, step) pairs), ``flops`` and ``bytes``
        per call, their totals, ``achieved_tflops`` (total FLOPs / total time),
        ``achieved_gbps``, ``intensity`` (FLOPs / byte), ``peak_dtype`` and ``peak_tflops``
        (the hardware's peak used), ``bound_tflops`` (the roofline at that intensity),
        ``ideal_us`` (per call, at the roofline), ``efficiency`` (achieved over roofline),
        ``bound`` (``compute`` / ``memory``), ``causal`` (attention), and the Ascend PMU
        pipe ratios beside it (duration-weighted ``pmu_compute_ratio``,
        ``pmu_memory_ratio`` and ``pmu_bound`` by :func:`operator_bound`'s rule).
        ``attrs["hardware"]`` names the hardware used; notes say where numbers come from.
    """
    if by not in ("type", "name"):
        raise InvalidArgumentError("by", "must be 'type' or 'name'", by)
    if hardware is not None and not isinstance(hardware, Hardware):
        raise InvalidArgumentError("hardware", "must be a perfkit.Hardware",
                                   type(hardware).__name__)
    why = "given"
    if hardware is None:
        hardware, why = infer_hardware(profile)
    if is_lazy(profile):
        part = per_rank(profile, _partial, by, causal, backward_factor)
    else:
        part = _partial(profile, by, causal, backward_factor)
    if part.empty:
        return empty_frame(EFFICIENCY_COLUMNS, "no input shapes in this profile: operator "
                           "efficiency needs Ascend kernel_details Input Shapes or a PyTorch "
                           "trace recorded with record_shapes=True")
    source = str(part["_source"].iloc[0])
    steps = int(part.groupby("_unit")["steps"].max().sum())
    g = part.groupby(["key", "input_shapes", "input_dtypes"], sort=False, dropna=False).agg(
        count=("count", "sum"), total_us=("total_us", "sum"), flops=("flops", "first"),
        bytes=("bytes", "first"), kind=("kind", "first"), name=("name", "first"),
        dtype=("dtype", "first"), causal=("causal", "first"), pmu_us=("pmu_us", "sum"),
        pmu_c=("pmu_c", "sum"), pmu_m=("pmu_m", "sum")).reset_index()
    g["mean_us"] = g["total_us"] / g["count"]
    g["per_step_us"] = g["total_us"] / max(steps, 1)
    g["total_flops"] = g["flops"] * g["count"]
    g["total_bytes"] = g["bytes"] * g["count"]
    secs = g["total_us"].where(g["total_us"] > 0) * 1e-6
    g["achieved_tflops"] = g["total_flops"] / secs / 1e12
    g["achieved_gbps"] = g["total_bytes"] / secs / 1e9
    g["intensity"] = g["flops"] / g["bytes"].where(g["bytes"] > 0)
    out = g
    notes: list[str] = []
    if hardware is not None:
        keys = [peak_key(d) if isinstance(d, str) else None for d in out["dtype"]]
        have = [k in hardware.peak_flops if k else False for k in keys]
        out["peak_dtype"] = [k if h else hardware.default_dtype
                             for k, h in zip(keys, have, strict=True)]
        out["peak_tflops"] = out["peak_dtype"].map(hardware.peak) / 1e12
        bw = hardware.memory_bandwidth
        peak = out["peak_tflops"] * 1e12
        roof = np.minimum(peak, out["intensity"] * bw)
        out["bound_tflops"] = roof / 1e12
        ideal = np.maximum(out["flops"] / peak, out["bytes"] / bw) * 1e6
        out["ideal_us"] = ideal.where(out["kind"].notna())
        compute_eff = out["achieved_tflops"] * 1e12 / roof.where(roof > 0)
        move_eff = out["achieved_gbps"] * 1e9 / bw
        out["efficiency"] = compute_eff.where(out["flops"] > 0, move_eff)
        lab = np.where(out["intensity"] * bw < peak, "memory", "compute")
        lab = np.where(out["flops"] == 0, "memory", lab)
        out["bound"] = pd.Series(lab, index=out.index, dtype="string").where(
            out["kind"].notna() & out["bytes"].notna())
        missing = sorted({str(d) for d, h in zip(out["dtype"], have, strict=True)
                          if not h and isinstance(d, str) and d})
        if missing:
            notes.append(f"{hardware.name} lists no peak for {', '.join(missing)}: those "
                         f"operators use its {hardware.default_dtype} peak (peak_dtype)")
        if (out["efficiency"] > 1.05).any():
            notes.append("some operators run above their roofline (efficiency > 100 %): "
                         "their data came partly from on-chip cache (the bytes assume device "
                         "memory), the hardware given is not the one profiled, or their "
                         "shapes are read wrongly")
        notes.append(f"roofline of {hardware.name} ({why})")
    else:
        for c in ("peak_tflops", "bound_tflops", "ideal_us", "efficiency"):
            out[c] = np.nan
        out["peak_dtype"] = pd.NA
        out["bound"] = pd.NA
        notes.append(why)
    out["pmu_compute_ratio"] = out["pmu_c"] / out["pmu_us"].where(out["pmu_us"] > 0)
    out["pmu_memory_ratio"] = out["pmu_m"] / out["pmu_us"].where(out["pmu_us"] > 0)
    pl = np.where(out["pmu_memory_ratio"] > out["pmu_compute_ratio"], "memory", "compute")
    pl = np.where((out["pmu_compute_ratio"] < 0.2) & (out["pmu_memory_ratio"] < 0.2),
                  "latency", pl)
    out["pmu_bound"] = pd.Series(pl, index=out.index, dtype="string").where(
        out["pmu_compute_ratio"].notna() & ((out["pmu_compute_ratio"] > 0)
                                            | (out["pmu_memory_ratio"] > 0)))
    out = out.sort_values("total_us", ascending=False, kind="mergesort")
    if n is not None:
        out = out.head(n)
    out = out[list(EFFICIENCY_COLUMNS)].astype(EFFICIENCY_COLUMNS).reset_index(drop=True)
    if source == "ops":
        notes.insert(0, "no device tasks: priced from the innermost host operators "
                        "(CPU time of a CPU-only run)")
    for note in notes:
        add_note(out, note)
    out.attrs["hardware"] = hardware.name if hardware is not None else None
    return out


# --------------------------------------------------------------------------- chains

#: Kinds that form an element-wise chain (normalisations and reductions end a chain: their
#: fusions are the named patterns of :data:`perfkit.analysis.operators.PATTERNS`).
_CHAIN_KINDS = ("elementwise",)


def _ordered(profile: Any, columns: Sequence[str]) -> pd.DataFrame:
    """Priced rows in execution order per (rank, stream or thread).

    Only ``columns`` (those present) are taken, besides ``rank`` and ``_lane`` (an
    integer per stream or thread); the order is found on the three sort keys alone and
    shared by the callers of one :func:`shared_results` block.
    """
    rows, order = shared("ordered", (profile,), (), lambda: _order(profile))
    if rows.empty:
        return pd.DataFrame()
    cols = list(dict.fromkeys(["rank", "_lane", *[c for c in columns if c in rows.columns]]))
    return take_rows(rows[cols], order).reset_index(drop=True)


def _order(profile: Any) -> tuple[pd.DataFrame, np.ndarray]:
    rows = _narrow_costs(profile)
    if rows.empty or "start_us" not in rows.columns:
        return pd.DataFrame(), np.zeros(0, dtype=np.int64)
    lane = "stream" if "stream" in rows.columns and rows["stream"].notna().any() else "thread"
    if lane not in rows.columns:
        rows = rows.assign(thread=0)
    # the lane ordered as its text ("" when missing), coded per distinct value: ``_lane``
    # is the rank of the lane's text among the lanes' texts
    code, uniq = shared_factorize(rows[lane], use_na_sentinel=True)
    code = np.where(code < 0, len(uniq), code)
    text = np.array([*pd.Series(uniq, dtype=object).astype(str), ""], dtype=str)
    _, text_rank = np.unique(text, return_inverse=True)
    rows = rows.assign(_lane=text_rank.ravel().astype(np.int64)[code])
    if "rank" not in rows.columns:
        rows = rows.assign(rank=0)
    keys = pd.DataFrame({"rank": rows["rank"].array, "_lane": rows["_lane"].to_numpy(),
                         "start_us": rows["start_us"].to_numpy()})
    order = stable_order(keys, ["rank", "_lane", "start_us"])
    return rows, np.arange(len(rows)) if order is None else order


def elementwise_chains(profile: Any, hardware: Hardware | None = None, min_chain: int = 3,
                       kernel_efficiency: float = 0.7) -> pd.DataFrame:
    """Runs of consecutive element-wise kernels (memory-bound by nature).

    On each (rank, stream) (host thread for a profile without device tasks), a run is at
    least ``min_chain`` priced element-wise kernels in a row (a normalisation, reduction,
    GEMM or attention kernel ends it). One fused kernel would move
    about the data of the run's largest member once, at ``kernel_efficiency`` of the
    memory bandwidth: ``fused_us = max(bytes) / (kernel_efficiency · bandwidth)`` and
    ``saving_us = max(0, total_us - fused_us)``.

    Returns
    -------
    DataFrame
        One row per run: ``rank``, ``kernels``, ``total_us``, ``fused_us``, ``saving_us``,
        ``names`` (the operators, ``" > "``-joined). Empty without shapes or hardware.
    """
    cols = {"rank": "Int64", "kernels": "int64", "total_us": "float64", "fused_us": "float64",
            "saving_us": "float64", "names": "string"}
    if hardware is None:
        hardware, why = infer_hardware(profile)
        if hardware is None:
            return empty_frame(cols, why)
    if isinstance(min_chain, bool) or not isinstance(min_chain, int) or min_chain < 2:
        raise InvalidArgumentError("min_chain", "must be a whole number >= 2", min_chain)
    if not 0 < kernel_efficiency <= 1:
        raise InvalidArgumentError("kernel_efficiency", "must be in (0, 1]", kernel_efficiency)
    if is_lazy(profile):  # streams never span ranks: each rank on its worker
        return per_rank(profile, elementwise_chains, hardware, min_chain,
                        kernel_efficiency)[list(cols)].astype(cols)
    rows = _ordered(profile, ("kind", "dur_us", "bytes"))
    if rows.empty:
        return empty_frame(cols, "no input shapes in this profile")
    mem = rows["kind"].isin(list(_CHAIN_KINDS)).fillna(False).to_numpy(bool)
    new_lane = np.r_[True, value_changes(rows["rank"], rows["_lane"])]
    brk = ~mem | new_lane | ~np.r_[False, mem[:-1]]
    at = np.flatnonzero(mem)  # the element-wise rows, in run order
    if not len(at):
        return empty_frame(cols, "no element-wise operator")
    # each run is a block of consecutive element-wise rows: summed block by block (a run
    # never spans two ranks, so its first row gives the rank)
    run = np.cumsum(brk)[at]
    lo = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
    hi = np.r_[lo[1:], len(at)]
    dur = rows["dur_us"].to_numpy(np.float64, na_value=np.nan)[at]
    size = rows["bytes"].to_numpy(np.float64, na_value=np.nan)[at]
    total = np.add.reduceat(np.nan_to_num(dur, nan=0.0), lo)
    biggest = np.maximum.reduceat(np.where(np.isnan(size), -np.inf, size), lo)
    keep = hi - lo >= min_chain
    lo, hi, total, biggest = lo[keep], hi[keep], total[keep], biggest[keep]
    out = pd.DataFrame({"rank": rows["rank"].array.take(at[lo]), "kernels": hi - lo,
                        "total_us": total,
                        "max_bytes": np.where(np.isneginf(biggest), np.nan, biggest)})
    # names of the runs kept: the labels of each run's rows, by code
    codes, text = _ordered_codes(profile, "label")
    out["names"] = _joined_runs(codes[at], text, lo, hi)
    out["fused_us"] = out["max_bytes"] / (kernel_efficiency * hardware.memory_bandwidth) * 1e6
    out["saving_us"] = (out["total_us"] - out["fused_us"]).clip(lower=0)
    return out[list(cols)].astype(cols)


def _ordered_codes(profile: Any, column: str) -> tuple[np.ndarray, list[str]]:
    """Codes of ``column`` of the :func:`_ordered` rows, and the text of each code.

    Coded on the priced rows (codes the pricing shares) and put in order, instead of
    taking the text column in order and coding it again.
    """
    rows, order = shared("ordered", (profile,), (), lambda: _order(profile))
    codes, uniq = shared_factorize(rows[column], use_na_sentinel=False)
    return codes[order], pd.Series(uniq, dtype="string").astype(str).tolist()


def _joined_runs(codes: np.ndarray, text: list[str], lo: np.ndarray, hi: np.ndarray
                 ) -> np.ndarray:
    """``" > ".join(text[c] for c in codes[a:b])`` for each run ``[a, b)`` of ``lo``/``hi``.

    Runs repeat (every layer runs the same chain), so each distinct sequence of codes is
    joined once: runs of one length are stacked and deduplicated as rows.
    """
    out = np.empty(len(lo), dtype=object)
    lengths = hi - lo
    base = max(len(text), 1)
    for length in np.unique(lengths):
        sel = np.flatnonzero(lengths == length)
        seqs = codes[lo[sel][:, None] + np.arange(length)].astype(np.int64)
        if length * np.log2(base) < 62:  # each sequence as one integer (digits in base)
            inverse, _ = pd.factorize(seqs @ base ** np.arange(length, dtype=np.int64))
            uniq = seqs[_first_rows(inverse)]
        else:
            uniq, inverse = np.unique(seqs, axis=0, return_inverse=True)
        joined = np.array([" > ".join([text[c] for c in row]) for row in uniq.tolist()],
                          dtype=object)
        out[sel] = joined[inverse.ravel()]
    return out


def attention_chains(profile: Any, hardware: Hardware | None = None,
                     kernel_efficiency: float = 0.7) -> pd.DataFrame:
    """Attention computed as matmul, softmax (dropout), matmul instead of a fused kernel.

    Chains are found with the ``softmax_dropout_matmul`` pattern of
    :data:`perfkit.analysis.operators.PATTERNS` (on ranks with no fused-attention kernel).
    A fused kernel does the chain's matrix FLOPs without writing the score matrix:
    ``fused_us = FLOPs of the chain's GEMMs / (kernel_efficiency · peak)``;
    ``saving_us = max(0, total_us - fused_us)``.

    Returns
    -------
    DataFrame
        ``rank``, ``kernels``, ``total_us``, ``flops``, ``fused_us``, ``saving_us``.
    """
    from .operators import PATTERNS, kernel_tokens

    cols = {"rank": "Int64", "kernels": "int64", "total_us": "float64", "flops": "float64",
            "fused_us": "float64", "saving_us": "float64"}
    if hardware is None:
        hardware, why = infer_hardware(profile)
        if hardware is None:
            return empty_frame(cols, why)
    if is_lazy(profile):
        return per_rank(profile, attention_chains, hardware,
                        kernel_efficiency)[list(cols)].astype(cols)
    rows = _ordered(profile, ("type", "name", "dur_us", "flops", "kind", "dtype"))
    if rows.empty:
        return empty_frame(cols, "no input shapes in this profile")
    tok = kernel_tokens(rows).to_numpy()
    flash = set(rows.loc[tok == "Z", "rank"].dropna().tolist())
    sep = np.where(np.r_[True, value_changes(rows["rank"], rows["_lane"])], "|", "")
    text_tokens = np.char.add(sep.astype(str), tok.astype(str))
    row_of = np.repeat(np.arange(len(rows)), np.char.str_len(text_tokens))
    text = "".join(text_tokens.tolist())
    found = []
    dur = rows["dur_us"].to_numpy(float)
    flops = rows["flops"].where(rows["kind"] == "gemm", 0.0).fillna(0.0).to_numpy(float)
    dts = rows["dtype"].astype("string").fillna("")
    for m in re.finditer(PATTERNS["softmax_dropout_matmul"][0], text):
        a, b = row_of[m.start()], row_of[m.end() - 1]
        rank = rows["rank"].iloc[a]
        if rank in flash:
            continue
        key = peak_key(dts.iloc[a]) or hardware.default_dtype
        peak = hardware.peak(key if key in hardware.peak_flops else None)
        fl = float(flops[a:b + 1].sum())
        fused = fl / (kernel_efficiency * peak) * 1e6
        tot = float(dur[a:b + 1].sum())
        found.append((rank, b - a + 1, tot, fl, fused, max(0.0, tot - fused)))
    if not found:
        return empty_frame(cols, "no unfused attention chain")
    return pd.DataFrame(found, columns=list(cols)).astype(cols)
