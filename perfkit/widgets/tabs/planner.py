"""The Planner tab: the job's figures and a search over its layouts."""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from ... import charts as C
from ...plan import search
from ..markup import describe_error, error, frame_html
from ..metrics import summary_html
from ..render import chart_widget, close_widgets, spinner_html
from ..summary import job_summary
from .base import Context, JobTab, heading, html_widget, no_job_note

__all__ = ["PlannerTab"]


class PlannerTab(JobTab):
    """The job's figures and a search over every way to split it."""

    title = "Planner"

    def __init__(self, ctx: Context) -> None:
        wide = {"description_width": "initial"}
        self.devices = W.BoundedIntText(value=16, min=1, max=1 << 20, description="devices",
                                        style=wide, layout=W.Layout(width="170px"))
        self.batch = W.BoundedIntText(value=1024, min=1, max=1 << 24,
                                      description="global batch (sequences)", style=wide,
                                      layout=W.Layout(width="270px"))
        self.run = W.Button(description="Search strategies", button_style="primary")
        self.result = W.VBox()
        self.run.on_click(lambda _button: self.search())
        super().__init__(ctx)
        self.children = (
            heading("The job's figures (from The job panel above; edit it there)"),
            *self.children,
            heading("Every way to split it (perfkit.plan.search on the job's model and "
                    "device; devices and batch start from the job)"),
            W.HBox([self.devices, self.batch, self.run]), self.result)

    def show(self, profile: Any) -> None:
        """Set the profile and start the search from the job's devices and batch."""
        super().show(profile)
        close_widgets(self.result.children)
        self.result.children = ()

    def build(self, profile: Any) -> list[W.Widget]:
        job = self.current
        if job is not None:
            if job.world_size:
                self.devices.value = int(job.world_size)
            if job.global_batch_size:
                self.batch.value = int(job.global_batch_size)
        if job is None or job.missing():
            return [no_job_note(job, "figures")]
        return [html_widget(summary_html(job_summary(job)))]

    def search(self) -> None:
        """Rank every layout of the job with :func:`perfkit.plan.search`."""
        job = self.current
        close_widgets(self.result.children)
        if job is None or job.model is None or job.hardware is None:
            self.result.children = (no_job_note(job, "strategy search"),)
            return
        self.result.children = (html_widget(spinner_html("Searching …")),)
        try:
            ranked = search(job.model, job.hardware, self.devices.value, self.batch.value,
                            include_rejected=True)
        except Exception as exc:  # noqa: BLE001 - shown in the page
            self.result.children = (html_widget(error(describe_error(exc, "the strategy "
                                                                          "search"))),)
            return
        fits = ranked[ranked["fits"]]
        columns = [c for c in ("rank", "dp", "tp", "pp", "vpp", "micro_batch_size",
                               "num_micro_batches", "recompute", "step_s",
                               "tokens_per_second_per_device", "mfu", "memory_bytes")
                   if c in ranked.columns]
        chart = chart_widget(C.strategy_chart(ranked, title=f"{len(ranked):,} candidates, "
                                                            f"{len(fits):,} fit (scroll to "
                                                            "zoom)"))
        self.result.children = (
            chart,
            html_widget(frame_html(fits, "Fastest that fit", columns=columns, max_rows=10,
                                   headers={"step_s": "estimated step", "memory_bytes":
                                      "memory per device", "tokens_per_second_per_device":
                                      "tokens/s per device", "micro_batch_size":
                                      "micro-batch", "num_micro_batches": "micro-batches"})))
