"""The served dashboard and one headless Chromium page per test module, offline.

``perfkit serve`` runs in a subprocess (preheated kernel, random token, as users get it;
the page opens the address it prints, token included); Debian's
Chromium is driven by Playwright (``executable_path=/usr/bin/chromium``, headless, never a
downloaded browser) with ``--no-sandbox --disable-gpu --disable-background-networking``.
Every request that does not go to the local server is aborted and recorded in
``page.external``; console errors and page errors go to ``page.errors``. Tests assert both
stay empty. One page serves every test of a module (the tests of a module run in order on
one xdist worker, see tests/conftest.py), and one server (``server``) every module on the
default sample, so the suite stays short.

Skipped when Chromium or Playwright is missing; `.ci/run` installs both.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("PERFKIT_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "browser"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
WAIT_MS = 120_000

#: A number in scientific notation, and a microsecond figure with three decimals.
SCI = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[eE][+-]?\d+(?![\w])")
US3 = re.compile(r"(?<![\d,.])[1-9][\d,]*\.\d{3}\s*(?:µs|us)\b|\d,\d{3}\.\d{3}\b")

#: True once the visible tab is drawn: it carries pk-ready (perfkit.widgets.tabs) and each
#: of its charts has been rendered by Vega in the page (an svg inside its vega-embed).
TAB_READY = """() => {
  const tabs = [...document.querySelectorAll('.pk-tab')].filter(t => t.offsetParent !== null);
  if (tabs.length !== 1 || !tabs[0].classList.contains('pk-ready')) return false;
  const charts = [...tabs[0].querySelectorAll('.pk-chart')];
  return charts.every(c => c.querySelector('svg.marks, canvas.marks'));
}"""


#: What anywidget's front end (0.11, its ``Runtime``) reports when a chart's JavaScript has
#: not started within ``AbortSignal.timeout(2000)`` of the chart's model being made, as
#: happens on a busy machine: it rejects the model's ``ready`` promise, unhandled. The chart
#: is drawn anyway once its JavaScript has loaded (the view waits for the module, not for
#: ``ready``); what is lost are the kernel's later messages to that model, which perfkit's
#: charts do not need (tests/test_widgets_render.py). So this one message is not a failure,
#: provided every chart of the page is then drawn: :func:`page_errors` checks that.
ANYWIDGET_LATE = "[anywidget] Failed to initialize model."


def _anywidget_has_limit() -> bool:
    """Whether the installed anywidget front end gives a model's JavaScript 2 s to start
    (``AbortSignal.timeout(2000)`` in its lab extension, which Voila serves too): 0.11 has
    the limit, older releases (0.9, the lower bound CI's oldest job installs) do not."""
    static = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "anywidget" / "static"
    return any("AbortSignal.timeout(2000)" in f.read_text(encoding="utf-8", errors="ignore")
               for f in static.glob("*.js"))


#: Whether a chart that starts late meets :data:`ANYWIDGET_LATE` with this anywidget.
ANYWIDGET_HAS_LIMIT = _anywidget_has_limit()
#: Every chart of the page (class pk-chart, given when its widget opens) drawn by Vega.
CHARTS_DRAWN = """() => {
  const charts = [...document.querySelectorAll('.pk-chart')];
  return charts.length > 0 && charts.every(c => c.querySelector('svg.marks, canvas.marks'));
}"""
#: A page script that makes anywidget's 2 s limit run out at once (every
#: ``AbortSignal.timeout(2000)`` becomes 1 ms): each chart model then meets it, as on a
#: machine too busy to start a chart's JavaScript within 2 s.
ANYWIDGET_LIMIT_AT_ONCE = """(() => {
  const timeout = AbortSignal.timeout.bind(AbortSignal);
  AbortSignal.timeout = ms => timeout(ms === 2000 ? 1 : ms);
})();"""


def page_errors(page: Any, errors: list[str] | None = None) -> list[str]:
    """The page's errors (``page.errors`` unless ``errors`` is given) other than
    :data:`ANYWIDGET_LATE`; if that one occurred, first waits until every chart of the page
    is drawn (and fails if one stays blank): the page must recover from it."""
    errors = page.errors if errors is None else errors
    if ANYWIDGET_LATE in errors:
        page.wait_for_function(CHARTS_DRAWN, timeout=WAIT_MS)
    return [e for e in errors if e != ANYWIDGET_LATE]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every browser test is slow, needs Chromium, and may take a few minutes."""
    missing = not Path(CHROMIUM).exists()
    for item in items:
        if "tests/browser" not in str(item.path).replace(os.sep, "/"):
            continue
        item.add_marker(pytest.mark.browser)
        item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.timeout(600))
        if missing:
            item.add_marker(pytest.mark.skip(reason="Chromium is not installed"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: The address ``perfkit serve`` prints: its own, with the random token it made.
SERVED_URL = re.compile(r"serving \S+ at (http://127\.0\.0\.1:\d+/)\?token=([0-9a-f]+) ")


@dataclass(frozen=True)
class Served:
    """A running ``perfkit serve``: its address, the token it made, the two together."""

    base: str
    token: str

    @property
    def url(self) -> str:
        return f"{self.base}?token={self.token}"

    def owns(self, url: str) -> bool:
        """Whether a request of the page goes to this server (http or its websockets)."""
        return url.startswith((self.base, self.base.replace("http", "ws", 1)))


def start_served(log_path: Path, *args: str, timeout_s: float = 120) -> tuple[Any, Served]:
    """``perfkit serve --port P --no-browser ARGS`` in a subprocess, as a user starts it.

    The token is the random one ``serve`` makes by default, read from the line it prints,
    exactly as a user copies it. Returns the process and the address once it listens.
    """
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "PERFKIT_PROFILE"}
    log = log_path.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "serve", "--port",
                             str(port), "--no-browser", *args], stdout=log,
                            stderr=subprocess.STDOUT, env=env)
    log.close()  # the child keeps its own copy
    deadline = time.monotonic() + timeout_s
    found = None
    while time.monotonic() < deadline and proc.poll() is None:
        found = found or SERVED_URL.search(log_path.read_text())
        if found:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return proc, Served(found.group(1), found.group(2))
            except OSError:
                pass
        time.sleep(0.3)
    proc.terminate()
    proc.wait(timeout=30)
    raise AssertionError(f"perfkit serve did not start:\n{log_path.read_text()}")


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``perfkit serve`` on a free port (preheated kernel, random token), one for the
    session: each module opens its own page, so its own kernel (Voila runs the notebook
    afresh for every page); tests/conftest.py has one worker run every module using it."""
    proc, served = start_served(tmp_path_factory.mktemp("serve") / "serve.log")
    try:
        yield served
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class UI:
    """What the tests do with the page: open tabs, read text, hover and click marks."""

    def __init__(self, page: Any) -> None:
        self.page = page

    def show_tab(self, title: str) -> Any:
        """Click the tab ``title``, wait until it is drawn, and return its panel."""
        self.page.locator(".lm-TabBar-tab", has_text=title).first.click()
        self.page.wait_for_function(TAB_READY, timeout=WAIT_MS)
        return self.tab()

    def tab(self) -> Any:
        return self.page.locator(".pk-tab:visible").first

    def open_sample(self, name: str) -> None:
        """Pick a bundled sample and wait until it is open and the Overview drawn."""
        self.page.locator(".widget-dropdown", has_text="bundled sample").locator(
            "select").select_option(label=name)
        self.page.wait_for_selector(f"text=Opened {name}", timeout=WAIT_MS)
        self.page.wait_for_function(TAB_READY, timeout=WAIT_MS)

    def text(self) -> str:
        return self.page.inner_text("body")

    def check_numbers(self, where: str) -> None:
        """No number in scientific notation, no µs figure with three decimals."""
        text = self.text()
        assert not SCI.search(text), (where, SCI.search(text).group(0))
        assert not US3.search(text), (where, US3.search(text).group(0))

    def marks(self, kind: str = "rect") -> Any:
        """The visible chart marks of the current tab (bars by default)."""
        return self.tab().locator(f".pk-chart svg.marks .mark-{kind} path")

    def picked(self, description: str, within: Any = None) -> str:
        """The option shown by the dropdown labelled ``description`` (spaces normalised:
        ipywidgets writes them as no-break spaces)."""
        scope = within if within is not None else self.page
        text = scope.locator(".widget-dropdown", has_text=description).locator(
            "select option:checked").inner_text()
        return text.replace("\xa0", " ")

    def wait_text(self, text: str) -> None:
        self.page.wait_for_selector(f"text={text}", timeout=WAIT_MS)


@contextlib.contextmanager
def chromium_page(url: str, *, width: int = 1280, height: int = 900,
                  owns: Callable[[str], bool] | None = None, console: bool = True,
                  dashboard: bool = True, anywidget_late: bool = False) -> Iterator[Any]:
    """A headless Chromium page opened at ``url``, closed (with its browser) on leaving.

    ``page.errors`` gathers the page's errors, and its console errors when ``console``;
    when ``owns`` is given, every request it refuses is aborted and recorded in
    ``page.external`` (the page must need nothing from outside this machine). With
    ``dashboard``, waits until the dashboard is there and its visible tab drawn. With
    ``anywidget_late``, every chart meets anywidget's 2 s limit
    (:data:`ANYWIDGET_LIMIT_AT_ONCE`), as on a busy machine.
    """
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": width, "height": height})
        page.errors, page.external = [], []
        if anywidget_late:
            page.add_init_script(ANYWIDGET_LIMIT_AT_ONCE)
        if console:
            page.on("console",
                    lambda m: page.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: page.errors.append(str(e)))
        if owns is not None:
            def offline(route: Any) -> None:
                url = route.request.url
                if owns(url):
                    route.continue_()
                else:
                    page.external.append(url)
                    route.abort()

            page.route("**/*", offline)
        try:
            page.goto(url, timeout=WAIT_MS)
            if dashboard:
                page.wait_for_selector(".pk-dashboard", timeout=WAIT_MS)
                page.wait_for_function(TAB_READY, timeout=WAIT_MS)
            yield page
        finally:
            browser.close()


@pytest.fixture(scope="module")
def page(server: Served, request: pytest.FixtureRequest) -> Iterator[Any]:
    """One Chromium page on the served dashboard for the whole module, offline, opened at
    the address with the token (as printed by ``perfkit serve``)."""
    with chromium_page(server.url, owns=server.owns) as page:
        try:
            yield page
        finally:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            name = Path(str(request.node.path)).stem
            page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def ui(page: Any) -> UI:
    return UI(page)
