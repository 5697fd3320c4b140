"""Planning: parallel-strategy search and pipeline stage balancing."""

from .balance import (
    BalanceError,
    BalancePlan,
    LayerType,
    balance_pipeline,
    decompose_memory,
    layers_from_model,
    read_sapp_layers,
)
from .calibrate import Calibration, calibrate
from .search import SearchSpace, candidates, search, to_parallel_config

__all__ = [
    "Calibration",
    "calibrate",
    "SearchSpace",
    "candidates",
    "search",
    "to_parallel_config",
    "BalanceError",
    "BalancePlan",
    "LayerType",
    "balance_pipeline",
    "decompose_memory",
    "layers_from_model",
    "read_sapp_layers",
]
