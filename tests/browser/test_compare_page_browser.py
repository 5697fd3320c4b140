"""``perfkit compare --html``'s page as a reader sees it: headless Chromium, offline.

Debian's Chromium through Playwright (``executable_path=/usr/bin/chromium``); every request
that leaves the file is aborted and recorded, so a page that needs the network fails. The
verdict and the step times read in the page are checked against the JSON answer of the
same comparison, written by the same command.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from perfkit.cli import parser

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def test_compare_page_reads_offline_at_1280_and_1440(tmp_path: Path, capsys) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("no Chromium at /usr/bin/chromium")
    a, b = "sample:llama2-13b-baseline-dp16", "sample:llama2-13b-tuned-dp8-pp2"
    page_file = tmp_path / "compare.html"
    assert parser.main(["compare", a, b, "--json", "--html", str(page_file)]) == 0
    answer = json.loads(capsys.readouterr().out)
    external: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        try:
            for width in (1280, 1440):
                page = browser.new_page(viewport={"width": width, "height": 900})
                page.route("**/*", lambda route: (
                    route.continue_() if route.request.url.startswith("file:")
                    else (external.append(route.request.url), route.abort())))
                page.goto(page_file.as_uri())
                text = page.inner_text("body")
                page.screenshot(path=str(tmp_path / f"compare-{width}.png"), full_page=True)
                # nothing wider than the window: no cut table or label
                overflow = page.evaluate("document.documentElement.scrollWidth")
                assert overflow <= width, (width, overflow)
                page.close()
        finally:
            browser.close()
    assert not external, external
    assert answer["verdict"]["word"] == "faster"
    assert "faster" in text.lower()
    change = f"{abs(answer['verdict']['change_pct']):.3g}"
    assert change in text, (change, text[:500])
