"""The Operators tab of an export where one rank's kernel list was cut short, as a user sees
it at 1366 × 768: ``ascend/msinsight-pt-level1`` with rank 1's kernel_details.csv cut to its
last 20 tasks (a copy in a temporary folder), whose tasks then cover less than half of the
step's busy time in step_trace_time.csv (computed here from the raw files). The roofline
and the unfused chains are rank 0's alone, and the page says so under them. A screenshot is
kept in the test artifacts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from raw_ascend import covered_share, keep_last_tasks
from shared_samples import PT_LEVEL1, sample, writable_copy

from .conftest import ARTIFACTS, UI, WAIT_MS, chromium_page, page_errors, start_served

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.shared_samples
LEVEL1 = sample(PT_LEVEL1)
_KEEP = 20


def test_roofline_says_it_is_over_the_steps_recorded_in_full(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = writable_copy(LEVEL1, tmp_path / "level1")
    out = root / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    keep_last_tasks(out / "kernel_details.csv", _KEEP)
    assert covered_share(out) < 0.5
    assert covered_share(root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT") > 0.99
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    proc, served = start_served(tmp_path / "serve.log", str(root))
    try:
        with chromium_page(served.url, width=1366, height=768, console=False) as page:
            tab = UI(page).show_tab("Operators")
            said = tab.get_by_text("The roofline and the unfused chains are over the steps")
            said.wait_for(timeout=WAIT_MS)
            assert "(step 50 of 1 on rank 0; no step of 1 on rank 1)" in said.inner_text()
            assert said.is_visible()
            said.scroll_into_view_if_needed()
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "operators_recorded_1366x768.png"))
            assert page_errors(page) == []  # the page is open: it may wait for charts
    finally:
        proc.terminate()
        proc.wait(timeout=30)
