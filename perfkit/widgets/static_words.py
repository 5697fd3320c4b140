"""What static memory counts, in words: the note of the static-memory figure.

The bytes come from :func:`perfkit.calc.precision.parameter_bytes` for the run's type and
the gradients its reduction moves, so the note names what the figure counts: an fp16
Megatron-LM run keeps fp16 weights and an fp16 gradient buffer (the data-parallel
reduction moves it) and its optimizer fp32 main gradients beside the main weights and
Adam's moments, ``4 + 16/d`` bytes per parameter, not a bf16 run's ``6 + 12/d``.
"""

from __future__ import annotations

from ..calc.precision import full_precision, parameter_bytes
from ..format import counted
from ..specs import ParallelConfig

__all__ = ["static_note", "type_name"]


def type_name(nbytes: float, sixteen: str) -> str:
    """The name of a ``nbytes``-byte element: ``"fp32"`` for 4, ``sixteen`` (``"fp16"``,
    ``"bf16"``) for 2, else ``"N-byte"``."""
    return {4.0: "fp32", 2.0: sixteen}.get(float(nbytes), f"{nbytes:g}-byte")


def static_note(scheme: str, parallel: ParallelConfig, dtype: str | None = None,
                gradient_bytes: float | None = None, read: str = "") -> str:
    """The static-memory figure's note: what it counts per parameter, and how it shards.

    Parameters
    ----------
    scheme : str
        The static-memory scheme (:func:`perfkit.calc.static_memory`).
    parallel : ParallelConfig
        Its ``optimizer_shard`` (the distributed optimizer's ``d``, MindSpore's ``t``).
    dtype : str, optional
        The run's type (None: the scheme's mixed precision, bf16 under Megatron-LM).
    gradient_bytes : float, optional
        The gradients' element size when read elsewhere than the scheme (a profile's
        reductions), as :func:`~perfkit.calc.precision.parameter_bytes` takes it.
    read : str
        Where ``gradient_bytes`` was read, for the note (``"the profile's reductions"``).
    """
    if scheme not in ("mindspore", "megatron"):
        fp32 = "; an fp32 run: no mixed precision" if full_precision(dtype) else ""
        return f"perfkit.calc.static_memory, scheme {scheme!r}{fp32}"
    per = parameter_bytes(scheme, dtype, gradient_bytes)
    fp32 = full_precision(dtype)
    sixteen = dtype if dtype in ("fp16", "bf16") else \
        ("bf16" if scheme == "megatron" else "fp16")
    weights = type_name(per.weight, sixteen)
    grads = type_name(per.gradient, sixteen)
    source = f" (read from {read})" if read and gradient_bytes is not None else ""
    d = parallel.optimizer_shard
    if scheme == "mindspore":
        # the buffer exists only when gradients accumulate (several micro-batches or a
        # pipeline), as perfkit.calc.static_memory counts it
        m, pp = parallel.num_micro_batches, parallel.pp
        if m > 1 or pp > 1:
            why = counted(m, "micro-batch") if m > 1 else f"pipeline of {pp} stages"
            buffer = (f", + {grads} gradient buffer{source} (gradients accumulate over the "
                      f"{why})")
        else:
            buffer = (", no gradient buffer (1 micro-batch and no pipeline: gradients do "
                      "not accumulate)")
        return (f"{weights} weights + fp32 Adam m, v over optimizer shard t = {d}{buffer}"
                + ("; an fp32 run: no mixed precision" if fp32 else ""))
    kept = per.weight + per.gradient
    if fp32:
        return (f"fp32 weights and gradients + fp32 Adam m, v over the distributed "
                f"optimizer d = {d}: {kept:g} + {per.optimizer:g}/d bytes per parameter "
                "(Megatron-LM's most loaded shard); an fp32 run: no mixed precision")
    main = "fp32 main gradients, " if per.main_gradient else ""
    return (f"{weights} weights + {grads} gradients{source}, which the data-parallel "
            f"reduction moves, + {main}fp32 main weights and Adam m, v over the "
            f"distributed optimizer d = {d}: {kept:g} + {per.optimizer:g}/d bytes per "
            "parameter (Megatron-LM's most loaded shard)")
