"""``perfkit serve`` as a new user meets it: empty cache, the address it prints, the page.

The server starts with an empty perfkit cache, so its preheated kernel parses the
bundled default sample (16 ranks) and perfkit's loading bar runs. Checked:

- ``serve`` printed its address after saying on stderr what it waited for and that the
  page was ready (perfkit.cli.page_ready followed Voila's real kernel pool: not a
  fallback that prints at once);
- the page at that address shows the Overview's step time;
- no progress bar is left in the page (it showed a cut-off "perfkit: lo…" bar above the
  sample picker), neither after the first load nor after a sample opened from the picker
  afresh, and the dashboard's progress box is empty.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import CHROMIUM, LAUNCH_ARGS, WAIT_MS, Served, page_errors, start_served

sync_api = pytest.importorskip("playwright.sync_api")

#: The Overview's step-time card holds a value (benchmarks/bench_serve.py waits the same).
STEP_TIME_SHOWN = """() => [...document.querySelectorAll('.pk-card')].some(card => {
  const k = card.querySelector('.pk-k'), v = card.querySelector('.pk-v');
  return k && v && k.textContent.trim().toLowerCase() === 'step time'
         && /\\d/.test(v.textContent);
})"""
#: Any progress bar in the page: ipywidgets' IntProgress, perfkit's rows.
BARS = ".widget-progress, .pk-progress"


@pytest.fixture(scope="module")
def cold_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Any]]:
    """``perfkit serve`` with an empty cache; yields the address and its log's path."""
    folder = tmp_path_factory.mktemp("serve-cold")
    log = folder / "serve.log"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PERFKIT_CACHE_DIR", str(folder / "cache"))
        proc, served = start_served(log)
    try:
        yield served, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_printed_address_shows_the_step_time_and_no_leftover_progress(
        cold_server: tuple[Served, Any]) -> None:
    served, log = cold_server
    text = log.read_text()
    printed = text.index(f"at {served.url} (Ctrl-C to stop)")
    # what it waited for, then the address: the page was rendered before it was printed
    assert text.index("perfkit: preparing the page: a kernel runs dashboard.ipynb") < printed
    assert text.index("perfkit: the kernel has started") < printed
    assert text.index("perfkit: the page is ready (") < printed
    assert "still being prepared" not in text and "could not follow" not in text
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(served.url, timeout=WAIT_MS)
            page.wait_for_function(STEP_TIME_SHOWN, timeout=WAIT_MS)
            assert page.locator(BARS).count() == 0
            assert page.locator(".pk-open-progress").count() == 1  # the dashboard's box,
            assert page.locator(".pk-open-progress > *").count() == 0  # empty once open
            assert "perfkit: lo" not in page.inner_text("body")
            # a sample opened afresh from the picker: its bar is gone once it is open
            name = "simulated/llama2-13b-tuned-dp8-pp2"
            page.locator(".widget-dropdown", has_text="bundled sample").locator(
                "select").select_option(label=name)
            page.wait_for_selector(f"text=Opened {name}", timeout=WAIT_MS)
            page.wait_for_function(STEP_TIME_SHOWN, timeout=WAIT_MS)
            assert page.locator(BARS).count() == 0
            assert page_errors(page, errors) == []
        finally:
            browser.close()
