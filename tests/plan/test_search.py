"""Strategy search at a what-if's round numbers (``efficiency=0.5, comm_efficiency=0.8``,
the retired first-order model's defaults): the same numbers as estimate_step with the same
terms, valid rows, the seed's ranking; the default, predict's step model at its default
rates, is checked row by row in tests/plan/test_search_step_model.py."""

import numpy as np
import pytest

import perfkit as pk
from perfkit import plan

#: The what-if the lab teaches: every matrix product at 50 %, every link at 80 %.
ROUND = {"efficiency": 0.5, "comm_efficiency": 0.8}
#: Columns the search and estimate_step name alike; the search's ``*_comm_s`` are each
#: group's exposed time, estimate_step's ``parts``.
SAME = ("compute_s", "recompute_s", "bubble_s", "optimizer_s", "exposed_comm_s", "step_s",
        "mfu", "static_bytes", "activation_bytes")


def _same_as_estimate(row, est, columns=SAME, groups=("tp", "dp", "pp", "ep", "cp")):
    for column in columns:
        assert row[column] == pytest.approx(getattr(est, column), rel=1e-9), column
    for g in groups:
        assert row[f"{g}_comm_s"] == pytest.approx(est.parts[f"{g}_comm"], rel=1e-9,
                                                   abs=1e-15), g


@pytest.fixture(scope="module")
def llama13b_search():
    model = pk.ModelSpec.preset("llama2-13b")
    hw = pk.Hardware.preset("ascend-910b")
    am = pk.ActivationModel.mindformers()
    frame = plan.search(model, hw, 16, 1024, memory_limit=57.2 * 2**30, activation_model=am,
                        include_rejected=True, **ROUND)
    return model, hw, am, frame


def test_rows_equal_estimate_step(llama13b_search):
    model, hw, am, frame = llama13b_search
    rng = np.random.default_rng(1)
    for i in rng.choice(len(frame), 40, replace=False):
        row = frame.iloc[i]
        par = plan.to_parallel_config(row)
        est = pk.estimate_step(model, par, hw, activation_model=am,
                               memory_limit_bytes=57.2 * 2**30, **ROUND)
        _same_as_estimate(row, est)
        assert bool(row["fits"]) == est.fits


def test_rows_are_valid_and_ranked(llama13b_search):
    model, _, _, frame = llama13b_search
    for _, row in frame.iterrows():
        par = plan.to_parallel_config(row)
        stages = par.pp * par.vpp
        # stages the 40 layers do not divide are split unevenly (as predict splits them):
        # the even split's rule is the only one such a row breaks
        broken = [] if 40 % stages == 0 else [f"pp: pp*vpp={stages} must divide num_layers=40"]
        assert par.problems(model, num_devices=16) == broken
        assert par.global_batch_size == 1024
    fitting = frame[frame["fits"]]
    assert (fitting["memory_bytes"] <= 57.2 * 2**30).all()
    assert fitting["step_s"].is_monotonic_increasing
    assert fitting["rank"].tolist() == list(range(1, len(fitting) + 1))
    assert frame["rank"].isna().sum() == (~frame["fits"]).sum() > 0


def test_candidate_count_by_hand():
    # 8 devices, 4 layers, 8 heads, batch 16; only tp/cp/pp/mbs/vpp vary, no SP/OS/recompute.
    # cp defaults to the powers of two up to 8 that divide the devices and leave the
    # 256-token sequence a multiple of 2·cp: 1, 2, 4, 8.
    model = pk.ModelSpec(num_layers=4, hidden_size=512, num_attention_heads=8, seq_length=256,
                         vocab_size=1000)
    space = plan.SearchSpace(sequence_parallel=(False,), optimizer_shard=("off",),
                             recompute=("none",), vpp=(1, 2), micro_batch_size=(1, 2, 4))
    expected = 0
    for tp in (1, 2, 4, 8):
        for cp in (1, 2, 4, 8):
            for pp in (1, 2, 4):
                if 8 % (tp * cp * pp):
                    continue
                dp = 8 // (tp * cp * pp)
                for mbs in (1, 2, 4):
                    if 16 % (dp * mbs):
                        continue
                    m = 16 // (dp * mbs)  # fewer than pp too: plain 1F1B runs them
                    for v in (1, 2):
                        if v == 2 and (pp == 1 or m % pp or 4 % (pp * v)):
                            continue
                        expected += 1
    got = plan.candidates(model, 8, 16, space)
    assert len(got) == expected
    assert set(got["cp"]) == {1, 2, 4, 8} and set(got["ep"]) == {1}
    only_cp1 = plan.candidates(model, 8, 16, plan.SearchSpace(
        sequence_parallel=(False,), optimizer_shard=("off",), recompute=("none",),
        vpp=(1, 2), micro_batch_size=(1, 2, 4), cp=(1,)))
    assert set(only_cp1["cp"]) == {1} and len(only_cp1) < len(got)


def test_moe_search_explores_ep_and_cp_with_megatron_rules():
    # Mixtral 8x7B on 32 devices: ep runs over the powers of two dividing the 8 experts
    # with ep·expert_tp dividing tp·cp·dp (Megatron's expert grid).
    mx = pk.ModelSpec.preset("mixtral-8x7b")
    space = plan.SearchSpace(tp=(1, 2), pp=(1, 2), vpp=(1,), micro_batch_size=(1,),
                             cp=(1, 2), expert_tp=(None, 1), recompute=("full",),
                             sequence_parallel=(False,), optimizer_shard=("dp",))
    got = plan.candidates(mx, 32, 64, space)
    expected = set()
    for tp in (1, 2):
        for cp in (1, 2):
            for pp in (1, 2):
                dp = 32 // (tp * cp * pp)
                for ep in (1, 2, 4, 8):
                    for etp in (tp, 1):
                        if (tp * cp * dp) % (ep * etp) == 0:
                            expected.add((dp, tp, pp, cp, ep, 0 if etp == tp else etp))
    rows = set(zip(got["dp"], got["tp"], got["pp"], got["cp"], got["ep"], got["expert_tp"],
                   strict=True))
    assert rows == expected
    for _, row in got.iterrows():
        assert plan.to_parallel_config(row).problems(mx, num_devices=32) == []


@pytest.fixture(scope="module")
def mixtral_search():
    mx = pk.ModelSpec.preset("mixtral-8x7b").replace(seq_length=8192)
    hw = pk.Hardware.preset("h100")
    space = plan.SearchSpace(expert_tp=(None, 1), micro_batch_size=(1, 2))
    frame = plan.search(mx, hw, 64, 256, space=space, include_rejected=True, ep_overlap=0.5,
                        cp_overlap=0.25, **ROUND)
    return mx, hw, frame


def test_moe_rows_equal_estimate_step(mixtral_search):
    mx, hw, frame = mixtral_search
    assert (frame["ep"] > 1).any() and (frame["cp"] > 1).any() and (frame["expert_tp"] == 1).any()
    rng = np.random.default_rng(2)
    picks = list(rng.choice(len(frame), 40, replace=False))
    picks += list(frame.index[(frame["ep"] > 1) & (frame["cp"] > 1)
                              & (frame["expert_tp"] == 1)][:5])
    for i in picks:
        row = frame.iloc[i]
        est = pk.estimate_step(mx, plan.to_parallel_config(row), hw, ep_overlap=0.5,
                               cp_overlap=0.25, **ROUND)
        _same_as_estimate(row, est)


def test_dense_first_moe_rows_equal_estimate_step():
    # DeepSeek-V3's shape cut to 8 layers, the first 3 dense, so stages differ in cost.
    m = pk.ModelSpec.preset("deepseek-v3").replace(num_layers=8)
    hw = pk.Hardware.preset("h100")
    space = plan.SearchSpace(expert_tp=(None, 1), micro_batch_size=(1,), cp=(1, 2),
                             full_layer_fractions=(0.5,))
    frame = plan.search(m, hw, 64, 64, space=space, include_rejected=True,
                        static_scheme="megatron", **ROUND)
    rng = np.random.default_rng(3)
    for i in rng.choice(len(frame), 30, replace=False):
        row = frame.iloc[i]
        est = pk.estimate_step(m, plan.to_parallel_config(row), hw, static_scheme="megatron",
                               **ROUND)
        _same_as_estimate(row, est)


def test_fp32_rows_equal_estimate_step():
    """An fp32 run: the search prices its 4-byte activations, gradients and weights as
    estimate_step does."""
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("a100")
    space = plan.SearchSpace(pp=(1, 2), vpp=(1,), micro_batch_size=(1,), cp=(1,))
    frame = plan.search(model, hw, 8, 64, space=space, include_rejected=True, dtype="fp32",
                        **ROUND)
    half = plan.search(model, hw, 8, 64, space=space, include_rejected=True, dtype="bf16",
                       **ROUND).set_index(["tp", "pp", "recompute", "sequence_parallel",
                                           "optimizer_shard"]).sort_index()
    for _, row in frame.head(12).iterrows():
        par = plan.to_parallel_config(row)
        est = pk.estimate_step(model, par, hw, dtype="fp32", **ROUND)
        _same_as_estimate(row, est)
        assert row["static_bytes"] > pk.estimate_step(model, par, hw, dtype="bf16").static_bytes
        other = half.loc[(row["tp"], row["pp"], row["recompute"], row["sequence_parallel"],
                          row["optimizer_shard"])]
        if row["dp_comm_s"] > 0:  # 4-byte gradients: twice the bytes, one latency
            assert row["dp_comm_s"] > 1.9 * float(np.asarray(other["dp_comm_s"]).max())


def test_activation_conventions_reach_the_search():
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("a100")
    space = plan.SearchSpace(pp=(1, 2), vpp=(1,), micro_batch_size=(1,), cp=(1,))
    frame = plan.search(model, hw, 8, 64, space=space, include_rejected=True,
                        activation_convention="megatron", **ROUND)
    for _, row in frame.head(10).iterrows():
        est = pk.estimate_step(model, plan.to_parallel_config(row), hw,
                               activation_convention="megatron", **ROUND)
        assert row["activation_bytes"] == pytest.approx(est.activation_bytes, rel=1e-12)


def test_seed_tuned_family_beats_the_full_recompute_baseline(llama13b_search):
    """Why a pipeline with partial recompute beats pure DP with full recompute.

    Assumptions (all explicit above): the same GEMM efficiency (50 %) for every
    configuration; full recompute adds one forward per layer (~+32 % FLOPs); the
    pipeline's bubble is (pp-1)/m = 1/128 of compute; pipeline sends are small next to
    compute; MindFormers activations with a 57.2 GiB limit. Pure data parallelism with
    16 replicas keeps the whole model's gradients (2 B/param) on every device, so without
    recompute it does not fit.
    """
    _, _, _, frame = llama13b_search
    baseline = frame[(frame["dp"] == 16) & (frame["recompute"] == "full")
                     & (frame["micro_batch_size"] == 1)].iloc[0]
    tuned = frame[(frame["pp"] == 2) & (frame["tp"] == 1) & frame["fits"]].iloc[0]
    assert baseline["fits"]
    assert tuned["rank"] < baseline["rank"]
    assert tuned["step_s"] < 0.85 * baseline["step_s"]
    no_recompute_dp16 = frame[(frame["dp"] == 16) & (frame["recompute"] == "none")]
    assert not no_recompute_dp16["fits"].any()


def test_calibration_feeds_the_search():
    """A calibration on a slow measured step makes every candidate slower, by the same
    model predict() uses (tests/plan/test_predict.py checks rows against predict)."""
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("a100")
    par = pk.ParallelConfig(dp=8, num_micro_batches=8)
    fast = plan.calibrate(plan.predict(None, model, par, hw).step_s, model, par, hw)
    slow = plan.calibrate(2 * fast.measured_step_s, model, par, hw)
    a = plan.search(model, hw, 8, 64, calibration=fast)
    b = plan.search(model, hw, 8, 64, calibration=slow)
    assert (b["step_s"].to_numpy() > a["step_s"].to_numpy().min()).all()
    assert b["step_s"].iloc[0] > 1.5 * a["step_s"].iloc[0]
    assert (a["low_s"] < a["step_s"]).all() and (a["step_s"] < a["high_s"]).all()
    with pytest.raises(pk.InvalidArgumentError, match="calibration"):
        plan.search(model, hw, 8, 64, calibration=object())


def test_search_bad_input():
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("a100")
    with pytest.raises(pk.InvalidArgumentError, match="num_devices"):
        plan.search(model, hw, 0, 64)
    with pytest.raises(pk.InvalidArgumentError, match="no valid configuration"):
        plan.search(model, hw, 3, 64)  # dp = 3 cannot split 64 sequences
    with pytest.raises(pk.InvalidArgumentError, match="efficiency"):
        plan.search(model, hw, 8, 64, efficiency=0)
    with pytest.raises(pk.InvalidArgumentError, match="optimizer_shard"):
        plan.search(model, hw, 8, 64, space=plan.SearchSpace(optimizer_shard=("half",)))


def test_the_retired_first_order_model_is_the_step_model_at_its_round_numbers():
    """``step_model="first-order"`` warns and ranks with the step model at 0.5 / 0.8, the
    first-order model's old defaults; a what-if's terms also move a calibration's or given
    rates; an unknown model is refused."""
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("a100")
    with pytest.warns(DeprecationWarning, match="retired"):
        old = plan.search(model, hw, 8, 64, step_model="first-order")
    new = plan.search(model, hw, 8, 64, **ROUND)
    assert old["step_s"].to_numpy() == pytest.approx(new["step_s"].to_numpy(), rel=1e-12)
    given = plan.search(model, hw, 8, 64, rates=pk.Rates(link_latency_s=0.0), **ROUND)
    assert (given["step_s"].to_numpy() <= new["step_s"].to_numpy().max()).all()
    assert given["step_s"].min() < new["step_s"].min()  # no link latency
    with pytest.raises(pk.InvalidArgumentError, match="step_model"):
        plan.search(model, hw, 8, 64, step_model="roofline")


def test_fsdp_candidates_shard_everything_and_are_priced_as_predict():
    """``optimizer_shard="fsdp"`` adds ZeRO-3 rows (``zero_stage`` 3, sharded over dp):
    16 bytes per parameter over the data-parallel ranks (Rajbhandari et al. 2020, §5,
    K = 12), the step and memory ``predict`` gives the same layout."""
    model = pk.ModelSpec.preset("llama2-13b")
    hw = pk.Hardware.preset("h100")
    plain = plan.SearchSpace(cp=(1,), pp=(1, 2), vpp=(1,), micro_batch_size=(1,))
    both = plan.SearchSpace(cp=(1,), pp=(1, 2), vpp=(1,), micro_batch_size=(1,),
                            optimizer_shard=("off", "dp", "fsdp"))
    before = plan.search(model, hw, 16, 64, space=plain, static_scheme="megatron",
                         include_rejected=True)
    frame = plan.search(model, hw, 16, 64, space=both, static_scheme="megatron",
                        include_rejected=True)
    fsdp = frame[frame["zero_stage"] == 3]
    sharded = before[before["optimizer_shard"] > 1]
    assert len(fsdp) == len(sharded) and len(frame) == len(before) + len(sharded)
    assert (before["zero_stage"] == 0).all()
    assert (fsdp["optimizer_shard"] == fsdp["dp"]).all()
    for _, row in fsdp.sample(6, random_state=0).iterrows():
        par = plan.to_parallel_config(row)
        assert par.zero_stage == 3
        n = pk.calc.parameters_per_device(model, par)
        assert row["static_bytes"] == pytest.approx(16 * n / par.dp, rel=1e-9)
        pred = plan.predict(None, model, par, hw, static_scheme="megatron")
        assert row["step_s"] == pytest.approx(pred.step_s, rel=1e-9)
        assert row["memory_bytes"] == pytest.approx(pred.memory_bytes, rel=1e-9)
    with pytest.raises(pk.InvalidArgumentError, match="fsdp"):
        plan.search(model, hw, 16, 64, space=plan.SearchSpace(optimizer_shard=("zero3",)))
