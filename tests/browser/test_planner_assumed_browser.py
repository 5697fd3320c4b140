"""The Planner's "What the model assumes" panel as a user sees it, at 1280 × 800 and
1440 × 900: on the simulated 16-rank data-parallel Llama 2 13B, picking the DDP preset
(gradient reduction overlapped with the backward) changes the predicted step the tab
shows, and fusing the layers' element-wise kernels (torch.compile) shortens it.
Screenshots of the panel at both sizes are kept in the test artifacts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfkit.widgets import bundled_profile

from .conftest import ARTIFACTS, UI, WAIT_MS, chromium_page, page_errors, start_served

pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.slow, pytest.mark.browser]

PREDICTED = re.compile(r"Predicted ([\d.,]+ \S+) \(band")


def _predicted(tab) -> str:
    found = PREDICTED.search(tab.inner_text())
    assert found, "no predicted step on the Planner tab"
    return found.group(1)


def _seconds(text: str) -> float:
    value, unit = text.split()[0].replace(",", ""), text.split()[1]
    return float(value) * {"s": 1.0, "ms": 1e-3, "µs": 1e-6}[unit]


def test_the_assumptions_panel_changes_the_predicted_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = bundled_profile("simulated/llama2-13b-baseline-dp16")
    proc, served = start_served(tmp_path / "serve.log", str(folder))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        with chromium_page(served.url, width=1280, height=800, console=False) as page:
            tab = UI(page).show_tab("Planner")
            panel = tab.locator(".pk-assumed")
            panel.wait_for(timeout=WAIT_MS)
            assert "What the model assumes" in panel.inner_text()
            assert "tp-cp-ep-dp-pp" in panel.inner_text()
            before = _predicted(tab)
            panel.locator(".widget-dropdown", has_text="framework preset").locator(
                "select").select_option("ddp")
            page.wait_for_function(
                """(before) => {
                  const m = document.querySelector('.pk-tab:not([hidden]) .pk-assumed');
                  const tab = m && m.closest('.pk-tab');
                  const t = tab ? tab.innerText : '';
                  const f = t.match(/Predicted ([\\d.,]+ \\S+) \\(band/);
                  return f && f[1] !== before && t.includes("Starting from the 'ddp'");
                }""", arg=before, timeout=WAIT_MS)
            after = _predicted(tab)
            assert after != before
            # the layers' element-wise kernels fused (torch.compile): fewer bytes, faster
            panel.locator(".widget-dropdown", has_text="element-wise").locator(
                "select").select_option("compiled")
            page.wait_for_function(
                """(after) => {
                  const m = document.querySelector('.pk-tab:not([hidden]) .pk-assumed');
                  const tab = m && m.closest('.pk-tab');
                  const f = (tab ? tab.innerText : '').match(/Predicted ([\\d.,]+ \\S+) \\(band/);
                  return f && f[1] !== after;
                }""", arg=after, timeout=WAIT_MS)
            fused = _predicted(tab)
            assert _seconds(fused) < _seconds(after), (fused, after)
            # a node no preset describes, typed in: 16 devices put the 16 data-parallel
            # ranks in one node, so their gradient reduction stays on the node's link
            typed = panel.locator(".widget-inline-hbox", has_text="devices per node").locator(
                "input")
            typed.fill("16")
            typed.press("Enter")
            page.wait_for_function(
                """(fused) => {
                  const m = document.querySelector('.pk-tab:not([hidden]) .pk-assumed');
                  const tab = m && m.closest('.pk-tab');
                  const t = tab ? tab.innerText : '';
                  const f = t.match(/Predicted ([\\d.,]+ \\S+) \\(band/);
                  return f && f[1] !== fused && t.includes('16 of 16 dp ranks share a node');
                }""", arg=fused, timeout=WAIT_MS)
            assert _seconds(_predicted(tab)) < _seconds(fused)
            assert "atlas-800t-a2, edited" in panel.inner_text()
            shots = {}
            for width, height in ((1280, 800), (1440, 900)):
                page.set_viewport_size({"width": width, "height": height})
                panel.scroll_into_view_if_needed()
                box = panel.bounding_box()
                assert box is not None and box["width"] <= width  # nothing past the edge
                path = ARTIFACTS / f"planner_assumed_{width}x{height}.png"
                page.screenshot(path=str(path))
                shots[width] = path
            assert all(p.stat().st_size > 0 for p in shots.values())
            assert page_errors(page) == []
    finally:
        proc.terminate()
        proc.wait(timeout=30)
