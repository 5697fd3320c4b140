"""What the guided notebooks call, on real profiles recorded by other projects.

The notebooks are run in ``tests/test_notebooks.py`` on bundled profiles only; running them on
the ten ``shared/samples/wild`` profiles found sections that showed figures of a stand-in as
the job's, or hid why a figure was not computed. These tests check the perfkit functions
those sections call, directly on the profile that showed it (no notebook is executed), and
the facts they rely on against the raw file.
"""

from __future__ import annotations

import dataclasses
import gzip
import html
import json
import re

import pytest
from raw_kineto import raw_events
from shared_samples import KINETO_TRACES, sample

import perfkit as pk
from perfkit.widgets import metrics_panel

__all__: list[str] = []

pytestmark = pytest.mark.shared_samples

DS_TRAIN = sample(KINETO_TRACES["ds_train"])


def test_metrics_panel_names_the_stand_in_model_of_a_profile_without_shapes() -> None:
    """05_memory's what-if on the DeepSeek H800 trace: a header reading "model unknown" over
    MFU 279 % computed for the panel's default Llama2-13B. The trace records no operator
    shapes (read from the raw file), so the model cannot come from it: the header must say
    which preset the figures are for."""
    events = raw_events(DS_TRAIN)
    assert not any("Input Dims" in e.get("args", {}) for e in events)  # no shapes recorded
    job = pk.infer_job(pk.load(DS_TRAIN.parent))
    assert job.model is None and job.hardware is not None
    header = html.unescape(metrics_panel(job=job).header.value)
    assert "model unknown" in header
    assert ("The profile does not give the model: the figures below that need it are for "
            "the preset llama2-13b (the control above), not for this job.") in header
    assert "device" not in header.split("what-if.")[1]  # the H800 is the job's own


def test_metrics_panel_adds_nothing_when_the_job_gives_model_and_device() -> None:
    job = pk.infer_job(pk.load("sample:llama2-13b-baseline-dp16"))
    assert job.model is not None and job.hardware is not None
    header = metrics_panel(job=job).header.value
    assert "does not give" not in header and "what-if" in header


def test_stage_balance_of_a_one_stage_job_says_there_is_nothing_to_balance() -> None:
    """02, 07 and 08 pass the job's split to stage_balance; on the DeepSeek trace (pp 1: the
    trace's distributedInfo names no pipeline group) the note asked for the very
    ``parallel=`` it had been given ("pass stages= or parallel=")."""
    info = json.loads(DS_TRAIN.read_text(encoding="utf-8"))["distributedInfo"]
    assert set(info) == {"backend", "rank", "world_size"}  # no pipeline group recorded
    prof = pk.load(DS_TRAIN.parent)
    job = pk.infer_job(prof)
    assert job.parallel.pp == 1
    frame = pk.analysis.stage_balance(prof, parallel=job.parallel)
    assert frame.empty
    assert frame.attrs["notes"] == ["one pipeline stage (pp 1): no stages to balance"]
    # without a split the stages are still unknown, and the note still says what to pass
    assert "pass stages= or parallel=" in pk.analysis.stage_balance(prof).attrs["notes"][0]


def _svg_words(chart: object) -> list[str]:
    from perfkit.charts import chart_to_svg

    return re.findall(r"<text[^>]*>([^<]*)</text>", chart_to_svg(chart))


def test_empty_memory_and_roofline_charts_say_why() -> None:
    """05_memory's timeline and 03_operators' roofline drew bare axes on the DeepSeek trace,
    which has neither memory samples nor operator shapes (counted in the raw file)."""
    events = raw_events(DS_TRAIN)
    assert not any(e.get("name") == "[memory]" for e in events)
    assert not any("Input Dims" in e.get("args", {}) for e in events)
    prof = pk.load(DS_TRAIN.parent)
    memory = pk.analysis.memory_timeline(prof, max_points=200)
    assert memory.empty
    words = _svg_words(pk.charts.memory_timeline_chart(memory, title="Reserved memory"))
    assert words == ["Nothing to draw: no memory samples.", "Reserved memory"]
    roof = _svg_words(pk.charts.roofline_chart(pk.analysis.operator_efficiency(prof)))
    assert " ".join(roof).startswith("Nothing to draw: no input shapes in this profile")


def test_comparison_of_a_run_with_itself_says_no_setting_changed() -> None:
    """10_tuning_journal on one profile as both runs: its job-changes table read "nothing in
    this profile." (the DeepSeek trace has a job; none of its settings changed)."""
    from perfkit.tables import table

    journal = pk.Journal.temporary()
    run = journal.add(str(DS_TRAIN.parent), if_exists="return")
    changes = journal.compare(run, run).job_changes
    assert changes.empty
    assert changes.attrs["notes"] == ["no job setting changed between the two runs"]
    assert "nothing to show (no job setting changed between the two runs)" in \
        table(changes)._repr_html_()


def test_metrics_panel_names_both_stand_ins_when_the_device_is_unnamed_too() -> None:
    """05_memory on HTA's sampled rank: neither the model nor the device is in the trace
    (it has no deviceProperties), so both presets stand in and both are named."""
    import gzip

    from shared_samples import HTA

    with gzip.open(sample(HTA) / "sampled_rank-0.json.gz", "rt", encoding="utf-8") as f:
        assert json.load(f).get("deviceProperties") is None
    prof = pk.load(sample(HTA))
    job = pk.infer_job(prof)
    assert job.model is None and job.hardware is None
    header = html.unescape(metrics_panel(job=job).header.value)
    assert ("The profile does not give the model and device: the figures below that need "
            "them are for the preset llama2-13b and the preset ascend-910b (the controls "
            "above), not for this job.") in header


K_RESNET50_NW0 = sample(KINETO_TRACES["k_resnet50_nw0"])


def _summary_value(panel: object, key: str) -> float:
    return float(panel.summary.set_index("key").loc[key, "value"])  # type: ignore[attr-defined]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_what_if_of_02_does_not_start_from_another_jobs_step() -> None:
    """02_parallel_strategy's calculator plans llama2-7b on 8 Ascend 910B (the notebook
    tests' settings) beside the ResNet-50 V100 trace. It started from a fixed 12.8 s and
    read MFU 147.5 % "not plausible"; it must start from a step of this configuration and
    say which. The trace names its GPU (read from the raw file), so the device differs."""
    with gzip.open(K_RESNET50_NW0, "rt", encoding="utf-8") as f:
        props = json.load(f)["deviceProperties"]
    assert props[0]["name"] == "Tesla V100-DGXS-32GB"
    job = pk.infer_job(pk.load(K_RESNET50_NW0.parent))
    panel = metrics_panel("llama2-7b", "ascend-910b", dp=4, pp=2, num_micro_batches=64,
                          recompute="selective", optimizer_parallel=True, measured_job=job)
    step = panel.controls["step_time_s"].value
    # tokens/s per device by hand: 256 sequences of 4,096 tokens over 8 devices
    assert _summary_value(panel, "tokens_per_s_per_device") == \
        pytest.approx(256 * 4096 / (step * 8))
    assert step == pytest.approx(_summary_value(panel, "predicted_step_s"))
    assert 0 < _summary_value(panel, "mfu") < 1.0
    assert "not plausible" not in panel.table.value
    header = html.unescape(panel.header.value)
    assert "starts at the uncalibrated estimate for this configuration" in header
    assert "it ran on v100, not ascend-910b" in header


def test_memory_panel_without_the_model_does_not_put_the_traces_step_under_a_stand_in() -> None:
    """05_memory's panel on the ResNet-50 trace: the stand-in Llama2-13B at the trace's
    177 ms read MFU 1,609.9 % and an estimate "32× the measured step"."""
    job = pk.infer_job(pk.load(K_RESNET50_NW0.parent))
    assert job.model is None and job.step_time_s
    panel = metrics_panel(job=job)
    step = panel.controls["step_time_s"].value
    assert step != pytest.approx(job.step_time_s)
    assert step == pytest.approx(_summary_value(panel, "predicted_step_s"))
    assert 0 < _summary_value(panel, "mfu") < 1.0
    assert "not plausible" not in panel.table.value
    assert "is of another job (the profile does not give the model)" in \
        html.unescape(panel.header.value)


def test_panel_keeps_the_measured_step_of_the_job_it_starts_from() -> None:
    job = pk.infer_job(pk.load("sample:llama2-13b-tuned-dp8-pp2"))
    panel = metrics_panel(job=job)
    assert panel.controls["step_time_s"].value == pytest.approx(job.step_time_s)
    assert "starts at the profile's measured step" in html.unescape(panel.header.value)


def test_panel_shows_a_measured_step_to_seven_figures_not_its_full_float() -> None:
    """A measured step is a mean of many floats (1.215988953671 s on one walk): the box
    showed all of it. Seven significant figures keep MFU within 1e-7 of the full value."""
    job = pk.infer_job(pk.load("sample:llama2-13b-tuned-dp8-pp2"))
    job = dataclasses.replace(job, step_time_s=1.215988953671)
    value = metrics_panel(job=job).controls["step_time_s"].value
    assert value == 1.215989
    assert len(repr(value).replace(".", "")) <= 7


def test_a_journal_run_shows_as_sentences_not_its_repr() -> None:
    """10_tuning_journal displayed ``Run(id=1, label='k_resnet50_nw4', ..., fingerprint=
    '9f…')`` for each run it added: what IPython shows is checked through its own display
    formatter (what the kernel sends)."""
    from IPython.core.formatters import DisplayFormatter

    folder = sample(KINETO_TRACES["k_resnet50_nw4"]).parent
    journal = pk.Journal.temporary()
    formats, _ = DisplayFormatter().format(journal.add(str(folder), note="four workers"))
    assert "Run(" not in formats["text/plain"] and "fingerprint" not in formats["text/plain"]
    page = re.sub(r"<[^>]+>", " ", html.unescape(formats["text/html"]))
    assert "Run 1 'k_resnet50_nw4', added to the journal on" in page
    # the journal keeps the absolute path with its links resolved (profile_spec); the
    # samples folder may be reached through a link (../shared -> /work/shared), so the
    # page names the resolved folder, not necessarily the spelling sample() gives
    assert "Note: four workers" in page and f"Profile: {folder.resolve()}" in page
    again, _ = DisplayFormatter().format(journal.add(str(folder), if_exists="return"))
    assert "is already in the journal" in again["text/plain"]


@pytest.mark.slow
@pytest.mark.notebooks
def test_04_compares_with_the_profiles_own_device_not_a_preset() -> None:
    """04_communication gave the advisor its preset parameter, ascend-910b, as the device of
    the ResNet-50 V100 trace: "3 GEMM shapes under 35.0 % of their roofline (ascend-910b)",
    and an element-wise saving (6.47 ms) other than 00_start_here's on the job's own device
    (4.91 ms). One kernel run: the wiring is the notebook's."""
    from test_notebooks import NOTEBOOK_DIR, _seen_text, execute

    with gzip.open(K_RESNET50_NW0, "rt", encoding="utf-8") as f:
        assert json.load(f)["deviceProperties"][0]["name"] == "Tesla V100-DGXS-32GB"
    prof = pk.load(K_RESNET50_NW0.parent)
    job = pk.infer_job(prof)
    nb, _ = execute(NOTEBOOK_DIR / "04_communication.ipynb",
                    {"PROFILE": str(K_RESNET50_NW0.parent)})
    seen = " ".join(_seen_text(out) for cell in nb.cells if cell.cell_type == "code"
                    for out in cell.get("outputs", []))
    assert "ascend-910b" not in seen
    assert "Nominal figures for the profile's own device, v100." in seen
    # the findings are those 00_start_here shows for the job (model, split and device)
    for finding in pk.advise(prof, model=job.model, parallel=job.parallel,
                             hardware=job.hardware)[:3]:
        assert html.escape(finding.evidence) in seen, finding.evidence


def test_part_by_part_comparison_names_the_parts_in_words() -> None:
    """08_case_llama2_13b's "what changed, part by part" on the TimeSformer trace showed its
    rows as ``step_us``, ``preparing_us`` (the keys of the frame); the 218 ms wait before
    the first device task then sat under a "step_us" of 164 ms with nothing saying that it
    is outside the device's step."""
    from perfkit.tables import step_parts, table

    prof = pk.load(sample(KINETO_TRACES["tl_timesformer_h100"]).parent)
    frame = pk.analysis.compare_steps(prof, prof)
    page = html.unescape(table(step_parts(frame))._repr_html_())
    assert "before the first device task (data, launch)" in page
    assert "pipeline bubble (part of communication not overlapped)" in page
    assert not re.search(r">\w+_us<", page)  # no key shown as a part
    assert list(frame["part"])[0] == "step_us"  # the frame itself keeps its keys
