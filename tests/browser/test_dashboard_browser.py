"""The dashboard in a real browser (Debian's Chromium driven by Playwright), offline.

Skipped when Chromium or Playwright is missing; `.ci/run` installs both.
"""

from __future__ import annotations

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
pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Chromium is not installed"),
    pytest.mark.timeout(300),
]
sync_api = pytest.importorskip("playwright.sync_api")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = _free_port()
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    log = log_path.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "serve", "--port", str(port),
                             "--no-browser"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            urllib.request.urlopen(url, timeout=120).close()
            break
        except (urllib.error.URLError, ConnectionError):
            time.sleep(1)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture()
def page(server):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page()
        page.errors, page.external = [], []
        page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: page.errors.append(str(e)))

        def offline(route):
            url = route.request.url
            if url.startswith(server) or url.startswith(server.replace("http", "ws")):
                route.continue_()
            else:  # the page must not need anything from outside this machine
                page.external.append(url)
                route.abort()

        page.route("**/*", offline)
        page.goto(server, timeout=120_000)
        page.wait_for_selector(".widget-html svg", timeout=120_000)
        yield page
        browser.close()


def _chart(page) -> str:
    return page.locator(".widget-html svg").first.inner_html()


def test_loads_offline_with_a_chart_and_no_errors(page):
    assert page.locator(".widget-html svg").count() >= 1
    assert "tokens/s per device" in page.content()
    assert page.external == []
    assert page.errors == []


def test_changing_a_widget_changes_the_chart(page):
    before = _chart(page)
    box = page.get_by_label("micro-batch size")  # doubles the activations in the chart
    box.fill("2")
    box.press("Enter")
    page.wait_for_function("(b) => document.querySelector('.widget-html svg').innerHTML !== b",
                           arg=before, timeout=60_000)
    assert _chart(page) != before


def test_a_bad_value_shows_a_message_and_the_page_keeps_working(page):
    box = page.get_by_label("tensor parallel (tp)")
    box.fill("3")
    box.press("Enter")
    page.wait_for_selector("text=tp: must divide num_attention_heads=40", timeout=60_000)
    box.fill("2")
    box.press("Enter")
    page.wait_for_function("() => !document.body.innerText.includes('must divide')",
                           timeout=60_000)
    assert page.errors == []
