"""A screenshot of a student's lab app (docs/img/lab-student-app.png).

Makes a one-student pack in a temporary folder, serves it with ``perfkit serve --lab``,
opens it in headless Chromium at 1280 × 900 (Debian's ``/usr/bin/chromium`` through
Playwright; any request leaving the machine is aborted and makes the script fail),
answers the bubble question wrong and then right, the throughput question right, and
saves the view around those questions.

Usage::

    python tools/screenshot_lab.py [--out docs/img/lab-student-app.png] [--seed 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import perfkit as pk

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WAIT_MS = 300_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "lab-student-app.png")
    ap.add_argument("--seed", type=int, default=2)
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="perfkit-lab-shot-") as tmp:
        pack = pk.lab.make(Path(tmp) / "class", students=1, seed=args.seed, workers=1)
        student = pack / "student-1"
        answers = json.loads((pack / "instructor" / "key.json").read_text())[
            "entries"]["student-1"]["answers"]
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if k != "PERFKIT_LAB"}
        proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "serve", "--lab",
                                 str(student), "--port", str(port), "--no-browser"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        url = f"http://127.0.0.1:{port}/"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.3)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                            args=["--no-sandbox", "--disable-gpu",
                                                  "--disable-background-networking"])
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                outside: list[str] = []

                def offline(route: object) -> None:
                    request_url = route.request.url  # type: ignore[attr-defined]
                    if request_url.startswith(url) or request_url.startswith(
                            url.replace("http", "ws")):
                        route.continue_()  # type: ignore[attr-defined]
                    else:
                        outside.append(request_url)
                        route.abort()  # type: ignore[attr-defined]

                page.route("**/*", offline)
                page.goto(url, timeout=WAIT_MS)
                page.wait_for_selector("text=right so far", timeout=WAIT_MS)

                def box(title: str) -> object:
                    return page.locator(".widget-vbox", has=page.locator(
                        f".pk-lab-q:has-text('{title}')")).last

                def answer(title: str, value: str, verdict: str) -> None:
                    b = box(title)
                    b.locator("input[type=text]").fill(value)  # type: ignore[attr-defined]
                    b.locator("button", has_text="Check").click()  # type: ignore[attr-defined]
                    b.locator(f"text={verdict}").wait_for(  # type: ignore[attr-defined]
                        timeout=WAIT_MS)

                typed = float(f"{answers['throughput']['answer']:.4g}")  # 4 digits, as typed
                answer("Throughput of your job", f"{typed:g}", "Right.")
                answer("MFU of your job", f"{answers['mfu']['answer'] * 1.4:.3g}", "Not yet.")
                box("Throughput of your job").scroll_into_view_if_needed()  # type: ignore
                page.evaluate("document.getElementById('rendered_cells').scrollBy(0, -150)")
                time.sleep(0.5)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.out))
                browser.close()
            if outside:
                raise SystemExit(f"the page asked for outside resources: {outside}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
