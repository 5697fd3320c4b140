"""How many timeline events a browser draws smoothly: the measurement behind the event cap.

For each N, the 16-rank bundled sample's step 1 goes through
``perfkit.analysis.timeline(..., ranks=all 16, max_events=N)`` (so the frame has at most N
rows, tiny events merged exactly as the dashboard would merge them) and
``perfkit.charts.timeline_chart``; the Vega-Lite spec is rendered in headless Chromium
(Playwright, Debian's ``/usr/bin/chromium``, no network: the page is one local file with
vl-convert's Vega bundle inline) with vega-embed, in the ``canvas`` renderer (the default
of vega-embed and of Altair's JupyterChart) and in the ``svg`` renderer. Measured per N
and renderer, median of ``--repeat`` fresh pages:

- ``first_paint_ms``: from the call to ``vegaEmbed`` to the second animation frame after
  it resolved (the chart is on screen);
- ``zoom_ms``: one mouse-wheel zoom step on the x axis (Playwright's mouse wheel over the
  chart), from the ``wheel`` event to the end of Vega's re-render (``view.runAsync()``),
  median of 10 steps; ``zoom_frame_ms`` to the next animation frame after that (the
  browser has painted; at least the frame interval, ~16.7 ms);
- and, in Python, ``svg_s``: ``chart_to_svg`` (vl-convert), the static report's path.

Run::

    python benchmarks/bench_timeline_render.py --sizes 1000 2000 5000 10000 20000 \\
        --results benchmarks/results/timeline_render_<date>.json

The figures and the method are in docs/timeline.md. The machine is shared (2 cores), so
figures are medians and should be read as orders of magnitude.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import perfkit as pk
from perfkit.charts import chart_to_svg, timeline_chart

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SAMPLE = "sample:llama2-13b-baseline-dp16"

PAGE = """<!doctype html><html><head><meta charset="utf-8">
<script>{bundle}</script></head><body><div id="vis"></div>
<script>
const SPEC = {spec};
const raf2 = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
window.bench = async (renderer) => {{
  const el = document.getElementById('vis');
  const t0 = performance.now();
  const res = await vegaEmbed(el, SPEC, {{renderer, actions: false}});
  await raf2();
  const paint = performance.now() - t0;
  const view = res.view;
  window.view = view;
  window.zoomTimes = [];
  window.addEventListener('wheel', () => {{
    const w0 = performance.now();
    setTimeout(async () => {{  // after Vega's own listener has run
      await view.runAsync();
      const done = performance.now() - w0;
      await new Promise(r => requestAnimationFrame(r));
      window.zoomTimes.push([done, performance.now() - w0]);
    }}, 0);
  }}, {{capture: true}});
  const box = el.querySelector('canvas, svg').getBoundingClientRect();
  return {{paint, box: [box.left, box.top, box.width, box.height],
           domain: view.scale('x').domain().slice()}};
}};
</script></body></html>"""


def frame_for(profile: Any, n: int) -> Any:
    """The timeline of every rank of step 1, capped at ``n`` rows."""
    return pk.analysis.timeline(profile, step=1, ranks=profile.ranks, max_events=n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 5000, 10000, 20000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--results", type=Path, default=None)
    args = ap.parse_args()

    import vl_convert as vlc
    from playwright.sync_api import sync_playwright

    profile = pk.load(SAMPLE, progress=False)
    bundle = vlc.javascript_bundle()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for n in args.sizes:
            frame = frame_for(profile, n)
            chart = timeline_chart(frame)
            spec = json.dumps(chart.to_dict())
            t = time.perf_counter()
            svg_kb = len(chart_to_svg(chart)) / 1e3
            svg_s = time.perf_counter() - t
            page_file = Path(tmp) / f"timeline_{n}.html"
            page_file.write_text(PAGE.format(bundle=bundle.replace("</script>", "<\\/script>"),
                                             spec=spec), encoding="utf-8")
            for renderer in ("canvas", "svg"):
                paints, zooms, frames, zoomed = [], [], [], True
                for _ in range(args.repeat):
                    page = browser.new_page(viewport={"width": 1280, "height": 900})
                    outside: list[str] = []
                    page.route("**/*", lambda route, outside=outside: (
                        route.continue_() if route.request.url.startswith("file:")
                        else (outside.append(route.request.url), route.abort())))
                    page.goto(page_file.as_uri())
                    out = page.evaluate("r => window.bench(r)", renderer)
                    left, top, w, h = out["box"]
                    page.mouse.move(left + w * 0.6, top + min(h / 2, 60))
                    for k in range(1, 11):
                        page.mouse.wheel(0, -120)
                        page.wait_for_function(f"window.zoomTimes.length >= {k}")
                    times = page.evaluate("window.zoomTimes")
                    after = page.evaluate("view.scale('x').domain()")
                    if outside:
                        raise SystemExit(f"the page asked for outside resources: {outside[:3]}")
                    paints.append(out["paint"])
                    zooms.append(statistics.median(t[0] for t in times))
                    frames.append(statistics.median(t[1] for t in times))
                    zoomed &= (after[1] - after[0]) < (out["domain"][1] - out["domain"][0])
                    page.close()
                row = {"rows": len(frame), "events": int(frame["n_events"].sum()),
                       "renderer": renderer,
                       "first_paint_ms": round(statistics.median(paints), 1),
                       "zoom_ms": round(statistics.median(zooms), 1),
                       "zoom_frame_ms": round(statistics.median(frames), 1),
                       "zoom_changed_domain": bool(zoomed),
                       "svg_s": round(svg_s, 2), "svg_kB": round(svg_kb),
                       "spec_kB": round(len(spec) / 1e3)}
                rows.append(row)
                print(json.dumps(row), flush=True)
        browser.close()
    result = {"benchmark": "timeline render", "sample": SAMPLE, "date": time.strftime("%F"),
              "machine": f"{platform.machine()}, {platform.python_version()}, "
                         f"{shutil.os.cpu_count()} CPUs",
              "chromium": CHROMIUM, "vega": vlc.get_vega_version(),
              "vega_lite": vlc.get_vegalite_versions()[-1], "rows": rows}
    if args.results:
        args.results.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
