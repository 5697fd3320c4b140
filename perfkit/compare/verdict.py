"""Is run B faster than run A, slower, or the same within the noise? The verdict of
:func:`perfkit.compare`.

The method, in full:

1. Each run's **step times** are the per-step walls of the rank that sets the step (per
   step the slowest rank's device span plus the wait before it,
   :func:`perfkit.analysis.steps.measured_step_s`'s figure before its median). A run's
   step time is their **median**, so one odd step (a warm-up, a checkpoint) does not move
   it.
2. When the two runs do **different work per step** (another global batch, sequence or
   number of devices, as :func:`perfkit.infer_job` reads them), the step times are
   compared per token per device: B's times are multiplied by ``work_scale`` = A's tokens
   per step per device / B's. The change is then the change of time per token per device,
   the inverse of the change of tokens/s per device.
3. **Change** = 100 × (median B × work_scale / median A − 1) %: negative is faster.
4. **Noise** of each median from its run's step-to-step spread: the robust standard
   deviation σ = 1.4826 × MAD (the median absolute deviation; 1.4826 makes it σ for
   normally distributed times, Rousseeuw & Croux, JASA 88, 1993) and the standard error of
   a median of n steps, sqrt(π/2) × σ / sqrt(n) (the median's asymptotic variance for a
   normal sample, π σ² / 2n). The noise of the change is the 95 % half-width
   1.96 × sqrt(se_A² + se_B²), in % of median A.
5. **Verdict**: "no change" when |change| ≤ the band, else "faster" or "slower". The band
   is the larger of the noise and :data:`DEFAULT_THRESHOLD_PCT` (``threshold_pct`` sets
   another; 0 leaves the noise alone): the steps of one run do not show what differs
   between two launches of the same job (placement, node, clocks), so a change smaller
   than that is not called. With fewer than :data:`MIN_STEPS_FOR_NOISE` steps in either
   run the noise cannot be estimated and the band is the threshold alone; the verdict
   says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..analysis._util import MAD_TO_SIGMA

__all__ = ["Verdict", "step_verdict", "throughput_change_pct", "robust_sigma",
           "median_standard_error", "DEFAULT_THRESHOLD_PCT", "MIN_STEPS_FOR_NOISE",
           "MAD_TO_SIGMA", "Z_95", "NOT_ONE_JOB"]

#: The first words of the note that two runs are not one job
#: (:func:`perfkit.compare.build.not_one_job`), which the text shows under the verdict.
NOT_ONE_JOB = "not one job:"

#: Smallest change (in % of A's step) the verdict calls, and the band where the steps give
#: no noise: a convention of this tool, not a measurement. Two simulations of one job with
#: different seeds (``perfkit.simulate``, 3 % kernel noise, 6 steps each) have medians up
#: to 1.3 % apart while their step-to-step noise band is about 0.7 %; launches of a real
#: job differ by their placement and nodes too. Set it with ``threshold_pct``.
DEFAULT_THRESHOLD_PCT = 2.0
#: Fewest steps per run from which a spread is computed (a MAD needs two values).
MIN_STEPS_FOR_NOISE = 2
#: Two-sided 95 % quantile of the standard normal distribution.
Z_95 = 1.96


def robust_sigma(values: Sequence[float] | np.ndarray) -> float:
    """σ estimated from the median absolute deviation: 1.4826 × median(|x − median(x)|).

    Returns NaN for fewer than two values: one value has no spread to tell (0 would read
    as "no noise at all").
    """
    x = np.asarray(values, dtype="float64")
    x = x[np.isfinite(x)]
    if x.size < 2:
        return math.nan
    return float(MAD_TO_SIGMA * np.median(np.abs(x - np.median(x))))


def median_standard_error(values: Sequence[float] | np.ndarray) -> float:
    """Standard error of the median of ``values``: sqrt(π/2) × σ / sqrt(n), σ from
    :func:`robust_sigma` (the asymptotic variance of a sample median of normal data is
    π σ² / 2n). NaN for fewer than :data:`MIN_STEPS_FOR_NOISE` values."""
    x = np.asarray(values, dtype="float64")
    x = x[np.isfinite(x)]
    if x.size < MIN_STEPS_FOR_NOISE:
        return math.nan
    return math.sqrt(math.pi / 2.0) * robust_sigma(x) / math.sqrt(x.size)


@dataclass(frozen=True)
class Verdict:
    """The verdict of a comparison (see the module's docstring for the method).

    Attributes
    ----------
    word : {"faster", "slower", "no change"}
        What B is against A.
    change_pct : float
        100 × (B / A − 1) of the compared step time (per token per device where the work
        per step differs); negative: B is faster. NaN when a side has no step time.
    noise_pct : float or None
        The 95 % noise of the change, in % of A; None where it cannot be estimated.
    threshold_pct : float
        The band inside which the verdict is "no change": the larger of ``noise_pct`` and
        the threshold (the threshold alone without a noise).
    basis : {"step", "token per device"}
        What was compared.
    work_scale : float
        Factor applied to B's step times (1 for equal work per step).
    method : str
    assumptions : list of str
    threshold_given_pct : float
        The threshold itself (given, or :data:`DEFAULT_THRESHOLD_PCT`), which
        ``threshold_pct`` widens to the noise.
    """

    word: str
    change_pct: float
    noise_pct: float | None
    threshold_pct: float
    basis: str
    work_scale: float
    method: str
    assumptions: list[str] = field(default_factory=list)
    threshold_given_pct: float = DEFAULT_THRESHOLD_PCT

    def gate_failed(self, pct: float | None) -> bool:
        """Whether B is slower than A by more than ``pct`` % and more than the noise
        (the ``--gate`` of ``perfkit compare``); False without a gate."""
        if pct is None or not math.isfinite(self.change_pct):
            return False
        return self.change_pct > pct and self.change_pct > self.threshold_pct


def step_verdict(a_steps_ms: Sequence[float] | np.ndarray,
                 b_steps_ms: Sequence[float] | np.ndarray, work_scale: float = 1.0,
                 threshold_pct: float | None = None) -> Verdict:
    """Compare two runs' per-step times (module docstring: the method).

    Parameters
    ----------
    a_steps_ms, b_steps_ms : array-like of float
        Each run's step times in ms, one per step (missing values left out).
    work_scale : float
        A's work per step / B's (tokens per step per device); B's times are multiplied by
        it. 1 when both do the same work per step.
    threshold_pct : float, optional
        Smallest change called (default :data:`DEFAULT_THRESHOLD_PCT`): the "no change"
        band is the larger of it and the noise; 0 leaves the noise alone.

    Returns
    -------
    Verdict
    """
    a = _finite(a_steps_ms)
    b = _finite(b_steps_ms) * work_scale
    fallback = DEFAULT_THRESHOLD_PCT if threshold_pct is None else float(threshold_pct)
    whose = "default threshold" if threshold_pct is None else "the threshold given"
    basis = "step" if work_scale == 1.0 else "token per device"
    assumptions = [
        "each run's step time is the median of its per-step times (per step, the slowest "
        "rank's wall, with the wait before its first device task)",
        "steps are independent draws of the same distribution (no drift within a run)",
    ]
    if basis != "step":
        assumptions.append(f"the runs do different work per step: B's times are scaled by "
                           f"A's tokens per step per device / B's = {work_scale:.4g}, so the "
                           "change is that of time per token per device (the inverse of "
                           "tokens/s per device)")
    if a.size == 0 or b.size == 0:
        return Verdict("no change", math.nan, None, fallback, basis, work_scale,
                       "no step time on one side: nothing to compare",
                       [*assumptions, "a run without a step time cannot be judged"],
                       fallback)
    ma, mb = float(np.median(a)), float(np.median(b))
    change = 100.0 * (mb / ma - 1.0)
    se_a, se_b = median_standard_error(a), median_standard_error(b)
    if math.isfinite(se_a) and math.isfinite(se_b):
        noise: float | None = 100.0 * Z_95 * math.hypot(se_a, se_b) / ma
        band = max(float(noise), fallback)
        method = ("medians of the per-step times compared; noise = 1.96 × sqrt(se_A² + "
                  "se_B²), se = sqrt(π/2) × 1.4826 × MAD / sqrt(steps) (robust 95 % "
                  "interval of the difference of two medians); a change within the larger "
                  f"of the noise and ±{fallback:g} % (threshold) counts as no change")
        assumptions.append(f"launches of the same job differ by up to {fallback:g} % beyond "
                           "what their steps show (the threshold; not measured here)")
        assumptions.append("the per-step times are roughly normal around their median (for "
                           "the MAD-to-σ factor 1.4826 and the median's standard error)")
    else:
        noise, band = None, fallback
        method = (f"medians of the per-step times compared; a run has fewer than "
                  f"{MIN_STEPS_FOR_NOISE} steps, so the noise cannot be estimated: a change "
                  f"within ±{fallback:g} % ({whose}) counts as no change")
        assumptions.append(f"the run-to-run noise is under {fallback:g} % of the step (not "
                           "measured: record several steps to measure it)")
    word = "no change" if abs(change) <= band else ("slower" if change > 0 else "faster")
    return Verdict(word, change, noise, band, basis, work_scale, method, assumptions,
                   fallback)


def _finite(values: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype="float64")
    return x[np.isfinite(x)]


def throughput_change_pct(change_pct: float) -> float:
    """Change of throughput (tokens/s per device where the work differs, steps/s else) for
    a change of time of ``change_pct`` %: 100 × (1 / (1 + change/100) − 1)."""
    if not math.isfinite(change_pct) or change_pct <= -100.0:
        return math.nan
    return 100.0 * (1.0 / (1.0 + change_pct / 100.0) - 1.0)
