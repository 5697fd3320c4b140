"""Hardware: one accelerator's peak FLOP/s per dtype, memory and link bandwidths.

The published devices, one row each with its source, are in
:mod:`~perfkit.specs.hardware_presets`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import InvalidArgumentError, check_positive, check_positive_int
from .hardware_presets import (
    ALIASES,
    HARDWARE_PRESETS,
    preset_fields,
    preset_for_device,
    unpublished_peak,
)
from .node import Node
from .node_presets import HARDWARE_NODES

__all__ = ["Hardware"]

_LINK_FIELDS = ("intra_node_bandwidth", "inter_node_bandwidth", "devices_per_node")


@dataclass(frozen=True)
class Hardware:
    """One accelerator and its links.

    Parameters
    ----------
    name : str
    peak_flops : mapping of str to float
        Dense peak FLOP/s per dtype (keys like ``"bf16"``, ``"fp16"``, ``"fp32"``,
        ``"tf32"``, ``"fp8"``, ``"int8"``). Sparse figures are never used.
    memory_bytes : float
        Device memory in bytes.
    memory_bandwidth : float
        Device-memory bandwidth, bytes/s.
    intra_node_bandwidth : float
        Per-device, per-direction bandwidth to the other devices of the node, bytes/s
        (NVLink / HCCS).
    inter_node_bandwidth : float
        Per-device, per-direction bandwidth across nodes, bytes/s (InfiniBand / RoCE).
    devices_per_node : int
    default_dtype : str
        Dtype used when a calculator is given this Hardware but no dtype.
    node : Node, optional
        The server topology collectives are priced on (:mod:`perfkit.calc.topology`).
        :meth:`preset` attaches the vendor's reference node
        (:data:`~perfkit.specs.node_presets.HARDWARE_NODES`, e.g. a DGX H100 to
        ``"h100"``); None: :attr:`topology` derives one from the link fields above.
        :meth:`replace` of a link field without a new ``node`` drops the attached one.
    multiprocessors : int, optional
        The GPU's streaming multiprocessors, on which a fused attention call's occupancy
        is priced (:mod:`perfkit.calc.attention_occupancy`). None (default): the datasheet
        count for ``name`` (:data:`~perfkit.calc.attention_occupancy.MULTIPROCESSORS`,
        e.g. 132 for ``"h100"``); a Kineto trace's ``deviceProperties`` ``numSms`` sets
        it when the job is read from the trace (an H100 PCIe has 114).
    power_limit_w : float, optional
        The board power limit the device runs under, W, where it is set below the rated
        one (a data centre's cap, ``nvidia-smi -pl``). None (default): the rated power.
        The step model prices compute at the share a capped device keeps
        (:func:`perfkit.calc.power_limit.compute_scale`; Hopper parts only); :meth:`peak`
        and every MFU stay on the datasheet.
    """

    name: str
    peak_flops: Mapping[str, float] = field(hash=False)
    memory_bytes: float
    memory_bandwidth: float
    intra_node_bandwidth: float
    inter_node_bandwidth: float
    devices_per_node: int = 8
    default_dtype: str = "bf16"
    node: Node | None = None
    # a profile a simulation wrote keeps its bytes when the count is the datasheet's
    multiprocessors: int | None = field(default=None, metadata={"omit_when_default": True})
    power_limit_w: float | None = field(default=None, metadata={"omit_when_default": True})

    #: The Hardware fields of every preset row (:data:`perfkit.specs.hardware_presets.
    #: HARDWARE_PRESETS` without ``source`` and ``aliases``).
    _PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        name: preset_fields(row) for name, row in HARDWARE_PRESETS.items()}

    def __post_init__(self) -> None:
        if not isinstance(self.peak_flops, Mapping) or not self.peak_flops:
            raise InvalidArgumentError("peak_flops", "must be a non-empty mapping dtype -> FLOP/s",
                                       self.peak_flops)
        for dtype, value in self.peak_flops.items():
            check_positive(f"peak_flops[{dtype!r}]", value)
        object.__setattr__(self, "peak_flops", dict(self.peak_flops))
        for name in ("memory_bytes", "memory_bandwidth", "intra_node_bandwidth",
                     "inter_node_bandwidth"):
            check_positive(name, getattr(self, name))
        object.__setattr__(self, "devices_per_node",
                           check_positive_int("devices_per_node", self.devices_per_node))
        if self.node is not None and not isinstance(self.node, Node):
            raise InvalidArgumentError("node", "must be a perfkit.specs.Node (e.g. "
                                       "Node.preset('dgx-h100')) or None", self.node)
        if self.multiprocessors is not None:
            object.__setattr__(self, "multiprocessors", check_positive_int(
                "multiprocessors", self.multiprocessors))
        if self.power_limit_w is not None:
            object.__setattr__(self, "power_limit_w", check_positive(
                "power_limit_w", self.power_limit_w))
        if self.default_dtype not in self.peak_flops:
            raise InvalidArgumentError("default_dtype", "must be a key of peak_flops",
                                       self.default_dtype)

    def peak(self, dtype: str | None = None) -> float:
        """Dense peak FLOP/s for ``dtype`` (default: ``default_dtype``)."""
        dtype = self.default_dtype if dtype is None else dtype
        if dtype not in self.peak_flops:
            raise InvalidArgumentError("dtype", f"{self.name} has peaks for "
                                       f"{', '.join(sorted(self.peak_flops))}", dtype)
        return float(self.peak_flops[dtype])

    def missing_peak(self, dtype: str) -> str:
        """Why this device has no ``dtype`` peak, naming it: the vendor publishes none (a
        preset that says so, e.g. fp32 on an Ascend NPU, with what was searched), else the
        dtypes it lists; and how to give one. ``""`` when it has a ``dtype`` peak."""
        if dtype in self.peak_flops:
            return ""
        listed = ", ".join(sorted(self.peak_flops))
        why = unpublished_peak(self.name, dtype)
        how = (f"pass your device's own {dtype} peak (Hardware.preset({self.name!r})"
               f".replace(peak_flops={{..., {dtype!r}: FLOP/s}})) or the dtype its matrices "
               "run in")
        if why is not None:
            return (f"no {dtype} peak is published for {self.name} ({why}; perfkit lists "
                    f"its {listed} peaks): {how}")
        return f"{self.name} lists no {dtype} peak, only {listed}: {how}"

    @property
    def topology(self) -> Node:
        """The node collectives are priced on: ``node``, else
        :meth:`Node.from_hardware <perfkit.specs.Node.from_hardware>`."""
        return self.node if self.node is not None else Node.from_hardware(self)

    def replace(self, **changes: Any) -> Hardware:
        """A copy with some fields changed, e.g. your SKU's measured peak. Changing a link
        field (``intra_node_bandwidth``, ``inter_node_bandwidth``, ``devices_per_node``)
        without giving ``node`` drops the attached node, so the new figures are used."""
        if "node" not in changes and any(k in changes for k in _LINK_FIELDS):
            changes["node"] = None
        return dataclasses.replace(self, **changes)

    @classmethod
    def presets(cls) -> list[str]:
        """Names accepted by :meth:`preset`."""
        return sorted(cls._PRESETS)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> Hardware:
        """A published device, e.g. ``Hardware.preset("h100")``.

        Names and aliases are the rows of :data:`perfkit.specs.hardware_presets.
        HARDWARE_PRESETS` (case-insensitive), where each row's ``source`` says where its
        figures come from (:func:`perfkit.specs.hardware_presets.preset_source`).
        """
        key = ALIASES.get(str(name).lower(), str(name).lower())
        if key not in cls._PRESETS:
            raise InvalidArgumentError("name", f"unknown hardware preset; known: "
                                       f"{', '.join(cls.presets())}", name)
        fields = {**cls._PRESETS[key], **overrides}
        if "node" not in overrides and key in HARDWARE_NODES \
                and not any(k in overrides for k in _LINK_FIELDS):
            fields["node"] = Node.preset(HARDWARE_NODES[key])
        return cls(**fields)

    @classmethod
    def for_device(cls, device_name: str) -> Hardware | None:
        """The preset of a device as a profile names it, or None when none fits.

        ``Hardware.for_device("NVIDIA H100 80GB HBM3")`` is the ``h100`` preset; the
        name is matched by :func:`perfkit.specs.hardware_presets.preset_for_device`, the
        one matcher every reader of a profile uses (Kineto ``deviceProperties`` names,
        Ascend SoC names).
        """
        name = preset_for_device(device_name)
        return None if name is None else cls.preset(name)
