"""Fit the step model's rates to a measured run: a profile, a steps table or a step time.

:func:`calibrate` returns a :class:`Calibration` whose :class:`~perfkit.calc.rates.Rates`
make :func:`perfkit.calc.timing.step_times` — the model of :func:`perfkit.plan.predict`
and of :func:`perfkit.plan.search` with ``calibration=`` — reproduce the run, and says
how well (``residual``).

What is fitted, by source
-------------------------
**A Profile or Cluster** (the job read by :func:`perfkit.infer_job`; the ``model``,
``parallel`` and ``hardware`` you pass win over what the profile shows):

* *matrix multiplies*: the size curve ``t = (F + F½)/(e·peak) + B/(e_mem·bw)`` fitted
  by weighted least squares to the profile's own GEMM rows of
  :func:`perfkit.analysis.operator_efficiency` (one row per operator and shape: FLOPs,
  bytes, calls, time) — ``e`` and ``F½``; when the shapes do not vary enough to separate
  them, ``F½`` keeps its default and only ``e`` is fitted;
* *fused attention*: its speed relative to the GEMM curve, from the attention rows;
* *memory-bound kernels*: ``t = (B + B½)/(e_mem·bw)`` fitted to the element-wise, norm
  and reduction rows — ``e_mem`` and ``B½``;
* *the optimizer*: bytes moved per updated parameter, from the ``Adam`` kernels' time;
* *links*: per communication group (tp, dp, pp, ep, cp, from the profile's group
  names), achieved bandwidth of its transfers (``comm_bandwidth``, transit time) over
  the nominal bandwidth of the transport (intra-node HCCS/NVLink, inter-node
  RDMA/InfiniBand);
* *idle time*: each rank's least idle step's ``free_us`` (median over the ranks), per
  kernel of the model (launch gaps; the profiler's host stalls only add idle time);
* *steps recorded in part*: the operator rows and the kernels per step are read from the
  steps whose device tasks were recorded in full
  (:func:`perfkit.analysis.recorded.recorded_profile`), as the Operators tab reads them; a
  note names those steps, and when no step was recorded in full the compute rates come
  from the steps table, as for a steps table (below);
* *framework behaviour*: fused attention and dropout from the kernel names, fp32 norm
  inputs from the norm kernels' dtypes, and which recompute style ran (from how often
  the MLP's output-projection shape occurs next to its input-projection shape).

The residual is the model with these rates against the measured step (slowest rank,
median step, the device span: the wait before the step's first device task, fetching data
or launching, is not part of the model and is left out); it is *not* closed unless
``close=True``, so it measures the model. Closed, a profile's fit is closed part by part
on what the device measured (the steps' free time carries the profiler's own host
stalls): the model's computing time is made the busiest rank's ``computing_us``
(``C``), then, where no link was measured on its transfers, the links are scaled to the
exposed communication; the idle time per kernel is already that of each rank's least
idle step, over the model's kernels. The computing time is reached one of two ways
(``closing``):

* ``"one"`` (default): one factor on every compute rate but the optimizer's (whose time
  is kept: fitted to its own kernels);
* ``"kernels"``: by kernel kind and by pass. With ``O`` the model's optimizer time and
  ``s`` the share the profile's matrix and attention kernels take of its other kernels'
  time, a factor on the GEMM efficiency (fused attention with it, capped at the peak)
  gives the model's matrix kernels ``s·(C − O)`` (``solve._solve_split_closing``); the
  memory-bound kernels get the rest ``R``, split by pass: with ``φ`` the forward's share
  of the profile's memory-bound kernel time (the kernels whose launching operator ran on
  a thread other than autograd's backward thread, the optimizer's left out:
  :func:`~.passes._forward_share`), the forward's memory-bound kernels
  (``Rates.elementwise_efficiency``; a recomputed forward runs at it) get ``φ·R`` and
  the backward's (``Rates.backward_elementwise_efficiency``) ``(1 − φ)·R``
  (:func:`~.passes._solve_pass_closing`). What the model misses is mostly a run's
  unfused element-wise kernels, which tensor parallelism without sequence parallelism
  does not divide, as it does not divide the model's norms and residual adds, where it
  divides the GEMMs: one factor spreads that missing time over the GEMMs too. And the
  run's forward runs its memory-bound kernels faster against the model than its
  backward does (φ = 35.6 % on the small H100 Llama, 14.0 of its 39.4 ms, where the
  model puts 43.6 % there), so one factor over both passes' memory-bound kernels would
  make a recomputed forward too slow: splitting by pass is what brought the measured
  layouts' recompute part from +14 / +17 % to +1.3 / +3.8 %. Where the profile does not
  tell the passes apart (no host operators or no autograd thread: an Ascend export,
  MindSpore) or the calibrating run recomputes (its recomputed forward launches from the
  backward's thread), the memory-bound kernels of both passes get ``R`` at one
  efficiency, and the notes say so.

What each gets right, on the H100 Llama's measured sets (``tests/data/kineto_llama_*``,
calibrated on layout ``a``; device computing time from the raw traces; 2026-11-26):

=========================================  ============  =============
check                                      ``"one"``     ``"kernels"``
=========================================  ============  =============
computing of a tp-2 / tp-4 rank's share    −9.9 / −21 %  −3.9 / −8.5 %
  (``kineto_llama_tp_h100`` h, i)
tp-2 with full recompute (j)               −5.3 %        −0.1 %
the same on Llama 2 7B's wider layer       −6.1 / −15 %  +0.4 / −0.2 %
  (``kineto_llama_wide_tp_h100`` h, i)
its tp-2 with full recompute (j)           −1.3 %        +4.7 %
recompute part vs added computing (b, d)   +3.6 / +5.7 % +1.3 / +3.8 %
H100 → H200 step (``kineto_llama_h200``)   −2.6 %        −7.8 %
=========================================  ============  =============

The kernel closing gets the tp split right on both models and the measured layouts'
recomputed part within 3.8 % of what the traces add, but it is the default for none of
them: the wider model's recomputed share still computes 4.7 % too much (outside its
runs' 0.97 % spread, where one factor is −1.3 %), and the run's small kernels gain less
from the H200's bandwidth than the model's (×0.83 where 3.35/4.8 TB/s gives ×0.70).
One factor hides that by putting part of the missing time on the GEMMs, which the H200
does not speed up. Neither closing is right everywhere, so the default stays the one
the other measured checks were made with.

**A steps table** (``computing_us``, ``comm_not_overlapped_us``, ``free_us`` and, when
known, ``bubble_us``, per rank and step) and **a measured step time** (seconds) need
``model``, ``parallel`` and ``hardware``. The table gives three aggregates: the compute
rates are scaled to the busiest rank's computing time, the link efficiencies to the
exposed communication (receive waits — the bubble — taken out: ``bubble_us`` when
given, else the model's bubble), the idle time to ``free_us``. A step time gives one:
every compute rate is scaled by one factor. Either way the fit is then closed so that
the model reproduces the measured step exactly — a measured step is never
re-estimated with a bubble or communication added on top of it (``residual`` reports
how far the unclosed fit was).

The fit is split by job: :mod:`.result` (what a calibration returns), :mod:`.solve` (the
model at given rates and the scaling factors), :mod:`.passes` (the kernel closing's split by pass),
:mod:`.operators` (the operator fit),
:mod:`.gradients` (the gradient size), :mod:`.links` (link efficiencies), :mod:`.profile`
(calibrating on a profile), :mod:`.fallback` (a steps table or a step time) and
:mod:`.fit` (the entry point).
"""

from __future__ import annotations

from .fit import (
    BACKWARD_CLOSING,
    CLOSINGS,
    FORWARD_CLOSING,
    MATRIX_CLOSING,
    NOT_CLOSED_NOTE,
    RESIDUAL_NOTE_SHARE,
    VECTOR_CLOSING,
    calibrate,
    residual_note,
)
from .result import CalibratedJob, Calibration

__all__ = ["Calibration", "CalibratedJob", "calibrate", "residual_note", "RESIDUAL_NOTE_SHARE",
           "NOT_CLOSED_NOTE", "MATRIX_CLOSING", "VECTOR_CLOSING", "FORWARD_CLOSING",
           "BACKWARD_CLOSING", "CLOSINGS"]
