"""Activation bytes of the output layer and loss, which the per-layer tables leave out.

The seed's dynamic-memory table and Korthikanti et al. 2022 (Table 2) count the
transformer layers only. At the end of the forward pass the last pipeline stage also holds,
for the micro-batch whose loss it computes, its final norm's input, the output layer's
input, and the logits with what the loss makes of them. In a plain PyTorch run under
``torch.autocast`` (bf16) with ``F.cross_entropy``, per logit (``s·b·V/t`` of them):

* the 16-bit logits the output matmul writes: 2 bytes;
* their fp32 copy: autocast runs ``log_softmax``/``nll_loss`` in fp32 (PyTorch's autocast
  op reference, "CUDA Ops that can autocast to float32"), or the model code's ``.float()``:
  4 bytes, alive while the loss runs;
* the fp32 ``log_softmax`` output, which its backward keeps: 4 bytes;

10 bytes per logit, ``ActivationModel(logits_bytes=10)``: 2.62 GB for ``b = 4``,
``s = 2048``, ``V = 32000``, more than two of that model's layers. Measured on one H100
(``tests/data/kineto_llama_layouts_h100``: the Kineto memory events show the three
allocations, 524,288,000 + 1,048,576,000 + 1,048,576,000 bytes, just before the allocator's
peak inside ``aten::nll_loss_forward``; ``tests/plan/test_measured_memory.py``).

Megatron-LM's estimator counts the output layer as ``2·(s·b·V/t + s·b·h)`` without
sequence parallelism (:mod:`perfkit.calc.megatron`): 2 bytes per logit, its fused
vocabulary-parallel cross-entropy keeping no fp32 copy of its own.
"""

from __future__ import annotations

from ..specs import ModelSpec

__all__ = ["output_bytes"]


def output_bytes(model: ModelSpec, micro_batch_size: int, tp: int = 1,
                 sequence_parallel: bool = False, cp: int = 1, *, logits_bytes: float,
                 norm_bytes: float, element_bytes: float, unfused_norm: bool = False) -> float:
    """Bytes the last stage holds for its output layer and loss, one micro-batch.

    ``s·b·h·(n + e)/t'`` (``t' = t`` with sequence parallelism, else 1) for the final
    norm's input (``n = norm_bytes``, ``2·norm_bytes`` when ``unfused_norm``: its
    ``x·rsqrt(…)`` too) and the output layer's input (``e = element_bytes``), plus
    ``s·b·V·logits_bytes/t`` for the logits and the loss's copies of them (the vocabulary
    is split ``t`` ways); ``s`` is the local ``s/cp``. 0 when ``logits_bytes`` is 0 (the
    tables' convention). The :class:`~perfkit.calc.ActivationModel` fields of the same
    names are what :func:`perfkit.calc.activation_memory` passes.

    Parameters
    ----------
    model : ModelSpec
    micro_batch_size, tp, cp : int
    sequence_parallel : bool
    logits_bytes, norm_bytes, element_bytes : float
        Bytes per logit, per element of a norm's input, per element of a 16-bit tensor.
    unfused_norm : bool

    Returns
    -------
    float
        Bytes.
    """
    if not logits_bytes:
        return 0.0
    s = model.seq_length / cp
    sb = s * micro_batch_size
    norm = norm_bytes * (2.0 if unfused_norm else 1.0)
    hidden = sb * model.hidden_size * (norm + element_bytes)
    if sequence_parallel and tp > 1:
        hidden /= tp
    return hidden + sb * model.vocab_size * logits_bytes / tp
