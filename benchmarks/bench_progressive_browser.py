"""Seconds from *Open* to the step figure in headless Chromium, on the served dashboard.

``perfkit serve`` (as users start it: preheated kernel, random token) runs with a fresh
``PERFKIT_CACHE_DIR``; Chromium (``/usr/bin/chromium`` through Playwright, offline) opens
the page and waits for the bundled sample's Overview; then, for each input, the path is
typed in the *or a path* box and *Open* clicked, and the script times:

- ``first``: until the Overview shows the step figure read first (the step time card, or
  the host step span a Kineto trace above 256 MiB gives first; its note says "read
  first", or, once the files are read and the job is being worked out, "the whole
  profile is read"), a value;
- ``split``: until the Overview shows the step split (computing, exposed communication,
  free): at once where the steps read first have it (Ascend), else once the files are read;
- ``all``: until the status line says "Opened" (the whole profile read, the job worked out;
  the Overview then redraws with its findings);

once cold (the cache is empty: parsed) and once warm (the same path again). A screenshot of
the page while the rest is read is saved beside ``--shots`` (default: none).

Run::

    python benchmarks/bench_progressive_browser.py --data /tmp/perfkit-bench
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHROMIUM = "/usr/bin/chromium"
SERVED = re.compile(r"serving \S+ at (http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+) ")

__all__ = ["main"]

#: The new profile's step figure is on show: the visible tab shows the steps read first
#: (its step card says "read first"; with ``fresh`` false, any step card) with a value.
STEP_SHOWN = """(fresh) => {
  const tab = [...document.querySelectorAll('.pk-tab')].find(t => t.offsetParent !== null);
  if (!tab || (fresh && !['read first', 'the whole profile is read'].some(
      w => tab.innerText.includes(w)))) return false;
  return [...tab.querySelectorAll('.pk-card')].some(c => {
    const k = c.querySelector('.pk-k'), v = c.querySelector('.pk-v');
    return k && v && ['step time', 'host step span'].includes(k.textContent.trim())
      && !['…', '–', ''].includes(v.textContent.trim());
  });
}"""


#: The Overview shows the step split (computing, exposed communication, free): on a
#: Kineto trace it comes with the device tasks, once the files are read.
SPLIT_SHOWN = """() => {
  const tab = [...document.querySelectorAll('.pk-tab')].find(t => t.offsetParent !== null);
  return !!tab && tab.innerText.includes('Where the step time goes')
    && !tab.innerText.includes('The split (computing, exposed communication, free) comes');
}"""


def _serve(cache: Path, log: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PERFKIT_CACHE_DIR": str(cache)}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = log.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "serve", "--port",
                             str(port), "--no-browser"], stdout=out, stderr=subprocess.STDOUT,
                            env=env)
    out.close()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        m = SERVED.search(log.read_text())
        if m:
            return proc, m.group(1)
        time.sleep(0.3)
    proc.terminate()
    raise SystemExit(f"perfkit serve did not start:\n{log.read_text()}")


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/tmp/perfkit-bench")
    ap.add_argument("--inputs", default="kineto,ascend")
    ap.add_argument("--shots", default=None, help="folder for screenshots (optional)")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="perfkit-bench-") as tmp:
        proc, url = _serve(Path(tmp) / "cache", Path(tmp) / "serve.log")
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                            args=["--no-sandbox", "--disable-gpu"])
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(url, timeout=180_000)
                page.wait_for_function(STEP_SHOWN, arg=False, timeout=180_000)
                box = page.locator("input[placeholder^='/path/to/your/profile']")
                for name in args.inputs.split(","):
                    path = str(Path(args.data) / name)
                    for state in ("cold", "warm"):
                        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
                        box.fill(path)
                        t0 = time.perf_counter()
                        page.locator("button", has_text="Open").first.click()
                        page.wait_for_selector(f"text=Opening {path}", timeout=180_000)
                        page.wait_for_function(STEP_SHOWN, arg=True, timeout=180_000)
                        first = time.perf_counter() - t0
                        if args.shots and state == "cold":
                            Path(args.shots).mkdir(parents=True, exist_ok=True)
                            page.screenshot(path=str(Path(args.shots) / f"opening-{name}.png"),
                                            full_page=True)
                        page.wait_for_function(SPLIT_SHOWN, timeout=600_000)
                        split = time.perf_counter() - t0
                        page.wait_for_selector(f"text=Opened {path}", timeout=600_000)
                        done = time.perf_counter() - t0
                        print(f"{name:7s} {state}: step figure after {first:.2f} s, split "
                              f"after {split:.2f} s, whole profile after {done:.2f} s (load "
                              f"average {load})", flush=True)
                browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
