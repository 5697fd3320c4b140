"""Raw CANN output whose ``msprof_`` files hold the Overlap Analysis of some iterations only.

mindinsight-legacy's copy of ``PROF_000001_20230818142704322_COJGGGCANRMICFBC`` keeps the
step trace of 10 iterations (``step_trace_0_2_1.json``: an ``Iteration Time`` event per
iteration) but the ``msprof_`` file of the first only: iterations 2–10 have no Overlap
Analysis tracks. They read what the files give (their Iteration Time, their wait for data),
their computing / communication / free stay unknown (never zeros), and the page says which
iterations lack the split, once. Everything expected is read here with ``json``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from shared_samples import MINDINSIGHT, sample
from widget_html import panel_words

import perfkit as pk
from perfkit.widgets import tab_panel

pytestmark = pytest.mark.shared_samples

ROOT = sample(MINDINSIGHT) / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"


def _events(path: Path) -> list[dict]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, list) else data["traceEvents"]


def _raw() -> tuple[dict[int, tuple[float, float]], set[int]]:
    """Iteration id -> (start, duration) µs of the step trace's ``Iteration Time`` events,
    and the iterations holding an Overlap Analysis event of some ``msprof_`` file."""
    timeline = ROOT / "device_0" / "timeline"
    iterations = {}
    for f in sorted(timeline.glob("step_trace_*.json")):
        for e in _events(f):
            if e.get("ph") == "X" and e.get("cat") == "Iteration Time":
                iterations[int(e["args"]["Iteration ID"])] = (float(e["ts"]), float(e["dur"]))
    with_overlap = set()
    for f in sorted(timeline.glob("msprof_*.json")):
        events = _events(f)
        pids = {e["pid"] for e in events if e.get("name") == "process_name"
                and e["args"]["name"] == "Overlap Analysis"}
        for e in events:
            if e.get("ph") == "X" and e["pid"] in pids:
                ts = float(e["ts"])
                with_overlap |= {i for i, (a, d) in iterations.items() if a <= ts < a + d}
    return iterations, with_overlap


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_iterations_without_overlap_analysis_are_unknown_and_said_once() -> None:
    iterations, with_overlap = _raw()
    lacking = sorted(set(iterations) - with_overlap)
    assert sorted(iterations) == list(range(1, 11)) and with_overlap == {1}
    assert lacking == list(range(2, 11))

    p = pk.load(ROOT, cache=False, progress=False)
    steps = p.steps.set_index("step")
    # what the files give, every iteration: its Iteration Time
    assert [steps.loc[i, "total_us"] for i in sorted(iterations)] == pytest.approx(
        [iterations[i][1] for i in sorted(iterations)])
    parts = ["computing_us", "comm_not_overlapped_us", "free_us"]
    assert steps.loc[lacking, parts].isna().all().all()  # unknown, not zero
    assert steps.loc[sorted(with_overlap), parts].notna().all().all()

    # the note names the iterations (2–10 of 10), and the Overview says it once
    which = f"iterations {lacking[0]}–{lacking[-1]} of {len(iterations)}"
    said = [n for n in p.meta.notes if "Overlap Analysis" in n]
    assert len(said) == 1 and which in said[0], said
    words = panel_words(tab_panel("Overview", str(ROOT)))
    assert words.count("no Overlap Analysis events") == 1
    assert words.count(which) == 1
    for i in lacking:  # the step table shows the parts as unknown, never as 0
        assert re.search(rf"\| {i} \| [\d.,]+ \| – \| – \| – \|", words), i

    # the exposed communication finding is a mean over the one iteration that has it
    found = [f for f in pk.advise(p) if f.rule == "exposed_communication"]
    assert found and f"the mean over its {len(with_overlap)} step)" in found[0].evidence
