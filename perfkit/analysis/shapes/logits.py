"""The bytes an inference step holds per logit, from its operators' input types.

The output layer is the ``aten::linear`` whose weight has one row per vocabulary entry
(:func:`perfkit.analysis.shapes.fused_moe.logits_rows`). Kineto records its operators'
inputs, not their outputs, so the logits' type is read where they are used: the first
later operator whose first input ends in the vocabulary (views and reshapes left out) takes
the logits, in their type (2 bytes in a bf16 or fp16 run; under ``torch.autocast`` the
linear itself records its fp32 inputs but writes 16-bit logits, which its consumers show).
With no such operator, the output layer's input type. Hugging Face's causal LMs
(``LlamaForCausalLM``, ``Qwen2ForCausalLM`` before transformers 4.45) then upcast the
logits, ``logits = logits.float()``: an ``aten::_to_copy`` of a 16-bit tensor whose last
dimension is the vocabulary. At that moment the 16-bit logits and their fp32 copy are both
allocated, ``2 + 4`` bytes per logit, which
:func:`perfkit.calc.inference_memory.logits_working_bytes` counts.
"""

from __future__ import annotations

from math import isnan

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ..efficiency.tensors import dtype_bytes, peak_key
from .records import parse_shapes

__all__ = ["logit_bytes"]

#: The fp32 copy an upcast makes of each logit.
_FP32 = 4.0
#: Operators that only view their input: not a use of the logits that shows their type.
_VIEWS = frozenset({"aten::view", "aten::reshape", "aten::_unsafe_view", "aten::slice",
                    "aten::select", "aten::as_strided", "aten::t", "aten::transpose",
                    "aten::expand", "aten::unsqueeze", "aten::squeeze", "aten::linear",
                    "aten::matmul", "aten::mm", "aten::addmm"})


def _first_type(types: object) -> str:
    return str(types).split(";")[0].strip()


def _ends_in(shapes: object, width: int) -> bool:
    s = parse_shapes(shapes)
    return bool(s and s[0] and s[0][-1] == width)


def logit_bytes(ops: pd.DataFrame, vocab_rows: int) -> tuple[float, str] | None:
    """Bytes held per logit and the sentence that says why, or None where no output layer
    over ``vocab_rows`` rows (the vocabulary, or one tp rank's slice of it) is seen or no
    type is recorded (module docstring).

    The logits' element size ``e`` (their first user's input type, else the output
    layer's); ``e + 4`` where an ``aten::_to_copy`` takes them as a 16-bit tensor (an
    upcast to fp32).
    """
    need = {"input_shapes", "input_dtypes", "name", "start_us"}
    if ops.empty or not need <= set(ops.columns):
        return None
    ops = ops.sort_values("start_us", kind="stable")
    names = ops["name"].astype(TEXT).fillna("")
    head = None
    for start, shapes, types in ops.loc[(names == "aten::linear").to_numpy(bool),
                                        ["start_us", "input_shapes", "input_dtypes"]
                                        ].itertuples(index=False):
        s = parse_shapes(shapes)
        if len(s) >= 2 and len(s[1]) == 2 and s[1][0] == vocab_rows:
            head = (start, _first_type(types))
            break
    if head is None:
        return None
    later = ops[(ops["start_us"] >= head[0]).to_numpy(bool)
                & ~names.isin(_VIEWS).to_numpy(bool)]
    users = later[np.array([_ends_in(x, vocab_rows) for x in later["input_shapes"]],
                           dtype=bool)]  # an array: an empty list would pick columns
    kind, where = head[1], "the output layer's input type"
    if len(users):
        kind = _first_type(users["input_dtypes"].iloc[0])
        where = f"as {users['name'].iloc[0]} takes them"
    size = dtype_bytes(kind)
    if isnan(size):
        return None
    name = peak_key(kind) or kind
    said = f"logits in {name}, {size:g} bytes each ({where})"
    if size == 2.0:
        copies = users[(users["name"] == "aten::_to_copy").to_numpy(bool)]
        if any(dtype_bytes(_first_type(t)) == 2 for t in copies["input_dtypes"]):
            return size + _FP32, (f"{said}, and an aten::_to_copy upcasts them to fp32: "
                                  f"{size:g} + 4 bytes per logit held at once")
    return size, said
