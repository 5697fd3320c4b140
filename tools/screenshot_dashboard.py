"""Take the README's screenshot of the dashboard (docs/img/dashboard.png).

Starts ``perfkit serve`` on the bundled sample, opens it in headless Chromium (Debian's
``/usr/bin/chromium`` through Playwright, offline) and saves the top of the dashboard
with the overview chart drawn.

Usage::

    python tools/screenshot_dashboard.py [--out docs/img/dashboard.png] [--tab Overview]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "dashboard.png")
    parser.add_argument("--tab", default="Overview", help="tab to show (default Overview)")
    parser.add_argument("--height", type=int, default=860, help="pixels kept from the top")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "PERFKIT_PROFILE"}
    proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "serve", "--port", str(port),
                             "--no-browser", "--no-preheat"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    raise SystemExit("perfkit serve exited") from None
                time.sleep(0.2)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = browser.new_page(viewport={"width": 1200, "height": args.height})
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
                ("http://127.0.0.1", "ws://127.0.0.1")) else r.abort())
            page.goto(f"http://127.0.0.1:{port}/", timeout=300_000)
            page.wait_for_selector(".pk-dashboard .widget-html svg", timeout=300_000)
            if args.tab != "Overview":
                page.locator(".lm-TabBar-tab", has_text=args.tab).first.click()
                page.wait_for_timeout(3000)
            board = page.locator(".pk-dashboard").first
            box = board.bounding_box()
            board.scroll_into_view_if_needed()
            page.evaluate(f"window.scrollTo(0, {box['y'] - 10})")
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out))
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:,.0f} KiB)")


if __name__ == "__main__":
    main()
