"""A student's own data, read the way the student reads it: with perfkit.

:class:`StudentData` opens the student's folder (the two simulated profiles, the IR dump
and its configuration) and runs the analyses the questions need, each once, on first use.
The answer key is computed from these readings (:mod:`perfkit.lab.questions`), never from
the simulator's inputs; :func:`perfkit.lab.make` then checks the choices whose truth the
inputs know (the planted fault, the slow rank or link) against them.
"""

from __future__ import annotations

import hashlib
import math
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from .. import analysis as A
from ..analysis.recorded import recorded_profile
from ..io.engines.local import load
from ..io.ir.graph import load_ir
from ..specs import Hardware, ModelSpec
from .evidence import PLANNER_LINK_EFFICIENCY
from .ir import IR_FILE
from .scenario import Setup

__all__ = ["StudentData", "JobFacts", "operator_label", "layout_label"]

#: Faults whose symptoms :meth:`StudentData.job_symptoms` looks for, in words.
SYMPTOMS = ("DataLoadingStall", "UnfusedOperators", "MemoryPressure", "UnbalancedStage",
            "FullRecompute", "NoOverlap")
#: Unfused-operator patterns every simulated job shows (its SiLU and Mul are separate
#: kernels): not a planted problem.
_BASELINE_PATTERNS = frozenset({"silu_mul_not_swiglu"})
#: Recompute checks already made in this process, by (dump digest, configuration).
_IR_CHECKS: dict[tuple[str, str], Any] = {}


def operator_label(row: pd.Series) -> str:
    """``"aclnnMm_w1_MatMulV3 (4096,4096;4096,11008)"``: a kernel and its input shapes."""
    return f"{row['name']} ({row['input_shapes']})"


def layout_label(row: Any) -> str:
    """``"dp 8 · tp 1 · pp 2 · selective recompute"``: a planner row in words."""
    return (f"dp {int(row['dp'])} · tp {int(row['tp'])} · pp {int(row['pp'])} · "
            f"{row['recompute']} recompute")


class JobFacts:
    """What a student is told about their job: model, layout, batch, hardware."""

    def __init__(self, setup: Setup) -> None:
        job = setup.job
        p = job.parallel
        self.model: ModelSpec = job.model
        self.hardware = Hardware.preset(job.hardware)
        self.devices = p.world_size
        self.global_batch_size = p.global_batch_size
        self.seq_length = job.model.seq_length
        self.parallel = p


class StudentData:
    """The readings of one student's folder (lazy, each computed once).

    Parameters
    ----------
    folder : path
        The student's folder (``DIR/student-3``).
    setup : Setup
        What the pack says the folder holds (from key.json, or from the draw).
    """

    def __init__(self, folder: str | Path, setup: Setup) -> None:
        self.folder = Path(folder)
        self.setup = setup
        self.facts = JobFacts(setup)
        self.hardware = self.facts.hardware

    # ---- the profiles ------------------------------------------------------------------
    def _load(self, path: str) -> Any:
        return load(self.folder / path, cache=False, workers=1, progress=False)

    @cached_property
    def job(self) -> Any:
        """The job's profile (:func:`perfkit.load`)."""
        return self._load(self.setup.job.path)

    @cached_property
    def cluster(self) -> Any:
        """The four-rank cluster's profile."""
        return self._load(self.setup.cluster.path)

    # ---- the job -------------------------------------------------------------------------
    @cached_property
    def job_steps(self) -> pd.DataFrame:
        """:func:`perfkit.analysis.step_breakdown` of the job."""
        return A.step_breakdown(self.job)

    @cached_property
    def step_s(self) -> float:
        """The job's measured step (:func:`perfkit.analysis.measured_step_s`), seconds."""
        return A.measured_step_s(self.job_steps)

    @cached_property
    def tokens_per_s_per_device(self) -> float:
        """Global batch × sequence / (step × devices)."""
        f = self.facts
        return f.global_batch_size * f.seq_length / (self.step_s * f.devices)

    @cached_property
    def operators(self) -> pd.DataFrame:
        """:func:`perfkit.analysis.operator_efficiency` of the job per kernel name and input
        shapes (``by="name"``), costliest first, over the steps whose device tasks were
        recorded in full (:func:`~perfkit.analysis.recorded.recorded_profile`: what the
        student's table, :meth:`perfkit.lab.evidence.Evidence.job_operators`, shows)."""
        ops = A.operator_efficiency(recorded_profile(self.job), hardware=self.hardware,
                                    by="name")
        return ops.sort_values("total_us", ascending=False, kind="stable") \
            .reset_index(drop=True)

    @cached_property
    def recompute_evidence(self) -> pd.DataFrame:
        """:func:`perfkit.analysis.recompute_evidence` of the job."""
        return A.recompute_evidence(self.job)

    @cached_property
    def observed_recompute(self) -> str:
        """``"full"`` when the forward attention runs twice per backward, else ``"none"``."""
        ev = self.recompute_evidence
        return "full" if not ev.empty and (ev["recompute"] == "full").all() else "none"

    def job_symptoms(self) -> list[str]:
        """The planted problems whose symptom the job's profile shows (see SYMPTOMS).

        Data-loading stall: :func:`~perfkit.analysis.data_loading` flags a step. Unfused
        operators: :func:`~perfkit.analysis.unfused_patterns` finds a pattern beyond the
        SiLU / Mul pair every simulated job has. Memory pressure: a memory component's
        reserved peak above 90 % of device memory. Unbalanced stage: a stage other than
        the last (which also holds the output head) computes at least 15 % longer than
        every other stage. Full recompute: the forward attention runs twice per backward
        on every rank. No overlap: ranks that communicate hide less than 5 % of it.
        """
        out = []
        job = self.job
        if A.data_loading(job)["stall"].fillna(False).any():
            out.append("DataLoadingStall")
        # over the steps recorded in full, as the advisor and the Operators tab search
        patterns = set(A.unfused_patterns(recorded_profile(job))["pattern"].dropna()
                       .astype(str))
        if patterns - _BASELINE_PATTERNS:
            out.append("UnfusedOperators")
        peaks = A.memory_peaks(job)
        peak = pd.concat([peaks["peak_reserved_bytes"], peaks["peak_allocated_bytes"]]).max()
        if peak == peak and peak > 0.9 * self.hardware.memory_bytes:
            out.append("MemoryPressure")
        if self.facts.parallel.pp > 1:
            steps = self.job_steps
            stage = steps["rank"].astype(int) // (self.facts.devices // self.facts.parallel.pp)
            per_stage = steps.groupby(stage)["computing_us"].max()
            top = int(per_stage.idxmax())
            rest = per_stage.drop(top)
            if top != per_stage.index.max() and per_stage[top] >= 1.15 * rest.max():
                out.append("UnbalancedStage")
        if self.observed_recompute == "full" and self.facts.parallel.recompute != "full":
            out.append("FullRecompute")
        overlap = A.comm_overlap(job)
        talking = overlap[overlap["communication_us"].fillna(0) > 0]
        if self.facts.parallel.dp > 1 and not talking.empty \
                and (talking["overlap_share"].fillna(0) < 0.05).all():
            out.append("NoOverlap")
        return out

    # ---- the cluster ---------------------------------------------------------------------
    @cached_property
    def slow_ranks(self) -> pd.DataFrame:
        """:func:`perfkit.analysis.slow_ranks` of the cluster."""
        return A.slow_ranks(self.cluster)

    @cached_property
    def slow_links(self) -> pd.DataFrame:
        """:func:`perfkit.analysis.slow_links` of the cluster."""
        return A.slow_links(self.cluster)

    @cached_property
    def comm_summary(self) -> pd.DataFrame:
        """:func:`perfkit.analysis.comm_summary` of the cluster (its data-parallel group)."""
        return A.comm_summary(self.cluster)

    def slow_components(self) -> list[str]:
        """``"rank 2"`` for a rank slow in computing, ``"link 1-3"`` for a slow link."""
        out = []
        sr = self.slow_ranks
        flagged = sr[sr["slow"].fillna(False) & (sr["metric"] == "computing_us")]
        out += [f"rank {int(r)}" for r in sorted(set(flagged["rank"]))]
        sl = self.slow_links
        if not sl.empty:
            pairs = {tuple(sorted((int(a), int(b))))
                     for a, b in zip(sl.loc[sl["slow"].fillna(False), "src_rank"],
                                     sl.loc[sl["slow"].fillna(False), "dst_rank"],
                                     strict=True)}
            out += [f"link {a}-{b}" for a, b in sorted(pairs)]
        return out

    @cached_property
    def collective(self) -> pd.Series:
        """The cluster's busiest collective row of :attr:`comm_summary`."""
        cs = self.comm_summary
        return cs.sort_values("total_us", ascending=False).iloc[0]

    # ---- the IR ----------------------------------------------------------------------------
    @cached_property
    def recompute_check(self) -> Any:
        """:func:`perfkit.analysis.recompute_check` of the IR dump and its configuration.

        Students of a class share a few dumps (three bases, three namings): the check of a
        dump whose bytes and configuration were already checked in this process is reused.
        """
        path = self.folder / IR_FILE
        config = self.setup.recompute.config()
        key = (hashlib.sha256(path.read_bytes()).hexdigest(), repr(config))
        if key not in _IR_CHECKS:
            _IR_CHECKS[key] = A.recompute_check(load_ir(path), config)
        return _IR_CHECKS[key]

    # ---- calculators and the planner -----------------------------------------------------
    @cached_property
    def plan(self) -> pd.DataFrame:
        """:func:`perfkit.plan.search` for the student's planning job at the lab's round
        numbers: every matrix product at the student's measured matrix efficiency, every
        link at :data:`~perfkit.lab.evidence.PLANNER_LINK_EFFICIENCY`."""
        from ..plan import search

        job = self.setup.planner
        return search(ModelSpec.preset(job.preset), Hardware.preset(job.hardware),
                      job.num_devices, job.global_batch_size, space=job.space(),
                      efficiency=job.efficiency, comm_efficiency=PLANNER_LINK_EFFICIENCY)


def finite(value: float) -> bool:
    """True for a finite number."""
    return isinstance(value, (int, float)) and math.isfinite(value)
