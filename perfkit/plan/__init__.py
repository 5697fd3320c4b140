"""Planning: calibrate on a run, predict a layout, search layouts, balance pipeline stages."""

from .balance import (
    BalanceError,
    BalancePlan,
    LayerType,
    balance_pipeline,
    decompose_memory,
    layers_from_model,
    read_sapp_layers,
)
from .calibrate import CalibratedJob, Calibration, calibrate
from .changes import layout_saving_s, recompute_off
from .predict import Prediction, predict, run_types
from .published import PUBLISHED_RUNS, PublishedRun, published_runs
from .search import SearchSpace, candidates, search, to_parallel_config

__all__ = [
    "layout_saving_s",
    "recompute_off",
    "CalibratedJob",
    "Calibration",
    "calibrate",
    "Prediction",
    "predict",
    "run_types",
    "PUBLISHED_RUNS",
    "PublishedRun",
    "published_runs",
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
