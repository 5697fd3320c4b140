"""Visits to ``perfkit serve`` leave no kernel behind (issue 64, point 1).

Each visit of the dashboard gets its own kernel (310-365 MB). Before, none was ever ended:
Voila's unload beacon was refused (no ``_xsrf`` cookie) and idle kernels were not culled,
so one server held 15 idle kernels after 16 visits. Here one server (short idle timeout)
gets ``PERFKIT_KERNEL_VISITS`` visits (default 6; the issue asks for 50: they passed in
590 s on 2 cores, 2026-11-27): closed tabs (their beacon arrives), reloads, and abandoned
pages whose beacon never arrives (blocked: a killed browser, a lost network), which
culling must end.
Checked afterwards, within a bound: the server's kernel processes are back to their idle
level (the preheated kernel), and each visited page's kernel is gone from the server's
``/api/kernels/<id>`` (HTTP 404 with the token).
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from .conftest import CHROMIUM, LAUNCH_ARGS, start_served

sync_api = pytest.importorskip("playwright.sync_api")
psutil = pytest.importorskip("psutil")

#: Visits of the page (the issue's done-when says 50: ``PERFKIT_KERNEL_VISITS=50``).
VISITS = int(os.environ.get("PERFKIT_KERNEL_VISITS", "6"))
#: The server's ``--kernel-idle-timeout`` here: short, so abandoned pages end soon; not
#: shorter, since a page handed its kernel must connect to it within that time (20 s was
#: too short on a 2-core machine shared by many test runs: a page took longer).
IDLE_TIMEOUT_S = 60
#: Longest wait for one page: a visit waits for the kernel that replaces the one the
#: previous visit took to run the dashboard (20-30 s, minutes on a busy 2-core machine).
WAIT_MS = 300_000
#: Longest wait for the kernels to end after the last visit: the idle timeout, a culling
#: round (a fifth of it), and room for a busy machine to stop the kernels.
SETTLE_S = IDLE_TIMEOUT_S + IDLE_TIMEOUT_S / 5 + 60


def kernel_processes(server: Any) -> int:
    """Kernel processes the ``perfkit serve`` process runs (ipykernel launchers)."""
    return sum(1 for child in psutil.Process(server.pid).children(recursive=True)
               if any("ipykernel" in part for part in _cmdline(child)))


def _cmdline(proc: Any) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:  # ended meanwhile
        return []


def kernel_status(base: str, token: str, kernel_id: str) -> int:
    """HTTP status of ``GET /api/kernels/<id>`` with the token: 200 while it runs."""
    url = f"{base}api/kernels/{kernel_id}?token={token}"
    try:
        with urllib.request.urlopen(url, timeout=30) as reply:  # noqa: S310 - our server
            json.load(reply)
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code


def page_kernel(page: Any) -> str:
    """The id of the kernel Voila gave this page (its page config)."""
    return page.evaluate("JSON.parse(document.getElementById('jupyter-config-data')"
                         ".textContent).kernelId")


def wait_for(check: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(1)
    return check()


@pytest.mark.timeout(max(600, 60 * VISITS))  # over tests/browser's 600 s for 50 visits
def test_kernels_of_closed_reloaded_and_abandoned_pages_end(tmp_path: Any) -> None:
    log = tmp_path / "serve.log"
    # the 4-rank sample: each visit's kernel runs the dashboard sooner than on the default
    proc, served = start_served(log, "sample:slow-rank", "--kernel-idle-timeout",
                                str(IDLE_TIMEOUT_S), timeout_s=300)
    try:
        idle = kernel_processes(proc)
        assert idle == 1, idle  # the preheated kernel, ready for the next visitor
        visited: list[str] = []
        unloaded: list[str] = []  # pages left normally: their unload request ends them
        peak = idle
        started = time.monotonic()
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=LAUNCH_ARGS)
            try:
                for i in range(VISITS):
                    print(f"visit {i + 1} at {time.monotonic() - started:.0f} s: "
                          f"{kernel_processes(proc)} kernels", flush=True)
                    page = browser.new_page()
                    if i % 3 == 2:  # abandoned: the unload beacon never reaches the server
                        page.route("**/voila/api/shutdown/**", lambda route: route.abort())
                    page.goto(served.url, timeout=WAIT_MS)
                    page.wait_for_selector(".pk-dashboard", timeout=WAIT_MS)
                    visited.append(page_kernel(page))
                    if i % 3 == 1:  # reloaded: a new kernel, the old page's one ends
                        unloaded.append(visited[-1])
                        page.reload(timeout=WAIT_MS)
                        page.wait_for_selector(".pk-dashboard", timeout=WAIT_MS)
                        visited.append(page_kernel(page))
                    if i % 3 != 2:
                        unloaded.append(visited[-1])
                    # leaving the page, as a closed tab does (Playwright's page.close
                    # drops the page's unload request; a browser's tab close sends it)
                    page.goto("about:blank")
                    page.close()
                    peak = max(peak, kernel_processes(proc))
            except Exception:
                print(log.read_text()[-6000:])  # what the server did meanwhile
                raise
            finally:
                browser.close()
        visits_s = time.monotonic() - started
        assert len(set(visited)) == len(visited)  # a kernel of its own for each page
        ended = time.monotonic()

        def gone() -> bool:  # every visited page's kernel ended, the server at idle
            return all(kernel_status(served.base, served.token, k) == 404
                       for k in visited) and kernel_processes(proc) <= idle

        settled = wait_for(gone, SETTLE_S)
        left = kernel_processes(proc)
        print(f"{VISITS} visits ({len(visited)} pages) in {visits_s:.0f} s: at most {peak} "
              f"kernels meanwhile; {left} left (idle level {idle}) "
              f"{time.monotonic() - ended:.0f} s after the last visit")
        assert settled, ([kernel_status(served.base, served.token, k) for k in visited],
                         left, idle, log.read_text()[-3000:])
        assert kernel_processes(proc) == idle  # the preheated kernel is still there
        # those of pages left normally were ended by their unload request, not culled
        text = log.read_text()
        assert all(f"Kernel shutdown: {k}" in text for k in visited)
        assert [k for k in unloaded if f"({k}) with 0 connections" in text] == []
        # one address printed, perfkit's, with the token; not Voila's masked one
        assert "Voil\u00e0 is running at" not in text
        assert len(re.findall(r"serving \S+ at http://\S+ \(Ctrl-C to stop\)", text)) == 1
        # the kernel that serves the next visitor is still there and works
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=LAUNCH_ARGS)
            try:
                page = browser.new_page()
                page.goto(served.url, timeout=WAIT_MS)
                page.wait_for_selector(".pk-dashboard", timeout=WAIT_MS)
                assert kernel_status(served.base, served.token, page_kernel(page)) == 200
            finally:
                browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
