"""The bundled Llama2-13B journal: what it holds is what the bundled data measures.

The baseline and tuned runs are the bundled samples; the pipelined run is only in the
journal, and ``perfkit simulate --scenario llama2-13b-pipelined-dp8-pp2`` writes its
profile again with the fingerprint the journal records. Numbers are checked against the
profiles' own ``step_trace_time.csv`` and the job's batch and layout.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

import perfkit as pk
from perfkit import cli
from perfkit.journal import Journal, fingerprint
from perfkit.simulate.scenarios import scenario

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT / "data" / "journals" / "llama2-13b-case.sqlite"
SIM = ROOT / "data" / "simulated"
PIPELINED = "llama2-13b-pipelined-dp8-pp2"


@pytest.fixture(scope="module")
def journal() -> Journal:
    return Journal(FILE, readonly=True)


def _step_s(folder: Path) -> float:
    """The slowest rank's step (one step per profile): its device span and the Preparing
    before it."""
    worst = 0.0
    for csv in folder.glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"):
        t = pd.read_csv(csv)
        worst = max(worst, float((t["Computing"] + t["Communication(Not Overlapped)"]
                                  + t["Free"] + t["Preparing"]).max()))
    return worst / 1e6


def _tool():
    spec = importlib.util.spec_from_file_location("make_journal", ROOT / "tools" /
                                                  "make_journal.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_three_runs_of_the_case(journal: Journal) -> None:
    runs = journal.runs()
    assert list(runs["label"]) == ["baseline", "pipelined", "tuned"]
    assert list(runs["path"]) == ["sample:llama2-13b-baseline-dp16", None,
                                  "sample:llama2-13b-tuned-dp8-pp2"]
    assert list(zip(runs["dp"], runs["pp"], runs["recompute"], strict=True)) == [
        (16, 1, "full"), (8, 2, "full"), (8, 2, "selective")]
    assert f"perfkit simulate OUT --scenario {PIPELINED}" in runs["provenance"].iloc[1]
    assert Journal.bundled().path.name == FILE.name and Journal.bundled().readonly
    assert "llama2-13b-case" in pk.journal.bundled_journals()
    with pytest.raises(pk.PerfkitError, match="no bundled journal is called 'nope'"):
        Journal.bundled("nope")


def test_the_bundled_samples_are_the_runs_recorded(journal: Journal) -> None:
    for label, name in (("baseline", "llama2-13b-baseline-dp16"),
                        ("tuned", "llama2-13b-tuned-dp8-pp2")):
        assert journal.run(label).fingerprint == fingerprint(SIM / name)[0]
        assert journal.profile_path(label).name == name


@pytest.mark.parametrize("label, name", [("baseline", "llama2-13b-baseline-dp16"),
                                         ("tuned", "llama2-13b-tuned-dp8-pp2")])
def test_numbers_against_the_profiles_files(journal: Journal, label: str, name: str) -> None:
    record = journal.record(label)
    job = {r.field: json.loads(r.value) for r in record.job.itertuples(index=False)}
    step = _step_s(SIM / name)
    assert record.metric("step_time_s") == pytest.approx(step, rel=1e-9)
    tokens = job["global_batch_size"] * job["seq_length"]
    simulated = scenario(name).parallel  # what the scenario simulated
    assert tokens == simulated.global_batch_size * 4096
    devices = job["dp"] * job["tp"] * job["pp"]
    assert record.metric("tokens_per_s_per_device") == pytest.approx(tokens / (step * devices))
    assert record.metric("tokens_per_s_per_p") == pytest.approx(tokens / (step * job["dp"]))


def test_the_pipelined_profile_regenerates_with_its_fingerprint(
        journal: Journal, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pipelined"
    assert cli.main(["simulate", str(out), "--scenario", PIPELINED]) == 0
    capsys.readouterr()
    run = journal.run("pipelined")
    assert fingerprint(out)[0] == run.fingerprint
    record = journal.record("pipelined")
    step = _step_s(out)
    assert record.metric("step_time_s") == pytest.approx(step, rel=1e-9)
    assert record.metric("tokens_per_s_per_device") == pytest.approx(64 * 4096 / (step * 16))


def test_the_case_reads_as_the_guide_tells_it(journal: Journal) -> None:
    first = journal.compare("baseline", "pipelined")
    assert first.sentence().startswith("pipeline 1→2, data parallel 16→8")
    # per device the replay moves as the guide measured: 1,860 -> 2,136 -> 2,562 tokens/s/p
    # (perf_optimize.md, Llama2-13B case), each step within 5 % of the guide's gain
    per_device = journal.runs().set_index("label")["tokens_per_s_per_device"]
    for label, guide in (("pipelined", 2136 / 1860), ("tuned", 2562 / 1860)):
        assert per_device[label] / per_device["baseline"] == pytest.approx(guide, rel=0.05)
    second = journal.compare("pipelined", "tuned")
    assert second.sentence().startswith("recompute full→selective")
    assert second.metric("recompute_flops_per_step")["delta"] < 0
    assert second.metric("tokens_per_s_per_device")["delta"] > 0
    assert second.metric("peak_memory_bytes")["delta"] > 0  # ... which the tuning spends
    whole = journal.compare("baseline", "tuned")
    assert whole.metric("tokens_per_s_per_device")["delta_pct"] > 15


def test_readme_is_the_one_the_tool_writes(journal: Journal) -> None:
    readme = (FILE.parent / "README.md").read_text(encoding="utf-8")
    assert readme == _tool().readme(journal)


@pytest.mark.slow
def test_rebuilding_gives_the_same_journal(journal: Journal, tmp_path: Path) -> None:
    rebuilt = Journal(_tool().build(tmp_path), readonly=True)
    for label in ("baseline", "pipelined", "tuned"):
        a, b = journal.record(label), rebuilt.record(label)
        assert a.fingerprint == b.fingerprint
        for frame in ("job", "metrics", "breakdown", "operators"):
            pd.testing.assert_frame_equal(getattr(a, frame), getattr(b, frame),
                                          check_exact=False, rtol=1e-9)


def test_run_ids_of_any_integer_type_name_a_run(journal: Journal) -> None:
    """The ids that runs() gives (numpy int64) name runs everywhere a run is named."""
    import numpy as np

    from perfkit.errors import InvalidArgumentError
    from perfkit.widgets.history import history_panel

    ids = journal.runs()["id"]
    first, last = ids.iloc[0], ids.iloc[-1]
    assert isinstance(first, np.integer)  # what a user gets from the frame
    assert journal.run(first).label == "baseline"
    for ref in (np.int32(1), np.uint8(1), np.int64(1)):
        assert journal.run(ref).label == "baseline"
    cmp = journal.compare(first, last)
    assert (cmp.base_label, cmp.new_label) == ("baseline", "tuned")
    assert cmp.sentence() == journal.compare(1, 3).sentence()
    assert journal.record(last).label == "tuned"
    panel = history_panel(journal)
    panel.select(first, last)
    assert (panel.comparison.base_label, panel.comparison.new_label) == ("baseline", "tuned")
    for bad in (True, np.float64(1.0), None):
        with pytest.raises(InvalidArgumentError, match="must be a run id"):
            journal.run(bad)
