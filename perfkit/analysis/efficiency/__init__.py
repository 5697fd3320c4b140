"""Operator efficiency from shapes: FLOPs, bytes, achieved rates and the roofline.

:func:`operator_efficiency` reads the input (and, where the profiler records them, output)
shapes and dtypes of every device task (Ascend ``kernel_details``: ``Input Shapes``,
``Input Data Types``, ``Output Shapes``; GPU kernels through the PyTorch operator that
launched them, Kineto ``Input Dims`` / ``Input type``), or of the host operators of a
profile without device tasks (a CPU-only PyTorch trace), and prices each call with one
performance model per kind of operator, whose formulas are the pure functions of
:mod:`perfkit.calc.op_cost`. Against a :class:`perfkit.Hardware` it gives the roofline
(Williams, Waterman, Patterson, CACM 2009):

``attainable(I) = min(peak_flops[dtype], I × memory_bandwidth)`` with ``I = FLOPs / bytes``;
an operator is **memory-bound** when ``I × bandwidth < peak`` (left of the ridge point
``peak / bandwidth``) and **compute-bound** otherwise. ``efficiency`` is the achieved rate
over that bound: ``achieved FLOP/s / attainable(I)`` (for a pure data-movement operator
with no FLOPs: ``achieved bytes/s / bandwidth``). The ideal time of one call is
``max(FLOPs / peak, bytes / bandwidth)``.

The package, one job per module (conventions of each model in its docstring, and in
docs/analysis.md):

* :mod:`~.tensors` — an operator's recorded arguments: shapes, dtypes, scalar inputs;
* :mod:`~.perf_model` — what a performance model is (:class:`~.perf_model.PerfModel`,
  one :class:`~.perf_model.Call`);
* :mod:`~.gemm`, :mod:`~.attention`, :mod:`~.conv`, :mod:`~.memory_bound` — the models
  (GEMM; attention with its causal-argument positions; convolution; normalisation,
  reduction and element-wise);
* :mod:`~.registry` — which model prices a label (:func:`kind_of`), pricing one call
  (:func:`cost_of`);
* :mod:`~.costs` — the priced rows of a profile (:func:`operator_costs`);
* :mod:`~.hardware` — the profiled device as a preset (:func:`infer_hardware`);
* :mod:`~.table` — the roofline table (:func:`operator_efficiency`);
* :mod:`~.chains` — element-wise and attention chains a fused kernel would replace;
* :mod:`~.unfused_saving` — the unfused-pattern table with the attention row's saving
  priced on the roofline, as the advisor prices it (:func:`unfused_savings`).
"""

from .chains import (
    attention_chain_gemms,
    attention_chains,
    elementwise_chains,
    may_hold_bmm_attention,
)
from .costs import COST_COLUMNS, operator_costs
from .hardware import infer_hardware
from .registry import KIND_PATTERNS as KIND_PATTERNS  # importable here, not in __all__
from .registry import cost_of, kind_of
from .table import EFFICIENCY_COLUMNS, operator_efficiency
from .tensors import dtype_bytes, parse_shapes, peak_key
from .unfused_saving import unfused_savings

__all__ = ["operator_efficiency", "operator_costs", "infer_hardware", "cost_of",
           "elementwise_chains", "attention_chains", "attention_chain_gemms",
           "may_hold_bmm_attention", "unfused_savings",
           "parse_shapes", "dtype_bytes", "peak_key", "kind_of", "EFFICIENCY_COLUMNS",
           "COST_COLUMNS"]
