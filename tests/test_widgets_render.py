"""Charts as live widgets, offline: the JavaScript travels with the widget, never from a CDN."""

from __future__ import annotations

import re

import altair as alt
import pandas as pd
import pytest

from perfkit import charts as C
from perfkit.widgets import render

URL = re.compile(r"""(?:import|from)\s*\(?\s*["'](https?:)?//""")


@pytest.fixture()
def fresh(monkeypatch, tmp_path):
    """A cache folder of its own and JupyterChart back to its online default."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PERFKIT_CACHE", raising=False)
    monkeypatch.setattr(alt.JupyterChart, "_is_offline", False)
    monkeypatch.setattr(alt.JupyterChart, "_esm", alt.JupyterChart._esm)
    return tmp_path


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_chart_javascript_is_bundled_and_kept_between_kernels(fresh, monkeypatch) -> None:
    render.enable_offline()
    esm = alt.JupyterChart._esm
    assert alt.JupyterChart._is_offline
    assert len(esm) > 100_000  # Vega, Vega-Lite and vega-embed themselves
    assert not URL.search(esm), URL.search(esm).group(0)  # nothing imported from a server
    for cdn in ("cdn.jsdelivr.net", "unpkg.com", "esm.sh"):
        assert f"https://{cdn}" not in esm
    (kept,) = (fresh / "js").glob("jupyterchart-*.js")
    assert kept.read_text(encoding="utf-8") == esm
    # a new kernel reads the kept bundle instead of bundling again
    monkeypatch.setattr(alt.JupyterChart, "_is_offline", False)
    monkeypatch.setattr(alt.JupyterChart, "_esm", "")

    def no_bundling(*_a, **_k):
        raise AssertionError("bundled again")

    monkeypatch.setattr(alt.JupyterChart, "enable_offline", classmethod(no_bundling))
    render.enable_offline()
    assert alt.JupyterChart._esm == esm and alt.JupyterChart._is_offline


def test_a_click_in_the_browser_reaches_the_callback() -> None:
    frame = pd.DataFrame({"rank": [0, 0, 1, 1], "step": [1, 2, 1, 2],
                          "computing_us": [1.0, 2.0, 3.0, 4.0],
                          "comm_not_overlapped_us": [1.0] * 4, "free_us": [0.5] * 4})
    seen = []
    widget = render.chart_widget(C.step_breakdown_chart(frame, select=True), seen.append)
    assert render.CHART_CLASS in widget._dom_classes
    assert widget.embed_options["renderer"] == "svg" and widget.embed_options["actions"] \
        is False
    # what the front end sends when rank 1 is clicked, then when the click is cleared
    widget._vl_selections = {C.SELECTION: {"value": {"vlPoint": {"or": [{"rank": 1}]}},
                                           "store": []}}
    widget._vl_selections = {C.SELECTION: {"value": None, "store": []}}
    assert seen == [[{"rank": 1}], []]
    assert render.selected_values(widget.selections.pick, "rank") == []


def test_a_chart_widget_needs_no_message_after_it_opens(monkeypatch) -> None:
    """Everything the chart shows travels in the message that opens it: anywidget 0.11's
    front end drops the kernel's later messages to a chart whose JavaScript took over 2 s
    to start (its ``AbortSignal.timeout(2000)``), so a class added by an update would be
    lost on a busy machine (the browser tests then found no ``pk-chart`` in the tab)."""
    # recorded at the widget's level, not its comm's: ipywidgets 8.0 (the lower bound)
    # opens comms through ipykernel, 8.1 and later through the comm package
    from ipywidgets import Widget

    sent: list[tuple[str, dict]] = []
    real_open, real_send = Widget.open, Widget.send_state

    def open_(self):  # the state the opening message carries (Widget.open's get_state)
        if self._model_name == "AnyModel":
            sent.append(("comm_open", {"state": self.get_state()}))
        return real_open(self)

    def send_state(self, key=None):  # every update the kernel sends after the opening
        if self._model_name == "AnyModel" and self.comm is not None and key != set():
            sent.append(("comm_msg", {"key": key}))  # (before its comm opens, none is sent)
        return real_send(self, key=key)

    monkeypatch.setattr(Widget, "open", open_)
    monkeypatch.setattr(Widget, "send_state", send_state)
    frame = pd.DataFrame({"component": ["weights"], "GiB": [1.0], "device_GiB": [64.0]})
    render.chart_widget(C.memory_chart(frame), renderer="canvas")
    opened = [data["state"] for kind, data in sent if kind == "comm_open"
              and data["state"].get("_model_name") == "AnyModel"
              and "spec" in data["state"]]  # not the carrier of the charts' code
    assert len(opened) == 1
    assert render.CHART_CLASS in opened[0]["_dom_classes"]
    assert opened[0]["embed_options"] == {"actions": False, "renderer": "canvas"}
    assert opened[0]["spec"]["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
    updates = [data for kind, data in sent if kind == "comm_msg"]
    assert updates == []


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_bundle_goes_to_the_page_once_not_with_every_chart(fresh) -> None:
    """Each chart's own JavaScript is a few lines that wait for the bundle, which one
    widget of the kernel carries (a chart carrying it was 900 kB sent and evaluated again
    in the browser for every chart drawn)."""
    frame = pd.DataFrame({"component": ["weights"], "GiB": [1.0], "device_GiB": [64.0]})
    first = render.chart_widget(C.memory_chart(frame))
    second = render.chart_widget(C.memory_chart(frame), renderer="canvas")
    code = render.chart_code()
    assert code is not None and code is render.chart_code() and code.comm is not None
    assert code.source == alt.JupyterChart._esm and len(code.source) > 100_000
    assert not URL.search(code.source)
    for chart in (first, second):
        assert len(chart._esm) < 2_000 and not URL.search(chart._esm)
        assert f'const KEY = "{code.key}";' in chart._esm
    # the carrier closed (every widget of the kernel closed at once): the next chart
    # comes with a new one
    code.close()
    render.chart_widget(C.memory_chart(frame))
    again = render.chart_code()
    assert again is not code and again.comm is not None and again.key == code.key


def test_a_chart_without_a_selection_takes_no_callback() -> None:
    frame = pd.DataFrame({"component": ["weights"], "GiB": [1.0], "device_GiB": [64.0]})
    widget = render.chart_widget(C.memory_chart(frame), on_select=lambda _p: None)
    assert C.SELECTION not in widget.selections.trait_names()


def test_close_widgets_keeps_what_outlives_a_redraw() -> None:
    import ipywidgets as W

    keep, gone = W.Dropdown(options=["a"]), W.HTML("x")
    box = W.VBox([keep, gone])
    render.close_widgets([box], keep={id(keep)})
    assert keep.comm is not None and gone.comm is None and box.comm is None
