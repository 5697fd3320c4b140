"""The dashboard in a real browser (Debian's Chromium driven by Playwright), offline.

``perfkit serve`` runs in a subprocess on the bundled sample; Chromium is launched headless
with ``--no-sandbox --disable-gpu --disable-background-networking`` and every request that
does not go to the local server is aborted (and recorded), so the page must work with no
network. Screenshots go to ``$PERFKIT_TEST_ARTIFACTS`` (default ``test-artifacts/browser``
in the repository, ignored by git).

Skipped when Chromium or Playwright is missing; `.ci/run` installs both.
"""

from __future__ import annotations

import os
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

LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
WAIT_MS = 120_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = _free_port()
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    log = log_path.open("w")
    env = {k: v for k, v in os.environ.items() if k != "PERFKIT_PROFILE"}
    proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "serve", "--port", str(port),
                             "--no-browser"], stdout=log, stderr=subprocess.STDOUT, env=env)
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
def page(server, request):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
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
        page.goto(server, timeout=WAIT_MS)
        page.wait_for_selector(".pk-dashboard .widget-html svg", timeout=WAIT_MS)
        yield page
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
        browser.close()


def _open_tab(page, title: str):
    page.locator(".lm-TabBar-tab", has_text=title).first.click()
    panel = page.locator(".widget-tab-contents > .widget-box:visible").first
    return panel


def _visible_svg(page) -> str:
    return page.evaluate("""() => {
        const svgs = [...document.querySelectorAll('.widget-html svg')]
            .filter(s => s.getBoundingClientRect().width > 0);
        return svgs.length ? svgs[0].outerHTML : '';
    }""")


def test_loads_offline_with_a_chart_and_no_errors(page):
    assert page.locator(".pk-dashboard .widget-html svg").count() >= 1
    text = page.inner_text("body")
    assert "Where the step time goes" in text
    assert "simulated/llama2-13b-baseline-dp16" in text and "16 rank(s)" in text
    for title in ("Overview", "Operators", "Communication", "Memory", "Recompute",
                  "Planner", "Advice"):
        assert page.locator(".lm-TabBar-tab", has_text=title).count() == 1
    assert page.external == []
    assert page.errors == []


def test_every_tab_draws_without_an_error(page):
    for title, expect in (("Operators", "Device time per operator type"),
                          ("Communication", "Time per collective"),
                          ("Memory", "Memory over time"),
                          ("Recompute", "Memory against time"),
                          ("Planner", "Every way to split it"),
                          ("Advice", "Findings, best first")):
        _open_tab(page, title)
        page.wait_for_selector(f"text={expect}", timeout=WAIT_MS)
        assert "Unexpected error" not in page.inner_text("body"), title
    assert page.external == [] and page.errors == []


def test_changing_a_widget_changes_the_chart(page):
    _open_tab(page, "Operators")
    page.wait_for_selector("text=Device time per operator type", timeout=WAIT_MS)
    before = _visible_svg(page)
    assert before.startswith("<svg")
    page.locator(".widget-dropdown", has_text="group by").locator("select").select_option(
        label="task name")
    page.wait_for_selector("text=Device time per task name", timeout=WAIT_MS)
    page.wait_for_function("""(b) => {
        const s = [...document.querySelectorAll('.widget-html svg')]
            .filter(e => e.getBoundingClientRect().width > 0);
        return s.length && s[0].outerHTML !== b;
    }""", arg=before, timeout=WAIT_MS)
    assert _visible_svg(page) != before
    assert page.errors == []


def test_a_bad_path_shows_the_message_and_the_page_keeps_working(page):
    box = page.get_by_placeholder("/path/to/your/profile (folder or file)")
    box.fill("/no/such/profile")
    box.press("Enter")
    page.wait_for_selector("text=no such file or folder", timeout=WAIT_MS)
    text = page.inner_text("body")
    assert "/no/such/profile" in text and "Traceback" not in text
    assert "Still showing simulated/llama2-13b-baseline-dp16" in text
    # pick another sample: it opens and the overview redraws
    page.locator(".widget-dropdown", has_text="bundled sample").locator("select").select_option(
        label="simulated/slow-rank")
    page.wait_for_selector("text=Opened simulated/slow-rank", timeout=WAIT_MS)
    assert "4 rank(s)" in page.inner_text("body")
    assert page.errors == []


def test_a_bad_job_value_shows_a_message(page):
    # the job panel above the tabs: the job read from the 13B profile has 40 heads
    assert "The job" in page.inner_text("body")
    box = page.get_by_label("tp", exact=True)
    box.fill("3")
    box.press("Enter")
    page.wait_for_selector("text=tp: must divide num_attention_heads=40", timeout=WAIT_MS)
    box.fill("1")
    box.press("Enter")
    page.wait_for_function("() => !document.body.innerText.includes('must divide')",
                           timeout=WAIT_MS)
    assert page.errors == []


def _upload(page, path) -> None:
    """Click the upload button and pick ``path`` in the file chooser it opens."""
    with page.expect_file_chooser(timeout=WAIT_MS) as chooser:
        page.locator(".widget-upload", has_text="Upload .zip").first.click()
    chooser.value.set_files(str(path))


def test_uploading_a_zipped_profile_opens_it(page, tmp_path):
    import zipfile

    folder = ROOT / "data" / "simulated" / "slow-link"
    archive = tmp_path / "slow-link.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, f"slow-link/{path.relative_to(folder).as_posix()}")
    _upload(page, archive)
    page.wait_for_selector("text=Opened slow-link.zip", timeout=WAIT_MS)
    assert "4 rank(s)" in page.inner_text("body")
    # a file that is not a zip: a message, and the uploaded profile stays on show
    bad = tmp_path / "notes.zip"
    bad.write_text("not a zip archive", encoding="utf-8")
    _upload(page, bad)
    page.wait_for_selector("text=Still showing slow-link.zip", timeout=WAIT_MS)
    assert "notes.zip" in page.inner_text("body")
    assert page.errors == []
