"""What a performance model is: the operators it prices and how one call is priced.

A model is one kind of operator (GEMM, attention, convolution, ...). It names the operator
labels it prices (a regular expression on the Ascend type, the PyTorch operator or the
kernel name) and turns one :class:`Call` — the call's tensor arguments and scalar inputs —
into an :class:`perfkit.calc.op_cost.OpCost` with the pure formulas of
:mod:`perfkit.calc.op_cost`. Which argument is which (the bias of ``addmm``, ``is_causal``
of each attention operator, a convolution's stride) is the model's own knowledge; the
registry (:mod:`perfkit.analysis.efficiency.registry`) maps a label to its model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from ...calc.op_cost import OpCost
from .tensors import Tensor

__all__ = ["Call", "PerfModel", "Priced", "is_backward"]

#: A priced call: the cost and a note (for attention, whether it is causal and who said
#: so: ``"yes (profile)"``, ``"no (assumed)"``; empty for the other kinds).
Priced = tuple[OpCost, str]

_BACKWARD = re.compile(r"grad|backward|bwd|backprop", re.IGNORECASE)


def is_backward(label: str) -> bool:
    """Whether an operator label names a backward (gradient) operator."""
    return bool(_BACKWARD.search(label))


@dataclass(frozen=True)
class Call:
    """One call of an operator as the profile recorded it.

    Attributes
    ----------
    label : str
        Ascend operator type, PyTorch operator name (``aten::mm``) or kernel name.
    ins, outs : list of Tensor
        The tensor inputs and outputs with a known dtype, in argument order (non-tensor
        arguments left out).
    concrete : list of str
        PyTorch's ``Concrete Inputs``, one field per argument (empty when absent).
    out_formats : list of str
        Ascend ``Output Formats`` (``NC1HWC0``, ...), one per output.
    causal : bool
        Whether attention is causal where the profile does not say.
    backward_factor : float
        Attention backward FLOPs over forward.
    """

    label: str
    ins: list[Tensor]
    outs: list[Tensor]
    concrete: list[str]
    out_formats: list[str]
    causal: bool = True
    backward_factor: float = 2.5


class PerfModel:
    """A performance model of one kind of operator (subclass it and set the class fields).

    Attributes
    ----------
    kind : str
        The ``kind`` column of the priced rows (``"gemm"``, ``"attention"``, ...).
    pattern : str
        Regular expression (case-insensitive, ``re.search``) on the operator label.
    priority : int
        When modelled host operators nest, the heavier kind is priced (a fused attention
        operator, not the element-wise helpers it calls); of equal kinds, the innermost.
    """

    kind: ClassVar[str]
    pattern: ClassVar[str]
    priority: ClassVar[int]

    def __init__(self) -> None:
        self.regex = re.compile(self.pattern, re.IGNORECASE)

    def matches(self, label: str) -> bool:
        """Whether this model prices operator ``label``."""
        return bool(self.regex.search(label))

    def cost(self, call: Call) -> Priced | None:
        """Price one call; None when the shapes do not fit the model."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind!r}>"
