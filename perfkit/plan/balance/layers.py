"""The balancer's input: one kind of layer (:class:`LayerType`) and the recompute types.

A layer type carries its count, its forward time and, per recompute type, its activation
memory and backward time (default ``(1 + coef)·2·forward`` with SAPP's ``DEFAULT_COEF``,
``toolkit/pipeline_balance/utils/recompute.py``). :class:`BalanceError` is raised when the
integer program has no solution.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ...errors import InvalidArgumentError, PerfkitError, check_positive
from ...errors import check_positive_int as _check_int

__all__ = ["RECOMPUTE_TYPES", "DEFAULT_RECOMPUTE_COEF", "BalanceError", "LayerType"]


#: Recompute types in SAPP's order (none, select, comm, both, full) and their YAML keys.
RECOMPUTE_TYPES = ("none", "selective", "comm", "both", "full")
#: SAPP ``DEFAULT_COEF`` (``utils/recompute.py``): backward = (1 + coef) × 2 × forward.
DEFAULT_RECOMPUTE_COEF = {"none": 0.0, "selective": 0.04, "comm": 0.125, "both": 0.165,
                          "full": 0.5}


class BalanceError(PerfkitError):
    """The integer program has no solution (for example, nothing fits the memory limit)."""


@dataclass(frozen=True)
class LayerType:
    """One kind of layer for the balancer (SAPP's ``layers_description`` entry).

    Parameters
    ----------
    name : str
    kind : {"body", "head", "tail"}
        Body layers are placed by the solver; the head sits on the first stage's first
        chunk (embedding), the tail on the last stage's last chunk (output head, loss).
    count : int
        Number of layers of this type (``nb_layer``); 1 for head and tail.
    forward_time : float
        Forward time of one layer for one micro-batch (any unit; the plan uses it).
    memory_parameter : float
        Static memory of one layer (weights, gradients, optimizer share).
    memory_activation : mapping
        Activation memory of one layer for one micro-batch, per recompute type
        (keys from :data:`RECOMPUTE_TYPES`; ``"none"`` is required). Only the types given
        are offered to the solver.
    backward_time : mapping, optional
        Backward time per recompute type; default ``(1 + coef)·2·forward_time``.
    """

    name: str
    kind: str
    count: int
    forward_time: float
    memory_parameter: float
    memory_activation: Mapping[str, float] = field(hash=False)
    backward_time: Mapping[str, float] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if self.kind not in ("body", "head", "tail"):
            raise InvalidArgumentError("kind", "must be 'body', 'head' or 'tail'", self.kind)
        _check_int("count", self.count)
        check_positive("forward_time", self.forward_time)
        if self.memory_parameter < 0:
            raise InvalidArgumentError("memory_parameter", "must be >= 0", self.memory_parameter)
        mem = dict(self.memory_activation)
        if "none" not in mem:
            raise InvalidArgumentError("memory_activation", "needs the 'none' entry", mem)
        for key, value in mem.items():
            if key not in RECOMPUTE_TYPES:
                raise InvalidArgumentError("memory_activation",
                                           f"keys must be among {RECOMPUTE_TYPES}", key)
            if value < 0:
                raise InvalidArgumentError(f"memory_activation[{key!r}]", "must be >= 0", value)
        object.__setattr__(self, "memory_activation", mem)
        bwd = {r: (1 + DEFAULT_RECOMPUTE_COEF[r]) * 2 * self.forward_time for r in mem}
        if self.backward_time:
            bwd.update({k: float(v) for k, v in self.backward_time.items() if k in mem})
        object.__setattr__(self, "backward_time", bwd)

    @property
    def recompute_types(self) -> tuple[str, ...]:
        """Recompute types this layer can take, in SAPP order."""
        return tuple(r for r in RECOMPUTE_TYPES if r in self.memory_activation)
