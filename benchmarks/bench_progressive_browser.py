"""Seconds from *Open* to each answer in headless Chromium, on the served dashboard.

``perfkit serve`` (as users start it: preheated kernel, random token) runs with a fresh
``PERFKIT_CACHE_DIR`` and the perfkit on ``PYTHONPATH`` (this tree when it is unset), in a
temporary folder (``python -m`` would put the working folder, a tree, first on
``sys.path``; the script prints which ``perfkit/__init__.py`` that environment imports, and
the ``PYTHONPATH`` and folder of serve and its kernels, so that a run "from another tree"
can be checked); Chromium (``/usr/bin/chromium`` through Playwright, offline) opens the
page and waits for the bundled sample's Overview; then, for each input, the path is typed
in the *or a path* box and *Open* clicked. A recorder in the page (:data:`RECORDER`: a
``MutationObserver`` that checks at the next frame, so each time is that of the frame that
paints the change, not of a poll from Python) notes, from the press on *Open*, when the new
profile's Overview first shows:

- ``first``: the step figure read first (the step time card, or the host step span a
  Kineto trace above 256 MiB gives first; its note says "read first", or, once the files
  are read and the job is being worked out, "the whole profile is read"), a value;
- ``step time``: the step time card itself (the device's step) with a value (not "…":
  on a Kineto trace above 256 MiB the host step span shows first, the step time card
  "…" beside it until a step's device tasks are read); printed with its text;
- ``split``: a step split bar (``.pk-split-bar``: computing, exposed communication, free),
  of any kind; which one is printed: ``excerpt`` (a few whole steps cut from a large
  Kineto trace, the note "The split above is that of steps ..."), ``read first`` (the
  steps read first carry it: Ascend), ``whole steps`` (the whole profile's steps, while
  the job is worked out) or ``whole`` (the full page). The Overview's waiting page draws
  the bar only where it has a split; else it says "The split (...) comes with the device
  tasks", with no bar (``OverviewTab.waiting``);
- ``throughput``: the throughput card's final answer: a value, or "–" with its reason
  (anything but "…", which means "still being worked out"); printed with its text;
- ``all``: the status line says "Opened" (the whole profile read, the job worked out; the
  Overview then redraws with its findings);

the split and throughput only once the new profile's page is on show (its step figure read
first, or "Opened"): until then the previous profile's page, with its own split and
throughput, stays. Each input once cold (the cache is empty: parsed) and once warm (the
same path again). With ``--shots DIR``, a screenshot of the page as the split first shows
(cold runs) goes to ``DIR/split-<input>.png``; taking it costs the browser some time, so
time with and without it apart.

Run::

    python benchmarks/bench_progressive_browser.py --data /tmp/perfkit-bench
    PYTHONPATH=/path/to/other/tree python benchmarks/bench_progressive_browser.py ...
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

#: The page has settled after an opening: the tab on show holds no figure read first, no
#: progress bar and no advisor at work (the final page, as a plain open draws it). An
#: answer read first may come before the whole page (the throughput of an Ascend rank's
#: tables), and the next opening must not be timed while this one's page still draws.
SETTLED = """() => {
  const tab = [...document.querySelectorAll('.pk-tab')].find(t => t.offsetParent !== null);
  if (!tab) return false;
  const text = tab.innerText;
  return !['read first', 'still working', 'Waiting for', 'being worked out'].some(
    w => text.includes(w));
}"""

#: Installs ``window.__pk``: from the first press on *Open*, the milliseconds
#: (``performance.now()`` less the press's) at which each answer first shows for ``path``
#: (module docstring), checked at the frame after each DOM change and every 100 ms.
RECORDER = """(path) => {
  if (window.__pkObserver) { window.__pkObserver.disconnect(); clearInterval(window.__pkTick); }
  const rec = window.__pk = {path, t0: null, opening: false, fresh: false, first: null,
    stepTime: null, stepTimeText: null, split: null, splitKind: null, throughput: null,
    throughputText: null, all: null};
  document.addEventListener('pointerdown', e => {
    const b = e.target.closest && e.target.closest('button');
    if (rec.t0 === null && b && b.textContent.includes('Open')) rec.t0 = performance.now();
  }, {capture: true});
  // the values of the cards named ``names`` (a Kineto trace above 256 MiB first shows a
  // step time card "…" beside the host step span)
  const cards = (tab, names) => [...tab.querySelectorAll('.pk-card')].map(c => {
    const k = c.querySelector('.pk-k'), v = c.querySelector('.pk-v');
    return k && v && names.includes(k.textContent.trim()) ? v.textContent.trim() : null;
  }).filter(v => v !== null);
  const check = () => {
    if (rec.t0 === null || rec.all !== null && rec.split !== null && rec.throughput !== null
        && rec.stepTime !== null) return;
    const now = performance.now() - rec.t0, body = document.body.textContent;
    if (!rec.opening && body.includes('Opening ' + path)) rec.opening = true;
    if (!rec.opening) return;
    if (rec.all === null && body.includes('Opened ' + path)) rec.all = now;
    const tab = [...document.querySelectorAll('.pk-tab')].find(t => t.offsetParent !== null);
    if (!tab) return;
    const text = tab.innerText;
    const readFirst = text.includes('read first');
    const fresh = readFirst || text.includes('the whole profile is read');
    const valued = cards(tab, ['step time', 'host step span']).some(
      v => !['…', '–', ''].includes(v));
    if (rec.first === null && valued && (fresh || rec.all !== null)) rec.first = now;
    if (rec.first === null && rec.all === null) return;  // the previous profile's page
    if (rec.split === null && tab.querySelector('.pk-split-bar')) {
      rec.split = now;
      rec.splitKind = text.includes('The split above is that of') ? 'excerpt'
        : rec.all !== null ? 'whole' : readFirst ? 'read first' : 'whole steps';
    }
    const st = cards(tab, ['step time'])[0];
    if (rec.stepTime === null && st !== undefined && !['…', '–', ''].includes(st)) {
      rec.stepTime = now;
      rec.stepTimeText = st;
    }
    const tp = cards(tab, ['throughput'])[0];
    if (rec.throughput === null && tp !== undefined && !['…', ''].includes(tp)) {
      rec.throughput = now;
      rec.throughputText = tp;
    }
  };
  let due = false;  // one check a frame, as the change is painted
  window.__pkObserver = new MutationObserver(() => {
    if (!due) { due = true; requestAnimationFrame(() => { due = false; check(); }); }
  });
  window.__pkObserver.observe(document.body, {subtree: true, childList: true,
                                              characterData: true, attributes: true});
  window.__pkTick = setInterval(check, 100);
}"""


def _env(cache: Path) -> dict[str, str]:
    """The served process's environment: ``PYTHONPATH`` as given, else this tree."""
    return {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or str(ROOT),
            "PERFKIT_CACHE_DIR": str(cache)}


def _served_perfkit(env: dict[str, str], cwd: Path) -> str:
    """Which perfkit ``env`` imports in ``cwd`` (the interpreter, environment and folder of
    serve: ``python -m`` puts the working folder first on ``sys.path``, so serve runs
    outside any tree)."""
    return subprocess.run([sys.executable, "-c", "import perfkit; print(perfkit.__file__)"],
                          env=env, cwd=cwd, capture_output=True, text=True, check=True
                          ).stdout.strip()


def _kernel_paths(cache: Path) -> set[str]:
    """The ``PYTHONPATH`` and working folder of each process that runs with ``cache``
    (serve, its kernels)."""
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            env = dict(v.split("=", 1) for v in
                       (proc / "environ").read_bytes().decode(errors="replace").split("\0")
                       if "=" in v)
        except (OSError, ValueError):
            continue
        if env.get("PERFKIT_CACHE_DIR") == str(cache):
            try:
                cwd = os.readlink(proc / "cwd")
            except OSError:
                cwd = "?"
            found.add(f"{env.get('PYTHONPATH', '(unset)')} in {cwd}")
    return found


def _serve(cache: Path, log: Path) -> tuple[subprocess.Popen, str]:
    env, cwd = _env(cache), log.parent
    print(f"# served perfkit: {_served_perfkit(env, cwd)} (PYTHONPATH={env['PYTHONPATH']})",
          flush=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = log.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "serve", "--port",
                             str(port), "--no-browser"], stdout=out, stderr=subprocess.STDOUT,
                            env=env, cwd=cwd)
    out.close()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        m = SERVED.search(log.read_text())
        if m:
            return proc, m.group(1)
        time.sleep(0.3)
    proc.terminate()
    raise SystemExit(f"perfkit serve did not start:\n{log.read_text()}")


def _seconds(ms: float | None) -> str:
    return "–" if ms is None else f"{ms / 1e3:.2f} s"


def _time_one(page, box, path: str, shot: Path | None, limit_s: float = 600) -> dict:
    """Open ``path`` and wait for every answer (or ``limit_s``); the recorder's notes."""
    page.evaluate(RECORDER, path)
    box.fill(path)
    page.locator("button", has_text="Open").first.click()
    if shot is not None:
        page.wait_for_function("() => window.__pk.split !== null", timeout=limit_s * 1e3)
        page.screenshot(path=str(shot), full_page=True)
    page.wait_for_function("() => window.__pk.all !== null", timeout=limit_s * 1e3)
    try:  # the step time, split and throughput come with the full page at the latest
        page.wait_for_function("() => window.__pk.split !== null && "
                               "window.__pk.throughput !== null && "
                               "window.__pk.stepTime !== null", timeout=30_000)
    except Exception:  # noqa: BLE001 - printed as "–"
        pass
    try:  # the page settled: the next opening is not timed while this one still draws
        page.wait_for_function(SETTLED, timeout=60_000)
    except Exception:  # noqa: BLE001 - the next opening is timed anyway
        pass
    return page.evaluate("() => ({...window.__pk})")


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/tmp/perfkit-bench")
    ap.add_argument("--inputs", default="kineto,ascend")
    ap.add_argument("--shots", default=None, help="folder for screenshots (optional)")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="perfkit-bench-") as tmp:
        cache = Path(tmp) / "cache"
        proc, url = _serve(cache, Path(tmp) / "serve.log")
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                            args=["--no-sandbox", "--disable-gpu"])
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(url, timeout=180_000)
                page.wait_for_function(STEP_SHOWN, arg=False, timeout=180_000)
                where = ", ".join(sorted(_kernel_paths(cache)))
                print(f"# serve's and kernels' PYTHONPATH: {where}", flush=True)
                box = page.locator("input[placeholder^='/path/to/your/profile']")
                for name in args.inputs.split(","):
                    path = str(Path(args.data) / name)
                    for state in ("cold", "warm"):
                        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
                        shot = None
                        if args.shots and state == "cold":
                            Path(args.shots).mkdir(parents=True, exist_ok=True)
                            shot = Path(args.shots) / f"split-{name}.png"
                        r = _time_one(page, box, path, shot)
                        print(f"{name:7s} {state}: step figure after {_seconds(r['first'])}, "
                              f"step time after {_seconds(r['stepTime'])} "
                              f"({r['stepTimeText']}), "
                              f"split after {_seconds(r['split'])} ({r['splitKind']}), "
                              f"throughput after {_seconds(r['throughput'])} "
                              f"({r['throughputText']}), whole profile after "
                              f"{_seconds(r['all'])} (load average {load})", flush=True)
                browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
