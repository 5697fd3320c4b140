"""The Overview's first answer on a large profile: what is read first.

While a large Kineto profile is read, :func:`perfkit.io.preview.excerpt.first_steps` cuts
a few whole steps from its traces and loads them (about a second for a gigabyte); while a
large Ascend rank is read, its load hands over its tables before its ``trace_view.json``
(:mod:`perfkit.io.preview.tables`); before a large Ascend cluster is read, one rank's
tables are read ahead of it (:mod:`perfkit.io.preview.cluster`), its job with the step
time of every rank. :func:`first_answer` works out what the Overview
shows of them: the step time and the split of those steps, and the throughput and MFU of
the job read from their operator shapes (:func:`perfkit.infer_job`, as the full page does
on the whole profile). Each figure says where it comes from; the whole profile's replace
them as they come.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .. import analysis as A
from ..format import time_text
from ..io.preview.excerpt import FirstSteps, reported_rows
from ..io.preview.tables import TablesFirst
from ..job import infer_job
from .headline import Figure, mfu_figure, step_split, throughput_figure

__all__ = ["FirstAnswer", "first_answer", "TRAINING_ASSUMED"]

#: What the MFU read first from a torch_npu rank's tables adds to its note: until its
#: trace's host operators are read, the step is taken to train (an inference step's MFU
#: counts the forward pass alone, :func:`perfkit.widgets.headline.mfu_figure`); a trace
#: without PyTorch operators to tell leaves it so (:func:`perfkit.job.measured.
#: read_training_step`).
TRAINING_ASSUMED = ("; counted as a training step (forward and backward): the host operators "
                    "of trace_view.json, still being read, may say it is not one")


@dataclass
class FirstAnswer:
    """The first steps' figures (:func:`first_answer`).

    Attributes
    ----------
    first : FirstSteps or TablesFirst
        What was read first: a few steps cut from Kineto traces, or an Ascend rank's
        tables.
    job : perfkit.Job or None
        The job read from them; None where reading it failed.
    breakdown : pandas.DataFrame
        :func:`perfkit.analysis.step_breakdown` of the reported steps.
    """

    first: FirstSteps | TablesFirst
    job: Any
    breakdown: pd.DataFrame

    def split(self) -> pd.DataFrame:
        """The reported steps' split (:func:`perfkit.widgets.headline.step_split`)."""
        return step_split(self.breakdown)

    def step_figure(self) -> Figure:
        """The step time of the steps read (:func:`perfkit.analysis.measured_step_s`: the
        slowest rank's wall, median over the steps), saying where from."""
        step_s = A.measured_step_s(self.breakdown) if len(self.breakdown) else math.nan
        if not math.isfinite(step_s):
            return Figure("step time", "…", "comes with the device tasks, still being read")
        return Figure("step time", time_text(step_s * 1e6),
                      f"{A.steps.step_basis(self.breakdown)}; {self._read_first()}")

    def figures(self) -> list[Figure]:
        """Throughput and MFU of the job read from the steps (at the step time of
        :meth:`step_figure`), each saying where from."""
        step_s = getattr(self.job, "step_time_s", None) or math.nan
        why = "no job: it could not be read from the steps read first"
        where = f"; {self._read_first()}"
        out = []
        for fig in (throughput_figure(self.job, step_s, why), mfu_figure(self.job, why)):
            out.append(Figure(fig.name, fig.text, fig.note + where, fig.warning))
        other_world, stages = self._other_world(), self._one_stage()
        if other_world:
            out = [Figure(f.name, "–", f"not computed from one rank: {other_world}; it "
                          "comes with the whole profile") for f in out]
        elif stages:
            out[1] = Figure("MFU", "–", f"not computed from one rank: {stages}; it comes "
                            "with the whole profile")
        if self._training_assumed() and out[1].text != "–":
            out[1] = dataclasses.replace(out[1], note=out[1].note + TRAINING_ASSUMED)
        return out

    def _other_world(self) -> str:
        """Why the job of one rank of a cluster is not the cluster's, or "": its tables
        see fewer devices than the cluster has ranks (ranks of another job beside it)."""
        if not (isinstance(self.first, TablesFirst) and self.first.of_cluster):
            return ""
        ranks = len(getattr(self.first.steps_of, "profiles", ()))
        world = getattr(self.job, "world_size", None)
        if not world or ranks <= world:
            return ""
        return (f"{self.first.which()} see {world} devices, the profile holds {ranks} "
                "ranks")

    def _one_stage(self) -> str:
        """Why the MFU of one rank of a cluster is not the cluster's, or "": with pipeline
        parallelism the rank holds one stage's layers, so the model read from its
        kernels is not the whole model (:mod:`perfkit.io.preview.cluster`)."""
        if not (isinstance(self.first, TablesFirst) and self.first.of_cluster):
            return ""
        pp = getattr(getattr(self.job, "parallel", None), "pp", 1) or 1
        if pp <= 1:
            return ""
        who = "one rank" if self.first.rank is None else f"rank {self.first.rank}"
        return (f"with pipeline parallelism (pp={pp}) {who} holds one stage's layers, not "
                "the model's")

    def _training_assumed(self) -> bool:
        """Whether the MFU counts a training step only because what was read first cannot
        tell: an Ascend rank's tables without its trace, whose host operators (torch_npu's
        ``aten::`` operators) say whether the step runs a backward pass
        (:meth:`perfkit.Job.training_step`)."""
        return isinstance(self.first, TablesFirst) and self.job is not None and \
            self.job.training_step() is None and self.job.framework == "pytorch"

    def _read_first(self) -> str:
        """Where a card's figure comes from (the split's note says how they were read)."""
        return f"from {self.first.which()}, read first; the whole profile's follows"

    def source(self) -> str:
        """Which steps, and how they were read (one phrase)."""
        return self.first.describe()


def first_answer(first: FirstSteps | TablesFirst) -> FirstAnswer:
    """The figures of ``first`` (module docstring)."""
    steps_of = getattr(first, "steps_of", None)  # one rank of a cluster: the cluster's
    breakdown = reported_rows(A.step_breakdown(
        first.profile if steps_of is None else steps_of), first)
    try:
        job: Any = infer_job(first.profile)
    except Exception:  # noqa: BLE001 - the figures say the job could not be read
        job = None
    step_s = A.measured_step_s(breakdown) if len(breakdown) else math.nan
    if job is not None and math.isfinite(step_s):
        # the job's own step is over every step of the excerpt, the two read only for
        # their neighbours' sake included: the figures are the reported steps'
        job = dataclasses.replace(job, step_time_s=step_s)
    return FirstAnswer(first, job, breakdown)
