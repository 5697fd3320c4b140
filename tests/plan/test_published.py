"""Validation against published iteration times (perfkit.plan.published), with their sources.

The figures are the papers'; the checks recompute their derivations independently and
hold the calibrated model to the issue's targets on runs it was not fitted to: mean error
≤ 5 %, and at most 10 %; out of the box (no calibration) mean ≤ 15 %. The MindFormers
guide's Llama2-13B case is the narrowest (see docs/planner.md, "The guide's Llama2-13B
case"): its three pipelined runs agree with one another within 2 % whichever of them
calibrates, but its baseline is 6–8 % slower than any of them predicts — about 0.34 s of
its 4.4 s step that no source accounts for — so every prediction calibrated on the
baseline comes out too slow by 7–10 %; the tests pin both so that a change shows.
"""

import pytest

import perfkit as pk
from perfkit import plan
from perfkit.plan.published import (
    BEHAVIOUR,
    PUBLISHED_RUNS,
    STUDIES,
    narayanan_flops,
    published_runs,
    validate,
)

# Narayanan et al. 2021 Table 1, the aggregate petaFLOP/s column (rate x GPUs, printed)
TABLE1_AGGREGATE = {"1.7B": 4.4, "3.6B": 8.8, "7.5B": 18.2, "18.4B": 34.6, "39.1B": 70.8,
                    "76.1B": 143.8, "145.6B": 227.1, "310.1B": 297.4, "529.6B": 410.2,
                    "1008.0B": 502.0}


@pytest.fixture(scope="module")
def table():
    return validate()


def test_every_run_names_its_source_and_derivation():
    frame = published_runs()
    assert set(frame["study"]) == set(STUDIES)
    assert frame["key"].is_unique
    assert (frame["source"].str.len() > 10).all() and (frame["derivation"].str.len() > 5).all()
    for study in STUDIES:
        assert published_runs(study)["calibrates"].sum() == 1
    with pytest.raises(pk.InvalidArgumentError, match="study"):
        published_runs("nope")


def test_derivations_recomputed_independently():
    runs = {r.key: r for r in PUBLISHED_RUNS}
    # Korthikanti Table 5 and MT-NLG print the iteration time itself
    assert runs["korthikanti-530b-full"].step_s == 49.05
    assert runs["mtnlg-420-nodes"].step_s == 44.4
    # Narayanan eq. (3): 96 B s l h^2 (1 + s/6h + V/16lh) / (rate x GPUs)
    r = runs["narayanan-1008.0b"]
    flops = 96 * 3072 * 2048 * 128 * 25600 ** 2 * (1 + 2048 / (6 * 25600)
                                                    + 51200 / (16 * 128 * 25600))
    assert r.step_s == pytest.approx(flops / (163e12 * 3072))
    assert narayanan_flops(3072, 2048, 128, 25600, 51200) == pytest.approx(flops)
    # the printed aggregate column agrees with rate x GPUs (the rates are rounded)
    for run in (x for x in PUBLISHED_RUNS if x.study.startswith("Narayanan")):
        name = run.key.split("-")[1].upper()
        printed = TABLE1_AGGREGATE[name]
        assert run.figure * run.parallel.world_size / 1000 == pytest.approx(printed, rel=0.01)
    # Llama 3 Table 4: 16M tokens per step = DP x batch/DP x sequence
    for key in ("llama3-8192-cp1", "llama3-16384-cp1", "llama3-16384-cp16"):
        run = runs[key]
        assert run.global_batch_size * run.model.seq_length == 16 * 2 ** 20
        assert run.parallel.world_size == int(key.split("-")[1])
    # the guide's tokens/s/p are per device: step = tokens per device per step / rate
    base = runs["seed-llama2-13b-baseline"]
    assert base.step_s == pytest.approx(2 * 4096 / 1860)
    assert runs["seed-llama2-13b-tuned"].step_s == pytest.approx(128 * 4096 / 2 / 2562)


#: Worst calibrated error per GPU study where it is not 6 %. Narayanan et al.: since the
#: A100's size curve tops out at its best measured matmul (0.869 of the peak, not 0.95;
#: perfkit.calc.gemm_ceiling), the study's out-of-the-box mean went 14.1 -> 9.2 % and its
#: calibrated mean stayed 2.3 %, but the 39.1B run, the one closest out of the box
#: (-3.8 %), came out +6.7 % calibrated on the 1.7B run (+5.6 % before).
WORST_PER_GPU_STUDY = {"Narayanan et al. 2021": 0.07}


def _stats(table, study=None):
    rows = table[(table["role"] == "predicted") & table["in_statistics"]]
    if study is not None:
        rows = rows[rows["study"] == study]
    err = rows["error"].abs()
    return err.mean(), err.max()


def test_calibrated_predictions_meet_the_targets(table):
    mean, worst = _stats(table)
    assert mean <= 0.05
    assert worst <= 0.10
    for study in STUDIES[:4]:  # the GPU studies
        _, worst = _stats(table, study)
        assert worst <= WORST_PER_GPU_STUDY.get(study, 0.06), study
    # the calibrating runs are reproduced exactly
    assert table[table["role"] == "calibrates"]["error"].abs().max() < 1e-6


def test_the_guides_case_keeps_its_known_residual(table):
    rows = table[(table["study"] == STUDIES[4]) & (table["role"] == "predicted")]
    assert (rows["error"] > 0).all()  # calibrated on the baseline: too slow, never too fast
    assert 0.05 <= rows["error"].max() <= 0.10


def test_the_guides_baseline_reduces_its_gradients_after_the_backward():
    """MindSpore overlaps the dx computation with the data-parallel gradient reduction only
    with ``enable_grad_comm_opt`` (default False; the baseline's yaml does not set it) and
    the forward with the optimizer-parallel weight all-gather only with
    ``enable_opt_shard_comm_opt`` (default False): the baseline's exposed data-parallel
    time is the whole reduce-scatter plus the whole all-gather of every parameter."""
    base = next(r for r in PUBLISHED_RUNS if r.key == "seed-llama2-13b-baseline")
    pred = plan.predict(None, base.model, base.parallel, base.hardware_spec,
                        activation_model=base.activation_model,
                        overrides={k: getattr(base.rates, k) for k in BEHAVIOUR})
    # Llama2-13B by hand: 40 layers of q, k, v, o (4 h^2), gate, up, down (3 h f) and two
    # norms, the embedding and the output head (V h each), the final norm
    h, f, v = 5120, 13824, 32000
    params = 40 * (4 * h * h + 3 * h * f + 2 * h) + 2 * v * h + h
    assert params == pytest.approx(13.0e9, rel=0.002)
    ring = 7 / 8  # dp 8, one node: (n - 1)/n of the 16-bit tensor per rank
    link = 196e9 * 0.65  # HCCS per direction x the default intra-node efficiency
    one_op = params * 2 * ring / link + 10e-6
    assert pred.parts["dp_comm"] == pytest.approx(2 * one_op, rel=2e-3)


def _seed_error(anchor, run):
    cal = plan.calibrate(anchor.step_s, anchor.model, anchor.parallel, anchor.hardware_spec,
                         activation_model=anchor.activation_model, rates=anchor.rates)
    pred = plan.predict(cal, run.model, run.parallel, run.hardware_spec,
                        activation_model=run.activation_model,
                        overrides={k: getattr(run.rates, k) for k in BEHAVIOUR})
    return pred.step_s / run.step_s - 1.0


def test_the_guides_pipelined_runs_predict_each_other():
    """Full recompute → 13/5 → 4/0 fully recomputed layers (2,136 → 2,353 → 2,562 tokens/s/p):
    calibrated on any one of them, the model predicts the other two within 3 %; the
    baseline (1,860) comes out 5–10 % too fast from each (the gap is the baseline's)."""
    runs = [r for r in PUBLISHED_RUNS if r.study == STUDIES[4]]
    base, piped = runs[0], runs[1:]
    assert base.parallel.pp == 1 and all(r.parallel.pp == 2 for r in piped)
    for anchor in piped:
        for run in piped:
            assert abs(_seed_error(anchor, run)) <= 0.03, (anchor.key, run.key)
        assert -0.10 <= _seed_error(anchor, base) <= -0.05, anchor.key


def test_out_of_the_box_mean_error(table):
    rows = table[table["in_statistics"]]
    assert rows["out_of_box_error"].abs().mean() <= 0.15
