"""A profile whose job cannot be read: the Overview says that, not "open a profile".

Reading the job is made to fail (as a damaged or unknown layout would make it); the step
time is still the profile's (its ProfilerStep spans, read here with json), and the
throughput and MFU cards say that the job could not be read, where the job panel says why.
"""

from __future__ import annotations

import gzip
import html
import json
import re
from pathlib import Path

import pytest
from widget_html import panel_html

from perfkit.errors import PerfkitError

H100 = Path(__file__).parent / "data" / "kineto_llama_h100"


def _text(value: str) -> str:
    value = re.sub(r"<style>.*?</style>", "", value, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", value)))


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_a_job_that_cannot_be_read_is_said_so_on_the_overview(monkeypatch) -> None:
    from perfkit.widgets import dashboard
    from perfkit.widgets import job as job_panel

    def fail(*_a, **_k):
        raise PerfkitError("the layout is unreadable (made to fail by this test)")

    monkeypatch.setattr(job_panel, "infer_job", fail)
    board = dashboard(str(H100))
    assert board.job.job is None
    assert "made to fail by this test" in board.job.message.value
    board.select("Overview")
    text = _text(panel_html(board.panels["Overview"]))
    assert text.count("no job: it could not be read from this profile") == 2, text
    assert "open a profile" not in text
    # the step time still shows: the trace does have steps
    trace = next(H100.glob("*.json*"))
    opener = gzip.open if trace.suffix == ".gz" else open
    with opener(trace, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    assert any(str(e.get("name", "")).startswith("ProfilerStep#") for e in events)
    assert "no step found" not in text
