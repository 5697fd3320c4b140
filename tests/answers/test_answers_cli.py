"""``--json`` on ``perfkit info``, ``advise``, ``plan`` and ``check``: every answer valid
against the shipped schema, and its figures equal to what the Python API gives."""

from __future__ import annotations

import json
import math

import pytest
from answer_schema import no_nan, validate

import perfkit as pk
from perfkit import cli, plan
from perfkit.answers import finding_id

SLOW = "sample:slow-rank"
DP16 = "sample:llama2-13b-baseline-dp16"


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert cli.main(argv) == 0, capsys.readouterr().err
    return no_nan(capsys.readouterr().out)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_advise_json_matches_the_advisor(capsys: pytest.CaptureFixture[str]) -> None:
    answer = _json(["advise", SLOW, "--json"], capsys)
    validate(answer, "advise")
    profile = pk.load(SLOW)
    job = pk.infer_job(profile)
    found = pk.advise(profile, model=job.model, parallel=job.parallel, hardware=job.hardware)
    assert answer["total"] == len(found) == len(answer["findings"])
    for i, (d, f) in enumerate(zip(answer["findings"], found, strict=True), 1):
        assert d["rank"] == i and d["rule"] == f.rule and d["title"] == f.title
        if f.measured:
            assert d["ms_per_step"] == pytest.approx(f.ms_per_step)
            assert d["step_share_pct"] == pytest.approx(100 * f.score)
        else:
            assert d["ms_per_step"] is None
    ids = [d["id"] for d in answer["findings"]]
    assert len(set(ids)) == len(ids)
    # the slow rank of this sample is rank 2 (its README); the id keeps it, not the 25 %
    assert ids[0] == "slow_ranks/rank-2-computes-slower-than-the-others-who-wait-for-it"
    # the same profile gives the same ids, and --limit keeps the first ones
    again = _json(["advise", SLOW, "--json", "--limit", "2"], capsys)
    assert [d["id"] for d in again["findings"]] == ids[:2] and again["total"] == len(ids)
    # --limit 0 lists none and says how many there are, not "none found" (a walk)
    assert cli.main(["advise", SLOW, "--limit", "0"]) == 0
    said = capsys.readouterr().out
    assert f"Findings: {len(ids)} found, none listed (--limit 0" in said
    assert "nothing abnormal" not in said


def test_finding_id_drops_figures_and_keeps_subjects() -> None:
    a = finding_id("slow_ranks", "Rank 2 computes 25 % slower than the others")
    b = finding_id("slow_ranks", "Rank 2 computes 18.5 % slower than the others")
    assert a == b == "slow_ranks/rank-2-computes-slower-than-the-others"
    assert finding_id("slow_ranks", "Rank 3 computes 25 % slower than the others") != a
    assert finding_id("gemm", "MatMul takes 1.5 ms, 3x its roofline") == \
        "gemm/matmul-takes-its-roofline"
    # at most 60 characters, cut before a word the limit would halve ("allows")
    long = finding_id("gemm_below_roofline", "Matrix multiplications run far below what "
                      "the hardware allows for their shapes")
    assert long == "gemm_below_roofline/matrix-multiplications-run-far-below-what-the-hardware"
    assert finding_id("r", "a" * 70) == "r/" + "a" * 60  # one long word: cut as it is


def test_info_json(capsys: pytest.CaptureFixture[str]) -> None:
    answer = _json(["info", SLOW, "--json", "--findings", "3"], capsys)
    validate(answer, "info")
    profile = pk.load(SLOW)
    assert answer["profile"]["ranks"] == [int(r) for r in profile.ranks]
    assert answer["profile"]["notes"] == list(profile.meta.notes)
    assert len(answer["findings"]) == 3 and answer["findings_total"] >= 3
    # the measured step: the median over steps of the slowest rank's wall time, read here
    # from the steps table (computing + exposed communication + free + preparing)
    s = profile.steps
    wall = (s["computing_us"] + s["comm_not_overlapped_us"] + s["free_us"]
            + s["preparing_us"].fillna(0))
    per_step = wall.groupby(s["step"]).max()
    assert answer["steps"]["step_ms"] == pytest.approx(float(per_step.median()) / 1e3,
                                                       rel=0.02)
    assert answer["steps"]["ids"] == sorted(int(x) for x in s["step"].unique())
    job = answer["job"]
    assert job["parallel"]["dp"] * job["parallel"]["tp"] * job["parallel"]["pp"] == \
        job["parallel"]["world_size"]
    assert {r["status"] for r in answer["recording"]} <= {"missing", "recorded",
                                                          "not applicable", "not checked"}


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_plan_json_is_the_prediction_of_that_layout(capsys: pytest.CaptureFixture[str]) -> None:
    answer = _json(["plan", DP16, "--dp", "8", "--pp", "2", "--json"], capsys)
    validate(answer, "predict")
    # the same layout written out by hand: 32 sequences = dp 8 x micro-batch 2 x 2, on the
    # calibration the command makes (the Planner tab's: closed, the job's static scheme)
    profile = pk.load(DP16)
    cal = plan.calibrate(profile, static_scheme=pk.infer_job(profile).static_scheme,
                         close=True)
    par = pk.ParallelConfig(dp=8, pp=2, micro_batch_size=2, num_micro_batches=2,
                            optimizer_shard=8, recompute="full")
    pred = plan.predict(cal, parallel=par)
    assert answer["step_ms"] == pytest.approx(pred.step_s * 1e3)
    assert math.fsum(answer["parts_ms"].values()) == pytest.approx(answer["step_ms"])
    assert answer["low_ms"] <= answer["step_ms"] <= answer["high_ms"]
    assert answer["parallel"]["world_size"] == 16 and answer["calibrated"] is True
    assert answer["memory"]["total_bytes"] == pytest.approx(
        answer["memory"]["static_bytes"] + answer["memory"]["activation_bytes"])


def test_plan_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plan", DP16, "--tp", "2", "--pp", "2"]) == 0
    out = capsys.readouterr().out
    assert "dp 4 × tp 2 × pp 2" in out and "changes from the run: dp 16 → 4" in out


def test_compare_def_takes_the_compare_layout() -> None:
    side = {"path": "a", "label": "A", "step_ms": 100.0, "step_spread_ms": 2.0, "steps": 3,
            "ranks": 1, "format": "kineto"}
    answer = {"kind": "compare", "schema_version": "1", "perfkit_version": pk.__version__,
              "a": side, "b": dict(side, path="b", step_ms=90.0),
              "verdict": {"word": "faster", "change_pct": -10.0, "noise_pct": None,
                          "method": "medians", "assumptions": []},
              "parts": [{"part": "computing", "a_ms": 80.0, "b_ms": 70.0, "delta_ms": -10.0}],
              "kinds": [{"kind": "gemm", "a_ms": 50.0, "b_ms": 45.0, "delta_ms": -5.0}],
              "operators": [{"name": "aten::mm", "shape": None, "a_ms": 1.0, "b_ms": None,
                             "delta_ms": -1.0, "matched": False}],
              "job_changes": [{"field": "tp", "a": "1", "b": None}],
              "gate": {"pct": None, "failed": False}, "notes": []}
    validate(answer, "compare")
    import jsonschema

    with pytest.raises(jsonschema.ValidationError):
        validate(dict(answer, verdict=dict(answer["verdict"], word="quicker")), "compare")
    with pytest.raises(jsonschema.ValidationError):
        validate({k: v for k, v in answer.items() if k != "gate"}, "compare")


def test_compare_json_validates_and_gives_the_verdict(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    # perfkit compare --json against the shipped schema, its figures against the steps
    import numpy as np

    a, b = "sample:slow-rank", "sample:slow-link"
    answer = _json(["compare", a, b, "--json"], capsys)
    validate(answer, "compare")
    for side, name in (("a", a), ("b", b)):
        steps = pk.load(name).steps
        assert answer[side]["steps"] == steps["step"].nunique()
        assert answer[side]["ranks"] == steps["rank"].nunique()
        assert answer[side]["step_ms"] > 0 and np.isfinite(answer[side]["step_ms"])
    change = 100 * (answer["b"]["step_ms"] * answer["verdict"].get("work_scale", 1.0)
                    / answer["a"]["step_ms"] - 1)
    assert answer["verdict"]["change_pct"] == pytest.approx(change, rel=1e-6)


def test_compare_json_of_runs_without_a_bubble_validates(
        capsys: pytest.CaptureFixture[str]) -> None:
    # a Kineto trace has no pipeline stages: its bubble is null, which the schema
    # once refused ("None is not of type 'number'")
    tiny = "sample:kineto-tiny-llama"
    answer = _json(["compare", tiny, tiny, "--json"], capsys)
    validate(answer, "compare")
    bubble = next(p for p in answer["parts"] if p["part"] == "bubble")
    assert bubble == {"part": "bubble", "a_ms": None, "b_ms": None, "delta_ms": None}
    # one run against itself: the labels say A and B once each
    assert cli.main(["compare", tiny, tiny]) == 0
    out = capsys.readouterr().out
    assert out.startswith("A: kineto-tiny-llama (") and "A: A:" not in out
    assert "\nB: kineto-tiny-llama (" in out and "B: B:" not in out


@pytest.mark.parametrize(("argv", "option"), [
    (["--dp", "0"], "--dp"), (["--pp", "0"], "--pp"), (["--cp", "0"], "--cp"),
    (["--micro-batch-size", "0"], "--micro-batch-size"), (["--tp", "-1"], "--tp")])
def test_plan_names_the_count_given_wrong(argv: list[str], option: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # a zero once divided the device count (ZeroDivisionError), and a negative tp was
    # blamed on the dp worked out from it
    assert cli.main(["plan", SLOW, *argv]) == 2
    err = capsys.readouterr().err
    assert f"{option}: must be >= 1 (got {argv[1]})" in err
    assert "unexpected" not in err


def test_relayout_checks_the_counts_before_deriving_others() -> None:
    from perfkit.errors import ParallelConfigError
    from perfkit.plan.relayout import relayout

    base = pk.ParallelConfig(dp=4, tp=2, pp=2, micro_batch_size=1, num_micro_batches=4)
    with pytest.raises(ParallelConfigError, match=r"^tp: must be >= 1 \(got 0\)"):
        relayout(base, {"tp": 0}, global_batch_size=16)
    with pytest.raises(ParallelConfigError, match=r"^micro_batch_size: must be >= 1"):
        relayout(base, {"micro_batch_size": 0}, global_batch_size=16)
    # a good change still derives dp from the device count (16 / (4 · 2) = 2)
    assert relayout(base, {"tp": 4}, global_batch_size=16).dp == 2


def test_advise_text_says_what_its_shares_are_of(capsys: pytest.CaptureFixture[str]) -> None:
    from perfkit.cli.commands.advise import advise_text
    from perfkit.format import time_text

    answer = {"total": 2, "findings": [
        {"rank": 1, "severity": "high", "title": "T", "id": "r/t", "ms_per_step": 58.9,
         "step_share_pct": 41.7, "step_ms": 141.0, "evidence": "e", "recommendation": "n"},
        {"rank": 2, "severity": "info", "title": "U", "id": "r/u", "ms_per_step": None,
         "step_share_pct": None, "step_ms": None, "evidence": "e", "recommendation": "n"}]}
    text = advise_text(answer)
    # the share names the step it is of ...
    assert f"at stake: {time_text(58.9e3)} per step (41.7 % of {time_text(141e3)})" in text
    # ... and the head says which step that is, against the median perfkit info shows
    assert "the mean over the steps; perfkit info's step time is their median" in text
    assert "not measurable from the profile" in text


@pytest.mark.parametrize("command", ["info", "advise", "check", "plan"])
def test_a_json_command_that_cannot_answer_prints_nothing_on_stdout(
        command: str, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    # docs/json.md: errors are not answers (stdout empty, one line on stderr, status 2)
    missing = tmp_path / "no-such-profile"
    assert cli.main([command, str(missing), "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and str(missing) in err


def test_plan_on_more_devices_says_so_with_the_throughput_per_device(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--pp 2 --dp 16`` doubles the run's 16 devices: the walk read "step 1.09 s" against
    the measured 1.22 s as a speed-up, with only "pp 1 → 2" among the changes."""
    assert cli.main(["plan", DP16, "--pp", "2", "--dp", "16", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["parallel"]["world_size"] == 32
    assert answer["changes"][0] == "devices 16 → 32"
    assert cli.main(["plan", DP16, "--pp", "2", "--dp", "16"]) == 0
    out = capsys.readouterr().out
    tps = answer["tokens_per_second_per_device"]
    # the layout's tokens per second per device: global batch × sequence / (devices × step)
    assert tps == pytest.approx(answer["global_batch_size"] * answer["seq_length"]
                                / (32 * answer["step_ms"] / 1e3), rel=1e-6)
    assert f"{tps:,.0f} tokens/s per device on 32 devices" in out
    assert "changes from the run: devices 16 → 32, pp 1 → 2" in out


def test_plan_says_which_knob_moved_when_the_batch_does_not_split(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The run's batch of 8 sequences on 4 ranks: a micro-batch of 4 cannot split it. The
    error named global_batch_size and 'dp x micro_batch_size = 16', which the user set
    neither of."""
    assert cli.main(["plan", "sample:slow-rank", "--micro-batch-size", "4"]) == 2
    err = capsys.readouterr().err
    assert "the run's global batch of 8 sequences does not split over dp 4 × micro-batch 4" \
        in err and "(micro-batch 4 as given)" in err


def test_info_json_gives_the_figures_and_split_the_text_prints(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's walk: ``info --json`` left out MFU, tokens/s per device, where the step
    goes and the per-step table, all printed by ``perfkit info``. Checked against the
    steps table read here and the text of the same command."""
    answer = _json(["info", SLOW, "--json", "--findings", "0"], capsys)
    validate(answer, "info")
    figures = {r["key"]: r for r in answer["figures"]["rows"]}
    job, steps = answer["job"], answer["steps"]
    tokens = job["global_batch_size"] * job["seq_length"]
    # B·s / (step · devices), from the answer's own step and layout
    assert figures["tokens_per_s_per_device"]["value"] == pytest.approx(
        tokens / (steps["step_ms"] / 1e3 * job["parallel"]["world_size"]), rel=1e-9)
    assert figures["mfu"]["unit"] == "fraction" and 0 < figures["mfu"]["value"] < 1
    profile = pk.load(SLOW)
    s = profile.steps
    wall = (s["computing_us"] + s["comm_not_overlapped_us"] + s["free_us"]
            + s["preparing_us"].fillna(0))
    split = {r["part"]: r["share"] for r in steps["split"]}
    assert math.fsum(split.values()) == pytest.approx(1.0)
    assert split["computing_us"] == pytest.approx(s["computing_us"].sum() / wall.sum())
    assert steps["split_over"] == {"ranks": s["rank"].nunique(), "steps": s["step"].nunique(),
                                   "left_out": ""}
    for row in steps["per_step"]:  # each step's slowest rank and its wall time
        mine = wall[s["step"] == row["step"]]
        assert row["step_ms"] == pytest.approx(float(mine.max()) / 1e3)
        assert row["rank"] == int(s.loc[mine.idxmax(), "rank"])
        assert math.fsum(row["shares"].values()) == pytest.approx(1.0)
    assert cli.main(["info", SLOW, "--findings", "0"]) == 0
    text = capsys.readouterr().out
    for key in ("tokens_per_s_per_device", "mfu", "hfu"):
        assert f"{figures[key]['metric']:<36}{figures[key]['text']}" in text


def test_info_json_says_why_figures_are_missing(capsys: pytest.CaptureFixture[str]) -> None:
    answer = _json(["info", "sample:kineto-tiny-llama", "--json", "--findings", "0"], capsys)
    validate(answer, "info")
    assert answer["job"]["hardware"] is None  # a CPU recording names no accelerator
    assert "not known" in answer["figures"]["why"]
    assert [r["key"] for r in answer["figures"]["rows"]] in ([], ["tokens_per_s_per_device"])
