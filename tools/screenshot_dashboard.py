"""Screenshots of every tab of the dashboard on four kinds of profile (docs/img/).

The kinds: Ascend (the bundled simulated torch_npu Llama2-13B baseline), GPU Kineto (the
H100 test trace), CPU Kineto (the bundled 2-rank gloo DDP run) and MindSpore CPU (the
bundled tiny Llama). For each profile, starts ``perfkit serve`` on this checkout's
``notebooks/dashboard.ipynb`` (no preheat) with the profile in ``PERFKIT_PROFILE``, as
``perfkit serve PATH`` does, opens it in headless Chromium at 1280 × 900 by default
(``--width``, ``--height``: a laptop's 1366 × 768, say) (Debian's
``/usr/bin/chromium`` through Playwright; every request that leaves the machine is
aborted and makes the script fail), and for each tab waits until the tab is drawn (its
charts rendered by Vega in the page) and saves ``docs/img/<profile>-<tab>.png``. The
README shows ``docs/img/dashboard.png``, a copy of the first profile's Overview.

Usage::

    python tools/screenshot_dashboard.py [--out docs/img] [--profiles a b] [--tabs Overview]
        [--width 1280] [--height 900]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from perfkit.widgets import TAB_TITLES

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: One profile of each kind: a bundled sample's name, or a path from the checkout's root.
PROFILES = ("simulated/llama2-13b-baseline-dp16", "tests/data/kineto_llama_h100",
            "kineto-tiny-llama", "mindspore-cpu-tiny-llama")
TABS = TAB_TITLES
WAIT_MS = 180_000

#: True once the visible tab is drawn: the tab carries pk-ready and every chart in it has
#: been rendered by Vega (an svg or a canvas inside its vega-embed).
TAB_READY = """() => {
  const tabs = [...document.querySelectorAll('.pk-tab')].filter(t => t.offsetParent !== null);
  if (tabs.length !== 1 || !tabs[0].classList.contains('pk-ready')) return false;
  const charts = [...tabs[0].querySelectorAll('.pk-chart')];
  return charts.every(c => c.querySelector('svg.marks, canvas.marks'));
}"""


def _slug(text: str) -> str:
    return text.rsplit("/", 1)[-1].lower().replace(" ", "-")


def _serve(profile: str) -> tuple[subprocess.Popen, str, str]:
    """The checkout's dashboard on ``profile``, served on a free port: the process, its
    address, its token."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "PERFKIT_PROFILE"}
    # a path is given as `perfkit serve PATH` gives it; a bundled sample is picked in the
    # page (so the page shows its name, not this machine's path); the checkout's
    # dashboard notebook is served (an editable install may point elsewhere)
    path = ROOT / profile
    where = str(path) if path.exists() else None
    token = secrets.token_hex(16)
    code = ("from perfkit.cli import serve; "
            f"serve({where!r}, notebook={str(ROOT / 'notebooks' / 'dashboard.ipynb')!r}, "
            f"port={port}, open_browser=False, preheat=False, token={token!r})")
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}/", token
        except OSError:
            if proc.poll() is not None:
                raise SystemExit("perfkit serve exited") from None
            time.sleep(0.2)


def show_tab(page, title: str) -> None:
    """Click the tab ``title`` and wait until it is drawn."""
    page.locator(".lm-TabBar-tab", has_text=title).first.click()
    page.wait_for_function(TAB_READY, timeout=WAIT_MS)
    page.wait_for_timeout(400)  # let Vega finish laying out


def _shoot(browser, profile: str, args: argparse.Namespace) -> list[Path]:
    """Serve ``profile``, and save a screenshot of each of ``args.tabs``."""
    proc, url, token = _serve(profile)
    written = []
    try:
        page = browser.new_page(viewport={"width": args.width, "height": args.height})
        outside: list[str] = []

        def offline(route):
            if route.request.url.startswith((url, url.replace("http", "ws"))):
                route.continue_()
            else:
                outside.append(route.request.url)
                route.abort()

        page.route("**/*", offline)
        page.goto(f"{url}?token={token}", timeout=WAIT_MS)
        page.wait_for_selector(".pk-dashboard", timeout=WAIT_MS)
        if not (ROOT / profile).exists() and profile != PROFILES[0]:  # the page's default
            page.locator(".widget-dropdown", has_text="bundled sample").locator(
                "select").select_option(label=profile)
            page.wait_for_selector(f"text=Opened {profile}", timeout=WAIT_MS)
        args.out.mkdir(parents=True, exist_ok=True)
        for title in args.tabs:
            show_tab(page, title)
            path = args.out / f"{_slug(profile)}-{_slug(title)}.png"
            # Voila scrolls inside its own container: grow the window to the page
            tall = page.evaluate("() => Math.max(...[...document.querySelectorAll("
                                 "'*')].map(e => e.scrollHeight))")
            page.set_viewport_size({"width": args.width,
                                    "height": min(max(args.height, tall + 40), 6000)})
            page.wait_for_timeout(300)
            page.screenshot(path=str(path), full_page=True)
            page.set_viewport_size({"width": args.width, "height": args.height})
            written.append(path)
        page.close()
        if outside:
            raise SystemExit(f"the page asked for outside resources: {outside[:3]}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--profiles", nargs="+", default=list(PROFILES))
    parser.add_argument("--tabs", nargs="+", default=list(TABS))
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for profile in args.profiles:
            written += _shoot(browser, profile, args)
        browser.close()
    first = args.out / f"{_slug(args.profiles[0])}-overview.png"
    if first.exists():
        shutil.copyfile(first, args.out / "dashboard.png")
    for path in written:
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} "
              f"({path.stat().st_size / 1024:,.0f} KiB)")


if __name__ == "__main__":
    main()
