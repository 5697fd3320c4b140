"""The registry of performance models: which model prices an operator, and pricing a call.

:data:`MODELS` lists one model per kind of operator, in the order a label is tried (the
first whose pattern matches prices it), as TraceLens maps operator names to its perf
model classes. A new kind is one module with a :class:`~.perf_model.PerfModel` subclass
and one line here.
"""

from __future__ import annotations

from typing import Any

from .attention import ATTENTION
from .conv import CONV
from .gemm import GEMM
from .memory_bound import ELEMENTWISE, NORM, REDUCTION
from .perf_model import Call, PerfModel, Priced
from .tensors import parse_shapes, split_args, tensors

__all__ = ["MODELS", "KIND_PATTERNS", "PRIORITY", "model_for", "kind_of", "cost_of"]

#: The models, in the order a label is matched against them.
MODELS: tuple[PerfModel, ...] = (ATTENTION, GEMM, CONV, NORM, REDUCTION, ELEMENTWISE)

#: (kind, regex on the operator label: Ascend type, PyTorch operator, or kernel name).
KIND_PATTERNS: tuple[tuple[str, str], ...] = tuple((m.kind, m.pattern) for m in MODELS)

#: When modelled host operators nest, the heavier kind is priced (see
#: :attr:`~.perf_model.PerfModel.priority`).
PRIORITY: dict[str, int] = {m.kind: m.priority for m in MODELS}


def model_for(label: Any) -> PerfModel | None:
    """The model that prices operator ``label`` (None: no model applies)."""
    text = str(label or "")
    for model in MODELS:
        if model.matches(text):
            return model
    return None


def kind_of(label: Any) -> str | None:
    """Model kind of an operator label (``None``: no model applies)."""
    model = model_for(label)
    return model.kind if model is not None else None


def cost_of(label: str, input_shapes: Any, input_dtypes: Any, output_shapes: Any = None,
            output_dtypes: Any = None, output_formats: Any = None, concrete_inputs: Any = None,
            causal: bool = True, backward_factor: float = 2.5) -> Priced | None:
    """Price one call of operator ``label`` from its shapes and dtypes.

    Parameters
    ----------
    label : str
        Ascend operator type, PyTorch operator name (``aten::mm``), or kernel name.
    input_shapes, input_dtypes, output_shapes, output_dtypes, output_formats : str
        As in the ``kernels`` / ``ops`` tables (``"m,k;k,n"``, ``"DT_BF16;DT_BF16"``).
        Outputs without recorded dtypes take the first input's.
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
    model = model_for(label)
    if model is None:
        return None
    dt_in = split_args(input_dtypes)
    ins = tensors(parse_shapes(input_shapes), dt_in)
    outs = tensors(parse_shapes(output_shapes), split_args(output_dtypes) or dt_in[:1] * 8)
    if not ins and not outs:
        return None
    return model.cost(Call(label, ins, outs, split_args(concrete_inputs),
                           split_args(output_formats), causal, backward_factor))
