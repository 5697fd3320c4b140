"""What perfkit could not read: listed once, with why and how to set it; views refer to it.

The fields a profile leaves unknown are read from the job's evidence (the files a
profile lacks are known here: a MindSpore CPU run names no accelerator, the real Ascend
export has no attention kernels, the HTA trace names no GPU and records no allocator).
The dashboard says each reason once — on the Overview — and the other tabs and the job
line refer to it in one sentence; ``perfkit info`` has the same section.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from shared_samples import HTA, PT_LEVEL1, sample

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
        assert u.why == job.detail(field) and u.why  # the evidence's reason, not another
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
