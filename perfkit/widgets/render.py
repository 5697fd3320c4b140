"""Charts as live widgets, offline: Vega-Lite drawn in the browser without any CDN.

:func:`chart_widget` wraps an Altair chart in ``altair.JupyterChart`` (an anywidget) after
:func:`enable_offline`, which makes every JupyterChart carry its JavaScript (Vega, Vega-Lite
and vega-embed, bundled by vl-convert from the copies inside the ``vl-convert-python``
wheel) instead of importing it from a CDN. The browser then draws the chart with tooltips,
zoom and pan, and a click on a mark updates ``widget.selections`` in Python, which the
dashboard observes to filter the table next to the chart. Jupyter, JupyterLab and Voila
load the anywidget front end from the ``anywidget`` package's lab extension (installed with
it), so nothing leaves the machine.

The bundle (about 900 kB) goes to the page once per kernel, not once per chart: a hidden
widget (:class:`ChartCode`) carries it and imports it in the browser, and each chart's own
JavaScript is a few lines that wait for that import (:func:`chart_widget`). Carried by
every chart, it was sent and evaluated anew for each one drawn, about 65 ms of the
browser's time each, and each copy stayed in the page's memory (2.5 MiB of JavaScript
heap per chart drawn, measured in Chromium), since a module imported is never freed.

A static page (``perfkit report``, nbconvert) cannot run widgets: it keeps inline SVG
(:func:`perfkit.charts.svg`).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import anywidget
import ipywidgets as W
import traitlets

from ..charts import SELECTION, chart_to_svg
from ..errors import InvalidArgumentError
from ..io.cache.store import cache_enabled, cache_root

__all__ = ["enable_offline", "chart_widget", "static_chart", "selected_values", "spinner_html",
           "close_widgets", "widget_ids", "CHART_CLASS", "ChartCode", "chart_code"]

#: CSS class of every chart widget (the browser tests find charts by it).
CHART_CLASS = "pk-chart"

_LOCK = threading.Lock()

#: Where the browser keeps the imports of the charts' code, one per bundle (by its hash):
#: ``{promise, resolve, started}``, made by whichever comes first, a chart or the carrier.
_SLOT_JS = """
function perfkitChartSlot(key) {
  const all = (globalThis.__perfkitChartCode ??= {});
  if (!all[key]) {
    let resolve;
    const promise = new Promise((r) => { resolve = r; });
    all[key] = { promise, resolve, started: false };
  }
  return all[key];
}
"""

#: The carrier's JavaScript: imports the bundle it carries, once per page.
_CARRIER_ESM = _SLOT_JS + """
export default {
  initialize({ model }) {
    const slot = perfkitChartSlot(model.get("key"));
    if (slot.started) return;
    slot.started = true;
    const url = URL.createObjectURL(new Blob([model.get("source")], { type: "text/javascript" }));
    slot.resolve(import(url).finally(() => URL.revokeObjectURL(url)));
  },
  render() {},
};
"""

#: A chart's JavaScript: draws with the bundle's ``render`` once the carrier imported it.
_CHART_ESM = _SLOT_JS + """
const KEY = %s;
export default {
  async render(context) {
    const code = await perfkitChartSlot(KEY).promise;
    return code.default.render(context);
  },
};
"""


class ChartCode(anywidget.AnyWidget):
    """The JavaScript of every chart (:attr:`source`, the offline bundle), sent to the page
    once and imported there once; never displayed. :func:`chart_code` gives this kernel's.
    """

    _esm = _CARRIER_ESM
    #: the bundle's hash: the charts wait for the import of this bundle
    key = traitlets.Unicode().tag(sync=True)
    source = traitlets.Unicode().tag(sync=True)


_CODE: ChartCode | None = None


def chart_code() -> ChartCode | None:
    """This kernel's :class:`ChartCode` (made at the first call, and again should it have
    been closed); None while ``altair.JupyterChart`` is not offline (:func:`enable_offline`
    failed to bundle: each chart then carries its own JavaScript)."""
    global _CODE
    source = getattr(alt.JupyterChart, "_esm", None)
    if not getattr(alt.JupyterChart, "_is_offline", False) or not isinstance(source, str):
        return None
    with _LOCK:
        if _CODE is None or _CODE.comm is None or _CODE.source != source:
            key = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
            _CODE = ChartCode(key=key, source=source)
        return _CODE


def _bundle_path() -> Path:
    """Where the bundled JavaScript is kept between kernels (perfkit's cache folder), named
    after the Altair and vl-convert versions that made it."""
    import vl_convert

    name = f"jupyterchart-altair{alt.__version__}-vlconvert{vl_convert.__version__}.js"
    return cache_root() / "js" / name


def enable_offline() -> None:
    """Make every ``altair.JupyterChart`` carry its JavaScript (no CDN); idempotent.

    Bundling Vega with vl-convert takes about a second; the bundle is kept in perfkit's
    cache folder (``$PERFKIT_CACHE_DIR/js``, unless ``PERFKIT_CACHE=0``), so a new kernel
    reads it instead. ``perfkit serve``'s preheated kernel pays this before the first
    visitor.
    """
    with _LOCK:
        cls = alt.JupyterChart
        if getattr(cls, "_is_offline", False):
            return
        path = _bundle_path() if cache_enabled() else None
        if path is not None and path.is_file() and hasattr(cls, "_esm"):
            cls._esm = path.read_text(encoding="utf-8")
            cls._is_offline = True
            return
        cls.enable_offline()
        if path is None or not isinstance(getattr(cls, "_esm", None), str):
            return
        try:  # written whole, then renamed: a reader never sees half a bundle
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(cls._esm, encoding="utf-8")
            os.replace(tmp, path)
        except OSError:  # a read-only cache folder: bundle again next time
            pass


def selected_values(selection: Any, field: str) -> list[Any]:
    """The values of ``field`` in a JupyterChart point selection (empty when cleared)."""
    points = getattr(selection, "value", None) or []
    return [p[field] for p in points if isinstance(p, dict) and field in p]


def chart_widget(chart: alt.TopLevelMixin,
                 on_select: Callable[[list[dict[str, Any]]], None] | None = None,
                 renderer: str = "svg") -> alt.JupyterChart:
    """An interactive, offline chart widget.

    Parameters
    ----------
    chart : altair chart
        From :mod:`perfkit.charts` (built with ``select=True`` for a clickable chart).
    on_select : callable, optional
        Called with the selected points (a list of dicts such as ``[{"rank": 3}]``, empty
        when the selection is cleared) each time the selection :data:`perfkit.charts.
        SELECTION` changes in the browser.
    renderer : {"svg", "canvas"}
        Vega's renderer: SVG (marks are elements of the page, crisp when printed) or
        canvas (faster to zoom through thousands of marks: the timeline, see
        docs/timeline.md).

    Returns
    -------
    altair.JupyterChart
        With class :data:`CHART_CLASS`; its ``selections`` trait carries the selection.
    """
    enable_offline()
    if renderer not in ("svg", "canvas"):
        raise InvalidArgumentError("renderer", "must be 'svg' or 'canvas'", renderer)
    # The class goes in the state the widget opens with, not in an update sent after it:
    # anywidget's front end (0.11) drops every message the kernel sends a model whose
    # JavaScript took over 2 s to start (``AbortSignal.timeout(2000)``, which a busy
    # machine can exceed), and the chart must not need one (tests/browser/conftest.py).
    # The bundle comes with the carrier (sent once); the chart's own code waits for it.
    code = chart_code()
    own = {} if code is None else {"_esm": _CHART_ESM % json.dumps(code.key)}
    widget = alt.JupyterChart(chart, embed_options={"actions": False, "renderer": renderer},
                              _dom_classes=(CHART_CLASS,), **own)
    if on_select is not None and SELECTION in widget.selections.trait_names():
        def changed(change: dict[str, Any]) -> None:
            points = getattr(change["new"], "value", None) or []
            on_select([dict(p) for p in points])

        widget.selections.observe(changed, names=[SELECTION])
    return widget


def static_chart(chart: alt.TopLevelMixin) -> W.HTML:
    """The chart as inline SVG in an ``ipywidgets.HTML`` (no interaction)."""
    return W.HTML(f"<div class='{CHART_CLASS}-static'>{chart_to_svg(chart)}</div>")


def spinner_html(text: str) -> str:
    """A small animated spinner and ``text``, shown while a tab computes."""
    return ("<style>@keyframes pk-spin{to{transform:rotate(360deg)}}"
            ".pk-busy{display:flex;align-items:center;gap:8px;color:#555;font-size:13px;"
            "padding:10px 2px}"
            ".pk-busy i{width:16px;height:16px;border:3px solid #ccd;border-top-color:#4c78a8;"
            "border-radius:50%;animation:pk-spin .8s linear infinite;display:inline-block}"
            "</style>"
            f"<div class='pk-busy'><i></i><span>{html.escape(text)}</span></div>")


def widget_ids(widgets: Any) -> set[int]:
    """The ``id`` of ``widgets`` and of all their children (what :func:`close_widgets` is
    to keep when they replace the widgets it closes)."""
    found: set[int] = set()
    for w in list(widgets or ()):
        found.add(id(w))
        found |= widget_ids(getattr(w, "children", None))
    return found


def close_widgets(widgets: Any, keep: set[int] | frozenset[int] = frozenset()) -> None:
    """Close ``widgets`` and their children (their front-end models are freed), except
    those whose ``id`` is in ``keep`` (controls that outlive a redraw)."""
    for w in list(widgets or ()):
        if id(w) in keep:
            continue
        children = getattr(w, "children", None)
        if children:
            close_widgets(children, keep)
        if isinstance(w, W.Widget):
            w.close()
