"""DeepSpeed's own model-state memory estimators, as functions of plain numbers.

These are the formulas of ``estimate_zero2_model_states_mem_needs``
(``deepspeed/runtime/zero/stage_1_and_2.py``) and ``estimate_zero3_model_states_mem_needs``
(``deepspeed/runtime/zero/stage3.py``), read in deepspeedai/DeepSpeed at commits 02aa38c3
and 007cca6a (the ``*_all_cold`` functions print their results as tables; the numbers of
the docs' ``t5-3b`` examples are reproduced in ``tests/test_memory_conventions.py``).
:func:`perfkit.calc.static_memory` with ``scheme="deepspeed"`` applies them to a
:class:`~perfkit.ModelSpec` and :class:`~perfkit.ParallelConfig`.

Per parameter DeepSpeed counts 2 bytes of fp16/bf16 weights, 2 of fp16 gradients plus 4 of
fp32 gradients, 4 of fp32 master weights and 8 of Adam moments (its code comment:
"18 = 2_grads_16bit + 4_grads_32bit + 4_params_32bit + 8_optimizer_states_32bit"), and
for ZeRO-3 ``4 × largest_layer_params`` to gather one layer's fp16 weights and gradients.
Host memory is per node (``num_gpus_per_node`` GPUs), times ``additional_buffer_factor``.

Where DeepSpeed's docs and code differ: ``docs/code-docs/source/memory.rst`` still gives
ZeRO-2 without offload as ``4·P + 16·P/N`` (its printed ``t5-3b`` example, 15.93 GB per
GPU); the code computes ``2·P + 18·P/N`` (11.28 GB for the same model). perfkit follows
the code. For ZeRO-2 with optimizer offload the code multiplies by the *total* GPU count
(``max(4·total_gpus, 16)``) where the docs write GPUs per node; again perfkit follows the
code (identical on one node).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import check_non_negative, check_positive, check_positive_int

__all__ = ["ZeroEstimate", "estimate_zero2_model_states", "estimate_zero3_model_states"]


@dataclass(frozen=True)
class ZeroEstimate:
    """Bytes DeepSpeed's estimator returns: ``host_bytes_per_node`` ("per CPU"),
    ``device_bytes`` ("per GPU") and, for ZeRO-3, ``largest_layer_bytes``."""

    host_bytes_per_node: float
    device_bytes: float
    largest_layer_bytes: float = 0.0


def _check(total_params: float, num_gpus_per_node: int, num_nodes: int,
           additional_buffer_factor: float) -> tuple[float, int, int, float]:
    return (float(check_positive("total_params", total_params)),
            check_positive_int("num_gpus_per_node", num_gpus_per_node),
            check_positive_int("num_nodes", num_nodes),
            float(check_positive("additional_buffer_factor", additional_buffer_factor)))


def estimate_zero2_model_states(total_params: float, num_gpus_per_node: int = 1,
                                num_nodes: int = 1, cpu_offload: bool = True,
                                additional_buffer_factor: float = 1.5) -> ZeroEstimate:
    """DeepSpeed ``estimate_zero2_model_states_mem_needs`` (stage_1_and_2.py).

    With ``N = num_nodes · num_gpus_per_node`` and ``P = total_params``::

        cpu_offload:     device 2·P                 host P·max(4·N, 16)·factor
        no offload:      device 2·P + int(18·P/N)   host P·4·gpus_per_node·factor

    Same keyword names and defaults as DeepSpeed (``cpu_offload=True``); the result is
    not truncated to an integer as DeepSpeed's ``int(...)`` is.
    """
    p, gpn, nodes, factor = _check(total_params, num_gpus_per_node, num_nodes,
                                   additional_buffer_factor)
    total_gpus = nodes * gpn
    if cpu_offload:
        return ZeroEstimate(p * max(4 * total_gpus, 16) * factor, 2 * p)
    return ZeroEstimate(p * 4 * gpn * factor, 2 * p + 18 * p / total_gpus)


def estimate_zero3_model_states(total_params: float, largest_layer_params: float,
                                num_gpus_per_node: int = 1, num_nodes: int = 1,
                                cpu_offload: bool = True, cpu_offload_params: bool = True,
                                zero_init: bool = True,
                                additional_buffer_factor: float = 1.5) -> ZeroEstimate:
    """DeepSpeed ``estimate_zero3_model_states_mem_needs`` (stage3.py).

    ``LL = 4 · largest_layer_params`` (fp16 weights and gradients of the largest layer,
    gathered), ``N`` GPUs in all, ``g = 1/num_nodes``::

        offload params + optimizer:  device LL            host P·18·g·factor (zero_init)
                                                          or P·max(4·gpn, 18·g)·factor
        offload optimizer only:      device LL + 2·P/N    host P·16·g·factor (zero_init)
                                                          or P·max(4·gpn, 16·g)·factor
        no offload:                  device LL + 18·P/N   host LL·gpn·factor (zero_init)
                                                          or P·4·gpn·factor

    DeepSpeed's table never offers parameter offload without optimizer offload; neither
    does this function (``cpu_offload_params`` is ignored when ``cpu_offload`` is False, as
    in DeepSpeed).
    """
    p, gpn, nodes, factor = _check(total_params, num_gpus_per_node, num_nodes,
                                   additional_buffer_factor)
    largest = float(check_non_negative("largest_layer_params", largest_layer_params))
    total_gpus = nodes * gpn
    g = 1 / nodes
    gather = 4 * largest
    if cpu_offload:
        states = 18 if cpu_offload_params else 16
        device = gather if cpu_offload_params else gather + 2 * p / total_gpus
        host = p * states * g * factor if zero_init \
            else p * max(4 * gpn, states * g) * factor
        return ZeroEstimate(host, device, gather)
    host = largest * 4 * gpn * factor if zero_init else p * 4 * gpn * factor
    return ZeroEstimate(host, gather + 18 * p / total_gpus, gather)
