"""Seconds from Open to the step time on show in the dashboard, progressive and not.

Each run is a fresh process that builds a :class:`perfkit.widgets.Dashboard` (imports and
the empty dashboard are not timed), then times, from the call of ``load_profile`` (what
*Open* does):

- ``first_step_s``: until the Overview holds a step figure (its HTML is read back: the
  step time card, or for a Kineto trace above 256 MiB the host step span that comes
  first);
- ``all_s``: until the whole profile is on show: loaded, the job worked out and the
  Overview redrawn with its final findings (``Dashboard.wait``);

in two modes: ``progressive`` (the default, steps first, the rest in the background) and
``blocking`` (``background_bytes=None``: the way the dashboard opened before, the step
time on show only once everything is done). Each input is measured cold (a fresh
``PERFKIT_CACHE_DIR``: parsed) and warm (the cache the cold run wrote), the modes
interleaved. The load average is printed before each run.

Run::

    python benchmarks/bench_progressive.py                       # ~10 min on 2 cores
    python benchmarks/bench_progressive.py --data /tmp/perfkit-bench --repeat 2

The inputs are ``kineto/`` (a 1.1 GB pair of Kineto traces) and ``ascend/`` (a 0.87 GB
torch_npu rank) under ``--data``, written by ``loaders_generate.py --out DIR`` (needs
``../shared/samples``); ``loaders_generate.py --out DIR --kineto-mb 240 --only kineto``
writes a pair under the preview's 256 MiB, whose device step comes first
(``bench_preview.py`` times the preview alone).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

__all__ = ["main"]

CHILD = r"""
import json, re, sys, time
from perfkit.widgets.dashboard import Dashboard

def html(panel):
    out = []
    def walk(ws):
        for w in ws:
            v = getattr(w, "value", None)
            if isinstance(v, str) and type(w).__name__ == "HTML":
                out.append(v)
            walk(getattr(w, "children", ()) or ())
    walk(panel.body.children)
    return "".join(out)

def figure(text, name):
    m = re.search("<div class='pk-k'>" + name + "</div><div class='pk-v'>([^<]*)<", text)
    return m.group(1) if m else None

path, mode = sys.argv[1], sys.argv[2]
board = Dashboard(background_bytes=None if mode == "blocking" else 64 << 20)
t0 = time.perf_counter()
board.load_profile(path)
page = html(board.panels["Overview"])
first = time.perf_counter() - t0
shown = figure(page, "step time")
if shown in (None, "…"):
    shown = figure(page, "host step span")
    name = "host step span"
else:
    name = "step time"
board.wait()
done = time.perf_counter() - t0
final = figure(html(board.panels["Overview"]), "step time")
print(json.dumps({"first_step_s": first, "first_figure": name, "first_value": shown,
                  "all_s": done, "final_step": final, "error": board.error}))
"""


def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _run(path: Path, mode: str, cache: Path, child: str = CHILD) -> dict[str, Any]:
    """Run ``child`` (a script printing one JSON line) on ``path`` in a fresh process with
    its own cache folder; the JSON it printed last."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PERFKIT_CACHE_DIR": str(cache)}
    env.pop("PERFKIT_CACHE", None)
    done = subprocess.run([sys.executable, "-c", child, str(path), mode], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{mode} on {path} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/tmp/perfkit-bench")
    ap.add_argument("--inputs", default="kineto,ascend")
    ap.add_argument("--repeat", type=int, default=1, help="cold and warm runs per mode")
    ap.add_argument("--results", default=None, help="write the runs as JSON here")
    args = ap.parse_args(argv)
    data = Path(args.data)
    results: dict[str, Any] = {}
    for name in args.inputs.split(","):
        path = data / name
        if not path.exists():
            raise SystemExit(f"{path} is missing: python benchmarks/loaders_generate.py "
                             f"--out {data}")
        print(f"== {name}: {path} ({_size(path) / 1e9:.2f} GB)", flush=True)
        runs: dict[str, list[dict[str, Any]]] = {}
        for _ in range(args.repeat):
            for mode in ("progressive", "blocking"):
                with tempfile.TemporaryDirectory(prefix="perfkit-bench-cache-") as cache:
                    for state in ("cold", "warm"):
                        print(f"   {mode:11s} {state}  ({_load()})", flush=True)
                        r = _run(path, mode, Path(cache))
                        runs.setdefault(f"{mode} {state}", []).append(r)
                        print(f"      first {r['first_figure']} {r['first_value']} after "
                              f"{r['first_step_s']:.2f} s; all on show after "
                              f"{r['all_s']:.2f} s (step time {r['final_step']})",
                              flush=True)
        print(f"-- {name}: medians (s)      first step figure   all on show")
        for key, rs in runs.items():
            print(f"   {key:20s} {statistics.median(r['first_step_s'] for r in rs):12.2f}"
                  f" {statistics.median(r['all_s'] for r in rs):13.2f}")
        results[name] = runs
    print(_load())
    if args.results:
        Path(args.results).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
