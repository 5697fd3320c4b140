"""One control, one result: small explorers the communication and cluster notebooks use.

Each explorer redraws an analysis of :mod:`perfkit.analysis` when its control changes and
shows a :class:`~perfkit.errors.PerfkitError` as a message instead of raising.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as W

from .. import analysis as A
from .. import charts as C
from ..format import share_text
from ..specs import Hardware, ParallelConfig
from .markup import STYLE as _STYLE
from .markup import describe_error, frame_html, note
from .markup import error as _error
from .tabs.communication import has_peers, peers_note

__all__ = ["Explorer", "bandwidth_explorer", "slow_ranks_explorer"]


class Explorer(W.VBox):
    """A control and the HTML it produces.

    Attributes
    ----------
    control : ipywidgets.ValueWidget
        Setting its ``value`` redraws ``output``.
    output : ipywidgets.HTML
        The table or inline SVG chart, or the error message.
    """

    def __init__(self, control: W.ValueWidget, render: Callable[[Any], str]) -> None:
        self.control = control
        self.output = W.HTML()
        self._render = render
        super().__init__([control, self.output])
        control.observe(lambda _change: self.refresh(), names="value")
        self.refresh()

    def refresh(self) -> None:
        """Redraw from the control's value."""
        try:
            self.output.value = self._render(self.control.value)
        except Exception as exc:  # noqa: BLE001 - shown in the panel
            self.output.value = _error(describe_error(exc, "this analysis"))


def bandwidth_explorer(profile: Any, hardware: str = "ascend-910b") -> Explorer:
    """Achieved bandwidth per transport against the nominal links of a device preset.

    Parameters
    ----------
    profile : Profile or Cluster
        With communication tables.
    hardware : str
        The preset selected first (:meth:`Hardware.presets`).

    Returns
    -------
    Explorer
        A dropdown of presets and the table of
        :func:`perfkit.analysis.comm_bandwidth_summary` for the chosen one.
    """
    control = W.Dropdown(options=Hardware.presets(), value=hardware,
                         description="device preset", style={"description_width": "100px"})

    def render(name: str) -> str:
        table = A.comm_bandwidth_summary(profile, Hardware.preset(name))
        return _STYLE + frame_html(table, f"Bandwidth against the nominal links of {name}")

    return Explorer(control, render)


def slow_ranks_explorer(profile: Any, parallel: ParallelConfig | None = None,
                        min_excess: float = 0.05) -> Explorer:
    """The slow-rank chart with a slider over the minimum excess a slow rank must show.

    Parameters
    ----------
    profile : Cluster
        A multi-rank profile.
    parallel : ParallelConfig, optional
        Passed to :func:`perfkit.analysis.slow_ranks` (groups ranks by stage).
    min_excess : float
        The slider's starting value (share above the peers' median).

    Returns
    -------
    Explorer
        A slider and :func:`perfkit.charts.slow_ranks_chart` of
        :func:`perfkit.analysis.slow_ranks` with that ``min_excess``.
    """
    control = W.FloatSlider(value=min_excess, min=0.0, max=0.5, step=0.01,
                            description="min excess", continuous_update=False,
                            readout_format=".0%")

    def render(value: float) -> str:
        ranks = A.slow_ranks(profile, parallel=parallel, min_excess=value)
        slow = sorted(ranks.loc[ranks["slow"].fillna(False).astype(bool), "rank"].unique())
        peers = peers_note(ranks)
        chart = C.chart_to_svg(C.slow_ranks_chart(ranks, title="Excess over the peers")) \
            if has_peers(ranks) else ""
        return (_STYLE + f"<p><b>Slow at {share_text(value, 0)}:</b> "
                f"{', '.join(f'rank {r}' for r in slow) or 'none'}</p>" + chart
                + (note(peers) if peers else ""))

    return Explorer(control, render)
