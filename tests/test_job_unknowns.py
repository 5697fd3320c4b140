"""What perfkit could not read: listed once, with why and how to set it; views refer to it.

The fields a profile leaves unknown are read from the job's evidence (the files a
profile lacks are known here: a MindSpore CPU run names no accelerator, the real Ascend
export has no attention kernels, the HTA trace names no GPU and records no allocator).
The dashboard says each reason once — on the Overview — and the other tabs and the job
line refer to it in one sentence; ``perfkit info`` has the same section.
"""

from __future__ import annotations

import csv
import html
import re
from pathlib import Path

import pytest
from shared_samples import CLUSTER_OUTPUT, HTA, PT_LEVEL1, sample, writable_copy

import perfkit as pk
from perfkit.cli.profile_text import profile_info_text
from perfkit.job import PANEL_TITLE, how_to_set
from perfkit.widgets import dashboard, job_panel

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests" / "data"

#: profile -> the unknowns it must list (what its files lack)
MS_CPU = ROOT / "data" / "mindspore-cpu-tiny-llama"
CASES = {
    MS_CPU: ["hardware"],
    sample(PT_LEVEL1): ["model", "global_batch_size"],
    sample(HTA): ["model", "global_batch_size", "hardware", "peak_memory_bytes"],
    TESTS / "kineto_llama_h100": [],
    # pp from msprof-analyze's stage rows (tests/test_job_pipeline_stages.py)
    sample(CLUSTER_OUTPUT): ["model", "global_batch_size", "peak_memory_bytes"],
}
pytestmark = pytest.mark.shared_samples  # two of the cases are other projects' profiles


@pytest.fixture(scope="module")
def jobs() -> dict[Path, pk.Job]:
    return {path: pk.infer_job(pk.load(path)) for path in CASES}


@pytest.mark.parametrize("path", list(CASES), ids=lambda p: p.name)
def test_each_unknown_with_why_and_how(jobs: dict, path: Path) -> None:
    job = jobs[path]
    items = job.unknowns()
    assert [u.field for u in items] == CASES[path]
    for u in items:
        field = "name" if u.field == "model" else u.field
        said, seq_why = job.detail(field), job.detail("seq_length")
        if u.field == "model" and job.observed.get("network", (None,))[0] == "convolutional":
            # a CNN (PT_LEVEL1's Conv2D): said to be no transformer, not field by field
            assert u.why.startswith("this is not a transformer (") and said not in u.why
            continue
        if u.field == "global_batch_size" and f"({seq_why})" in said:
            # the micro-batch size's reason is the sequence length's, said once above (a
            # CNN's: that it is no transformer)
            assert items[0].field == "model"
            if items[0].why.startswith("this is not a transformer ("):
                said = said.replace(f"({seq_why})", "(not a transformer, above)")
            else:
                assert seq_why in items[0].why
                said = said.replace(f"({seq_why})", "(as the sequence length, above)")
        assert u.why == said and u.why  # the evidence's reason, not another
        assert u.needed_for
        assert "Edit the job" in how_to_set(u, "dashboard")
        assert f"job.with_overrides({u.example})" in how_to_set(u, "python")
        # a field a config carries says which files; --config on the command line
        assert ("--config FILE" in how_to_set(u, "cli")) is bool(u.config)
    with pytest.raises(ValueError):
        how_to_set(items[0] if items else None, "nowhere")


def _page_text(board) -> str:
    parts = [board.status.value, board.job.summary.value, board.job.warnings.value]
    for title in ("Overview", "Memory", "Recompute", "Planner"):
        parts.append(board.select(title).static_html())
    text = html.unescape(re.sub(r"<style.*?</style>|<[^>]+>", " ", "".join(parts),
                                flags=re.S))
    return " ".join(text.split())


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_the_dashboard_says_each_reason_once_and_the_tabs_refer_to_it(jobs: dict) -> None:
    path = MS_CPU
    board = dashboard(str(path))
    why = " ".join(jobs[path].detail("hardware").split())
    text = _page_text(board)
    assert text.count(why) == 1, text  # on the Overview's panel only
    assert text.count(PANEL_TITLE) >= 5  # the panel, the job line and three tabs refer
    for what in ("memory theory", "recompute trade-off", "figures, prediction or strategy search"):
        assert (f"No {what}: the hardware is not known (“{PANEL_TITLE}” on the Overview "
                "says why and how to set it).") in text
    # the job line says what is missing in one sentence, not why
    warn = html.unescape(board.job.warnings.value)
    assert "the hardware" in warn and why not in warn


def test_a_notebooks_job_panel_holds_the_table(jobs: dict) -> None:
    job = jobs[sample(PT_LEVEL1)]
    static = job_panel(job)._repr_mimebundle_()["text/html"]
    assert PANEL_TITLE in static and "pk.infer_job(profile, config=FILE)" in static
    assert html.escape(job.detail("global_batch_size")) in static


def test_perfkit_info_has_the_section(jobs: dict) -> None:
    path = sample(HTA)
    text = profile_info_text(pk.load(path), n_findings=0)
    assert f"\n{PANEL_TITLE}:\n" in text
    section = text.split(f"\n{PANEL_TITLE}:\n", 1)[1].split("\n\n", 1)[0]
    flat = " ".join(section.split())
    for u in jobs[path].unknowns():
        assert f"{u.label}: {' '.join(u.why.split())}" in flat
    assert flat.count("how to set it:") == len(jobs[path].unknowns())
    # the job section points there instead of repeating the 400-character reason
    job_part = text.split(f"\n{PANEL_TITLE}:\n", 1)[0]
    assert jobs[path].detail("name") not in " ".join(job_part.split())


def test_a_measured_bubble_without_a_pipeline_group_leaves_pp_unread(tmp_path: Path) -> None:
    """msprof-analyze's cluster output, its stage rows taken out, measures a pipeline
    bubble on ranks 8-15 (its Bubble column, read here) but records no pipeline group or
    stage: pp is not shown as 1 from the profile. Its reading says pp > 1 and that its
    size is not read (no size guessed: nothing gives one); dp's says it is smaller; the
    job line, the unknowns and perfkit info say so."""
    folder = writable_copy(sample(CLUSTER_OUTPUT), tmp_path / "cluster")
    path = folder / "cluster_analysis_output" / "cluster_step_trace_time.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.DictWriter(fh, fieldnames=list(rows[0]))
        out.writeheader()
        out.writerows(r for r in rows if r["Type"] != "stage")
    bubble = {int(r["Index"]): float(r["Bubble"]) for r in rows if r["Type"] == "rank"}
    waiting = {r: b for r, b in bubble.items() if b > 0}
    worst = max(waiting, key=waiting.__getitem__)
    job = pk.infer_job(pk.load(folder))
    assert (job.parallel.pp, job.source("pp")) == (1, "default")
    detail = job.detail("pp")
    assert detail.startswith("not read: the step table measures a pipeline bubble")
    assert (f"on {len(waiting)} of {len(bubble)} ranks, up to {waiting[worst] / 1e3:.0f} ms "
            f"per step (rank {worst}): the job is pipelined, pp > 1") in detail
    assert "1 is a placeholder, not a reading" in detail
    assert job.detail("dp").endswith(f"so dp is at most {len(bubble) // 2}")
    assert "pp not read: a pipeline bubble is measured, so pp > 1" in job.describe()
    text = " ".join(profile_info_text(pk.load(folder), n_findings=0).split())
    assert "dp 16 × tp 1 × pp 1 (pp not read: a pipeline bubble is measured, so pp > 1)" in text
    assert f"the pipeline size (pp): {' '.join(detail.split())}" in text
    # the way to set it works, and then nothing is a placeholder
    pp = [u for u in job.unknowns() if u.field == "pp"][0]
    given = job.with_overrides(**dict(kv.split("=") for kv in pp.example.split(", ")))
    assert given.parallel.pp == 2 and given.parallel.world_size == len(bubble)
    assert given.pp_unread is None and "pp" not in [u.field for u in given.unknowns()]


def test_a_read_pp_or_no_bubble_is_left_as_it_is() -> None:
    """The bundled dp 8 × pp 2 run gives pp from its pipeline groups (its Bubble is > 0);
    a run without a bubble keeps pp = 1 as assumed, with no word about a pipeline."""
    from perfkit.widgets import bundled_profile

    piped = pk.infer_job(pk.load(bundled_profile("simulated/llama2-13b-tuned-dp8-pp2")))
    assert (piped.parallel.pp, piped.source("pp")) == (2, "profile")
    assert piped.pp_unread is None and "not read" not in piped.detail("pp")
    flat = pk.infer_job(pk.load(sample(PT_LEVEL1)))
    assert flat.pp_unread is None and "bubble" not in flat.detail("pp")
