"""The Planner's "What the model assumes" panel: the node, the rank placement and the
framework behaviour the step model predicts with, each editable.

The table is :func:`perfkit.plan.assumed.assumptions`'s (name, value, where it came
from, source); this module only draws it and its controls. A change calls the panel's
``on_change`` with the new :class:`~perfkit.plan.assumed.Assumptions`: the Planner tab
predicts the profiled layout again with them (:func:`perfkit.plan.assumed.
predict_assumed`) and redraws its figures. Notebook 02 shows the same panel
(:func:`assumed_panel`).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import ipywidgets as W

from ..calc.attention_rate import ATTENTION_IMPLEMENTATIONS
from ..calc.behaviour import Behaviour
from ..calc.contention import overlap_contention
from ..calc.elementwise import ELEMENTWISE_KERNELS
from ..calc.grad_accumulation import GRAD_ACCUMULATION
from ..calc.power_limit import rated_power
from ..format import listed, time_text
from ..plan.assumed import (
    FRAMEWORK_PRESETS,
    Assumptions,
    assumptions,
    predict_assumed,
)
from ..specs import Hardware, Node, ParallelConfig
from .markup import STYLE, frame_html, note

__all__ = ["AssumedPanel", "assumed_panel", "predict_kwargs", "CALIBRATED", "CUSTOM", "preset_for",
           "RANK_ORDERS"]

#: The preset dropdown's entry for the calibration's own options, and for edited ones.
CALIBRATED = "calibrated"
CUSTOM = "custom"
#: The node dropdown's entry for the hardware's own node.
OWN_NODE = "as the hardware"

#: Placements offered besides the layout's own (innermost first): Megatron-LM's default,
#: and pipeline or data parallel innermost after tensor parallel.
RANK_ORDERS = ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-pp-cp-ep-dp", "dp-tp-cp-ep-pp")

_BOOLS = {"tp_comm_overlap": "tp comm overlap", "overlap_grad_reduce": "overlap grad reduce",
          "overlap_param_gather": "overlap param gather", "fsdp_prefetch": "FSDP prefetch",
          "sp_regather": "SP re-gather in backward"}
_COSTS = {"kernel_gap_s": "gap per kernel (µs)",
          "layer_overhead_s": "per layer and micro-batch (µs)",
          "overhead_s": "per step (µs)"}


def preset_for(framework: str | None) -> tuple[str | None, str]:
    """The behaviour preset a profile's framework implies (:data:`~perfkit.plan.assumed.
    FRAMEWORK_PRESETS`) and a sentence saying why, or None and why not."""
    preset = FRAMEWORK_PRESETS.get(str(framework or "").lower())
    if preset is not None:
        return preset, (f"Preset {preset!r}: the profile's framework is {framework}.")
    if framework:
        return None, (f"The profile's framework is {framework}, which does not say which "
                      "of its frameworks' defaults ran (Megatron, NeMo, DDP, FSDP, "
                      "DeepSpeed): the calibration's own options are kept; pick a preset.")
    return None, ("The profile does not say its framework: the calibration's own options "
                  "are kept; pick a preset.")


def _short_source(source: str) -> str:
    """A source up to its first colon (a datasheet's name, not its figures)."""
    return source.split(": ")[0] if len(source) > 60 else source


#: The node's figures the panel lets a user type: (label, whole number, largest, tooltip).
_NODE_FIELDS = {
    "devices_per_node": ("devices per node", True, 1024, "devices in one server"),
    "intra_gbs": ("intra-node GB/s", False, 1e5,
                  "each device's bandwidth to the others of its node, per direction, GB/s "
                  "(an H100's NVLink 4: 450)"),
    "nics_per_node": ("NICs per node", True, 64,
                      "NICs of the compute fabric in one server (storage NICs not counted)"),
    "nic_gbits": ("NIC Gb/s", False, 1e5, "one NIC's line rate, Gb/s (ConnectX-7: 400)")}


class AssumedPanel:
    """The panel (:attr:`widget`), its controls, and the assumptions on show
    (:attr:`assumed`).

    Parameters
    ----------
    calibration : Calibration or None
        What the prediction is calibrated with (its rates start the behaviour).
    parallel, hardware : ParallelConfig, Hardware
        The profiled layout and device.
    framework : str, optional
        The profile's framework (:attr:`perfkit.Job.framework`): its preset is the
        default where it implies one (:func:`preset_for`).
    on_change : callable, optional
        Called with the new :class:`~perfkit.plan.assumed.Assumptions` after each edit.
    """

    def __init__(self, calibration: Any, parallel: ParallelConfig, hardware: Hardware,
                 framework: str | None = None,
                 on_change: Callable[[Assumptions], None] | None = None) -> None:
        self.calibration, self.parallel, self.hardware = calibration, parallel, hardware
        self.on_change = on_change
        #: the last prediction made with the assumptions (by :func:`assumed_panel`)
        self.prediction: Any = None
        preset, self.preset_why = preset_for(framework)
        self._preset: str | None = preset
        self._default_preset = preset
        self._edits: dict[str, Any] = {}
        self._syncing = False
        wide = {"description_width": "initial"}
        self.preset = W.Dropdown(options=[CALIBRATED, *Behaviour.presets(), CUSTOM],
                                 value=preset or CALIBRATED, description="framework preset",
                                 style=wide, layout=W.Layout(width="260px"))
        self.node = W.Dropdown(options=[OWN_NODE, *Node.presets()], value=OWN_NODE,
                               description="node", style=wide,
                               layout=W.Layout(width="240px"))
        # the node's own figures, for a server no preset describes (4 GPUs, 16 NPUs, ...)
        self._node_edits: dict[str, float] = {}
        self.node_fields = {n: (W.BoundedIntText if whole else W.BoundedFloatText)(
            min=1, max=top, description=d, style=wide, tooltip=tip,
            layout=W.Layout(width="215px"))
            for n, (d, whole, top, tip) in _NODE_FIELDS.items()}
        capped = rated_power(hardware.name) is not None
        self.power = W.BoundedFloatText(
            value=float(hardware.power_limit_w or 0.0), min=0.0, max=5000.0, step=25.0,
            description="power limit (W, 0: rated)", style=wide, disabled=not capped,
            tooltip="the board power limit the GPUs run under: compute is priced at the "
                    "share a capped device keeps (Hopper parts)" if capped else
                    f"no measured power law for {hardware.name}: calibrate on a capped run",
            layout=W.Layout(width="230px"))
        orders = [parallel.rank_order] + [o for o in RANK_ORDERS if o != parallel.rank_order]
        self.rank_order = W.Dropdown(options=orders, value=parallel.rank_order,
                                     description="rank order", style=wide,
                                     layout=W.Layout(width="250px"))
        self.bools = {n: W.Checkbox(description=d, indent=False,
                                    layout=W.Layout(width="190px"))
                      for n, d in _BOOLS.items()}
        self.costs = {n: W.BoundedFloatText(min=0.0, max=1e7, step=0.5, description=d,
                                            style=wide, layout=W.Layout(width="250px"))
                      for n, d in _COSTS.items()}
        self.attention = W.Dropdown(options=list(ATTENTION_IMPLEMENTATIONS),
                                    description="attention", style=wide,
                                    layout=W.Layout(width="190px"))
        self.contention = W.BoundedFloatText(
            min=0.0, max=100.0, step=1.0, description="overlap contention (%)", style=wide,
            tooltip="how much slower compute runs beside the communication it hides "
                    "(GPUs: 18.9 %, Lee et al. 2025; Ascend: 0)",
            layout=W.Layout(width="230px"))
        self.elementwise = W.Dropdown(
            options=list(ELEMENTWISE_KERNELS), description="element-wise", style=wide,
            tooltip="how the layers' norms, rotary, adds and activation run: fused "
                    "library kernels, eager PyTorch op by op, or torch.compile's",
            layout=W.Layout(width="220px"))
        self.accumulation = W.Dropdown(
            options=list(GRAD_ACCUMULATION), description="gradient accumulation",
            style=wide, tooltip="where the micro-batches' gradients are added up: in the "
            "GEMMs (Megatron), into fp32 copies (DeepSpeed bf16), into .grad (PyTorch)",
            layout=W.Layout(width="260px"))
        self.table = W.HTML()
        self.said = W.HTML()
        self.assumed = self._assume()
        self._sync_controls()
        self.preset.observe(self._preset_chosen, names="value")
        self.node.observe(lambda _c: self._node_chosen(), names="value")
        for w in (self.rank_order, self.power):
            w.observe(lambda _c: self._changed(), names="value")
        for name, w in self.node_fields.items():
            w.observe(lambda c, name=name: self._node_edited(name, c["new"]), names="value")
        for name, w in [*self.bools.items(), *self.costs.items(),
                        ("overlap_contention", self.contention),
                        ("attention_implementation", self.attention),
                        ("elementwise_kernels", self.elementwise),
                        ("grad_accumulation", self.accumulation)]:
            w.observe(lambda c, name=name: self._edited(name, c["new"]), names="value")
        box = {"flex_flow": "row wrap", "align_items": "center"}
        self.widget = W.VBox([
            W.HTML(STYLE + "<div class='pk-h'>What the model assumes</div>" + note(
                "The node, where each group's ranks sit, the GPUs' power limit, what the "
                "framework overlaps and costs, and how much the traffic it hides slows the "
                "compute beside it: change any value to predict the profiled layout again "
                "with it.")),
            W.HBox([self.preset, self.node, self.rank_order, self.power],
                   layout=W.Layout(**box)),
            W.HBox(list(self.node_fields.values()), layout=W.Layout(**box)),
            W.HBox(list(self.bools.values()) + [self.attention, self.elementwise,
                                                 self.accumulation],
                   layout=W.Layout(**box)),
            W.HBox([*self.costs.values(), self.contention], layout=W.Layout(**box)),
            self.said, self.table])
        self.widget.add_class("pk-assumed")
        self._render()

    def recalibrated(self, calibration: Any) -> None:
        """Start from another calibration (the Planner fitted again), the user's choices
        kept; redrawn, without calling back."""
        self.calibration = calibration
        self.assumed = self._assume()
        self._sync_controls()
        self._render()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """Shown as its widget in a notebook; a static page (``perfkit report``,
        nbconvert) shows what the widget's text shows when displayed: the heading, what
        was changed, the assumptions' table and any line added under it (the predicted
        step of :func:`assumed_panel`), without the controls."""
        bundle = self.widget._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        bundle["text/html"] = "".join(c.value for c in self.widget.children
                                      if isinstance(c, W.HTML))
        return bundle

    def _assume(self) -> Assumptions:
        node: Node | str | None = None if self.node_value() == OWN_NODE else self.node_value()
        edited = getattr(self, "_node_edits", {})
        if edited:  # the node chosen (or the hardware's own) with the figures typed
            base = self.hardware.topology if node is None else Node.preset(str(node))
            figures = {"devices_per_node": base.devices_per_node,
                       "intra_gbs": base.intra_bandwidth / 1e9,
                       "nics_per_node": base.nics_per_node,
                       "nic_gbits": base.nic_bandwidth * 8 / 1e9, **edited}
            node = Node(name=f"{base.name}, edited", intra_link=base.intra_link,
                        devices_per_node=int(figures["devices_per_node"]),
                        intra_bandwidth=float(figures["intra_gbs"]) * 1e9,
                        nics_per_node=int(figures["nics_per_node"]),
                        nic_bandwidth=float(figures["nic_gbits"]) * 1e9 / 8,
                        source=f"you: {base.name} with "
                               + ", ".join(_NODE_FIELDS[k][0] for k in edited))
        return assumptions(self.calibration, self.parallel, self.hardware,
                           preset=self._preset, edits=self._edits, node=node,
                           rank_order=self.rank_order.value if hasattr(self, "rank_order")
                           else None,
                           power_limit_w=self.power.value if hasattr(self, "power") else None)

    def node_value(self) -> str:
        """The node chosen (:data:`OWN_NODE` for the hardware's own)."""
        return self.node.value if hasattr(self, "node") else OWN_NODE

    def _node_chosen(self) -> None:
        """Another node: its own figures, the ones typed for the previous one dropped."""
        if self._syncing:
            return
        self._node_edits = {}
        self._changed(sync=True)

    def _node_edited(self, name: str, value: float) -> None:
        if self._syncing:
            return
        self._node_edits[name] = value
        self._changed()

    def _sync_controls(self) -> None:
        """Set the controls to the behaviour and node in use, without calling back."""
        b = self.assumed.behaviour
        node = self.assumed.hardware.topology
        self._syncing = True
        try:
            for name, value in (("devices_per_node", node.devices_per_node),
                                ("intra_gbs", round(node.intra_bandwidth / 1e9, 3)),
                                ("nics_per_node", node.nics_per_node),
                                ("nic_gbits", round(node.nic_bandwidth * 8 / 1e9, 3))):
                self.node_fields[name].value = value
            for name, w in self.bools.items():
                w.value = bool(getattr(b, name))
            for name, w in self.costs.items():  # 3 significant digits on show
                w.value = float(f"{float(getattr(b, name)) * 1e6:.3g}")
            share = b.overlap_contention if b.overlap_contention is not None \
                else overlap_contention(self.hardware.name)
            self.contention.value = round(float(share) * 100, 2)
            self.attention.value = b.attention_implementation
            self.elementwise.value = b.elementwise_kernels
            self.accumulation.value = b.grad_accumulation
        finally:
            self._syncing = False

    def _preset_chosen(self, change: dict[str, Any]) -> None:
        if self._syncing or change["new"] == CUSTOM:
            return
        self._preset = None if change["new"] == CALIBRATED else change["new"]
        self._edits = {}
        self._changed(sync=True)

    def _edited(self, name: str, value: Any) -> None:
        if self._syncing:
            return
        if name in self.costs:
            value = float(value) / 1e6
        elif name == "overlap_contention":
            value = float(value) / 100
        self._edits[name] = value
        self._syncing = True
        try:
            self.preset.value = CUSTOM
        finally:
            self._syncing = False
        self._changed()

    def _changed(self, sync: bool = False) -> None:
        self.assumed = self._assume()
        if sync:
            self._sync_controls()
        self._render()
        if self.on_change is not None:
            self.on_change(self.assumed)

    def edits(self) -> list[str]:
        """What the user changed: the assumptions' names, and the framework preset where
        another one was picked (empty: the calibration's own)."""
        a = self.assumed
        return [*a.changed] + (["the framework preset"]
                               if a.preset != self._default_preset else [])

    def _render(self) -> None:
        a = self.assumed
        node = a.table["part"] == "node"
        shown = a.table.assign(source=a.table["source"].where(
            ~node, a.table["source"].map(_short_source)))
        self.table.value = STYLE + frame_html(
            shown, columns=["name", "text", "origin", "source"], max_rows=len(shown),
            headers={"name": "assumption", "text": "value", "origin": "from",
                     "source": "source"}, hot=list(shown["origin"] == "you"),
            wrap=("source",))  # a datasheet's name or what was fitted: read whole
        picked = a.preset != self._default_preset
        changed = self.edits()
        ranking = ("the layouts below are ranked with them too, each at the default rank "
                   "order" if self.calibration is not None else
                   "the ranking below keeps perfkit's default rates")
        said = (f"You changed {listed(changed)}: the profiled layout's step above is "
                f"predicted with your values ({ranking})." if changed
                else "Nothing changed by you yet.")
        start = (f"Starting from the {a.preset!r} preset (keeping what the calibration "
                 "fitted on the run)." if a.preset is not None and not self._edits else "")
        self.said.value = STYLE + note(" ".join(
            s for s in (said, start, self._other_vendor(),
                        "" if picked else self.preset_why) if s))

    def _other_vendor(self) -> str:
        """A sentence when the node chosen links its devices otherwise than the job's own
        device does (NVLink for an Ascend job, HCCS for a GPU's): its links are priced,
        while the devices keep the calibration's speeds."""
        own = self.hardware.topology.intra_link
        node = self.assumed.hardware.topology
        if self.node_value() == OWN_NODE or node.intra_link == own:
            return ""
        return (f"The node {node.name} links its devices by {node.intra_link}, not by "
                f"{own} as the job's {self.hardware.name} does: its links are priced, the "
                f"devices stay the job's ({self.hardware.name}).")


def predict_kwargs(job: Any, calibration: Any) -> dict[str, Any]:
    """What :func:`perfkit.plan.assumed.predict_assumed` needs besides the assumptions:
    nothing with a calibration (its job has it), else the job's model and conventions as
    :func:`perfkit.widgets.prediction_fit.predict_layout` predicts uncalibrated."""
    if calibration is not None:
        return {}
    return dict(model=job.model, dtype=job.dtype, activation_model=job.activation_model,
                static_scheme=job.static_scheme,
                overrides={"gradient_bytes": job.gradient_bytes})


def assumed_panel(job: Any, calibration: Any = None) -> AssumedPanel:
    """The panel for a complete :class:`perfkit.Job` (calibrated by ``calibration``, else
    at perfkit's default rates) with a line under it giving the profiled layout's
    predicted step (:func:`perfkit.plan.assumed.predict_assumed`, kept as the panel's
    ``prediction``), redrawn on each change: what notebook 02 shows."""
    step = W.HTML()
    extra = predict_kwargs(job, calibration)

    def show(assumed: Assumptions) -> None:
        pred = predict_assumed(calibration, assumed, **extra)
        panel.prediction = pred
        parts = ", ".join(f"{name} {time_text(seconds * 1e6)}"
                          for name, seconds in pred.parts.items() if seconds > 0)
        step.value = STYLE + (f"<p><b>Predicted step of the profiled layout: "
                              f"{html.escape(time_text(pred.step_s * 1e6))}</b> "
                              f"({html.escape(parts)})</p>")

    panel = AssumedPanel(calibration, job.parallel, job.hardware, job.framework, show)
    panel.widget.children = (*panel.widget.children, step)
    show(panel.assumed)
    return panel
