"""Pipeline stage balancing as an integer program, in the manner of MindFormers SAPP.

Given per-layer-type forward times and memories per recompute mode, choose how many layers
of each type, with which recompute mode, go to each (virtual chunk, stage) so that the
pipeline time is minimal and every stage fits its memory (the model, its formulas and its
sources: :mod:`perfkit.plan.balance.solve`).

One job per module: :mod:`~perfkit.plan.balance.layers` (the layer types and recompute
types), :mod:`~perfkit.plan.balance.sources` (layer types from perfkit's models or SAPP's
JSON), :mod:`~perfkit.plan.balance.solve` (:func:`balance_pipeline`),
:mod:`~perfkit.plan.balance.result` (:class:`BalancePlan` and its MindFormers YAML) and
:mod:`~perfkit.plan.balance.memory` (:func:`decompose_memory`, per-layer memories from
measured stage peaks).
"""

from __future__ import annotations

from .layers import DEFAULT_RECOMPUTE_COEF, RECOMPUTE_TYPES, BalanceError, LayerType
from .memory import decompose_memory
from .result import BalancePlan
from .solve import balance_pipeline
from .sources import layers_from_model, read_sapp_layers

__all__ = [
    "RECOMPUTE_TYPES",
    "DEFAULT_RECOMPUTE_COEF",
    "LayerType",
    "BalanceError",
    "BalancePlan",
    "balance_pipeline",
    "layers_from_model",
    "read_sapp_layers",
    "decompose_memory",
]
