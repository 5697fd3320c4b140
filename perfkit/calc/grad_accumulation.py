"""Gradient accumulation across micro-batches, where a framework does it outside the GEMMs.

With several micro-batches per step, each micro-batch's weight gradients are added to the
step's. Where that addition happens decides whether it costs a memory-bound pass over the
stage's parameters on every micro-batch (``Rates.grad_accumulation``):

* ``"fused"`` (the default) — each weight-gradient GEMM accumulates straight into the
  fp32 gradient buffer, so nothing runs apart: Megatron-LM's gradient-accumulation
  fusion, on unless ``--no-gradient-accumulation-fusion`` is given
  (``megatron/training/arguments.py``; the ``main_grad`` buffer that
  ``LinearWithGradAccumulationAndAsyncCommunication`` writes), and so NeMo's
  (``gradient_accumulation_fusion: true`` in NeMo-Framework-Launcher's Llama 3.1
  configurations, ``conf/training/llama/llama3_1_70b.yaml`` at ``1ab2c781b50b``). MindSpore's
  accumulation is not read here: 0 there too.
* ``"fp32-copy"`` — DeepSpeed's bf16 optimizer keeps fp32 gradients beside the model's
  16-bit ones and, after every micro-batch's backward, adds each 16-bit gradient into its
  fp32 copy (``BF16_Optimizer.update_hp_grads``: ``hp_grad.add_(lp.grad.to(fp32))``,
  ``deepspeed/runtime/bf16_optimizer.py`` at ``06e39a561d79``; its docstring: "to
  prevent accumulating in the bf16 grads after successive backward() calls"). The cast
  reads 2 bytes and writes 4, the add reads 4 + 4 and writes 4: **18 bytes per
  parameter on every micro-batch**, over all the stage's trained parameters (ZeRO-1
  shards the optimizer's state, not these gradients). A run that is not bf16 runs
  DeepSpeed's fp16 optimizers, which accumulate in the 16-bit ``.grad`` as autograd
  does: priced as ``"autograd"``.
* ``"autograd"`` — PyTorch's ``AccumulateGrad``: the first micro-batch's gradient
  becomes ``.grad`` (no copy), each later one is added into it in place, reading both
  and writing one: **3 × the gradient's bytes per parameter on each micro-batch after
  the first**, over the gradient the device holds (its shard under ZeRO-2/3 and FSDP,
  whose reduced shard is what accumulates): DDP and FSDP. A recorded PyTorch 2.13
  trace of a three-micro-batch step shows exactly this (``tests/data/
  grad_accumulation_cpu``: a detach on the first micro-batch, then one ``aten::add_`` of
  two parameter-shaped inputs per parameter). The gradient's bytes are
  those the data-parallel reduction moves (``Rates.gradient_bytes``, else by the
  static-memory scheme).

The bytes go at the rate of the optimizer's own memory-bound pass
(``Rates.memory_efficiency`` of the HBM bandwidth) and are charged to the step's
``optimizer`` part (:func:`perfkit.calc.timing.step_times`), which is the gradient
bookkeeping of the step. Two approximations, both small: the pass is priced on the stage
holding the most parameters and outside the pipeline's bubble, and the one or two kernel
launches per parameter tensor are not counted as kernels.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GRAD_ACCUMULATION", "FP32_COPY_BYTES", "accumulation_bytes", "step_accumulation_bytes"]

#: ``Rates.grad_accumulation`` values (module docstring).
GRAD_ACCUMULATION = ("fused", "fp32-copy", "autograd")

#: DeepSpeed's bf16 optimizer, bytes per parameter per micro-batch: cast 2 → 4, add
#: 4 + 4 → 4 (module docstring).
FP32_COPY_BYTES = 18.0


def accumulation_bytes(kind: str, dtype: str | None, gradient_bytes: float,
                       num_micro_batches: np.ndarray) -> tuple[np.ndarray, bool]:
    """Bytes per parameter that accumulating the gradients of one step moves, and whether
    they are over the device's gradient shard (``"autograd"``) rather than all the
    stage's parameters.

    Parameters
    ----------
    kind : {"fused", "fp32-copy", "autograd"}
        ``Rates.grad_accumulation`` (module docstring).
    dtype : str or None
        The run's type: ``"fp32-copy"`` applies to a bf16 run only.
    gradient_bytes : float
        Bytes per element of the gradient ``.grad`` holds (``"autograd"``).
    num_micro_batches : array
        Micro-batches per step.

    Returns
    -------
    (array, bool)
        Bytes per parameter per step; True where they are over the gradient the device
        holds (its shard when gradients are sharded).

    Examples
    --------
    >>> accumulation_bytes("fp32-copy", "bf16", 4.0, np.array([1, 8]))[0].tolist()
    [18.0, 144.0]
    >>> accumulation_bytes("autograd", "bf16", 4.0, np.array([1, 8]))[0].tolist()
    [0.0, 84.0]
    """
    m = np.asarray(num_micro_batches, dtype=float)
    if kind == "fused":
        return np.zeros_like(m), False
    if kind == "fp32-copy" and (dtype or "").lower() == "bf16":
        return FP32_COPY_BYTES * m, False
    return 3.0 * gradient_bytes * np.maximum(m - 1.0, 0.0), True


def step_accumulation_bytes(kind: str, dtype: str | None, gradient_bytes: float,
                            num_micro_batches: np.ndarray, stage_params: np.ndarray,
                            shard: np.ndarray, zero_stage: np.ndarray) -> np.ndarray:
    """Bytes one step's gradient accumulation moves on a stage of ``stage_params`` trained
    parameters: :func:`accumulation_bytes` per parameter, over the gradient the device
    holds (``"autograd"`` under ZeRO-2/3 and FSDP: its ``1/shard``), else over all of them.
    """
    per_param, over_shard = accumulation_bytes(kind, dtype, gradient_bytes,
                                               num_micro_batches)
    sharded = over_shard & (np.asarray(zero_stage, dtype=float) >= 2)
    held = np.where(sharded, stage_params / np.maximum(shard, 1), stage_params)
    return held * per_param
