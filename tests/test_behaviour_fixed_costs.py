"""Framework behaviour presets and fixed costs in the step model.

Each expectation is arithmetic on the model's own separately reported inputs (kernel
counts, layers, parameter counts), or a documented framework default.
"""

from __future__ import annotations

import math

import pytest

import perfkit as pk
from perfkit import plan
from perfkit.calc.behaviour import Behaviour
from perfkit.calc.contention import GPU_OVERLAP_CONTENTION
from perfkit.calc.memory import stage_parameters
from perfkit.errors import InvalidArgumentError

MODEL = pk.ModelSpec.preset("llama2-7b")
PAR = pk.ParallelConfig(dp=8, tp=2, num_micro_batches=8, optimizer_shard=8,
                        sequence_parallel=True)


def test_presets_carry_each_frameworks_documented_defaults():
    assert not Behaviour.preset("megatron").tp_comm_overlap  # --tp-comm-overlap off
    assert Behaviour.preset("megatron").bucket_params == 40e6  # max(40M, 1M·dp)
    nemo = Behaviour.preset("nemo")
    assert nemo.tp_comm_overlap and nemo.overlap_grad_reduce and nemo.overlap_param_gather
    assert Behaviour.preset("ddp").bucket_params == 25e6 / 4  # bucket_cap_mb=25, fp32
    assert Behaviour.preset("fsdp").fsdp_prefetch  # BACKWARD_PRE
    assert not Behaviour.preset("mindspore").overlap_grad_reduce  # enable_grad_comm_opt
    assert Behaviour.preset("megatron").kernel_gap_s == pytest.approx(3.8e-6 - 2.9e-6,
                                                                     abs=0.15e-6)
    with pytest.raises(InvalidArgumentError):
        Behaviour.preset("jax")


def test_fixed_costs_are_terms_of_their_own():
    base = plan.predict(None, MODEL, PAR, "h100")
    gap, per_layer, per_step = 2e-6, 50e-6, 0.01
    b = Behaviour(kernel_gap_s=gap, layer_overhead_s=per_layer, overhead_s=per_step)
    p = plan.predict(None, MODEL, PAR, "h100", behaviour=b)
    kernels = plan.predict(None, MODEL, PAR, "h100", overrides={"kernel_gap_s": 1.0}
                           ).parts["overhead"]  # 1 s per kernel: the kernel count
    expected = kernels * gap + PAR.num_micro_batches * MODEL.num_layers * per_layer \
        + per_step
    assert p.parts["overhead"] == pytest.approx(expected, rel=1e-9)
    assert p.step_s - base.step_s == pytest.approx(expected, rel=1e-9)


def test_megatron_buckets_follow_its_bucket_size():
    params = max(s["total"] for s in stage_parameters(MODEL, PAR))
    buckets = math.ceil(params / 40e6)
    over = Behaviour(overlap_grad_reduce=True, bucket_params=40e6)
    p = plan.predict(None, MODEL, PAR, "h100", behaviour=over)
    same = plan.predict(None, MODEL, PAR, "h100", overrides={"dp_buckets": buckets})
    assert p.parts["dp_comm"] == pytest.approx(same.parts["dp_comm"], rel=1e-12)
    assert p.parts["dp_comm"] < plan.predict(None, MODEL, PAR, "h100").parts["dp_comm"]


def test_tp_comm_overlap_shows_only_what_the_compute_does_not_cover():
    off = plan.predict(None, MODEL, PAR, "h100")
    on = plan.predict(None, MODEL, PAR, "h100", behaviour=Behaviour(tp_comm_overlap=True))
    # one stage, even micro-batches: the whole step's tp traffic against its compute;
    # what hides slows the compute beside it by the published contention share
    exposed = max(0.0, off.parts["tp_comm"] - off.parts["compute"] - off.parts["recompute"])
    expected = exposed + GPU_OVERLAP_CONTENTION * (off.parts["tp_comm"] - exposed)
    assert on.parts["tp_comm"] == pytest.approx(expected, rel=1e-12)
    assert on.parts["compute"] == off.parts["compute"]
    free = plan.predict(None, MODEL, PAR, "h100", behaviour=Behaviour(tp_comm_overlap=True),
                        overrides={"overlap_contention": 0.0})
    assert free.parts["tp_comm"] == pytest.approx(exposed, abs=1e-12)


def test_overlapped_param_gather_hides_under_the_first_forward():
    off = plan.predict(None, MODEL, PAR, "h100")
    on = plan.predict(None, MODEL, PAR, "h100",
                      behaviour=Behaviour(overlap_param_gather=True))
    assert on.parts["dp_comm"] < off.parts["dp_comm"]
    assert on.parts["dp_comm"] >= 0


def test_pytorch_keeps_the_gathered_input_where_megatron_gathers_it_again():
    """Under sequence parallelism a layer without recompute runs 2 all-gathers and 2
    reduce-scatters of one activation forward and as many backward (Korthikanti et al.
    2022, §4.2.2); Megatron-LM gathers each column-parallel input once more in the
    backward, PyTorch's tensor parallelism keeps it (``PrepareModuleInput``). On a ring,
    an all-gather and a reduce-scatter of the same tensor move the same bytes, so
    re-gathering adds 2 collectives to 8: a quarter of the tp traffic."""
    assert Behaviour.preset("megatron").sp_regather and Behaviour.preset("nemo").sp_regather
    assert not Behaviour.preset("fsdp").sp_regather and not Behaviour.preset("ddp").sp_regather
    megatron = plan.predict(None, MODEL, PAR, "h100", behaviour="megatron")
    pytorch = plan.predict(None, MODEL, PAR, "h100", behaviour="fsdp")
    assert megatron.parts["tp_comm"] == pytest.approx(pytorch.parts["tp_comm"] * 10 / 8,
                                                      rel=1e-9)
    # without sequence parallelism there is nothing to gather: the option changes nothing
    plain = PAR.replace(sequence_parallel=False)
    assert plan.predict(None, MODEL, plain, "h100",
                        behaviour=Behaviour(sp_regather=False)).parts["tp_comm"] \
        == plan.predict(None, MODEL, plain, "h100").parts["tp_comm"]
