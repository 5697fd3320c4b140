"""``perfkit plan`` on the profiles users bring: what the profile does not show comes from
``--hardware`` / ``--model`` / ``--config`` (the error names them, not ``calibrate()``), an
inference profile is refused as the Planner tab refuses it, a calibration that misses the
profiled run says so, and a per-stage recompute follows a change of pp."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shared_samples import shared_sample

import perfkit as pk
from perfkit import cli, plan
from perfkit.plan.relayout import relayout

TINY = "sample:kineto-tiny-llama"  # a CPU recording: it shows the model, not the device


def test_a_missing_device_names_the_option_that_gives_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plan", TINY]) == 2
    err = capsys.readouterr().err
    assert "hardware: the profile does not show it; give --hardware NAME" in err
    assert "calibrate()" not in err
    assert cli.main(["plan", TINY, "--hardware", "no-such-device"]) == 2
    err = capsys.readouterr().err  # named as the option given, not the preset's "name:"
    assert err.startswith("perfkit: error: --hardware: unknown hardware preset") and \
        "h100" in err
    assert cli.main(["plan", TINY, "--model", "no-such-model", "--hardware", "h100"]) == 2
    assert capsys.readouterr().err.startswith("perfkit: error: --model: unknown model preset")


def test_an_unknown_option_is_refused_with_the_commands_usage(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``perfkit plan PATH --bogus`` printed the list of commands, not plan's usage."""
    assert cli.main(["plan", TINY, "--bogus"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: perfkit plan") and \
        "perfkit plan: error: unrecognized arguments: --bogus" in err


def test_hardware_given_on_the_command_line_is_the_one_calibrated(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plan", TINY, "--hardware", "h100", "--json"]) == 0
    import json

    answer = json.loads(capsys.readouterr().out)
    assert answer["hardware"] == "h100" and answer["model"] is None
    # the same as the API given the same device
    cal = plan.calibrate(pk.load(TINY), hardware="h100")
    assert answer["calibration"]["measured_step_ms"] == pytest.approx(
        cal.measured_step_s * 1e3)
    # a CPU trace priced as an H100: its GEMMs cannot be fitted, and that is said
    assert any("no GEMM rate can be fitted" in n for n in answer["calibration"]["notes"])


@pytest.mark.slow  # two calibrations of a 4-rank sample: about 2.5 s
def test_the_residual_and_the_band_are_said(capsys: pytest.CaptureFixture[str]) -> None:
    # the slow-rank sample plants one rank 25 % slower: the model, fitted to the busiest
    # rank's computing, does not reproduce the slowest rank's step
    assert cli.main(["plan", "sample:slow-rank", "--json"]) == 0
    import json

    answer = json.loads(capsys.readouterr().out)
    cal = answer["calibration"]
    pct = 100 * (cal["predicted_step_ms"] / cal["measured_step_ms"] - 1)
    assert cli.main(["plan", "sample:slow-rank"]) == 0
    out = capsys.readouterr().out
    inside = answer["low_ms"] <= cal["measured_step_ms"] <= answer["high_ms"]
    said = f"({pct:+.1f} %".replace("-", "−")
    assert said in out
    assert ("outside the band" in out) is (not inside)


def test_a_changed_pp_spreads_the_runs_per_stage_recompute() -> None:
    base = pk.ParallelConfig(dp=8, pp=2, micro_batch_size=1, num_micro_batches=8,
                             recompute="selective", recompute_layers=(3, 0))
    assert relayout(base, {"pp": 4}, 64).recompute_layers == (1, 1, 1, 0)
    assert relayout(base, {"pp": 4, "dp": 4}, 64).recompute_layers == (1, 1, 1, 0)
    # a new policy covers every layer: the run's list no longer applies
    assert relayout(base, {"recompute": "none"}, 64).recompute_layers is None
    # unchanged pp keeps the run's list as it is
    assert relayout(base, {"micro_batch_size": 2}, 64).recompute_layers == (3, 0)


@pytest.mark.slow  # a 16-rank simulated sample, calibrated: several seconds
def test_plan_changes_pp_of_a_run_with_per_stage_recompute(
        capsys: pytest.CaptureFixture[str]) -> None:
    # it once failed: recompute_layers: needs one entry per pipeline stage (pp=4)
    assert cli.main(["plan", "sample:llama2-13b-tuned-dp8-pp2", "--pp", "4"]) == 0
    assert "recompute_layers (1, 0) → (1, 0, 0, 0)" in capsys.readouterr().out


@pytest.mark.shared_samples
def test_an_inference_profile_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    qwen = shared_sample("wild/tl_qwen_h100")
    assert cli.main(["plan", str(qwen)]) == 2
    err = capsys.readouterr().err
    assert "inference step, not a training step" in err and "perfkit info PATH" in err
    assert err.startswith(f"perfkit: error: {qwen}: ")  # the path it is about (a walk)


@pytest.mark.shared_samples
def test_a_convolutional_network_is_refused_without_asking_for_a_model(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A walk: ``perfkit plan`` on a ResNet-50 trace asked for ``--model``, where
    ``perfkit info`` already says it is no transformer (convolutions, no attention: see
    tests/test_unknowns_not_a_transformer.py, which counts them in the raw file)."""
    resnet = shared_sample("wild/k_resnet50_nw0")
    assert cli.main(["plan", str(resnet), "--tp", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"perfkit: error: {resnet}: this is not a transformer (")
    assert "--model" not in err and err.count("\n") == 1


@pytest.mark.shared_samples
def test_a_kernel_details_export_is_calibrated_on_its_step_time(
        capsys: pytest.CaptureFixture[str]) -> None:
    """kernel_details.csv alone: no step to fit the kernels to, but one step time, the span
    of its tasks (step 1, from the first task's start to the last one's end, read here
    from the raw CSV). plan calibrates on that step time, as the Planner tab does, and
    says the match is by construction (before, plan refused where the tab predicted)."""
    import csv

    folder: Path = shared_sample("wild/msa_kernel_details")
    with (folder / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["Step Id"] for r in rows} == {"1"}
    span_ms = (max(float(r["Start Time(us)"]) + float(r["Duration(us)"]) for r in rows)
               - min(float(r["Start Time(us)"]) for r in rows)) / 1e3
    assert cli.main(["plan", str(folder), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    cal = answer["calibration"]
    assert cal["source"] == "step time"
    assert cal["measured_step_ms"] == pytest.approx(span_ms, rel=1e-6)
    assert cal["notes"][-1].startswith("calibrated on the measured step time only")
    assert "its steps table has no complete step" in cal["notes"][-1]
    assert cli.main(["plan", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "calibrated on the measured step time only)" in text
    assert "equal by construction: no check of the model" in text
    assert "inside the band" not in text


@pytest.mark.shared_samples
def test_a_fit_the_peak_stops_is_not_said_to_hold_the_run(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A walk: a ResNet-50 trace calibrated as a Llama2-7B (the model given by mistake)
    came out 108× too slow even at the V100's peak, yet read "inside the band" (the band
    grown to 0 µs – 23 min) with ``closed: true``. The fit was not closed, and the words
    say the model does not reproduce the run."""
    from shared_samples import KINETO_TRACES, sample

    from perfkit.plan.calibrate import NOT_CLOSED_NOTE

    path = str(sample(KINETO_TRACES["k_resnet50_nw0"]).parent)
    assert cli.main(["plan", path, "--model", "llama2-7b", "--json"]) == 0
    cal = json.loads(capsys.readouterr().out)["calibration"]
    assert NOT_CLOSED_NOTE in cal["notes"] and cal["closed"] is False
    assert cal["closed_step_ms"] > 50 * cal["measured_step_ms"]
    assert cli.main(["plan", path, "--model", "llama2-7b"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "inside the band" not in text
    assert "at the device's peak it still gives" in text
    assert "the model does not reproduce this run" in text


def test_the_planner_says_a_capped_fit_does_not_reproduce_the_run() -> None:
    """The Planner's sentence for the same case: no "inside the band" either."""
    from types import SimpleNamespace

    import pandas as pd

    from perfkit.plan.calibrate import NOT_CLOSED_NOTE
    from perfkit.widgets.planner_words import comparison_sentence

    pred = SimpleNamespace(step_s=12.9, low_s=0.0, high_s=1400.0)
    fit = SimpleNamespace(prediction=pred, source="profile", calibrated=True,
                          calibration=SimpleNamespace(notes=(NOT_CLOSED_NOTE,)))
    frame = pd.DataFrame({"run": ["measured"], "part": ["step"], "seconds": [0.119],
                          "step_s": [0.119], "wait_s": [float("nan")]})
    said = comparison_sentence(frame, fit)
    assert "inside the band" not in said
    assert "even at the device's peak: the model does not reproduce this run" in said


def test_a_layout_on_another_batch_says_so_first(capsys: pytest.CaptureFixture[str]) -> None:
    """A walk: tp 2, pp 2, micro-batch 1 × 4 on the 16-rank sample (dp follows: 16/4 = 4)
    steps 4 × 1 × 4 = 16 sequences where the run stepped 16 × 2 × 1 = 32 (its README),
    and read as a 666 ms step against the run's 1.22 s, the batch change unsaid."""
    assert cli.main(["plan", "sample:llama2-13b-baseline-dp16", "--tp", "2", "--pp", "2",
                     "--micro-batch-size", "1", "--num-micro-batches", "4", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["global_batch_size"] == 4 * 1 * 4
    assert answer["changes"][0] == ("global batch 32 → 16 sequences (the step does the work "
                                    "of another batch)")
