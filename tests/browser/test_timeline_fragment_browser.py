"""The Timeline of a step whose kernel list was cut short, as a user sees it at 1366 × 768.

``ascend/msinsight-pt-gpt3-old`` keeps 21 and 22 tasks of step 2 (PROVENANCE: a trimmed
fixture). The tab draws them, but a warning comes first, above the chart: the drawn tasks
are a fragment of the step, covering the share of its busy time computed here from the raw
kernel_details.csv and step_trace_time.csv (5.1 % on rank 1, 16.8 % on rank 0); the
caption under the chart says so again. A screenshot is kept in the test artifacts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from raw_ascend import covered_share
from shared_samples import PT_GPT3_OLD, sample

from .conftest import (
    ANYWIDGET_HAS_LIMIT,
    ANYWIDGET_LATE,
    ARTIFACTS,
    UI,
    WAIT_MS,
    Served,
    chromium_page,
    page_errors,
    start_served,
)

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.shared_samples
OLD = sample(PT_GPT3_OLD)


def _covered_share(rank: int) -> float:
    """:func:`raw_ascend.covered_share` of the rank's export."""
    return covered_share(OLD / f"test_rank_{rank}" / "ASCEND_PROFILER_OUTPUT")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("serve-gpt3")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PERFKIT_CACHE_DIR", str(folder / "cache"))
        proc, served = start_served(folder / "serve.log", str(OLD))
    try:
        yield served
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def page(served: Served) -> Iterator[Any]:
    # every chart meets anywidget's 2 s limit, as on a busy machine (tests/browser/conftest.py
    # ANYWIDGET_LATE): the Timeline's chart, made when the tab is opened, must still be drawn
    with chromium_page(served.url, width=1366, height=768, console=False,
                       anywidget_late=True) as page:
        yield page


def test_the_warning_comes_first_and_gives_the_share_drawn(page: Any) -> None:
    ui = UI(page)
    tab = ui.show_tab("Timeline")
    warning = tab.locator(".pk-job-warn").first
    warning.wait_for(timeout=WAIT_MS)
    text = warning.inner_text()
    shares = {r: _covered_share(r) for r in (0, 1)}
    assert shares[0] < 0.5 and shares[1] < 0.5  # the raw files: a fragment of the step
    assert "Only part of step 2's device tasks were recorded" in text
    assert f"{100 * shares[1]:.1f} % of the step's busy time" in text
    assert f"{100 * shares[0]:.1f} % on rank 0" in text
    chart = tab.locator(".pk-chart").first
    # above the chart, and inside the first screen of a 1366 × 768 window
    assert warning.bounding_box()["y"] < chart.bounding_box()["y"]
    page.evaluate("window.scrollTo(0, 0)")
    assert warning.bounding_box()["y"] + warning.bounding_box()["height"] < 768
    assert "These events are a fragment of the step" in tab.inner_text()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "timeline_fragment_1366x768.png"))
    # the limit was met, where this anywidget has one
    assert (ANYWIDGET_LATE in page.errors) == ANYWIDGET_HAS_LIMIT
    assert page_errors(page) == []  # and every chart drawn all the same
