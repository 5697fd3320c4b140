"""A profile's closing by pass (part of ``closing="kernels"``): how much of its memory-bound kernel
time the forward pass takes (:func:`_forward_share`), and the closing that gives the
model's forward and backward memory-bound kernels each their measured share
(:func:`_solve_pass_closing`)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..._text_dtype import TEXT
from ...calc.rates import Rates
from ...errors import PerfkitError
from .result import CalibratedJob
from .solve import _computing_s, _solve_split_closing

__all__: list[str] = []  # private parts of perfkit.plan.calibrate


#: Host operators that only autograd's engine runs: a thread carrying them runs the backward.
_AUTOGRAD = "autograd::engine"
#: Kernel classes that run on the matrix units (as :data:`.profile._MATRIX_CLASSES`).
_MATRIX_CLASSES = ("matmul", "attention")


def _forward_share(tasks: Any) -> float:
    """The forward pass's share of the profile's memory-bound kernel time.

    PyTorch's autograd engine runs a CUDA backward on a thread of its own: the kernels
    whose launching operator (the kernels' ``op_id``, the operators' ``external_id``)
    ran on a thread that carries ``autograd::engine::evaluate_function`` operators are
    the backward's, those launched from the other threads the forward's (and the
    optimizer's). Over the compute kernels (``type`` kernel, not communication) of the
    steps recorded in full (``tasks``, :func:`~perfkit.analysis.recorded.recorded_profile`)
    that are neither matrix products nor attention by their name or their launching
    operator's (:func:`perfkit.analysis.compare.kernel_class`: cuDNN's attention backward
    launches a ``cudnn::fusion::compute_dot_do_o`` helper, which the operator rows of
    :func:`.profile._matrix_share` count as attention) nor the optimizer's (``adam`` in
    the kernel's or its operator's name, as :func:`.profile._matrix_share` leaves it out):
    ``φ = T_fwd / (T_fwd + T_bwd)``.

    NaN where the profile cannot tell the passes apart: no host operators or launch
    links (an Ascend export, MindSpore), no autograd thread, or a forward or backward
    with no such kernel (a backward run on the forward's own thread).
    """
    from ...analysis.compare import kernel_class

    try:
        kernels, ops = tasks.kernels, tasks.ops
    except (PerfkitError, OSError, ValueError, AttributeError):
        return math.nan
    if kernels is None or ops is None or not len(kernels) or not len(ops) or hasattr(
            kernels, "compute") or not {"op_id", "name"} <= set(kernels.columns) \
            or not {"external_id", "thread", "name"} <= set(ops.columns):
        return math.nan
    names = ops["name"].astype(TEXT).fillna("")
    backward_threads = set(ops.loc[names.str.contains(_AUTOGRAD, regex=False), "thread"]
                           .dropna().tolist())
    if not backward_threads:
        return math.nan
    thread_of = ops.dropna(subset=["external_id"]).drop_duplicates("external_id") \
        .set_index("external_id")["thread"]
    k = kernels
    if "type" in k.columns:
        k = k[k["type"].astype(TEXT) == "kernel"]
    if "category" in k.columns:
        k = k[k["category"].astype(TEXT) != "communication"]
    kname = k["name"].astype(TEXT).fillna("")
    oname = k["op_name"].astype(TEXT).fillna("") if "op_name" in k.columns \
        else pd.Series("", index=k.index, dtype=TEXT)
    optimizer = kname.str.contains("adam", case=False) | oname.str.contains("adam", case=False)
    matrix = kernel_class(kname).isin(_MATRIX_CLASSES) \
        | kernel_class(oname).isin(_MATRIX_CLASSES)
    vector = ~optimizer & ~matrix
    thread = k["op_id"].map(thread_of)
    known = vector & thread.notna()
    backward = known & thread.isin(backward_threads)
    forward = known & ~backward
    time = k["dur_us"].astype(float).fillna(0.0)
    fwd, bwd = float(time[forward].sum()), float(time[backward].sum())
    if not fwd > 0 or not bwd > 0:
        return math.nan
    return fwd / (fwd + bwd)


def _backward_vector_s(job: CalibratedJob, rates: Rates) -> float:
    """Seconds the model's backward memory-bound kernels take of its computing time:
    halving ``backward_elementwise_efficiency`` adds their time once (as
    :func:`.solve._vector_s` for all of them)."""
    e_b = rates.backward_vector_efficiency
    return _computing_s(job, rates.replace(backward_elementwise_efficiency=e_b / 2)) \
        - _computing_s(job, rates.replace(backward_elementwise_efficiency=e_b))


def _solve_pass_closing(job: CalibratedJob, rates: Rates, computing: float,
                        matrix_share: float, forward_share: float
                        ) -> tuple[Rates, dict[str, float]]:
    """A profile's closing by kernel kind and pass: the matrix kernels to their measured
    share, the memory-bound kernels of each pass to theirs.

    1. :func:`.solve._solve_split_closing`: ``k_g`` on the GEMM efficiency gives the
       model's matrix kernels ``s·(C − O)``, one efficiency ``e`` on the memory-bound
       kernels the rest ``R = C − O − M``;
    2. with ``V_b`` the model's backward memory-bound time at ``e``
       (:func:`_backward_vector_s`) and ``V_f = R − V_b`` the forward's, and ``φ`` the
       profile's forward share of its memory-bound kernel time (:func:`_forward_share`):
       ``e_f = e·V_f/(φ·R)`` (``elementwise_efficiency``) and
       ``e_b = e·V_b/((1 − φ)·R)`` (``backward_elementwise_efficiency``), so that the
       forward's take ``φ·R`` and the backward's ``(1 − φ)·R``: the computing time is
       still ``C``.

    Why: a recomputed forward replays forward kernels, and the run's forward runs its
    memory-bound kernels at a different speed against the model than its backward does
    (the H100 Llama: 35.6 % of its 39.4 ms of them in the forward, where the model puts
    more there), so one memory-bound factor mis-times a recompute.

    Returns the closed rates and ``{"matrix": k_g, "matrix_s": M, "matrix_capped": 0/1,
    "forward", "backward", "forward_s", "backward_s", "vector_capped", "model_forward_s",
    "model_backward_s"}``: ``"forward"`` and ``"backward"`` are the factors
    ``e_f/e_before`` and ``e_b/e_before`` on the memory-bound kernels' efficiency before
    closing, ``"forward_s"``/``"backward_s"`` their closed seconds, ``"model_forward_s"`` /
    ``"model_backward_s"`` ``V_f``/``V_b`` and ``"vector_capped"`` whether an efficiency
    had to stop at 1 (the computing time is then above ``C``).
    """
    before = rates.vector_efficiency
    rates, k = _solve_split_closing(job, rates, computing, matrix_share)
    e = rates.vector_efficiency
    rest = k["vector_s"]
    backward = _backward_vector_s(job, rates)
    forward = rest - backward
    e_f = float(e * forward / (forward_share * rest))
    e_b = float(e * backward / ((1.0 - forward_share) * rest))
    capped = bool(k["vector_capped"]) or e_f > 1.0 or e_b > 1.0
    rates = rates.replace(elementwise_efficiency=min(1.0, e_f),
                          backward_elementwise_efficiency=min(1.0, e_b))
    out = {"matrix": k["matrix"], "matrix_s": k["matrix_s"],
           "matrix_capped": k["matrix_capped"], "forward": min(1.0, e_f) / before,
           "backward": min(1.0, e_b) / before, "forward_s": forward * e / min(1.0, e_f),
           "backward_s": backward * e / min(1.0, e_b), "vector_capped": float(capped),
           "model_forward_s": forward, "model_backward_s": backward}
    return rates, out
