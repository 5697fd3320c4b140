"""What the step model assumes for a layout, each value with where it came from.

:func:`perfkit.plan.predict` prices a layout on a node topology
(``hardware.topology``, :class:`~perfkit.specs.Node`), with its ranks placed along
``parallel.rank_order`` (:mod:`perfkit.calc.topology`), and with a framework's overlap
options and fixed costs (:class:`~perfkit.calc.behaviour.Behaviour`). :func:`assumptions`
lists them as a table — name, value, where it came from and its source — and
:func:`predict_assumed` predicts the step with them: what the Planner's "What the model
assumes" panel shows and lets a user change (``docs/planner.md``).

Where a value comes from (column ``origin``)
--------------------------------------------
* ``"profile"`` — the calibration fitted it on the user's run (the fixed costs per kernel
  and per step, :func:`perfkit.plan.calibrate`), or the job read it from the profile;
* ``"preset"`` — a published node (:mod:`perfkit.specs.node_presets`) or a framework's
  defaults (:meth:`Behaviour.preset <perfkit.calc.behaviour.Behaviour.preset>`);
* ``"default"`` — perfkit's default (:class:`~perfkit.calc.rates.Rates`, a node derived
  from the hardware's link fields, Megatron-LM's placement ``tp-cp-ep-dp-pp``);
* ``"you"`` — changed by the user.

A preset applied over a calibration keeps what the calibration fitted on the run (its
``kernel_gap_s`` and ``overhead_s``, and the gradient reductions per step it counted,
``dp_buckets``: :func:`measured_rates`; said ``"profile"``): a preset's figure for them
is a framework's generic one, the fitted one the run's own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..calc.attention_occupancy import multiprocessors
from ..calc.behaviour import FITTED_FIELDS, Behaviour
from ..calc.contention import overlap_contention
from ..calc.gemm_ceiling import ceiling_source
from ..calc.gemm_rate import surface_for
from ..calc.power_limit import compute_scale, rated_power
from ..calc.rates import Rates
from ..calc.topology import PLACEMENT_ORDER, group_shape, layout_group, parse_order
from ..errors import InvalidArgumentError, PerfkitError
from ..format import count_text, rate_text, share_text, time_text
from ..specs import Hardware, Node, ParallelConfig
from .calibrate.profile import ATTENTION_READ, ELEMENTWISE_READ
from .predict import Prediction, predict

__all__ = ["Assumptions", "assumptions", "calibrated_behaviour", "predict_assumed",
           "assumed_calibration", "measured_rates",
           "ASSUMED_COLUMNS", "BEHAVIOUR_OPTIONS", "FIXED_COSTS", "GROUPS_PER_NODE",
           "FRAMEWORK_PRESETS", "GRAD_ACCUMULATION_TEXT"]

#: Columns of :attr:`Assumptions.table`.
ASSUMED_COLUMNS = ("part", "name", "value", "text", "origin", "source")

#: The options of a :class:`~perfkit.calc.behaviour.Behaviour`, in the panel's order.
BEHAVIOUR_OPTIONS = ("tp_comm_overlap", "overlap_grad_reduce", "bucket_params",
                     "overlap_param_gather", "fsdp_prefetch", "sp_regather", "kernel_gap_s",
                     "layer_overhead_s", "overhead_s", "attention_implementation",
                     "elementwise_kernels", "grad_accumulation", "overlap_contention")

#: The fixed costs (seconds), which a calibration on a profile fits and a preset keeps.
FIXED_COSTS = ("kernel_gap_s", "layer_overhead_s", "overhead_s")
_FITTED = ("kernel_gap_s", "overhead_s")

#: The groups whose ranks per node the table gives.
GROUPS_PER_NODE = ("tp", "cp", "ep", "dp", "pp")

#: The behaviour preset a profile's framework (:attr:`perfkit.Job.framework`) implies
#: where it implies one: MindSpore's; a PyTorch profile may be Megatron, NeMo, DDP, FSDP
#: or DeepSpeed, which the profile does not tell, so it implies none.
FRAMEWORK_PRESETS = {"mindspore": "mindspore"}

#: How the panel words each ``grad_accumulation`` (perfkit.calc.grad_accumulation).
GRAD_ACCUMULATION_TEXT = {
    "fused": "in the weight-gradient GEMMs (nothing apart)",
    "fp32-copy": "fp32 copies, every micro-batch: 18 B/param",
    "autograd": "into .grad after the 1st: 3 gradient sizes",
}

_DEFAULT_SOURCE = "perfkit's default (perfkit.calc.rates.Rates)"
CONTENTION_SOURCE = ("perfkit.calc.contention: Lee et al. 2025 (arXiv:2507.03114), 18.9 % "
                     "average on A100, H100, MI250, MI210; 0 on Ascend")


def calibrated_behaviour(rates: Rates) -> Behaviour:
    """The :class:`~perfkit.calc.behaviour.Behaviour` a set of rates already carries
    (named ``"calibrated"``): the inverse of :meth:`Behaviour.overrides` on its fields
    (``overlap_grad_reduce`` where gradient buckets are set, ``fsdp_prefetch`` where the
    data-parallel traffic is fully overlapped)."""
    per_layer = bool(rates.dp_bucket_per_layer)
    return Behaviour(
        name="calibrated", tp_comm_overlap=bool(rates.tp_comm_overlap),
        overlap_grad_reduce=per_layer or rates.dp_bucket_params > 0,
        bucket_params=0.0 if per_layer else float(rates.dp_bucket_params or 40e6),
        overlap_param_gather=bool(rates.param_gather_overlap),
        fsdp_prefetch=float(rates.overlap.get("dp", 0.0)) >= 1.0,
        sp_regather=bool(rates.sp_ag_redo),
        elementwise_kernels=str(rates.elementwise_kernels),
        kernel_gap_s=float(rates.kernel_gap_s), layer_overhead_s=float(rates.layer_overhead_s),
        overhead_s=float(rates.overhead_s),
        attention_implementation=str(rates.attention_implementation),
        overlap_contention=rates.overlap_contention,
        grad_accumulation=str(rates.grad_accumulation))


@dataclass(frozen=True)
class Assumptions:
    """What a prediction assumes (:func:`assumptions`).

    Attributes
    ----------
    parallel : ParallelConfig
        The layout with the rank order in use.
    hardware : Hardware
        The device with the node in use (``hardware.topology``).
    behaviour : Behaviour
        The framework behaviour in use.
    preset : str or None
        The behaviour preset applied (None: the calibration's own options).
    table : pandas.DataFrame
        :data:`ASSUMED_COLUMNS`, one row per value.
    changed : tuple of str
        The names the user changed (``origin == "you"``).
    """

    parallel: ParallelConfig
    hardware: Hardware
    behaviour: Behaviour
    preset: str | None
    table: pd.DataFrame = field(repr=False)
    changed: tuple[str, ...] = ()

    @property
    def behaviour_applies(self) -> bool:
        """Whether the behaviour differs from the calibration's own (a preset or an edit):
        only then is it passed to :func:`perfkit.plan.predict`, so that the calibrated
        figure stays the calibration's own otherwise."""
        return self.preset is not None or any(n in BEHAVIOUR_OPTIONS for n in self.changed)


def _value_text(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if name in FIXED_COSTS:
        return time_text(float(value) * 1e6)
    if name == "bucket_params":
        return "one per layer" if not value else f"{count_text(value)} parameters"
    if name == "grad_accumulation":
        return GRAD_ACCUMULATION_TEXT.get(str(value), str(value))
    if name == "overlap_contention" and value is not None:
        return (f"compute {share_text(float(value))} slower beside hidden traffic" if value
                else "off: hidden traffic is free")
    return str(value)


def _term_how(calibration: Any, name: str) -> str | None:
    for term, _value, how in getattr(calibration, "terms", ()) or ():
        if term == name:
            return f"fitted on the run: {how}"
    return None


def _read_note(calibration: Any, prefix: str) -> str | None:
    """What a calibration's note starting with ``prefix`` says it read (after its colon)."""
    note = next((n for n in getattr(calibration, "notes", ()) or ()
                 if n.startswith(prefix)), None)
    return None if note is None else note.split(": ", 1)[1]


def _attention_read(calibration: Any) -> str | None:
    """Where a calibration's attention kernel came from, when read from the profile."""
    read = _read_note(calibration, ATTENTION_READ)
    return None if read is None else f"the profile's kernel names: {read}"


def _behaviour_rows(calibration: Any, preset: str | None, edits: Mapping[str, Any]
                    ) -> tuple[Behaviour, list[dict[str, Any]]]:
    rates: Rates = getattr(calibration, "rates", None) or Rates()
    own = calibrated_behaviour(rates)
    fitted = "overhead" in (getattr(calibration, "measured", None) or ())
    base = Behaviour.preset(preset) if preset is not None else own
    keep = {n: getattr(own, n) for n in _FITTED} if preset is not None and fitted else {}
    if preset is not None and calibration is not None:  # what the rates were fitted with
        keep["elementwise_kernels"] = own.elementwise_kernels
    unknown = set(edits) - set(BEHAVIOUR_OPTIONS)
    if unknown:
        raise InvalidArgumentError("edits", f"unknown behaviour options "
                                   f"{', '.join(sorted(unknown))}; known: "
                                   f"{', '.join(BEHAVIOUR_OPTIONS)}", sorted(unknown))
    chosen = base.replace(**{**keep, **dict(edits)},
                          name=base.name if not edits else "custom")
    default = calibrated_behaviour(Rates())
    rows = []
    for name in BEHAVIOUR_OPTIONS:
        value = getattr(chosen, name)
        if name in edits:
            origin, source = "you", "changed in the panel"
        elif name == "elementwise_kernels" and name in keep:
            origin, source = "profile", ("the calibration's: its rates were fitted with "
                                         "it, a preset does not replace it")
        elif name in keep or (preset is None and fitted and name in _FITTED):
            origin = "profile"
            source = _term_how(calibration, name) or "fitted on the run (its idle time)"
        elif preset is not None:
            origin, source = "preset", f"Behaviour.preset({preset!r}) (perfkit.calc.behaviour)"
        elif value != getattr(default, name):
            origin, source = "profile", "the calibration's rates"
            if name == "attention_implementation":
                source = _attention_read(calibration) or source
            elif name == "elementwise_kernels":
                read = _read_note(calibration, ELEMENTWISE_READ)
                source = f"the profile's operators: {read}" if read else source
        else:
            origin, source = "default", _DEFAULT_SOURCE
        rows.append({"part": "behaviour", "name": name, "value": value,
                     "text": _value_text(name, value), "origin": origin, "source": source})
    for name, value in measured_rates(calibration).items():
        rows.append({"part": "behaviour", "name": name, "value": value,
                     "text": f"{value} gradient reductions per step", "origin": "profile",
                     "source": _term_how(calibration, name) or "fitted on the run"})
    rows.insert(0, {"part": "behaviour", "name": "preset",
                    "value": preset or "calibrated",
                    "text": preset or "none (the calibration's own options)",
                    "origin": "preset" if preset else "default",
                    "source": "perfkit.calc.behaviour.BEHAVIOUR_PRESETS" if preset else
                    "the calibration's rates"})
    return chosen, rows


def _node_rows(parallel: ParallelConfig, hardware: Hardware, node_by: str
               ) -> list[dict[str, Any]]:
    node = hardware.topology
    d = node.devices_per_node
    origin = node_by if node_by == "you" else ("preset" if hardware.node is not None
                                               else "default")
    source = node.source or "the hardware's link fields"
    rows = [
        ("node", node.name, node.name),
        ("devices_per_node", d, count_text(d)),
        ("intra_link", node.intra_link, node.intra_link),
        ("intra_bandwidth", node.intra_bandwidth,
         rate_text(node.intra_bandwidth / 1e9, "GB/s") + " per device, per direction"),
        ("nic_bandwidth_per_device", node.nic_bandwidth_per_device,
         rate_text(node.nic_bandwidth_per_device / 1e9, "GB/s")
         + f" ({node.nics_per_node} NICs × {rate_text(node.nic_bandwidth / 1e9, 'GB/s')}"
           f" / {d} devices)"),
    ]
    out = [{"part": "node", "name": n, "value": v, "text": t, "origin": origin,
            "source": source} for n, v, t in rows]
    order = parallel.rank_order
    out.append({"part": "placement", "name": "rank_order", "value": order,
                "text": order + " (innermost first)",
                "origin": node_by if node_by == "you" and order != "-".join(PLACEMENT_ORDER)
                else ("default" if order == "-".join(PLACEMENT_ORDER) else "profile"),
                "source": "Megatron-LM's RankGenerator order (perfkit.calc.topology)"
                if order == "-".join(PLACEMENT_ORDER) else "the job's layout"})
    p, dims = parallel, parse_order(order)
    dense = {"tp": p.tp, "cp": p.cp, "ep": 1, "dp": p.dp, "pp": p.pp}
    for group in GROUPS_PER_NODE:
        if group in ("tp", "cp", "ep"):
            n, r = layout_group(p, group, d, order)
        else:
            r = float(group_shape(dense, (group,), d, dims)[0][0])
            n = float(dense[group])
        nodes = -(-int(n) // max(int(r), 1))
        out.append({"part": "placement", "name": f"{group}_per_node", "value": int(r),
                    "text": (f"no {group} group (size 1)" if int(n) <= 1 else
                             f"{int(r)} of {int(n)} {group} ranks share a node"
                             + (f" ({nodes} nodes)" if nodes > 1 else "")),
                    "origin": "default", "source": "perfkit.calc.topology (rank order on "
                                                   "the node)"})
    return out


def _kernel_rows(calibration: Any, hardware: Hardware) -> list[dict[str, Any]]:
    """How the kernels are priced: GEMMs on a measured shape surface or the size curve
    (:mod:`perfkit.calc.gemm_rate`), fused attention's occupancy
    (:mod:`perfkit.calc.attention_occupancy`). Read-only: ``Rates`` fields, not options."""
    rates: Rates = getattr(calibration, "rates", None) or Rates()
    dtype = getattr(getattr(calibration, "job", None), "dtype", None)
    default_e = rates.gemm_efficiency is None
    rates = rates.resolved(hardware.name, dtype)
    surface = surface_for(hardware.name, dtype, rates.gemm_model)
    fitted = _term_how(calibration, "gemm_efficiency")
    if surface is not None:
        scale = rates.gemm_surface_scale
        text = (f"by (M, N, K): {surface.name} surface"
                + ("" if scale == 1 else f" × {scale:.3g}"))
        gemm = ("default", f"perfkit.calc.gemm_rate ({surface.basis})") if scale == 1 \
            else ("profile", "the calibration's compute scale on the measured surface")
    else:
        half = rates.gemm_half_flops
        text = (f"size curve: e {rates.gemm_efficiency:.3g}, "
                + (f"F½ {half / 1e9:.3g} GFLOP" if half > 0 else "no fixed cost per call"))
        ceiling = ceiling_source(hardware.name, dtype) if default_e else "as the rates set it"
        gemm = ("profile", fitted) if fitted else (
            "default", f"shape: Calculon's A100 table (perfkit.calc.rates); e: {ceiling}; "
                       f"no measured surface for {hardware.name}")
    recorded = hardware.multiprocessors is not None  # a trace's numSms, or given
    sms = hardware.multiprocessors if recorded else multiprocessors(hardware.name)
    occupancy = (f"by pairs per call, {sms} SMs" + (" (the device's own count)" if recorded
                                                    else "") if sms else
                 "not priced (multiprocessors unknown)")
    return [{"part": "kernels", "name": "gemm_model", "value": rates.gemm_model,
             "text": text, "origin": gemm[0], "source": gemm[1]},
            {"part": "kernels", "name": "attention_occupancy", "value": sms or 0,
             "text": occupancy, "origin": "default",
             "source": "perfkit.calc.attention_occupancy (kernels timed on an H100)"},
            _power_row(hardware)]


def _power_row(hardware: Hardware) -> dict[str, Any]:
    """The power limit compute is priced under (:mod:`perfkit.calc.power_limit`)."""
    limit = hardware.power_limit_w
    source = ("perfkit.calc.power_limit (an H100's power draw measured for perfkit; "
              "published H100 SXM and PCIe matmuls)")
    if limit is None:
        return {"part": "kernels", "name": "power_limit_w", "value": 0.0,
                "text": "rated power: compute at the peak", "origin": "default",
                "source": source}
    rated = rated_power(hardware.name)
    try:
        scale = compute_scale(hardware.name, limit, hardware.multiprocessors)
    except PerfkitError as error:
        return {"part": "kernels", "name": "power_limit_w", "value": float(limit),
                "text": f"{limit:g} W: not priced ({error})", "origin": "you",
                "source": source}
    of = f" ({rated[0]:g} rated)" if rated else ""
    return {"part": "kernels", "name": "power_limit_w", "value": float(limit),
            "text": f"{limit:g} W{of}: compute × {scale:.2f}", "origin": "you",
            "source": source}


def assumptions(calibration: Any = None, parallel: ParallelConfig | None = None,
                hardware: Hardware | None = None, *, preset: str | None = None,
                edits: Mapping[str, Any] | None = None, node: Node | str | None = None,
                rank_order: str | None = None,
                power_limit_w: float | None = None) -> Assumptions:
    """The node, rank placement and framework behaviour a prediction assumes.

    Parameters
    ----------
    calibration : Calibration, optional
        From :func:`perfkit.plan.calibrate`: its rates are the behaviour's starting point,
        its job the layout and hardware where they are not given. None: perfkit's default
        rates.
    parallel, hardware : optional
        The layout and device (default the calibration's job's).
    preset : str, optional
        A :meth:`Behaviour.preset <perfkit.calc.behaviour.Behaviour.preset>` name applied
        over the calibration's options (keeping what it fitted on the run, module
        docstring). None: the calibration's own.
    edits : mapping, optional
        Behaviour options the user changed (:data:`BEHAVIOUR_OPTIONS`), said ``"you"``.
    node : Node or str, optional
        Another node (or a :meth:`Node.preset <perfkit.specs.Node.preset>` name), said
        ``"you"``.
    rank_order : str, optional
        Another placement (``"tp-cp-ep-dp-pp"``, innermost first), said ``"you"``.
    power_limit_w : float, optional
        Another board power limit for the device, W (0: the rated power;
        :mod:`perfkit.calc.power_limit`), said ``"you"``. None: the hardware's own.

    Returns
    -------
    Assumptions
        ``table``: one row per value — the node (name, devices per node, intra-node link
        and bandwidth, inter-node bandwidth per device ``nics · nic_bw / devices``), the
        rank order and, for each group, how many of its ranks share a node
        (:func:`perfkit.calc.topology.layout_group` for tp, cp and ep;
        ``min(n_d, max(1, D / stride))`` of :func:`~perfkit.calc.topology.group_shape`
        for dp and pp), then the behaviour's preset and options, then how the kernels
        are priced (GEMMs by shape or size, attention's occupancy; read-only).
    """
    job = getattr(calibration, "job", None)
    parallel = parallel if parallel is not None else getattr(job, "parallel", None)
    hardware = hardware if hardware is not None else getattr(job, "hardware", None)
    if parallel is None or hardware is None:
        raise InvalidArgumentError("parallel", "a layout and hardware are needed: pass them, "
                                   "or a calibration that knows the job", None)
    changed: list[str] = []
    if node is not None:
        chosen_node = Node.preset(node) if isinstance(node, str) else node
        hardware = hardware.replace(node=chosen_node)
        changed.append("node")
    if power_limit_w is not None and (power_limit_w or None) != hardware.power_limit_w:
        hardware = hardware.replace(power_limit_w=power_limit_w or None)
        changed.append("power_limit_w")
    if rank_order is not None and rank_order != parallel.rank_order:
        parse_order(rank_order)
        parallel = dataclasses.replace(parallel, rank_order=rank_order)
        changed.append("rank_order")
    edits = dict(edits or {})
    behaviour, brows = _behaviour_rows(calibration, preset, edits)
    changed += [n for n in BEHAVIOUR_OPTIONS if n in edits]
    rows = _node_rows(parallel, hardware, "you" if "node" in changed else "")
    for row in rows:
        if row["name"] == "rank_order" and "rank_order" in changed:
            row["origin"], row["source"] = "you", "changed in the panel"
    for row in brows:  # the device's default share where none is set
        if row["name"] == "overlap_contention" and row["value"] is None:
            share = overlap_contention(hardware.name)
            row.update(value=share, text=_value_text("overlap_contention", share),
                       origin="default", source=CONTENTION_SOURCE)
    table = pd.DataFrame(rows + brows + _kernel_rows(calibration, hardware),
                         columns=list(ASSUMED_COLUMNS))
    if "power_limit_w" in changed:
        table.loc[table["name"] == "power_limit_w", ["origin", "source"]] = \
            ["you", "changed in the panel"]
    return Assumptions(parallel, hardware, behaviour, preset, table, tuple(changed))


def measured_rates(calibration: Any) -> dict[str, Any]:
    """Rates the calibration counted on the run that a behaviour also sets, kept when a
    behaviour is applied over it: ``dp_buckets``, the gradient reductions per step the
    profile shows (:mod:`perfkit.plan.calibrate.links`; a behaviour's overrides reset it
    to 1, its buckets then counted from ``bucket_params``)."""
    found = {term for term, _value, _how in getattr(calibration, "terms", ()) or ()}
    rates = getattr(calibration, "rates", None)
    return {"dp_buckets": rates.dp_buckets} if "dp_buckets" in found and rates else {}


def _edited_fitted(assumed: Assumptions) -> dict[str, Any]:
    """The options a calibration's fit keeps against a preset
    (:data:`~perfkit.calc.behaviour.FITTED_FIELDS`) that the user changed: those apply."""
    return {n: getattr(assumed.behaviour, n) for n in assumed.changed
            if n in FITTED_FIELDS and n in BEHAVIOUR_OPTIONS}


def predict_assumed(calibration: Any, assumed: Assumptions, **kwargs: Any) -> Prediction:
    """:func:`perfkit.plan.predict` with the layout, node and behaviour of ``assumed``
    (the behaviour only where :attr:`Assumptions.behaviour_applies`, with what the
    calibration counted on the run kept: :func:`measured_rates`); ``kwargs`` go to
    :func:`~perfkit.plan.predict` (an uncalibrated job's model, type, schemes)."""
    applies = assumed.behaviour_applies
    if applies:
        kept = {**measured_rates(calibration), **_edited_fitted(assumed)}
        if kept:
            kwargs["overrides"] = {**dict(kwargs.get("overrides") or {}), **kept}
    return predict(calibration, parallel=assumed.parallel, hardware=assumed.hardware,
                   behaviour=assumed.behaviour if applies else None, **kwargs)


def assumed_calibration(calibration: Any, assumed: Assumptions) -> Any:
    """The calibration with what ``assumed`` changes in it: its rates with the behaviour's
    :meth:`~perfkit.calc.behaviour.Behaviour.overrides_over` it (where
    :attr:`Assumptions.behaviour_applies`, :func:`measured_rates` kept), its job's
    hardware on the assumed node, so that :func:`perfkit.plan.search` (which takes no
    behaviour) ranks with the assumptions; None stays None. ``predict(
    assumed_calibration(cal, a), parallel=a.parallel)`` is :func:`predict_assumed` of the
    same (tests check it)."""
    if calibration is None:
        return None
    rates = calibration.rates
    if assumed.behaviour_applies:
        rates = rates.replace(**{**assumed.behaviour.overrides_over(calibration),
                                 **measured_rates(calibration), **_edited_fitted(assumed)})
    job = dataclasses.replace(calibration.job, hardware=assumed.hardware)
    return dataclasses.replace(calibration, rates=rates, job=job)
