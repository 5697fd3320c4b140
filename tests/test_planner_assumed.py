"""What the step model assumes (perfkit.plan.assumed) and the Planner's panel that edits it
(perfkit.widgets.planner_assumed): the node and placement against independent arithmetic on
the DGX H100 datasheet, the presets against Behaviour.preset, and each edit moving the
predicted step the way the model says it should."""

from __future__ import annotations

import html
import math
from pathlib import Path

import pytest
from widget_html import panel_html

import perfkit as pk
from perfkit.calc.behaviour import Behaviour
from perfkit.plan.assumed import (
    BEHAVIOUR_OPTIONS,
    assumed_calibration,
    assumptions,
    predict_assumed,
)
from perfkit.widgets.planner_assumed import CALIBRATED, AssumedPanel, preset_for

H100 = pk.Hardware.preset("h100")  # a DGX H100: 8 GPUs, NVLink 450 GB/s, 8 x 400 Gb/s NICs
LLAMA = pk.ModelSpec.preset("llama2-13b")


def _values(table):
    return dict(zip(table["name"], table["value"], strict=True))


def test_tp8_on_an_8_gpu_node_keeps_the_tp_group_in_the_node() -> None:
    par = pk.ParallelConfig(dp=4, tp=8, pp=1)
    v = _values(assumptions(None, par, H100).table)
    # DGX H100 datasheet: NVLink 4 900 GB/s bidirectional = 450 GB/s per direction;
    # 8 ConnectX-7 of 400 Gb/s = 50 GB/s each, shared by 8 GPUs = 50 GB/s per GPU
    assert v["devices_per_node"] == 8 and v["intra_link"] == "nvlink"
    assert v["intra_bandwidth"] == pytest.approx(900e9 / 2)
    assert v["nic_bandwidth_per_device"] == pytest.approx(8 * 400e9 / 8 / 8)
    assert v["rank_order"] == "tp-cp-ep-dp-pp"
    assert v["tp_per_node"] == 8  # the whole tp group
    assert v["dp_per_node"] == 8 // (8 * 1)  # D / (tp · cp) = 1: each dp rank on its node
    assert v["pp_per_node"] == 1 and v["cp_per_node"] == 1


def test_ranks_per_node_follow_the_rank_order() -> None:
    par = pk.ParallelConfig(dp=4, tp=2, pp=2, cp=2)
    v = _values(assumptions(None, par, H100).table)
    assert (v["tp_per_node"], v["cp_per_node"]) == (2, 2)
    assert v["dp_per_node"] == 8 // (2 * 2)  # D / (tp · cp) = 2 of the 4
    assert v["pp_per_node"] == 1  # pp's stride tp·cp·dp = 16 > 8 devices
    # pp inside dp: pp's stride tp·cp = 4, two stages in a node; dp's stride 8: one
    other = assumptions(None, par, H100, rank_order="tp-cp-ep-pp-dp")
    w = _values(other.table)
    assert (w["pp_per_node"], w["dp_per_node"]) == (min(2, 8 // 4), max(1, 8 // 16))
    assert other.parallel.rank_order == "tp-cp-ep-pp-dp" and other.changed == ("rank_order",)
    origin = dict(zip(other.table["name"], other.table["origin"], strict=True))
    assert origin["rank_order"] == "you"


def test_a_node_preset_replaces_the_hardware_node() -> None:
    par = pk.ParallelConfig(dp=2, tp=8)
    a = assumptions(None, par, H100, node="dgx-b200")
    v = _values(a.table)
    # DGX B200: NVLink 5, 1.8 TB/s bidirectional per GPU = 900 GB/s per direction
    assert v["intra_bandwidth"] == pytest.approx(1.8e12 / 2)
    assert a.hardware.topology.name == "dgx-b200" and "node" in a.changed


@pytest.mark.parametrize("name", Behaviour.presets())
def test_preset_values_are_behaviour_preset_values(name) -> None:
    a = assumptions(None, pk.ParallelConfig(dp=8), H100, preset=name)
    table = a.table.set_index("name")
    expected = Behaviour.preset(name)
    for option in BEHAVIOUR_OPTIONS:
        if option == "overlap_contention":  # no preset sets it: the device's share shows
            assert expected.overlap_contention is None
            assert table.loc[option, "value"] == pytest.approx(0.189)
            assert table.loc[option, "origin"] == "default"
            continue
        assert table.loc[option, "value"] == getattr(expected, option), option
        assert table.loc[option, "origin"] == "preset"
    assert a.behaviour == expected and a.behaviour_applies


def test_without_a_preset_the_default_rates_say_default() -> None:
    a = assumptions(None, pk.ParallelConfig(dp=8), H100)
    rows = a.table[a.table["part"] == "behaviour"].set_index("name")
    assert set(rows.loc[list(BEHAVIOUR_OPTIONS), "origin"]) == {"default"}
    assert not a.behaviour_applies and a.changed == ()


def test_the_kernels_say_how_they_are_priced() -> None:
    """GEMMs on the measured Hopper surface on an H100, on the size curve elsewhere or
    where a profile fitted its own; attention's occupancy on the datasheet's
    multiprocessors, none where they are unknown."""
    def kernels(calibration, hardware=None):
        a = assumptions(calibration, pk.ParallelConfig(dp=8) if hardware else None, hardware)
        return a.table[a.table["part"] == "kernels"].set_index("name")

    h100 = kernels(None, H100)
    assert h100.loc["gemm_model", "text"] == "by (M, N, K): hopper-bf16 surface"
    assert h100.loc["gemm_model", "origin"] == "default"
    assert h100.loc["attention_occupancy", "text"] == "by pairs per call, 132 SMs"
    a100 = kernels(None, pk.Hardware.preset("a100"))
    # the A100's best measured matmul: 271.2 of 312 TFLOP/s (stas00/ml-engineering MAMF)
    assert a100.loc["gemm_model", "text"] == f"size curve: e {271.2 / 312:.3g}, F½ 0.58 GFLOP"
    assert "271.2 of 312 TFLOP/s" in a100.loc["gemm_model", "source"]
    l40s = kernels(None, pk.Hardware.preset("l40s"))  # no published best: Calculon's 0.95
    assert l40s.loc["gemm_model", "text"] == "size curve: e 0.95, F½ 0.58 GFLOP"
    assert "108 SMs" in a100.loc["attention_occupancy", "text"]
    ascend = kernels(None, pk.Hardware.preset("ascend-910b"))
    assert ascend.loc["attention_occupancy", "text"].startswith("not priced")
    trace = Path(__file__).parent / "data" / "kineto_llama_wide_tp_h100" / "a.pt.trace.json.gz"
    cal = pk.plan.calibrate(pk.load(trace))
    own = kernels(cal)
    assert own.loc["gemm_model", "origin"] == "profile"
    assert own.loc["gemm_model", "source"].startswith("fitted on the run")


def test_a_size_curve_without_a_fixed_cost_says_so() -> None:
    """A fit that finds no fixed cost per GEMM (F½ = 0) is not shown as "F½ 0 GFLOP"."""
    from types import SimpleNamespace

    from perfkit.calc.rates import Rates

    cal = SimpleNamespace(rates=Rates(gemm_efficiency=0.81, gemm_half_flops=0.0,
                                      gemm_model="size"), terms=(), notes=(), job=None)
    a = assumptions(cal, pk.ParallelConfig(dp=8), pk.Hardware.preset("a100"))
    text = a.table.set_index("name").loc["gemm_model", "text"]
    assert text == "size curve: e 0.81, no fixed cost per call"


def test_the_framework_sets_the_preset_only_where_it_names_one() -> None:
    assert preset_for("mindspore")[0] == "mindspore"
    preset, why = preset_for("pytorch")
    assert preset is None and "pytorch" in why
    assert preset_for(None)[0] is None


def _panel(par):
    return AssumedPanel(None, par, H100)


def _step(panel):
    return predict_assumed(None, panel.assumed, model=LLAMA)


def test_tp_comm_overlap_never_slows_a_tp_layout() -> None:
    par = pk.ParallelConfig(dp=2, tp=8, num_micro_batches=8, sequence_parallel=True)
    panel = _panel(par)
    before = _step(panel)
    assert before.parts["tp_comm"] > 0
    panel.bools["tp_comm_overlap"].value = True
    after = _step(panel)
    assert panel.assumed.behaviour.tp_comm_overlap and panel.preset.value == "custom"
    assert after.step_s <= before.step_s
    # userbuffers hide the tp traffic under the layer's compute: only the excess shows
    assert after.parts["tp_comm"] < before.parts["tp_comm"]
    assert "You changed tp_comm_overlap" in panel.said.value


def test_a_larger_kernel_gap_adds_the_gap_once_per_kernel() -> None:
    par = pk.ParallelConfig(dp=2, tp=8, num_micro_batches=8, sequence_parallel=True)
    panel = _panel(par)
    base = _step(panel)
    panel.costs["kernel_gap_s"].value = 5.0  # µs
    five = _step(panel)
    panel.costs["kernel_gap_s"].value = 10.0
    ten = _step(panel)
    assert panel.assumed.behaviour.kernel_gap_s == pytest.approx(10e-6)
    d5, d10 = five.step_s - base.step_s, ten.step_s - base.step_s
    assert d5 > 0 and d10 == pytest.approx(2 * d5, rel=1e-9)  # linear in the gap
    kernels = d10 / 10e-6  # the step grows by kernels × gap: a whole number of kernels
    assert kernels > 1000 and abs(kernels - round(kernels)) < 1e-3
    assert ten.parts["overhead"] - base.parts["overhead"] == pytest.approx(d10, rel=1e-9)


def test_choosing_the_calibrated_entry_undoes_the_edits() -> None:
    par = pk.ParallelConfig(dp=2, tp=8, num_micro_batches=8)
    panel = _panel(par)
    base = _step(panel).step_s
    panel.preset.value = "nemo"
    assert panel.bools["overlap_param_gather"].value is True  # the controls follow
    panel.preset.value = CALIBRATED
    assert panel.assumed.changed == () and not panel.assumed.behaviour_applies
    assert _step(panel).step_s == base


@pytest.fixture(scope="module")
def board():
    from perfkit.widgets import dashboard

    board = dashboard("simulated/llama2-13b-baseline-dp16")
    board.select("Planner")
    return board


@pytest.mark.slow  # the whole dashboard built: over about 5 s on a busy 2-core machine
def test_the_planner_tab_predicts_again_with_the_edited_assumptions(board) -> None:
    tab = board.panels["Planner"]
    panel = tab.assumed
    assert panel is not None and "What the model assumes" in panel_html(tab)
    own, own_dp = tab.fit.prediction.step_s, tab.fit.prediction.parts["dp_comm"]
    cal = tab.fit.calibration
    assert cal is not None and "overhead" in cal.measured
    # MindSpore's defaults overlap nothing, as the calibration's own options: with the
    # fixed costs and the gradient reductions counted on the run kept, the step is the same
    panel.preset.value = "mindspore"
    assert tab.fit.prediction.step_s == pytest.approx(own, rel=1e-12)
    buckets = panel.assumed.table.set_index("name").loc["dp_buckets"]
    assert buckets["origin"] == "profile" and buckets["value"] == cal.rates.dp_buckets
    # a preset keeps the fixed costs the calibration fitted on the run
    panel.preset.value = "ddp"
    table = panel.assumed.table.set_index("name")
    assert table.loc["kernel_gap_s", "origin"] == "profile"
    assert table.loc["kernel_gap_s", "value"] == cal.rates.kernel_gap_s
    ddp = tab.fit.prediction
    assert ddp.step_s == pytest.approx(predict_assumed(cal, panel.assumed).step_s, rel=1e-12)
    # DDP overlaps the gradient reduction with the backward: the dp part shrinks
    assert 0 < ddp.parts["dp_comm"] < own_dp
    predicted = tab.comparison.loc[tab.comparison["run"] == "predicted", "step_s"]
    assert set(predicted) == {ddp.step_s}
    # the ranking below searches with the same assumptions: the profiled layout's row there
    # is the step above
    par, ranked = ddp.parallel, tab.ranked
    same = ranked[(ranked["dp"] == par.dp) & (ranked["tp"] == par.tp) & (ranked["pp"] == par.pp)
                  & (ranked["cp"] == 1) & (ranked["micro_batch_size"] == par.micro_batch_size)
                  & (ranked["optimizer_shard"] == par.optimizer_shard)
                  & (ranked["recompute"] == par.recompute)]
    assert len(same) == 1 and same["step_s"].iloc[0] == pytest.approx(ddp.step_s, rel=1e-9)
    assert ddp.step_s < own
    moved = assumed_calibration(cal, panel.assumed)
    assert pk.plan.predict(moved, parallel=panel.assumed.parallel).step_s == pytest.approx(
        ddp.step_s, rel=1e-12)
    # a larger fixed cost per step adds exactly that to the step
    was, shown = panel.assumed.behaviour.overhead_s, panel.costs["overhead_s"].value
    panel.costs["overhead_s"].value = shown + 2000.0  # µs: 2 ms more per step
    assert panel.assumed.behaviour.overhead_s == pytest.approx((shown + 2000.0) * 1e-6)
    assert tab.fit.prediction.step_s - ddp.step_s == pytest.approx(
        (shown + 2000.0) * 1e-6 - was, rel=1e-6)
    assert "You changed overhead_s" in panel_html(tab)
    # an edit is a what-if: the gap to the run is the change's, and the run is not blamed
    # (the walk of session 34 read "outside the band. The run loses time the model does
    # not explain" after ticking an overlap)
    said = " ".join(panel_html(tab).split())
    assert "with your overhead_s and the framework preset, against the measured" in said
    assert "a what-if, not a check of the model" in said
    assert "loses time the model does not explain" not in said
    # fitting again (another closing) keeps the user's choices and predicts with them
    tab.closing.value = "kernels"
    assert panel.assumed.changed == ("overhead_s",) and panel.assumed.preset == "ddp"
    again = predict_assumed(tab.fit.calibration, panel.assumed)
    assert tab.fit.prediction.step_s == pytest.approx(again.step_s, rel=1e-12)
    tab.closing.value = "one"
    panel.preset.value = CALIBRATED
    assert tab.fit.prediction.step_s == pytest.approx(own, rel=1e-12)
    assert not math.isnan(tab.fit.prediction.step_s)


def test_the_notebook_panel_predicts_as_the_planner_does_uncalibrated_and_calibrated() -> None:
    import dataclasses

    from perfkit.widgets.planner_assumed import assumed_panel
    from perfkit.widgets.prediction import fit_job, predict_layout

    profile = pk.load("sample:llama2-13b-baseline-dp16")
    job = dataclasses.replace(pk.infer_job(profile), step_time_s=None)
    bare = assumed_panel(job)  # no calibration: the default rates, the job's conventions
    assert bare.prediction.step_s == predict_layout(None, job, job.parallel).step_s
    fit = fit_job(profile, job)
    panel = assumed_panel(job, fit.calibration)
    assert panel.prediction.step_s == pytest.approx(fit.prediction.step_s, rel=1e-12)
    panel.costs["overhead_s"].value = panel.costs["overhead_s"].value + 1000.0
    assert panel.prediction.step_s > fit.prediction.step_s
    assert "Predicted step of the profiled layout" in panel_html(panel.widget)


def test_a_power_limit_set_in_the_panel_slows_compute_by_the_line() -> None:
    from perfkit.calc.power_limit import compute_scale

    par = pk.ParallelConfig(dp=8, num_micro_batches=8)
    panel = _panel(par)
    assert panel.power.value == 0 and not panel.power.disabled
    base = _step(panel)
    panel.power.value = 500
    assert panel.assumed.changed == ("power_limit_w",)
    assert panel.assumed.hardware.power_limit_w == 500
    row = panel.assumed.table.set_index("name").loc["power_limit_w"]
    assert row["origin"] == "you" and row["text"].endswith("compute × 0.81")
    capped = _step(panel)
    # the matrix work slows by the line's share at most, the memory-bound work not at all
    ratio = capped.parts["compute"] / base.parts["compute"]
    assert 1.1 < ratio <= 1 / compute_scale("h100", 500) + 1e-9
    assert capped.parts["dp_comm"] <= base.parts["dp_comm"] + 1e-12
    panel.power.value = 0  # back to the rated power
    assert panel.assumed.changed == () and _step(panel).step_s == base.step_s


def test_the_power_limit_is_not_offered_where_perfkit_has_no_law() -> None:
    panel = AssumedPanel(None, pk.ParallelConfig(dp=8), pk.Hardware.preset("a100"))
    assert panel.power.disabled and "no measured power law" in panel.power.tooltip
    row = panel.assumed.table.set_index("name").loc["power_limit_w"]
    assert row["origin"] == "default" and "rated power" in row["text"]


def test_the_overlap_contention_box_starts_at_the_devices_share_and_applies() -> None:
    par = pk.ParallelConfig(dp=8, tp=2, num_micro_batches=8, sequence_parallel=True)
    panel = _panel(par)
    assert panel.contention.value == pytest.approx(18.9)  # Lee et al. 2025, on GPUs
    panel.bools["tp_comm_overlap"].value = True
    hidden = _step(panel)
    exposed = _step(panel).parts["tp_comm"]
    panel.contention.value = 0.0
    assert "overlap_contention" in panel.assumed.changed
    free = _step(panel)
    # the hidden tp traffic cost 18.9 % of itself; at 0 it costs nothing
    assert free.parts["tp_comm"] < exposed and free.step_s < hidden.step_s
    assert panel.assumed.table.set_index("name").loc["overlap_contention", "origin"] == "you"
    npu = AssumedPanel(None, par, pk.Hardware.preset("ascend-910b"))
    assert npu.contention.value == 0.0


def test_a_node_of_another_vendor_is_said_to_price_only_its_links() -> None:
    """A dgx-h100 node chosen for an Ascend 910B job was taken without a word."""
    panel = AssumedPanel(None, pk.ParallelConfig(dp=8, num_micro_batches=8),
                         pk.Hardware.preset("ascend-910b"))
    assert "links its devices by" not in panel.said.value
    panel.node.value = "dgx-h100"
    said = " ".join(html.unescape(panel.said.value).split())
    assert ("The node dgx-h100 links its devices by nvlink, not by hccs as the job's "
            "ascend-910b does: its links are priced, the devices stay the job's "
            "(ascend-910b).") in said
    panel.node.value = "atlas-900-a2-pod"  # the same vendor's other node: nothing to say
    assert "links its devices by" not in panel.said.value


def test_a_node_no_preset_describes_is_typed_in_its_figures() -> None:
    """A new user's walk: only seven node presets, so a 16-device server could not be
    described. Typing 16 devices per node puts the 16 data-parallel ranks in one node:
    their gradient reduction runs on the intra-node link alone."""
    par = pk.ParallelConfig(dp=16, num_micro_batches=8)
    panel = _panel(par)
    assert panel.node_fields["devices_per_node"].value == 8  # the DGX H100's, on show
    two_nodes = _step(panel)
    panel.node_fields["devices_per_node"].value = 16
    table = panel.assumed.table.set_index("name")
    assert table.loc["devices_per_node", "origin"] == "you"
    assert table.loc["dp_per_node", "text"].startswith("16 of 16 dp ranks share a node")
    assert panel.edits() == ["node"]
    one_node = _step(panel)
    assert one_node.parts["dp_comm"] < two_nodes.parts["dp_comm"]
    # the same as the API given that node
    from perfkit.specs import Node

    dgx = Node.preset("dgx-h100")
    typed = Node(name="mine", devices_per_node=16, intra_link=dgx.intra_link,
                    intra_bandwidth=dgx.intra_bandwidth, nics_per_node=dgx.nics_per_node,
                    nic_bandwidth=dgx.nic_bandwidth)
    api = predict_assumed(None, pk.plan.assumed.assumptions(None, par, H100, node=typed),
                          model=LLAMA)
    assert one_node.step_s == pytest.approx(api.step_s, rel=1e-12)
    # choosing a preset node drops the typed figures
    panel.node.value = "dgx-a100"
    assert panel.node_fields["devices_per_node"].value == 8
    assert panel.assumed.hardware.topology.name == "dgx-a100"
