"""Charts and tables shown offline: SVG rendered in the Python process, HTML blocks.

Clusters are usually air-gapped, so :func:`chart_to_svg` renders a chart to a
self-contained SVG string with vl-convert (Vega runs inside the Python process): the SVG
can go into an ``ipywidgets.HTML``, a notebook output or a report without any script from
a CDN. :func:`svg` and :class:`HTMLBlock` wrap markup for display as a notebook cell's
result.
"""

from __future__ import annotations

import io

import altair as alt

__all__ = ["chart_to_svg", "SVGChart", "svg", "HTMLBlock"]


def chart_to_svg(chart: alt.TopLevelMixin) -> str:
    """Render an Altair chart to a standalone SVG string, offline (vl-convert).

    Parameters
    ----------
    chart : altair chart
        Any top-level Altair chart.

    Returns
    -------
    str
        ``<svg ...>...</svg>``; it references no external script or font.
    """
    buffer = io.StringIO()
    chart.save(buffer, format="svg")
    return buffer.getvalue()


class SVGChart:
    """A chart rendered to SVG that notebooks display inline (no JavaScript, no CDN).

    Attributes
    ----------
    svg : str
        The ``<svg>`` markup from :func:`chart_to_svg`.
    """

    def __init__(self, svg: str) -> None:
        self.svg = svg

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        return f'<div class="perfkit-chart">{self.svg}</div>'


def svg(chart: alt.TopLevelMixin) -> SVGChart:
    """Render ``chart`` offline for display as a notebook cell's result.

    Parameters
    ----------
    chart : altair chart
        Any top-level Altair chart (e.g. from :func:`step_breakdown_chart`).

    Returns
    -------
    SVGChart
        Shown as inline SVG by Jupyter, Voila and ``nbconvert``.
    """
    return SVGChart(chart_to_svg(chart))


class HTMLBlock:
    """Markup that notebooks display as HTML (e.g. :func:`findings_table`).

    Attributes
    ----------
    html : str
    """

    def __init__(self, markup: str) -> None:
        self.html = markup

    def _repr_html_(self) -> str:
        return self.html
