"""What a profile measured: the step time, the framework allocator's peak memory, and
whether its step trains (runs a backward pass)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .._text_dtype import TEXT
from ..analysis._frames import is_lazy
from ..analysis._shared import shared_factorize
from ..analysis._util import table
from ..analysis.backward_pass import BACKWARD_PATTERN, MIN_OPERATORS
from ..analysis.memory import framework_component, memory_peaks
from ..analysis.recorded import recorded_steps_text, recorded_tasks
from ..analysis.steps import (
    has_wait,
    inferred_steps,
    measured_step_s,
    step_breakdown,
    step_owner,
)
from ..errors import PerfkitError
from ..format import counted
from .fields import FieldValue
from .recorded_steps import none_recorded, over_recorded, recorded_steps_table

__all__ = ["read_step_time", "read_memory", "read_training_step", "TRAINING_STEP",
           "BACKWARD_PATTERN", "MIN_OPERATORS"]

#: Where :func:`read_training_step` puts what it read (in :attr:`perfkit.Job.observed`).
TRAINING_STEP = "training_step"


def read_step_time(profile: Any, put: Any) -> None:
    """Put ``step_time_s``: the median over steps of the slowest rank's step time (of the
    rank, on a profile of one: :func:`~perfkit.analysis.steps.step_owner`), the
    device's wait before the step's first task included (:func:`measured_step_s`); the
    evidence says where the steps were inferred (:func:`~perfkit.analysis.steps.
    inferred_steps`, as :func:`~perfkit.analysis.steps.step_basis` says it)."""
    try:
        steps = step_breakdown(profile)
        step = measured_step_s(steps)
    except PerfkitError as exc:
        steps, step = pd.DataFrame(), math.nan
        why = str(exc)
    else:
        why = "; ".join(steps.attrs.get("notes", [])) or "no step with a duration"
    if math.isfinite(step) and step > 0:
        src = ", ".join(sorted({str(s) for s in steps.get("source", []) if pd.notna(s)}))
        known = steps.dropna(subset=["step_us"])["step"].nunique() \
            if "step_us" in steps.columns else 0
        over = f"median over {known} step{'s' if known != 1 else ''}" if known else \
            "the one span without step numbers (no ProfilerStep marks in the profile)"
        wait = ", with the wait before its first device task" if has_wait(steps) else ""
        inferred = inferred_steps(steps)
        put("step_time_s", step, f"{over} of {step_owner(steps)} step time{wait} ({src} step "
                                 "figures)" + (f"; {inferred}" if inferred else ""))
    else:
        put("step_time_s", None, f"no measured step: {why}")


def read_memory(profile: Any, put: Any) -> None:
    """Put ``peak_memory_bytes``: the framework allocator's peak on the most loaded rank."""
    try:
        peaks = memory_peaks(profile)
        comp = framework_component(profile)
    except PerfkitError as exc:
        put("peak_memory_bytes", None, f"memory could not be read: {exc}")
        return
    if peaks.empty or comp is None:
        put("peak_memory_bytes", None, "no framework allocator samples (profile_memory off, "
                                       "or the source records none)")
        return
    fw = peaks[peaks["component"] == comp].dropna(subset=["peak_allocated_bytes"])
    if fw.empty:
        put("peak_memory_bytes", None, f"component {comp} has no allocated samples")
        return
    row = fw.loc[fw["peak_allocated_bytes"].idxmax()]
    put("peak_memory_bytes", float(row["peak_allocated_bytes"]),
        f"peak allocated of the framework allocator ({comp}), rank {row['rank']} "
        "(the most loaded)")


def read_training_step(profile: Any, out: dict[str, Any]) -> None:
    """Put :data:`TRAINING_STEP`: whether the profiled step runs a backward pass.

    The memory theory and the planner count a training step (forward and backward:
    6 FLOPs per parameter and token, optimizer states, kept activations); MFU and HFU of
    a step that is not one count its forward pass (:mod:`perfkit.calc.inference`). A PyTorch trace
    whose host operators (``aten::...``, at least 50) include none of autograd's backward
    operators (:data:`BACKWARD_PATTERN`) is an inference or evaluation step: False, with
    the count; True where some are. Nothing is put where the profile has no PyTorch
    operators to tell (an Ascend export without host operators, MindSpore's graph mode)
    or is a lazy cluster.

    Where the ``steps`` table marks steps whose device tasks were not recorded in full
    (:mod:`~perfkit.job.recorded_steps`), a backward operator in any step still says True
    (it ran), but "no backward operator" is read over the other steps only: a fragment of
    a training step may stop before its backward pass. The evidence says over which steps;
    where no step was recorded in full and none of the operators is a backward one, the
    value is None (unknown) with the reason.
    """
    if is_lazy(profile):
        return
    ops = table(profile, "ops")
    if ops.empty or "name" not in ops.columns:
        return
    n_aten, n_backward = _operator_counts(ops)
    if n_aten < MIN_OPERATORS:
        return
    if n_backward:
        found = counted(n_backward, "backward operator")
        out[TRAINING_STEP] = FieldValue(True, "profile", f"{found} among the host operators")
        return
    marks = recorded_steps_table(profile)
    if marks is not None:
        if none_recorded(marks):
            out[TRAINING_STEP] = FieldValue(
                None, "profile", "no backward operator among the host operators, but no "
                                 "step's device tasks were recorded in full (device tasks "
                                 f"recorded for {recorded_steps_text(marks)}), and a "
                                 "fragment of a training step may stop before its backward "
                                 "pass: whether the step trains is unknown")
            return
        n_aten = _operator_counts(recorded_tasks(ops, marks)[0])[0]
        if n_aten < MIN_OPERATORS:
            return
    out[TRAINING_STEP] = FieldValue(
        False, "profile", f"no backward operator (autograd, *Backward) among its "
                          f"{counted(n_aten, 'PyTorch operator')}{over_recorded(marks)}, so "
                          "it is an inference or evaluation step")


def _operator_counts(ops: pd.DataFrame) -> tuple[int, int]:
    """The ``aten::`` operators of ``ops`` and its backward operators
    (:data:`BACKWARD_PATTERN`)."""
    # each distinct name once (its codes shared with the other readings of one advise call)
    codes, uniq = shared_factorize(ops["name"].astype(TEXT), use_na_sentinel=False)
    names = pd.Series(uniq, dtype=TEXT)
    counts = np.bincount(codes, minlength=len(names))
    n_aten = int(counts[names.str.startswith("aten::").fillna(False).to_numpy(bool)].sum())
    n_backward = int(counts[names.str.contains(BACKWARD_PATTERN, regex=True)
                            .fillna(False).to_numpy(bool)].sum())
    return n_aten, n_backward
