"""Time to first chart and time per tab of the dashboard, in Chromium, offline.

Starts ``perfkit serve`` on the bundled sample, then opens the page ``--pages`` times in
headless Chromium (Playwright, Debian's ``/usr/bin/chromium``; every request off the
machine is aborted) and times, for each page, navigation start → the first chart of the
dashboard drawn by Vega in the page (``.pk-chart svg.marks``). On the last page it then
clicks every tab in turn and times the click → the tab drawn (it carries ``pk-ready`` and
all its charts are rendered): what a user waits for on the 16-rank sample.

The first page of a server started with ``--no-preheat`` pays for a kernel start and the
notebook's execution; with preheating (the default of ``perfkit serve``) Voila runs the
notebook in a pooled kernel before anyone asks, so every page, the first included once the
pool is warm, only pays for the transfer and the widget rendering. Also timed: the kernel-
side work alone (``dashboard()`` in this process: load the profile, compute the overview,
draw the chart).

Usage::

    python benchmarks/bench_dashboard.py                 # preheated (perfkit serve's default)
    python benchmarks/bench_dashboard.py --no-preheat    # a kernel started per page
    python benchmarks/bench_dashboard.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SELECTOR = ".pk-dashboard .pk-chart svg.marks"
TABS = ("Timeline", "Operators", "Communication", "Memory", "Recompute", "Planner", "Advice",
        "Overview")
#: True once the visible tab is drawn (see tests/browser/conftest.py).
TAB_READY = """() => {
  const tabs = [...document.querySelectorAll('.pk-tab')].filter(t => t.offsetParent !== null);
  if (tabs.length !== 1 || !tabs[0].classList.contains('pk-ready')) return false;
  const charts = [...tabs[0].querySelectorAll('.pk-chart')];
  return charts.every(c => c.querySelector('svg.marks, canvas.marks'));
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(preheat: bool) -> tuple[subprocess.Popen, str, float]:
    port = _free_port()
    token = secrets.token_hex(16)
    argv = [sys.executable, "-m", "perfkit.cli", "serve", "--port", str(port), "--no-browser",
            "--token", token]
    if not preheat:
        argv.append("--no-preheat")
    env = {k: v for k, v in os.environ.items() if k != "PERFKIT_PROFILE"}
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}/?token={token}"
    while proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.1)
    return proc, url, time.perf_counter() - start


def time_pages(url: str, pages: int, gap: float) -> tuple[list[float], dict[str, float]]:
    """Seconds from navigation to the first dashboard chart, one per fresh page, and on the
    last page the seconds from a click on each tab to the tab drawn.

    ``gap`` seconds pass between pages, so a preheated pool has refilled (a visitor
    takes the ready kernel; Voila then starts the next one and runs the notebook in it).
    """
    from playwright.sync_api import sync_playwright

    times = []
    tabs: dict[str, float] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for _ in range(pages):
            page = browser.new_page()
            external = []

            def offline(route, external=external):
                if route.request.url.startswith(("http://127.0.0.1", "ws://127.0.0.1")):
                    route.continue_()
                else:
                    external.append(route.request.url)
                    route.abort()

            page.route("**/*", offline)
            start = time.perf_counter()
            page.goto(url, timeout=300_000, wait_until="commit")
            page.wait_for_selector(SELECTOR, timeout=300_000)
            times.append(time.perf_counter() - start)
            if external:
                raise SystemExit(f"the page asked for outside resources: {external[:3]}")
            if len(times) == pages:  # the last page: every tab in turn
                page.wait_for_function(TAB_READY, timeout=300_000)
                for title in TABS:
                    start = time.perf_counter()
                    page.locator(".lm-TabBar-tab", has_text=title).first.click()
                    page.wait_for_function(TAB_READY, timeout=300_000)
                    tabs[title] = time.perf_counter() - start
                    page.wait_for_timeout(500)
            page.close()
            if len(times) < pages:
                time.sleep(gap)
        browser.close()
    return times, tabs


def time_in_process(repeat: int = 3) -> list[float]:
    """Seconds for ``dashboard()``: load the sample, compute and draw the overview."""
    os.environ["PERFKIT_CACHE"] = "0"  # measure parsing, not the Parquet cache
    times = []
    for _ in range(repeat):
        code = ("import time; t=time.perf_counter(); from perfkit.widgets import dashboard; "
                "d=dashboard(); assert d.panels['Overview'].charts; "
                "print(time.perf_counter()-t)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env={**os.environ})
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=5, help="pages to open (default 5)")
    parser.add_argument("--no-preheat", action="store_true",
                        help="serve with --no-preheat (a kernel started per page)")
    parser.add_argument("--pool-wait", type=float, default=25.0,
                        help="seconds to let the preheated pool execute the notebook before "
                             "the first page (default 25)")
    parser.add_argument("--gap", type=float, default=15.0,
                        help="seconds between pages, for the pool to refill (default 15; "
                             "0 opens pages back to back)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    preheat = not args.no_preheat
    proc, url, started = _start_server(preheat)
    try:
        if preheat:  # do not fetch the page meanwhile: that would take the ready kernel
            time.sleep(args.pool_wait)
        pages, tabs = time_pages(url, args.pages, args.gap)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    kernel = time_in_process()

    figures = {
        "date": time.strftime("%Y-%m-%d"), "python": platform.python_version(),
        "cpus": os.cpu_count(), "preheat": preheat, "gap_s": args.gap,
        "server_listening_s": started,
        "page_to_first_chart_s": pages, "tab_click_to_drawn_s": tabs,
        "kernel_dashboard_s": kernel, "load_average": os.getloadavg(),
    }
    mode = "preheated kernel (perfkit serve default)" if preheat else "kernel per page"
    print(f"perfkit serve, {mode}, {args.gap:g} s between pages; {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}")
    print(f"  server listening after          {started:6.2f} s")
    print(f"  page → first chart, first page  {pages[0]:6.2f} s")
    if len(pages) > 1:
        rest = pages[1:]
        print(f"  page → first chart, next {len(rest)}      median {statistics.median(rest):6.2f} s"
              f"  (min {min(rest):.2f}, max {max(rest):.2f})")
    for title, seconds in tabs.items():
        print(f"  tab {title:<14} click → drawn   {seconds:6.2f} s")
    print(f"  dashboard() in a fresh process  median {statistics.median(kernel):6.2f} s"
          "  (import, load, overview, chart; cache off)")
    print(f"  load average (1, 5, 15 min)     {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
