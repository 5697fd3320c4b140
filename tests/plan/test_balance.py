"""Pipeline balancer: optimality on small cases (brute force), SAPP rules, YAML, the seed."""

import itertools
import json

import numpy as np
import pytest
import yaml

import perfkit as pk
from perfkit.errors import PerfkitWarning
from perfkit.plan import (
    LayerType,
    balance_pipeline,
    decompose_memory,
    layers_from_model,
    read_sapp_layers,
)
from perfkit.plan.balance import BalanceError

# Tolerances for what the solvers return (HiGHS through scipy's milp; LAPACK through numpy's
# lstsq/solve): their last digits change with the library versions and the machine.
#: A plan's times and memory: the balancer rounds HiGHS' layer counts to integers and
#: recomputes time and memory from them, so they differ from the brute force's sums only by
#: the order of the additions (relative 1e-15 per operation).
PLAN_RTOL = 1e-9
#: A stage's memory against the limit, in MiB: the same integer counts, summed in another
#: order than the solver's constraint row.
MEMORY_ATOL_MIB = 1e-6
#: Least-squares unknowns from exact integer peaks: exact up to rounding, about the system's
#: condition number times machine epsilon (below 1e-12 here); 1e-9 leaves room and still
#: fails on any wrong coefficient.
LSTSQ_RTOL = 1e-9


def body(count=6, fwd=1.0, mem_par=10.0, act=None):
    return LayerType("body", "body", count, fwd, mem_par,
                     act or {"none": 8.0, "selective": 5.0, "full": 1.0})


def brute_force(layer, p, m, limit, head=None, tail=None):
    """Best schedule length over every split and recompute mix (vpp = 1), by hand."""
    coef = {"none": 0.0, "selective": 0.04, "full": 0.5}
    types = list(layer.memory_activation)
    best = np.inf
    fixed_work = np.zeros(p)
    fixed_mem = np.zeros(p)
    for lt, s in ((head, 0), (tail, p - 1)):
        if lt is not None:
            fixed_work[s] += 3 * lt.forward_time
            fixed_mem[s] += lt.memory_parameter + lt.memory_activation["none"] * min(p - s, m)
    for split in itertools.product(range(1, layer.count + 1), repeat=p):
        if sum(split) != layer.count:
            continue
        per_stage = []
        for s, n in enumerate(split):
            options = []
            for counts in itertools.product(range(n + 1), repeat=len(types)):
                if sum(counts) != n:
                    continue
                work = fixed_work[s] + sum(c * layer.forward_time * (1 + 2 * (1 + coef[t]))
                                           for c, t in zip(counts, types, strict=True))
                mem = fixed_mem[s] + sum(c * (layer.memory_parameter + layer.memory_activation[t]
                                              * min(p - s, m))
                                         for c, t in zip(counts, types, strict=True))
                if mem <= limit:
                    options.append(work)
            per_stage.append(options)
        if all(per_stage):
            works = [min(o) for o in per_stage]  # each stage independently at its fastest
            best = min(best, m * max(works) + (p - 1) * max(works))
    return best


@pytest.mark.parametrize("limit", [200.0, 120.0, 95.0, 80.0])
def test_matches_brute_force_on_small_cases(limit):
    layer = body()
    plan = balance_pipeline([layer], pp=2, vpp=1, num_micro_batches=4, memory_limit=limit)
    expected = brute_force(layer, 2, 4, limit)
    assert plan.pipeline_time == pytest.approx(expected, rel=PLAN_RTOL)
    assert (plan.stage_memory <= limit + MEMORY_ATOL_MIB).all()
    assert plan.layers.sum() == 6


def test_head_and_tail_shift_layers_away_from_their_stages():
    layer = body(count=8, fwd=1.0)
    head = LayerType("emb", "head", 1, 1.5, 5.0, {"none": 1.0})
    tail = LayerType("lm", "tail", 1, 3.0, 5.0, {"none": 1.0})
    plan = balance_pipeline([head, layer, tail], pp=2, vpp=1, num_micro_batches=8,
                            memory_limit=1e9)
    assert plan.layers[0].tolist() == [5, 3]  # the tail costs more than the head
    assert plan.offset == [1, -1]
    expected = brute_force(layer, 2, 8, 1e9, head, tail)
    assert plan.pipeline_time == pytest.approx(expected, rel=PLAN_RTOL)


def test_memory_uses_sapp_in_flight_counts():
    layer = body(count=8, act={"none": 10.0})
    plan = balance_pipeline([layer], pp=4, vpp=2, num_micro_batches=8, memory_limit=1e9)
    inflight = pk.in_flight_micro_batches(4, 8, 2)
    expected = [sum(plan.layers[c, s] * (10.0 + 10.0 * inflight[c, s]) for c in range(2))
                for s in range(4)]
    assert plan.stage_memory.tolist() == pytest.approx(expected, rel=PLAN_RTOL)


@pytest.mark.slow
def test_eighty_layers_pp8_vpp2_and_yaml_snippet():
    model = pk.ModelSpec.preset("llama2-70b")
    par = pk.ParallelConfig(tp=8, pp=8, vpp=2, num_micro_batches=16, sequence_parallel=True)
    layers = layers_from_model(model, par, pk.Hardware.preset("ascend-910b"))
    plan = balance_pipeline(layers, 8, 2, 16, memory_limit=50e9 / 2**20)
    assert plan.layers.shape == (2, 8) and plan.layers.sum() == 80
    assert (plan.layers >= 1).all()
    assert (plan.stage_memory <= 50e9 / 2**20 + MEMORY_ATOL_MIB).all()
    doc = yaml.safe_load(plan.to_yaml())
    offset = doc["model"]["model_config"]["offset"]
    assert len(offset) == 2 and all(len(row) == 8 for row in offset)
    assert np.array(offset).sum() == 0
    assert doc["parallel_config"]["pipeline_stage"] == 8
    for key, value in doc["recompute_config"].items():
        assert key in ("recompute", "select_recompute")
        assert np.array(value).shape == (2, 8)
    assert plan.pipeline_time >= plan.ideal_time


def test_infeasible_memory_is_a_clear_error():
    with pytest.raises(BalanceError, match="memory_limit"):
        balance_pipeline([body()], pp=2, vpp=1, num_micro_batches=4, memory_limit=10.0)
    with pytest.raises(pk.InvalidArgumentError, match="num_micro_batches"):
        balance_pipeline([body()], pp=4, vpp=1, num_micro_batches=2, memory_limit=1e9)
    with pytest.raises(pk.InvalidArgumentError, match="chunks"):
        balance_pipeline([body(count=3)], pp=2, vpp=2, num_micro_batches=4, memory_limit=1e9)


def test_reads_sapp_layer_description(tmp_path):
    entries = [
        {"name": "emb", "type": "HEAD", "nb_layer": 1, "time": 2.0, "memory_parameter": 50,
         "memory_activation": 4},
        {"name": "body", "type": "BODY", "nb_layer": 4, "time": 10.0, "backward_time": 24.0,
         "select_rec_time": 26.0, "recompute_time": 37.0, "memory_parameter": 100,
         "memory_activation": 50, "memory_select_rec": 40, "memory_recompute": 5},
    ]
    path = tmp_path / "layers.json"
    path.write_text(json.dumps({"layers_description": entries}))
    head, layer = read_sapp_layers(path)
    assert head.kind == "head" and layer.count == 4
    assert layer.backward_time == {"none": 24.0, "selective": 26.0, "full": 37.0}
    assert layer.memory_activation == {"none": 50.0, "selective": 40.0, "full": 5.0}
    untimed = {k: v for k, v in entries[1].items() if not k.endswith("_time")}
    default = read_sapp_layers([untimed])[0]
    assert default.backward_time["full"] == pytest.approx((1 + 0.5) * 2 * 10.0)
    path.write_text('[{"name": "x", "type": "BODY"}]')
    with pytest.raises(pk.ConfigFileError, match="time"):
        read_sapp_layers(path)


def test_decompose_memory_recovers_known_coefficients():
    truth = {"mem_param": 900.0, "mem_act_none": 800.0, "mem_act_full": 40.0,
             "constant": 3000.0, "head": 500.0, "tail": 700.0}
    obs = []
    for pp, layers, full in [(4, 10, 0), (4, 10, 4), (2, 20, 0), (2, 20, 8), (8, 5, 1),
                             (4, 8, 2)]:
        for stage in range(pp):
            peak = (layers * truth["mem_param"] + (pp - stage) * (
                (layers - full) * truth["mem_act_none"] + full * truth["mem_act_full"])
                + truth["constant"] + truth["head"] * (stage == 0)
                + truth["tail"] * (stage == pp - 1))
            obs.append({"pp": pp, "stage": stage, "layers": layers, "layers_full": full,
                        "peak": peak})
    got = decompose_memory(obs, recompute_types=("none", "full"))
    for key, value in truth.items():
        assert got[key] == pytest.approx(value, rel=LSTSQ_RTOL)
    assert got["residual"] < 1e-6


# SAPP prints int() of a least-squares solution: the published integer is the exact value
# truncated toward zero, so the exact value lies within one unit of it on the side away from
# zero. Solvers differ in their last digits (2868.99999 with one HiGHS/numpy, 2869.00000000002
# with another), so each bound gets this tolerance.
SOLVER_TOLERANCE = 1e-6


def _assert_truncates_to(got: dict, published: dict) -> None:
    for key, value in published.items():
        low, high = (value, value + 1) if value >= 0 else (value - 1, value)
        assert low - SOLVER_TOLERANCE <= got[key] <= high + SOLVER_TOLERANCE, (key, got[key], value)


def test_decompose_memory_reproduces_sapp_without_constant():
    # mindformers tests/st/test_pipeline_balance/test_compute_memory.py::test_compute_memory:
    # pp 16, 6 layers per stage, stages 0, 1, 2, 3, 9, 15 with their COMM/FULL recompute
    # counts and dry-run peaks (MB). Three recompute types and six stages = 3 + 3: SAPP
    # fits no constant, and asserts head 9785, parameter 1562, activation 822, tail 2868,
    # full recompute 32, select-comm 498 (int()).
    obs = [dict(pp=16, stage=s, layers=6, layers_comm=c, layers_full=f, peak=peak)
           for s, c, f, peak in [(0, 1, 1, 80267), (1, 0, 1, 71519), (2, 0, 1, 67376),
                                 (3, 0, 2, 52962), (9, 2, 0, 39373), (15, 0, 1, 16386)]]
    got = decompose_memory(obs, ("none", "comm", "full"))
    assert not got["constant_fitted"] and got["constant"] == 0
    _assert_truncates_to(got, {
        "head": 9785, "mem_param": 1562, "mem_act_none": 822, "tail": 2868,
        "mem_act_full": 32, "mem_act_comm": 498})


def test_decompose_memory_reproduces_sapp_with_constant():
    # mindformers tests/st/test_pipeline_balance/mem.yaml (test_compute_memory_with_const):
    # pp 16, 96 layers, offsets -1/+1 (5 and 7 layers), select and select-comm recompute
    # lists; a layer with both counts as "both" (SAPP internal_from_yaml: the YAML lists
    # are slct + both + full and comm + both + full). Eight stages for four recompute types
    # and unequal layer counts: SAPP fits the constant and asserts parameter 2141,
    # activation 852, select 767, comm 535, both 511, constant -1896, head 4245, tail 1203.
    # SAPP's head and tail include the constant; perfkit's do not: head + constant.
    offset = [-1, 1] * 8
    select = [1, 0, 0, 0, 1, 1, 2, 0, 0, 0, 1, 1, 2, 0, 0, 1]
    comm = [1, 0, 0, 0, 0, 0, 0, 1, 1, 2, 1, 1, 2, 0, 0, 1]
    peaks = {0: 77698, 15: 21822, 6: 49732, 9: 50435, 10: 32341, 11: 41228, 12: 23134,
             13: 30998}
    obs = []
    for s, peak in peaks.items():
        both = min(select[s], comm[s])
        obs.append(dict(pp=16, stage=s, layers=6 + offset[s], layers_selective=select[s] - both,
                        layers_comm=comm[s] - both, layers_both=both, peak=peak))
    got = decompose_memory(obs, ("none", "selective", "comm", "both"))
    assert got["constant_fitted"]
    _assert_truncates_to(got, {
        "mem_param": 2141, "mem_act_none": 852, "mem_act_selective": 767,
        "mem_act_comm": 535, "mem_act_both": 511, "constant": -1896})
    _assert_truncates_to({"head": got["head"] + got["constant"],
                          "tail": got["tail"] + got["constant"]}, {"head": 4245, "tail": 1203})


def test_decompose_memory_refuses_an_underdetermined_system():
    truth = {"mem_param": 900.0, "mem_act_none": 800.0, "mem_act_full": 40.0, "head": 500.0,
             "tail": 700.0}

    def peak(pp, stage, layers, full):
        return (layers * truth["mem_param"] + (pp - stage) * (
            (layers - full) * truth["mem_act_none"] + full * truth["mem_act_full"])
            + truth["head"] * (stage == 0) + truth["tail"] * (stage == pp - 1))

    # no stage fully recomputes anything: mem_act_full is invisible
    obs = [dict(pp=4, stage=s, layers=10, layers_full=0, peak=peak(4, s, 10, 0))
           for s in range(4)]
    with pytest.raises(pk.InvalidArgumentError, match="not determined: mem_act_full"):
        decompose_memory(obs, ("none", "full"))
    # equal layer counts with the constant forced: constant and mem_param cannot be told
    # apart (SAPP refuses this too)
    obs = [dict(pp=8, stage=s, layers=10, layers_full=s % 3, peak=peak(8, s, 10, s % 3))
           for s in range(8)]
    assert not decompose_memory(obs)["constant_fitted"]  # the SAPP rule leaves it out
    with pytest.raises(pk.InvalidArgumentError, match="mem_param.*constant|constant.*"
                       "mem_param"):
        decompose_memory(obs, fit_constant=True)
    # "warn": the determined unknowns are exact, the others NaN, and a PerfkitWarning
    # names them
    with pytest.warns(PerfkitWarning, match="not determined: mem_param, constant"):
        got = decompose_memory(obs, fit_constant=True, underdetermined="warn")
    assert np.isnan(got["mem_param"]) and np.isnan(got["constant"])
    assert got["mem_act_none"] == pytest.approx(800.0, rel=LSTSQ_RTOL)
    assert got["mem_act_full"] == pytest.approx(40.0, rel=LSTSQ_RTOL)
    # pp = 1: head and tail sit on the same stage
    one = [dict(pp=1, stage=0, layers=n, layers_full=f, peak=peak(1, 0, n, f))
           for n, f in ((10, 0), (12, 3), (8, 8), (9, 1))]
    with pytest.raises(pk.InvalidArgumentError, match="head, tail"):
        decompose_memory(one)


def test_seed_llama2_13b_recomputes_on_the_first_stage_only():
    """The seed's [4, 0]-style lists come from the in-flight micro-batches.

    Assumptions: Llama2-13B, pp = 2, 128 micro-batches of one 4096-token sequence;
    MindFormers activations (flash attention, no dropout, fp32 norm inputs, SiLU/Mul
    selective recompute: ActivationModel.mindformers()); static memory 10/8 + 2 bytes per
    parameter (optimizer parallel over dp = 8 plus an fp16 gradient buffer); SAPP's
    recompute time coefficients (selective +4 %, full +50 % of the backward). Stage 0
    holds 2 micro-batches in flight and stage 1 one, so whatever the memory limit between
    what stage 1 and stage 0 need without recompute, full recompute lands on stage 0 only
    and stage 0 recomputes at least as much as stage 1: the seed's ``recompute: [4, 0]``.
    """
    model = pk.ModelSpec.preset("llama2-13b")
    par = pk.ParallelConfig(dp=8, pp=2, num_micro_batches=128)
    layers = layers_from_model(model, par, pk.Hardware.preset("ascend-910b"),
                               static_bytes_per_param=10 / 8 + 2,
                               activation_model=pk.ActivationModel.mindformers())
    free = balance_pipeline(layers, 2, 1, 128, memory_limit=1e9)
    stage0, stage1 = free.stage_memory
    assert stage0 > stage1 and not free.recompute
    saw_full = False
    for limit in np.linspace(stage1 + 1, stage0 - 1, 7):
        plan = balance_pipeline(layers, 2, 1, 128, memory_limit=limit)
        full = plan.recompute.get("full", np.zeros((1, 2), int))
        selective = plan.recompute.get("selective", np.zeros((1, 2), int))
        assert full[0, 1] == 0
        assert selective[0, 0] >= selective[0, 1]
        saw_full |= bool(full[0, 0] > 0)
        config = plan.recompute_config()
        if "recompute" in config:
            assert config["recompute"][1] == 0 and config["recompute"][0] > 0
    assert saw_full
