"""``perfkit serve``: seconds from the address printed to the step time seen in the page.

Issue 32's target: the page ``perfkit serve`` opens shows the bundled sample's step time
≤ 3 s after the URL is printed. Each run, in fresh processes on this machine:

1. headless Chromium is started first (a user's browser is already open);
2. ``perfkit serve --no-browser --port P`` is started (no PATH: the bundled default
   sample), with its own ``PERFKIT_CACHE_DIR`` per tree, kept between runs (the first run
   of a tree parses the sample, the others read the cache, as a user's second start);
3. the moment the line with the address (``http://127.0.0.1:P/?token=…``) appears on its
   output is *printed*; the page then opens that address at once (retrying while the
   port refuses connections, as a browser tab opened by ``serve`` itself would wait);
4. *visible* is the moment the Overview's "step time" card shows a value in the page.

Reported per run: start → printed, printed → visible (the target), start → visible, and
the load average before the run. With ``--before DIR`` another checkout is measured too,
its runs interleaved with this one's.

Run::

    python benchmarks/bench_serve.py --runs 5 [--before /work/main] [--results out.json]

Needs Playwright and /usr/bin/chromium (never a downloaded browser).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHROMIUM = "/usr/bin/chromium"

__all__ = ["main", "measure", "serve_once"]

#: The Overview's step-time card holds a value (not the dash of "no step found").
STEP_TIME_SHOWN = """() => [...document.querySelectorAll('.pk-card')].some(card => {
  const k = card.querySelector('.pk-k'), v = card.querySelector('.pk-v');
  return k && v && k.textContent.trim().toLowerCase() === 'step time'
         && /\\d/.test(v.textContent);
})"""
URL_LINE = re.compile(r"(http://127\.0\.0\.1:(\d+)/\?token=[0-9a-f]+)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port}")


def serve_once(browser: Any, tree: Path, cache: Path, timeout_s: float = 180) -> dict[str, Any]:
    """One ``perfkit serve`` of ``tree`` and one page on it; times in seconds."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "PERFKIT_PROFILE"}
    env |= {"PYTHONPATH": str(tree), "PERFKIT_CACHE_DIR": str(cache)}
    load = os.getloadavg()[0]
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "serve", "--no-browser",
                             "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=tempfile.gettempdir())
    printed: dict[str, Any] = {}
    seen = threading.Event()
    lines: list[str] = []

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            found = URL_LINE.search(line)
            if found and not seen.is_set():
                printed["t"], printed["url"] = time.monotonic(), found.group(1)
                seen.set()

    threading.Thread(target=read, daemon=True).start()
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        if not seen.wait(timeout_s):
            raise TimeoutError("serve printed no address:\n" + "".join(lines[-20:]))
        deadline = printed["t"] + timeout_s
        _wait_listening(port, deadline)
        page.goto(printed["url"], wait_until="commit", timeout=timeout_s * 1000)
        page.wait_for_function(STEP_TIME_SHOWN, timeout=timeout_s * 1000, polling=50)
        visible = time.monotonic()
    finally:
        page.close()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return {"start_to_printed_s": printed["t"] - start,
            "printed_to_visible_s": visible - printed["t"],
            "start_to_visible_s": visible - start, "load_before": load}


def measure(trees: dict[str, Path], runs: int) -> dict[str, Any]:
    """``runs`` rounds of :func:`serve_once` per tree, interleaved; per-run figures and
    medians (over the runs after the first of each tree, whose cache starts empty)."""
    from playwright.sync_api import sync_playwright

    got: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="perfkit-bench-serve-") as tmp, \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu",
                                          "--disable-background-networking"])
        for i in range(runs):
            for name, tree in trees.items():
                r = serve_once(browser, tree, Path(tmp) / name)
                got[name].append(r)
                print(f"{name} run {i + 1}: printed after {r['start_to_printed_s']:.2f} s, "
                      f"step time visible {r['printed_to_visible_s']:.2f} s later "
                      f"({r['start_to_visible_s']:.2f} s from the start; load average "
                      f"{r['load_before']:.2f})", flush=True)
        browser.close()
    res: dict[str, Any] = {"runs": got, "summary": {}}
    for name, rs in got.items():
        warm = rs[1:] or rs  # the first run of a tree parses the sample into its cache
        s = {key: statistics.median(r[key] for r in warm)
             for key in ("start_to_printed_s", "printed_to_visible_s", "start_to_visible_s")}
        s["printed_to_visible_max_s"] = max(r["printed_to_visible_s"] for r in rs)
        res["summary"][name] = s
        print(f"{name}: medians over the warm-cache runs: printed {s['start_to_printed_s']:.2f} "
              f"s after the start, step time {s['printed_to_visible_s']:.2f} s after that "
              f"(max of all runs {s['printed_to_visible_max_s']:.2f} s; target ≤ 3 s)")
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--before", default=None, help="another checkout to measure alongside")
    ap.add_argument("--results", default=None, help="write the raw results as JSON here")
    args = ap.parse_args(argv)
    trees = {"now": ROOT} | ({"before": Path(args.before).resolve()} if args.before else {})
    res = measure(trees, args.runs)
    if args.results:
        Path(args.results).write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
