"""Calculators: pure functions of ModelSpec / ParallelConfig / Hardware.

Every function documents its formula and source; conventions are parameters.
See docs/calculators.md for the overview; the calibrated step model (what
``perfkit.plan.predict`` runs) is :mod:`perfkit.calc.timing` with its rates in
:mod:`perfkit.calc.rates`. The published tools' own formulas live in
:mod:`perfkit.calc.deepspeed`, :mod:`perfkit.calc.megatron` and
:mod:`perfkit.calc.llm_analysis`; activation memory in :mod:`perfkit.calc.activation`.
"""

from .comm import CommItem, CommVolume, comm_volume
from .flops import (
    flops_per_token,
    flops_table,
    forward_flops,
    hardware_flops,
    hfu,
    implied_peak_flops,
    layer_forward_flops,
    mfu,
    model_flops,
)
from .memory import (
    ActivationBreakdown,
    ActivationModel,
    MemoryBreakdown,
    activation_memory,
    activation_per_layer,
    largest_layer_parameters,
    parameters_per_device,
    stage_parameters,
    static_memory,
)
from .pipeline import (
    bubble_fraction,
    bubble_idle_share,
    in_flight_micro_batches,
    interleave_memory_penalty,
)
from .rates import Rates
from .step import StepEstimate, estimate_step
from .throughput import (
    linearity,
    samples_per_second,
    step_time_from_tokens_per_second,
    tokens_per_second,
    tokens_per_second_per_device,
    tokens_per_second_per_p,
)

__all__ = [
    "ActivationBreakdown",
    "ActivationModel",
    "CommItem",
    "CommVolume",
    "MemoryBreakdown",
    "Rates",
    "StepEstimate",
    "activation_memory",
    "activation_per_layer",
    "bubble_fraction",
    "bubble_idle_share",
    "comm_volume",
    "estimate_step",
    "flops_per_token",
    "flops_table",
    "forward_flops",
    "hardware_flops",
    "hfu",
    "implied_peak_flops",
    "in_flight_micro_batches",
    "interleave_memory_penalty",
    "largest_layer_parameters",
    "layer_forward_flops",
    "linearity",
    "mfu",
    "model_flops",
    "parameters_per_device",
    "samples_per_second",
    "stage_parameters",
    "static_memory",
    "step_time_from_tokens_per_second",
    "tokens_per_second",
    "tokens_per_second_per_device",
    "tokens_per_second_per_p",
]
