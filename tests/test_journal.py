"""The tuning journal: what a run records, what compare says, and that the file holds.

Three small jobs are simulated once per module (2 ranks each: dp 2 with full recompute,
then pp 2 with full recompute, then pp 2 with recompute on one layer of stage 0) and
added to a journal. The recorded numbers are checked against arithmetic written here
from the profiles' own files (``step_trace_time.csv``) and the job, the comparisons
against the analyses run on both profiles, and the store against a killed writer and
concurrent writers.
"""

from __future__ import annotations

import ast
import json
import math
import multiprocessing as mp
import os
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_samples import PT_LEVEL1, shared_sample

import perfkit as pk
from perfkit import analysis as A
from perfkit.journal import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    DuplicateRunError,
    Journal,
    JournalError,
    RunRecord,
    change_sentence,
    compare_records,
    fingerprint,
    measure_run,
)
from perfkit.journal.record import METRIC_COLUMNS, job_rows

MODEL = pk.ModelSpec(num_layers=4, hidden_size=1024, num_attention_heads=16,
                     seq_length=1024, vocab_size=8000, ffn_hidden_size=2816, mlp="gated")
LAYOUTS = {
    "dp2": pk.ParallelConfig(dp=2, num_micro_batches=2, recompute="full"),
    "pp2": pk.ParallelConfig(dp=1, pp=2, num_micro_batches=4, recompute="full"),
    "pp2-tuned": pk.ParallelConfig(dp=1, pp=2, num_micro_batches=4, recompute="selective",
                                   recompute_layers=(1, 0)),
}
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Three simulated jobs (outside the journal's folder) and a journal holding them."""
    hw = pk.Hardware.preset("ascend-910b")
    profiles = tmp_path_factory.mktemp("profiles")
    paths = {}
    for name, parallel in LAYOUTS.items():
        paths[name] = pk.simulate(MODEL, parallel, hw, steps=1, seed=0, out=profiles / name,
                                  aic_metrics=None, trace_kernels=False)
    folder = tmp_path_factory.mktemp("journal")
    journal = Journal(folder / "j.sqlite")
    runs = {name: journal.add(str(p), label=name, note=f"layout {name}")
            for name, p in paths.items()}
    loaded = {name: pk.load(p) for name, p in paths.items()}
    return {"journal": journal, "paths": paths, "runs": runs, "profiles": loaded,
            "jobs": {n: pk.infer_job(p) for n, p in loaded.items()}}


def _measured_step_s(folder: Path) -> float:
    """The step of ``step_trace_time.csv`` read here: per rank computing + exposed
    communication + free (the device span) + preparing (the wait before it), the slowest
    rank (one step per profile)."""
    worst = 0.0
    for csv in folder.glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"):
        t = pd.read_csv(csv)
        worst = max(worst, float((t["Computing"] + t["Communication(Not Overlapped)"]
                                  + t["Free"] + t["Preparing"]).max()))
    return worst / 1e6


def _runs_flash_attention(folder: Path) -> bool:
    """Whether every rank's raw ``kernel_details.csv`` has a FlashAttentionScore kernel."""
    tables = list(folder.glob("*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
    return bool(tables) and all(
        pd.read_csv(csv)["Name"].str.contains("FlashAttentionScore").any() for csv in tables)


def _job_value(record: RunRecord, field: str):
    row = record.job[record.job["field"] == field]
    return json.loads(row["value"].iloc[0])


# --------------------------------------------------------------------------------------
# what a run records
# --------------------------------------------------------------------------------------

def test_runs_frame_has_every_run_in_order(case: dict) -> None:
    runs = case["journal"].runs()
    assert list(runs["label"]) == list(LAYOUTS)
    assert list(runs["id"]) == [1, 2, 3]
    assert list(runs["note"]) == [f"layout {n}" for n in LAYOUTS]
    assert list(runs["pp"]) == [1, 2, 2] and list(runs["dp"]) == [2, 1, 1]
    assert runs["recompute_layers"].iloc[2] == [1, 0]
    for value in runs["added_utc"]:  # ISO 8601, UTC, within the last hour
        added = pd.Timestamp(value)
        assert added.tzinfo is not None
        assert abs((pd.Timestamp.now(tz="UTC") - added).total_seconds()) < 3600
    assert runs["fingerprint"].str.fullmatch(r"sha256:[0-9a-f]{64}").all()


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_metrics_against_independent_arithmetic(case: dict, name: str) -> None:
    journal = case["journal"]
    record = journal.record(name)
    row = journal.runs().set_index("label").loc[name]
    step = _measured_step_s(case["paths"][name])
    assert row["step_time_s"] == pytest.approx(step, rel=1e-9)
    p = LAYOUTS[name]
    gbs = p.dp * p.micro_batch_size * p.num_micro_batches  # what was simulated
    assert _job_value(record, "global_batch_size") == gbs
    assert _job_value(record, "seq_length") == MODEL.seq_length
    devices = p.dp * p.tp * p.pp
    tokens = gbs * MODEL.seq_length
    assert row["tokens_per_s_per_device"] == pytest.approx(tokens / (step * devices))
    assert row["tokens_per_s_per_p"] == pytest.approx(tokens / (step * p.dp))
    # MFU: the model's FLOPs for the step's tokens over the devices' peak for one step
    peak = pk.Hardware.preset("ascend-910b").peak("bf16")
    model = case["jobs"][name].model
    assert row["mfu"] == pytest.approx(pk.model_flops(model, tokens) / (step * devices * peak))
    full = p.full_recompute_layers_per_stage(MODEL)
    # the simulated ranks run a fused attention (read from the raw kernel tables): it keeps
    # no s² scores, so a selectively recomputed layer re-runs no matrix multiplication
    assert _runs_flash_attention(case["paths"][name])
    hw_flops = pk.hardware_flops(model, tokens, recompute=p.recompute,
                                 full_recompute_layers=full, selective_core=False)
    # only the fully recomputed layers add a forward each
    layer = pk.layer_forward_flops(model)["total"]
    assert hw_flops == pytest.approx(pk.model_flops(model, tokens) + sum(full) * layer * tokens)
    assert row["hfu"] == pytest.approx(hw_flops / (step * devices * peak))
    assert record.metric("recompute_flops_per_step") == pytest.approx(
        hw_flops - pk.model_flops(model, tokens))
    assert row["mfu_text"] == f"{100 * row['mfu']:.1f} %"


def test_peak_memory_is_the_most_loaded_ranks(case: dict) -> None:
    for name in LAYOUTS:
        mem = case["profiles"][name].memory
        pta = mem[mem["component"].astype(str).str.contains("PTA", case=False)]
        expected = pta.groupby("rank")["allocated_bytes"].max().max()
        got = case["journal"].record(name).metric("peak_memory_bytes")
        assert got == pytest.approx(float(expected))


def test_breakdown_and_operators_are_those_of_the_profiles(case: dict) -> None:
    journal = case["journal"]
    for name, profile in case["profiles"].items():
        record = journal.record(name)
        row = _job_step(profile)
        bd = record.breakdown.set_index("part")
        assert bd.loc["step_us", "us"] == pytest.approx(row["step_us"])
        assert bd.loc["wall_us", "us"] == pytest.approx(row["wall"])
        assert bd.loc["bubble_us", "share"] == pytest.approx(row["bubble_us"] / row["wall"])
        ops = record.operators
        k = profile.kernels
        pairs = k[["rank", "step"]].drop_duplicates().shape[0]
        by_name = k.groupby("name")["dur_us"].sum() / pairs
        stored = ops[ops["grouping"] == "name"].set_index("key")["us"]
        assert set(stored.index) == set(by_name.index)
        np.testing.assert_allclose(stored.sort_index(), by_name.sort_index(), rtol=1e-9)
        assert ops[ops["grouping"] == "category"]["us"].sum() == pytest.approx(by_name.sum())


def test_findings_are_the_advisors(case: dict) -> None:
    for name in ("pp2",):
        profile, job = case["profiles"][name], case["jobs"][name]
        found = pk.advise(profile, model=job.model, parallel=job.parallel,
                          hardware=job.hardware)
        stored = case["journal"].record(name).findings
        assert list(stored["rule"]) == [f.rule for f in found]
        assert list(stored["title"]) == [f.title for f in found]
        np.testing.assert_allclose(stored["ms_per_step"], [f.ms_per_step for f in found])


def test_an_impossible_mfu_is_never_stored_as_a_number(case: dict, tmp_path: Path) -> None:
    profile = case["profiles"]["dp2"]
    job = case["jobs"]["dp2"].with_overrides(step_time_s=1e-6)  # 10,000x too fast
    record = measure_run(profile, job=job)
    mfu = record.metrics.set_index("key").loc["mfu"]
    assert mfu["value"] is None or math.isnan(mfu["value"])
    assert "not plausible" in mfu["text"] and "above 100 %" in mfu["warning"]
    journal = Journal(tmp_path / "j.sqlite")
    journal.add(record, label="too fast")
    row = journal.runs().iloc[0]
    assert math.isnan(row["mfu"]) and "⚠ not plausible" in row["mfu_text"]
    with sqlite3.connect(journal.path) as con:  # nor in the file
        value, text = con.execute("SELECT value, text FROM metrics WHERE key = 'mfu'").fetchone()
    assert value is None and "not plausible" in text


def test_figures_a_job_cannot_give_say_why() -> None:
    cpu = measure_run(ROOT / "data" / "kineto-tiny-llama" / "rank0.pt.trace.json.gz")
    m = cpu.metrics.set_index("key")
    assert m.loc["tokens_per_s_per_device", "value"] > 0
    for key in ("mfu", "hfu"):  # a CPU run has no peak
        assert pd.isna(m.loc[key, "value"]) and m.loc[key, "text"] == "–"
        assert "not computed" in m.loc[key, "note"] and "hardware" in m.loc[key, "note"]


def test_figures_of_a_model_that_is_not_a_transformer_say_why() -> None:
    real = measure_run(shared_sample(PT_LEVEL1))  # the real torch_npu CNN: no LLM shapes
    m = real.metrics.set_index("key")
    for key in ("global_batch_size", "seq_length", "tokens_per_s_per_device", "mfu"):
        assert pd.isna(m.loc[key, "value"]) and "not computed" in m.loc[key, "note"], key
    assert m.loc["step_time_s", "value"] > 0


# --------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------

def test_compare_job_fields(case: dict) -> None:
    cmp = case["journal"].compare("dp2", "pp2")
    a, b = case["jobs"]["dp2"], case["jobs"]["pp2"]
    expected = {f for f in pk.job.JOB_FIELDS
                if f not in ("step_time_s", "peak_memory_bytes")
                and json.dumps(job_rows(a).set_index("field")["value"][f])
                != json.dumps(job_rows(b).set_index("field")["value"][f])}
    assert set(cmp.job_changes["field"]) == expected
    assert {"dp", "pp", "num_micro_batches"} <= expected
    pp = cmp.job.set_index("field").loc["pp"]
    assert (pp["base"], pp["new"], bool(pp["changed"])) == ("1", "2", True)
    assert pp["base_source"] == "profile"


def test_compare_metrics_read_from_both_runs(case: dict) -> None:
    journal = case["journal"]
    cmp = journal.compare("pp2", "pp2-tuned")
    runs = journal.runs().set_index("label")
    for key in ("step_time_s", "tokens_per_s_per_device", "mfu"):
        row = cmp.metric(key)
        base, new = runs.loc["pp2", key], runs.loc["pp2-tuned", key]
        assert (row["base"], row["new"]) == pytest.approx((base, new))
        assert row["delta_pct"] == pytest.approx(100 * (new - base) / base)


def _job_step(profile) -> pd.Series:
    """The job's step of a profile by hand: ``wall`` the median over the steps of the
    slowest rank's wall time (device span + wait before it), each part that wall times
    the part's sum over every (rank, step) / the sum of their walls."""
    steps = A.step_breakdown(profile)
    wall = (steps["computing_us"] + steps["comm_not_overlapped_us"] + steps["free_us"]
            + steps["preparing_us"].fillna(0.0))
    step = float(np.median(wall.groupby(steps["step"]).max()))
    out = steps.select_dtypes("number").sum() / wall.sum() * step
    out["wall"] = step
    return out


def test_compare_breakdown_is_of_each_run_s_job_step(case: dict) -> None:
    p = case["profiles"]
    cmp = case["journal"].compare("dp2", "pp2")
    base, new = _job_step(p["dp2"]), _job_step(p["pp2"])
    got = cmp.breakdown.set_index("part")
    for part in got.index:
        column = "wall" if part == "wall_us" else part
        assert got.loc[part, "base_us"] == pytest.approx(base[column])
        assert got.loc[part, "new_us"] == pytest.approx(new[column])
    share = new["bubble_us"] / new["wall"] - base["bubble_us"] / base["wall"]
    assert got.loc["bubble_us", "delta_share"] == pytest.approx(share)


@pytest.mark.parametrize("by", ["category", "name"])
def test_stored_operator_diff_equals_compare_profiles(case: dict, by: str) -> None:
    p = case["profiles"]
    stored = case["journal"].compare("dp2", "pp2-tuned", by=by).operators
    direct = A.compare_profiles(p["dp2"], p["pp2-tuned"], by=by)
    pd.testing.assert_frame_equal(stored.sort_values("key").reset_index(drop=True),
                                  direct.sort_values("key").reset_index(drop=True))
    loaded = case["journal"].compare("dp2", "pp2-tuned", by=by, operators="profiles")
    assert loaded.operators_source == "profiles"
    pd.testing.assert_frame_equal(loaded.operators, direct)
    auto = case["journal"].compare("dp2", "pp2-tuned", by=by, operators="auto")
    assert auto.operators_source == "profiles"  # both at hand and unchanged


def test_auto_falls_back_to_the_stored_tables(case: dict, tmp_path: Path) -> None:
    journal = case["journal"].copy_to(tmp_path / "c.sqlite")
    journal.relocate(case["paths"]["dp2"].parent, tmp_path / "gone")
    cmp = journal.compare("dp2", "pp2", operators="auto")
    assert cmp.operators_source == "stored"
    assert any("not at hand" in n for n in cmp.operators.attrs["notes"])
    with pytest.raises(JournalError, match="cannot be opened"):
        journal.compare("dp2", "pp2", operators="profiles")


def _keep_names(record: RunRecord, n: int) -> RunRecord:
    """The record as measure_run(..., max_names=n) keeps it: the n longest names."""
    ops = record.operators
    names = ops[ops["grouping"] == "name"].sort_values("us", ascending=False).head(n)
    kept = pd.concat([ops[ops["grouping"] == "category"], names], ignore_index=True)
    return record.replace(operators=kept, operator_names_total=int(
        (ops["grouping"] == "name").sum()))


def test_truncated_name_tables_say_unknown_not_zero(case: dict) -> None:
    base = _keep_names(case["journal"].record("dp2"), 3)
    new = _keep_names(case["journal"].record("pp2"), 3)
    assert base.operator_names_total > 3
    ops = compare_records(base, new, by="name").operators
    kept_base = set(base.operators.query("grouping == 'name'")["key"])
    outside = ops[~ops["key"].isin(kept_base)]
    assert len(outside) and outside["base_us"].isna().all() and outside["delta_us"].isna().all()


def test_findings_appeared_and_disappeared(case: dict) -> None:
    journal = case["journal"]
    cmp = journal.compare("dp2", "pp2")
    before = set(journal.record("dp2").findings["rule"])
    after = set(journal.record("pp2").findings["rule"])
    assert set(cmp.appeared["rule"]) == after - before
    assert set(cmp.disappeared["rule"]) == before - after
    assert set(cmp.findings.query("status == 'kept'")["rule"]) == before & after
    assert after - before, "a pipeline brings its bubble finding"


def test_sentence_of_the_case(case: dict) -> None:
    journal = case["journal"]
    runs = journal.runs().set_index("label")
    s = journal.compare("dp2", "pp2").sentence()
    step = 100 * (runs.loc["pp2", "step_time_s"] / runs.loc["dp2", "step_time_s"] - 1)
    sign = "+" if step > 0 else "\u2212"
    assert s.startswith("pipeline 1→2, data parallel 2→1, micro-batches 2→4")
    assert f"step {sign}{abs(step):.{1 if abs(step) < 10 else 0}f} %" in s
    bubble = 100 * (runs.loc["pp2", "bubble_share"] - runs.loc["dp2", "bubble_share"])
    assert f"bubble +{bubble:.1f} % of the step" in s
    assert "recompute FLOPs" not in s  # full recompute on both sides: same FLOPs
    s2 = journal.compare("pp2", "pp2-tuned").sentence()
    assert s2.startswith("recompute full→selective, full-recompute layers all→[1, 0]")
    r = [journal.record(n).metric("recompute_flops_per_step") for n in ("pp2", "pp2-tuned")]
    pct = 100 * (r[1] - r[0]) / r[0]
    assert f"recompute FLOPs \u2212{abs(pct):.0f} %" in s2


def _record(pp: int, step_s: float, bubble_share: float, recompute_flops: float,
            label: str) -> RunRecord:
    """A run written by hand: only the fields the sentence reads."""
    values = {f: None for f in pk.job.JOB_FIELDS}
    values.update(pp=pp, dp=8, tp=1, recompute="full", step_time_s=step_s)
    job = pd.DataFrame({"field": list(values), "kind": "parallel",
                        "value": [json.dumps(v) for v in values.values()],
                        "source": "user", "detail": ""})
    job.loc[job["field"] == "step_time_s", "kind"] = "measured"
    metrics = pd.DataFrame([
        {"key": "step_time_s", "metric": "step time", "value": step_s, "unit": "s"},
        {"key": "devices", "metric": "devices", "value": 16.0, "unit": "devices"},
        {"key": "recompute_flops_per_step", "metric": "recompute FLOPs",
         "value": recompute_flops, "unit": "FLOP"}], columns=list(METRIC_COLUMNS))
    breakdown = pd.DataFrame({"part": ["step_us", "bubble_us"],
                              "us": [step_s * 1e6, bubble_share * step_s * 1e6],
                              "share": [1.0, bubble_share]})
    empty = pd.DataFrame(columns=["position", "rule", "severity", "area", "title",
                                  "ms_per_step", "measured", "score", "evidence",
                                  "recommendation"])
    ops = pd.DataFrame({"grouping": ["category"], "key": ["matmul"], "count": [1.0],
                        "us": [step_s * 5e5]})
    return RunRecord(path=None, fingerprint=label, profile_bytes=0, label=label, note=None,
                     job_line="", job_problems=(), job=job, metrics=metrics,
                     breakdown=breakdown, findings=empty, operators=ops)


def test_the_issues_sentence_word_for_word() -> None:
    base = _record(pp=1, step_s=1.0, bubble_share=0.0, recompute_flops=4e15, label="a")
    new = _record(pp=2, step_s=0.86, bubble_share=0.012, recompute_flops=3e15, label="b")
    assert change_sentence(compare_records(base, new)) == \
        "pipeline 1→2, step \u221214 %, bubble +1.2 % of the step, recompute FLOPs \u221225 %"
    same = compare_records(base, base)
    assert change_sentence(same) == "step ±0.0 %"
    with pytest.raises(pk.PerfkitError):
        change_sentence("not a comparison")


# --------------------------------------------------------------------------------------
# the same profile twice; paths
# --------------------------------------------------------------------------------------

def test_the_same_profile_twice_is_detected_by_content(case: dict, tmp_path: Path) -> None:
    journal = case["journal"]
    with pytest.raises(DuplicateRunError, match=r"already in the journal as run 1 'dp2'") as e:
        journal.add(str(case["paths"]["dp2"]))
    assert e.value.run.id == 1 and str(journal.path) in str(e.value)
    copy = shutil.copytree(case["paths"]["dp2"], tmp_path / "elsewhere" / "renamed")
    again = journal.add(str(copy), if_exists="return")
    assert again.existing and again.id == 1
    assert len(journal) == 3
    assert fingerprint(copy) == fingerprint(case["paths"]["dp2"])
    csv = next(copy.glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"))
    with csv.open("a") as f:  # another run: other content
        f.write("\n")
    assert fingerprint(copy)[0] != fingerprint(case["paths"]["dp2"])[0]


def test_labels_are_unique_and_default_to_the_folder(case: dict, tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite")
    r1 = journal.add(case["profiles"]["dp2"])  # a loaded profile: measured here
    assert r1.label == "dp2" and r1.path == str(case["paths"]["dp2"])
    pp2 = case["journal"].record("pp2")
    with pytest.raises(JournalError, match="label 'dp2' is taken by run 1"):
        journal.add(pp2, label="dp2")
    assert len(journal) == 1
    assert journal.add(pp2.replace(path=str(tmp_path / "x" / "dp2"), label=None)).label \
        == "dp2 #2"


def test_paths_relative_inside_the_journal_folder_and_relocate(case: dict,
                                                                tmp_path: Path) -> None:
    inside = shutil.copytree(case["paths"]["pp2"], tmp_path / "runs" / "pp2")
    outside = shutil.copytree(case["paths"]["dp2"], tmp_path.parent / f"{tmp_path.name}-o" /
                              "dp2")
    journal = Journal(tmp_path / "j.sqlite")  # the runs as measured, at their new paths
    journal.add(case["journal"].record("pp2").replace(path=str(inside)), label="in")
    journal.add(case["journal"].record("dp2").replace(path=str(outside)), label="out")
    stored = dict(zip(journal.runs()["label"], journal.runs()["path"], strict=True))
    assert stored["in"] == "runs/pp2" and stored["out"] == str(outside)
    # a colleague receives the journal and the profiles in other folders
    mate = tmp_path.parent / f"{tmp_path.name}-mate"
    shutil.copytree(tmp_path, mate / "work")
    moved = shutil.move(str(outside.parent), mate / "profiles")
    theirs = Journal(mate / "work" / "j.sqlite")
    assert theirs.profile_path("in") == mate / "work" / "runs" / "pp2"
    assert theirs.load_profile("in").ranks == [0, 1]  # relative paths travel along
    with pytest.raises(JournalError, match="relocate"):
        theirs.load_profile("out")
    assert theirs.relocate(outside.parent, moved) == 1
    assert theirs.profile_path("out") == Path(moved) / "dp2"
    assert theirs.load_profile("out").ranks == [0, 1]
    assert theirs.relocate("/no/such/prefix", "/x") == 0
    # copy_to keeps relative paths pointing at the same profiles
    copy = theirs.copy_to(tmp_path.parent / f"{tmp_path.name}-copy.sqlite")
    assert copy.profile_path("in") == mate / "work" / "runs" / "pp2"
    with pytest.raises(JournalError, match="exists already"):
        theirs.copy_to(copy.path)


def test_changed_profile_is_noticed_on_load(case: dict, tmp_path: Path) -> None:
    folder = shutil.copytree(case["paths"]["pp2"], tmp_path / "p")
    journal = Journal(tmp_path / "j.sqlite")
    journal.add(case["journal"].record("pp2").replace(path=str(folder)), label="p")
    assert journal.load_profile("p").ranks == [0, 1]
    (next(folder.glob("*")) / "extra.txt").write_text("x")
    with pytest.raises(JournalError, match="changed since it was recorded"):
        journal.load_profile("p")


# --------------------------------------------------------------------------------------
# the file
# --------------------------------------------------------------------------------------

def test_schema_version_and_application_id_in_the_file(case: dict) -> None:
    with sqlite3.connect(case["journal"].path) as con:
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        meta = dict(con.execute("SELECT key, value FROM meta"))
    assert meta["schema_version"] == str(SCHEMA_VERSION)
    assert case["journal"].schema_version == SCHEMA_VERSION
    assert not Path(str(case["journal"].path) + "-wal").exists()


def test_bad_and_foreign_files_are_refused_naming_them(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"PK\x03\x04 this is a zip, not a journal" * 10)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as con:
        con.execute("CREATE TABLE users (name TEXT)")
    newer = tmp_path / "newer.sqlite"
    Journal(newer)
    with sqlite3.connect(newer) as con:
        con.execute("PRAGMA user_version = 99")
    cases = {garbage: "not an SQLite database", foreign: "not a perfkit journal",
             newer: "newer perfkit", tmp_path: "is a folder",
             tmp_path / "nope" / "j.sqlite": "does not exist"}
    for path, words in cases.items():
        with pytest.raises(JournalError, match=words) as e:
            Journal(path)
        assert str(path) in str(e.value)
    with pytest.raises(JournalError, match="no journal here"):
        Journal(tmp_path / "missing.sqlite", create=False)
    with pytest.raises(pk.PerfkitError):
        Journal(42)  # type: ignore[arg-type]


def test_a_damaged_journal_is_a_journal_error(case: dict, tmp_path: Path) -> None:
    data = case["journal"].path.read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[:4096 * 3])  # the first pages only
    with pytest.raises(JournalError) as e:
        Journal(cut).runs()
    assert str(cut) in str(e.value)
    zeroed = tmp_path / "zeroed.sqlite"
    zeroed.write_bytes(data[:100] + b"\0" * (len(data) - 100))
    with pytest.raises(JournalError):
        Journal(zeroed).runs()


def test_read_only_journals_refuse_writes(case: dict) -> None:
    ro = Journal(case["journal"].path, readonly=True)
    assert len(ro) == 3
    with pytest.raises(JournalError, match="read-only"):
        ro.add(str(case["paths"]["dp2"]))
    with pytest.raises(JournalError, match="read-only"):
        ro.annotate("dp2", note="x")


def test_unknown_run_lists_the_runs(case: dict) -> None:
    with pytest.raises(JournalError, match=r"no run 'nope'; the runs are: 1 'dp2', 2 'pp2'"):
        case["journal"].run("nope")
    assert case["journal"].run("2").label == "pp2"  # an id typed as text


def test_annotate_and_remove(case: dict, tmp_path: Path) -> None:
    journal = case["journal"].copy_to(tmp_path / "c.sqlite")
    journal.annotate("pp2", label="pipeline", note="two stages")
    assert journal.run(2).label == "pipeline" and journal.run(2).note == "two stages"
    journal.remove("pipeline")
    assert list(journal.runs()["id"]) == [1, 3]
    with sqlite3.connect(journal.path) as con:  # nothing of run 2 is left behind
        for table in ("job", "metrics", "breakdown", "findings", "operators"):
            assert con.execute(f"SELECT COUNT(*) FROM {table} WHERE run_id = 2"
                               ).fetchone()[0] == 0


#: The code the child processes run. Children are *spawned* (a fresh interpreter: forking
#: a process that has threads can deadlock), so it must be importable by name: the fixture
#: writes it as a module into a temporary folder on ``sys.path``.
WORKERS = """
import os
import time
from pathlib import Path

from perfkit.journal import Journal


class SlowJournal(Journal):
    # Stops inside the write transaction, after the run's row and tables are written,
    # until it is killed. Its page cache is one page, so the transaction's pages reach
    # the database file before the commit: only the rollback journal can undo them.
    def _insert_details(self, conn, run_id, record):
        conn.execute("PRAGMA cache_size = 1")
        super()._insert_details(conn, run_id, record)
        Path(os.environ["PERFKIT_TEST_INSIDE"]).write_text("inside")
        time.sleep(120)


def add_slowly(path, record):
    SlowJournal(path).add(record, label="killed")


def add_many(path, records, barrier):
    journal = Journal(path)
    barrier.wait()
    for record in records:
        journal.add(record)
"""


@pytest.fixture()
def workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "workers"
    folder.mkdir()
    (folder / "perfkit_journal_test_workers.py").write_text(WORKERS)
    monkeypatch.syspath_prepend(str(folder))
    import importlib

    module = importlib.import_module("perfkit_journal_test_workers")
    yield module
    import sys

    sys.modules.pop("perfkit_journal_test_workers", None)


def test_a_killed_writer_leaves_every_complete_run(case: dict, tmp_path: Path, workers,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    journal = Journal(tmp_path / "j.sqlite")
    journal.add(journal_record := case["journal"].record("dp2"), label="complete")
    flag = tmp_path / "inside"
    monkeypatch.setenv("PERFKIT_TEST_INSIDE", str(flag))
    record = case["journal"].record("pp2")
    child = mp.get_context("spawn").Process(target=workers.add_slowly,
                                            args=(str(journal.path), record))
    child.start()
    try:
        deadline = time.monotonic() + 60
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert flag.exists(), "the child never reached the write"
        hot = Path(str(journal.path) + "-journal")
        assert hot.exists(), "killed inside the transaction: the rollback journal is there"
        assert hot.read_bytes()[:8] == bytes.fromhex("d9d505f920a163d7")  # a hot journal
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
    reopened = Journal(journal.path)
    runs = reopened.runs()
    assert list(runs["label"]) == ["complete"]
    assert reopened.record("complete").metrics.equals(journal_record.metrics)
    with sqlite3.connect(journal.path) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for table in ("job", "metrics", "breakdown", "findings", "operators"):
            orphans = con.execute(f"SELECT COUNT(*) FROM {table} WHERE run_id NOT IN "
                                  "(SELECT id FROM runs)").fetchone()[0]
            assert orphans == 0, table
    assert not hot.exists()  # rolled back on the first read
    assert reopened.add(record, label="again").id == 2  # and it can be written again


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_concurrent_writers_lose_nothing(case: dict, tmp_path: Path, workers) -> None:
    base = [case["journal"].record(n) for n in LAYOUTS]
    n_workers, each = 3, 6
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(n_workers, timeout=240)  # all write at the same moment
    batches = [[base[(w + i) % 3].replace(fingerprint=f"test:{w}:{i}", label=f"w{w}-{i}",
                                          added_utc=None)
                for i in range(each)] for w in range(n_workers)]
    path = tmp_path / "shared.sqlite"
    procs = [ctx.Process(target=workers.add_many, args=(str(path), b, barrier))
             for b in batches]
    try:
        for p in procs:
            p.start()
        for p in procs:
            p.join(300)  # spawned children import perfkit: slow on a busy machine
            assert p.exitcode == 0
    finally:
        for p in procs:  # a hung child fails the test, it never hangs the suite
            if p.is_alive():
                p.kill()
    journal = Journal(path)
    runs = journal.runs()
    assert sorted(runs["label"]) == sorted(r.label for b in batches for r in b)
    assert runs["id"].is_unique and len(runs) == n_workers * each
    for label in runs["label"]:
        got = journal.record(label)
        w, i = (int(x) for x in label[1:].split("-"))
        want = batches[w][i]
        assert len(got.job) == len(want.job) and len(got.operators) == len(want.operators)
        assert got.metric("step_time_s") == pytest.approx(want.metric("step_time_s"))


# --------------------------------------------------------------------------------------
# layering
# --------------------------------------------------------------------------------------

def test_the_journal_imports_no_charts_or_widgets() -> None:
    for path in (ROOT / "perfkit" / "journal").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                name = ("." * node.level) + (node.module or "")
                assert "charts" not in name and "widgets" not in name, (path.name, name)


def test_a_file_that_is_not_sqlite_is_described_by_its_start(tmp_path: Path) -> None:
    text = tmp_path / "config.sqlite"
    text.write_text('{"a":\n  1}\n', encoding="utf-8")  # a JSON file given by mistake
    with pytest.raises(JournalError, match=r"""starts with the text '\{"a": 1\}'"""):
        Journal(text)
    binary = tmp_path / "blob.sqlite"
    binary.write_bytes(bytes(range(20)))
    with pytest.raises(JournalError, match="starts with the bytes 00 01 02 03 04 05 06 07"):
        Journal(binary)
