"""At 1440 px on a real fp32 CNN export (``ascend/msinsight-pt-level1``, a torch_npu
AlexNet-style net on a 910B): the Advice tab tells mixed precision and none of a
transformer's fused operators, the roofline's tick labels have no long decimals, and no
label of the job panel or the profile picker is cut (the text of each ``widget-label`` fits
its box)."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_samples import PT_LEVEL1, sample

from .conftest import UI, WAIT_MS, chromium_page, start_served

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.shared_samples

TICKS = """() => [...document.querySelectorAll('.pk-tab')]
  .filter(t => t.offsetParent !== null)
  .flatMap(t => [...t.querySelectorAll('.pk-chart svg .role-axis-label text')])
  .map(e => e.textContent)"""
CUT = """() => [...document.querySelectorAll('.widget-label, .widget-button')]
  .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
  .map(e => e.textContent.trim())"""


def test_advice_fits_an_fp32_cnn_and_labels_are_whole(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    proc, served = start_served(tmp_path / "serve.log", str(sample(PT_LEVEL1)))
    try:
        with chromium_page(served.url, width=1440, height=1200, console=False) as page:
            ui = UI(page)
            page.locator("button", has_text="Edit the job").first.click()
            page.wait_for_selector("text=num_attention_heads", timeout=WAIT_MS)
            assert page.evaluate(CUT) == []
            text = ui.show_tab("Advice").inner_text()
            assert "mixed precision" in text
            for fused in ("npu_rms_norm", "npu_swiglu", "npu_fusion_attention"):
                assert fused not in text
            ui.show_tab("Operators")
            ticks = page.evaluate(TICKS)
            assert ticks and not [t for t in ticks if "0.000" in t], ticks
            assert page.evaluate(CUT) == []
            assert "0.0000001" not in ui.text()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
