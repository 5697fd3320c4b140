"""The timeline chart as an interactive, offline JupyterChart in a real browser.

A two-cell notebook (``alt.JupyterChart.enable_offline()`` then a JupyterChart of
``timeline_chart(timeline(sample))``) is served by ``perfkit.cli.serve`` (Voila with
perfkit's CDN-free template) on 127.0.0.1 and opened in
Debian's Chromium (Playwright) with every request off the machine aborted: the chart must
draw, show a tooltip on hover, and zoom on the mouse wheel, with no console error and
nothing fetched from outside. The dashboard's own tab is tested with the dashboard.

Skipped when Chromium, Playwright or Voila is missing.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("PERFKIT_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "browser"
pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Chromium is not installed"),
    pytest.mark.timeout(300),
    pytest.mark.browser,
    pytest.mark.slow,
]
sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("voila")
pytest.importorskip("anywidget")

LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
WAIT_MS = 120_000

CELLS = [
    "import altair as alt\nimport perfkit as pk\nfrom perfkit.charts import timeline_chart\n"
    "alt.JupyterChart.enable_offline()",
    "frame = pk.analysis.timeline(pk.load('sample:slow-rank', progress=False))\n"
    "alt.JupyterChart(timeline_chart(frame, width=900), embed_options={'renderer': 'canvas'})",
]


def _notebook(path: Path) -> None:
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "execution_count": None,
                     "outputs": [], "source": src} for src in CELLS],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                      "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb), encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("timeline-nb")
    _notebook(folder / "timeline.ipynb")
    port = _free_port()
    log = (folder / "voila.log").open("w")
    # perfkit's own server: Voila with its CDN-free template
    token = secrets.token_hex(8)
    code = ("from perfkit.cli import serve; "
            f"serve(notebook={str(folder / 'timeline.ipynb')!r}, port={port}, "
            f"open_browser=False, preheat=False, token={token!r})")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=folder, stdout=log,
                            stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            urllib.request.urlopen(f"{url}?token={token}", timeout=120).close()
            break
        except (urllib.error.URLError, ConnectionError):
            time.sleep(1)
    try:
        yield url, token
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_timeline_jupyterchart_draws_tooltips_and_zooms_offline(server):
    server, token = server
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        external: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))

        def offline(route):
            url = route.request.url
            if url.startswith(server) or url.startswith(server.replace("http", "ws")):
                route.continue_()
            else:
                external.append(url)
                route.abort()

        page.route("**/*", offline)
        page.goto(f"{server}?token={token}", timeout=WAIT_MS)
        # canvas: the renderer docs/timeline.md recommends (zoom 3x faster than SVG at 5k)
        chart = page.wait_for_selector(".vega-embed canvas", timeout=WAIT_MS)
        box = chart.bounding_box()
        assert box["width"] > 600 and box["height"] > 60
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        before = chart.screenshot(path=str(ARTIFACTS / "timeline_jupyterchart.png"))
        # hover the first lane (rank 2 · stream 2: a dense row of kernels) -> tooltip
        x, y = box["x"] + box["width"] * 0.45, box["y"] + 38
        page.mouse.move(x, y)
        page.mouse.move(x + 2, y)
        tip = page.wait_for_selector("#vg-tooltip-element.visible", timeout=10_000)
        text = tip.inner_text()
        assert "event" in text and "duration" in text and "lane" in text
        # zoom in on x: the drawing changes
        for _ in range(5):
            page.mouse.wheel(0, -240)
        page.mouse.move(box["x"] + 5, box["y"] + box["height"] + 40)  # tooltip away
        page.wait_for_timeout(500)
        after = chart.screenshot(path=str(ARTIFACTS / "timeline_jupyterchart_zoomed.png"))
        assert after != before
        browser.close()
    assert external == []
    assert errors == []
