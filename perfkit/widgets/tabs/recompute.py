"""The Recompute tab: recompute seen in the profile, the trade-off, an IR check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ipywidgets as W

from ... import analysis as A
from ... import charts as C
from ...errors import PerfkitError, ProfileError
from ...guards import check_step
from ...io.ir import load_ir
from ...tables import over_ranks
from ..markup import describe_error, error, frame_html
from ..overview import IR_DIR, recompute_tradeoff
from .base import Context, JobTab, heading, html_widget, no_job_note, warning_widgets

__all__ = ["RecomputeTab"]


class RecomputeTab(JobTab):
    """Recompute seen in the profile, the job's memory/time trade-off and an IR check."""

    title = "Recompute"
    waits_for = "the operator tables and the job (model, layout)"

    def __init__(self, ctx: Context) -> None:
        default_ir = IR_DIR / "silu_mul.ir"
        wide = {"description_width": "initial"}
        self.ir_path = W.Text(value=str(default_ir) if default_ir.is_file() else "",
                              placeholder="path of a MindSpore IR dump (.ir or .ir.gz)",
                              description="IR dump", style=wide,
                              layout=W.Layout(width="640px"))
        self.patterns = W.Textarea(value="feed_forward\\.mul\nfeed_forward\\.w1\\.activation",
                                   description="select_recompute patterns", style=wide,
                                   layout=W.Layout(width="640px", height="70px"))
        self.check = W.Button(description="Check the IR", button_style="primary")
        self.ir_result = W.VBox()
        self.check.on_click(lambda _button: self.check_ir())
        super().__init__(ctx)
        self.children = (*self.children, heading("Do the select_recompute patterns hit "
                                                 "the operators they should?"),
                         self.ir_path, self.patterns, self.check, self.ir_result)

    def build(self, profile: Any) -> list[W.Widget]:
        evidence = A.recompute_evidence(profile)
        if not evidence.empty and "rank" in evidence.columns:
            spread = over_ranks(evidence, ["recompute"], ["recompute_share"],
                                keep={"forward": "median", "backward": "median",
                                      "ratio": "median"})
            table = frame_html(spread, "Recompute seen in the profile (per rank: forward "
                                       "operators re-run in the backward pass)",
                               headers={"recompute_median_share": "recomputed, median",
                                        "recompute_min_share": "recomputed, min",
                                        "recompute_max_share": "recomputed, max",
                                        "ratio": "forward / backward, median",
                                        "forward": "forward ops, median",
                                        "backward": "backward ops, median"},
                               columns=["recompute", "recompute_median_share",
                                        "recompute_min_share", "recompute_max_share",
                                        "ranks", "forward", "backward", "ratio"])
        else:
            table = frame_html(evidence, "Recompute seen in the profile")
        out = [html_widget(table)]
        job = self.current
        if job is None or job.model is None or job.hardware is None:
            out.append(no_job_note(job, "recompute trade-off", ("model", "hardware"),
                                   self.ctx.open_tab is not None))
            return out
        try:
            tradeoff = recompute_tradeoff(job.model, job.parallel, job.hardware,
                                          activation_model=job.activation_model)
        except PerfkitError as exc:
            out.append(html_widget(error(describe_error(exc, "the recompute trade-off"))))
            return out
        mode = tradeoff[tradeoff["recompute"] == job.parallel.recompute]
        if len(mode) and job.step_time_s:
            guard = check_step(float(mode["step_s"].iloc[0]), job.step_time_s, job,
                               what=f"the estimate for recompute={job.parallel.recompute}")
            out += warning_widgets(guard.warning)
        out.append(self.chart(C.recompute_tradeoff_chart(
            tradeoff, memory_limit_GiB=job.hardware.memory_bytes / 2**30,
            title="Memory against time for each recompute mode")))
        out.append(html_widget(frame_html(
            tradeoff, "Memory against time for the job (perfkit.estimate_step, each mode on "
                      "every layer, per device)",
            headers={"activation_GiB": "activations", "memory_GiB": "static + activations",
                     "compute_s": "compute", "step_s": "step",
                     "tokens_per_s_per_device": "tokens/s per device"})))
        return out

    def check_ir(self) -> None:
        """Run :func:`perfkit.analysis.recompute_check` on the IR path and patterns."""
        patterns = [p.strip() for p in self.patterns.value.splitlines() if p.strip()]
        try:
            path = Path(self.ir_path.value.strip()).expanduser()
            if not path.is_file():
                raise ProfileError(path, "no such IR dump on the machine that runs the "
                                         "dashboard")
            result = A.recompute_check(load_ir(path), patterns)
        except Exception as exc:  # noqa: BLE001 - shown in the page
            self.ir_result.children = (html_widget(error(describe_error(exc, "the IR check"))),)
            return
        self.ir_result.children = (
            html_widget(frame_html(result.patterns, "Patterns and what they matched", wrap=(
                "matched", "note"))),
            html_widget(frame_html(result.diagnosis, "Operators the patterns miss or break",
                                   wrap=("why", "suggestion"))))
