"""Bytes per parameter of weights, gradients and optimizer state, by scheme and run type.

One rule for every path that counts static memory or the gradient reduction
(:func:`perfkit.calc.static_memory`, :func:`perfkit.calc.estimate_step`, the calibrated
step model of :func:`perfkit.plan.predict` and :func:`perfkit.plan.search`, the job's
figures and the Memory tab): **the gradients static memory keeps are the ones the
data-parallel reduction moves**. A framework reduces its gradient buffer in place, so the
element size of the reduction (:func:`scheme_gradient_bytes`, or what a profile's own
collectives record, :func:`perfkit.analysis.reduced_dtype.reduced_gradient_bytes`) is the
element size of the buffer (:func:`parameter_bytes`).

Megatron-LM, read at NVIDIA/Megatron-LM d98e8a64:

* ``megatron/core/distributed/param_and_grad_buffer.py`` line 924, ``grad_dtype =
  torch.float if grad_reduce_in_fp32 else param.dtype``: the gradient buffer is fp32 with
  ``grad_reduce_in_fp32`` and in the parameters' type otherwise; lines 1190-1195 allocate
  ``grad_data`` in that type, and lines 718-731 reduce-scatter or all-reduce
  ``bucket.grad_data`` itself: what the data-parallel reduction moves is the buffer;
* ``megatron/training/training.py`` line 2635 sets ``grad_reduce_in_fp32`` from
  ``--accumulate-allreduce-grads-in-fp32`` (``arguments.py`` line 3069, off by default);
  ``arguments.py`` lines 1204-1217 turn it on for ``--bf16`` (``--main-grads-dtype``
  defaults to fp32, line 3671; ``--grad-reduce-in-bf16`` keeps it off), and nothing
  turns it on for ``--fp16`` (lines 1195-1203): **a bf16 run's buffer is fp32 (4 bytes),
  an fp16 run's is fp16 (2 bytes)**;
* the optimizer steps on fp32 main gradients: ``megatron/core/optimizer/optimizer.py``
  line 1097 (``main_param.grad = model_param.main_grad.float()``) and
  ``distrib_optimizer.py`` line 2792 (``shard_main_param.grad =
  shard_model_grad.float()``, the rank's shard). ``.float()`` of an fp32 buffer is the
  buffer itself; of an fp16 buffer it is a new fp32 tensor, 4 more bytes per parameter,
  sharded as the optimizer is;
* hence Megatron-LM's own table (``docs/user-guide/features/dist_optimizer.md`` lines
  16-20), bytes per parameter without / with the distributed optimizer over ``d`` ranks:
  fp16 parameters and gradients **20** / ``4 + 16/d``; bf16 parameters, fp32 gradients
  **18** / ``6 + 12/d``; fp32 parameters and gradients **16** / ``8 + 8/d``.

perfkit counts the table's figures. Those fp32 copies of a 16-bit buffer live from the
optimizer step until the next step begins (``training.py`` line 3044 calls
``optimizer.zero_grad()``, which sets them to None: ``optimizer.py`` lines 1048-1061), so
while the activations of the next forward and backward are held they may already be
freed: the static + activation figure can then be up to ``4/d`` bytes per parameter above
what is allocated at once (the caching allocator may still hold the block).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgumentError, check_non_negative
from .activation import ELEMENT_BYTES

__all__ = ["ParameterBytes", "full_precision", "parameter_bytes", "scheme_gradient_bytes"]

#: (weight, gradient, optimizer) bytes per parameter of the mixed-precision schemes, as
#: their sources count them (the Megatron-LM one for a bf16 run).
_MIXED = {
    "mindspore": (2.0, 2.0, 8.0),
    "megatron": (2.0, 4.0, 12.0),
    "zero": (2.0, 2.0, 12.0),
}
#: (weight, gradient, optimizer) bytes per parameter of a run without mixed precision:
#: fp32 weights (the optimizer's own copy) and gradients, Adam's two fp32 moments.
_FP32 = (4.0, 4.0, 8.0)
#: Bytes per element of the fp32 main gradients Megatron-LM's optimizer copies from a
#: 16-bit gradient buffer (see the module docstring).
MAIN_GRADIENT_BYTES = 4.0


def full_precision(dtype: str | None) -> bool:
    """Whether a run of ``dtype`` keeps its tensors in fp32 (``"fp32"``, ``"tf32"``:
    4 bytes in :data:`~perfkit.calc.activation.ELEMENT_BYTES`), without mixed precision."""
    return ELEMENT_BYTES.get(dtype or "") == 4.0


def scheme_gradient_bytes(static_scheme: str | None, dtype: str | None = None) -> float:
    """Bytes per gradient element a job's data-parallel reduction moves, by its scheme:
    the element size of its gradient buffer.

    Under the Megatron-LM scheme 4 for a bf16 run and for a run whose ``dtype`` is not
    given (bf16 being the case Megatron-LM forces to fp32), 2 for an ``"fp16"`` run
    (Megatron-LM's buffer is then fp16 unless ``--accumulate-allreduce-grads-in-fp32`` is
    passed; the module docstring cites the lines). 4 for an fp32 ``dtype`` whatever the
    scheme (no mixed precision). 2 otherwise: MindSpore's fp16 gradients, the ZeRO paper's
    16-bit ones. :func:`perfkit.calc.estimate_step`, the calibrated step model
    (``Rates.gradient_bytes=None``), :func:`perfkit.simulate.simulate` and static memory
    (:func:`parameter_bytes`) all use it. Plain PyTorch DDP (also ``"megatron"``, as every
    PyTorch profile) reduces gradients in the parameters' type: 4 bytes under autocast
    (fp32 parameters), 2 for a model cast to bf16, which neither scheme nor dtype tells: a
    profile's collectives can (:func:`perfkit.analysis.reduced_dtype.reduced_gradient_bytes`),
    or pass ``gradient_bytes``.

    Parameters
    ----------
    static_scheme : str or None
        ``"mindspore"``, ``"megatron"``, ``"zero"`` or ``"deepspeed"`` (None: the
        MindSpore scheme).
    dtype : str, optional
        The run's type when known (``"bf16"``, ``"fp16"``; ``"fp32"``/``"tf32"`` keep
        fp32 gradients). None: not known, bf16 is assumed under ``"megatron"``.

    Returns
    -------
    float
    """
    if full_precision(dtype):
        return 4.0
    return 4.0 if static_scheme == "megatron" and dtype != "fp16" else 2.0


@dataclass(frozen=True)
class ParameterBytes:
    """Bytes per parameter of one scheme for one run, before any sharding.

    Attributes
    ----------
    weight : float
        The model's weights (16-bit under mixed precision, 4 in an fp32 run).
    gradient : float
        The gradient buffer: the element size the data-parallel reduction moves.
    optimizer : float
        The optimizer's state, which optimizer sharding divides: fp32 main weights (mixed
        precision), Adam's two moments, and under Megatron-LM the fp32 main gradients it
        copies from a 16-bit buffer (:attr:`main_gradient`).
    main_gradient : float
        The part of :attr:`optimizer` that is those fp32 main gradients: 4 under the
        Megatron-LM scheme when the buffer is 16-bit, else 0 (an fp32 buffer is its own
        main gradient).
    """

    weight: float
    gradient: float
    optimizer: float
    main_gradient: float = 0.0

    @property
    def total(self) -> float:
        """Bytes per parameter before sharding (Megatron-LM's 18 for a bf16 run)."""
        return self.weight + self.gradient + self.optimizer


def parameter_bytes(scheme: str, dtype: str | None = None,
                    gradient_bytes: float | None = None) -> ParameterBytes:
    """Bytes per parameter of weights, gradients and optimizer state of a run of ``dtype``.

    Parameters
    ----------
    scheme : {"mindspore", "megatron", "zero"}
        The static-memory scheme (:func:`perfkit.calc.static_memory`; DeepSpeed's
        estimator has its own bytes).
    dtype : str, optional
        The run's type. ``"fp32"``/``"tf32"``: 4 / 4 / 8 (fp32 weights, which are the
        optimizer's copy, fp32 gradients, Adam's two moments). Otherwise the scheme's
        mixed-precision bytes: MindSpore 2 / 2 / 8 (the seed's ``10N`` plus the buffer),
        ZeRO 2 / 2 / 12 (Rajbhandari et al. 2020, Fig. 1), Megatron-LM 2 / 4 / 12 for a
        bf16 run (or an unknown type) and 2 / 2 / 16 for an fp16 run (the module
        docstring: Megatron-LM's 18 and 20 bytes per parameter).
    gradient_bytes : float, optional
        The element size of the gradient reduction when known otherwise (a profile's
        collectives, ``Rates.gradient_bytes``, ``estimate_step(gradient_bytes=)``): the
        buffer's size then, and under Megatron-LM a 16-bit buffer (``< 4``) adds the
        optimizer's 4-byte fp32 main gradients, a 4-byte one does not (a bf16 run's
        ``--grad-reduce-in-bf16`` is 2 / 2 / 16 too; an fp16 run's
        ``--accumulate-allreduce-grads-in-fp32`` 2 / 4 / 12). Default
        :func:`scheme_gradient_bytes`.

    Returns
    -------
    ParameterBytes

    Examples
    --------
    Megatron-LM's table (``dist_optimizer.md``): 18 bytes for bf16, 20 for fp16, 16 for fp32.
    """
    if scheme not in _MIXED:
        raise InvalidArgumentError("scheme", f"must be one of {', '.join(map(repr, _MIXED))} "
                                   "(DeepSpeed's estimator counts its own bytes)", scheme)
    w, g, o = _FP32 if full_precision(dtype) else _MIXED[scheme]
    if gradient_bytes is None:
        g = scheme_gradient_bytes(scheme, dtype)
    else:
        g = float(check_non_negative("gradient_bytes", gradient_bytes))
    main = MAIN_GRADIENT_BYTES if scheme == "megatron" and not full_precision(dtype) \
        and 0 < g < MAIN_GRADIENT_BYTES else 0.0
    return ParameterBytes(w, g, o + main, main)
