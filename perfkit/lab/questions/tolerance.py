"""Tolerances that come from the rounding of the figures a student reads.

A fixed tolerance (±5 %, ±0.5 point) can be wider than the gap between the right answer
and the quantity a student most likely confuses it with, and then a wrong answer is
marked right. These give each student their own: the farthest an answer worked out from
the figures as the student sees them (the step table shows :data:`SHOWN_DIGITS`
significant digits) can lie from the exact one, plus the rounding of an answer to one
decimal (:data:`ANSWER_ROUNDING`). A question records in its ``facts`` whether the likely
wrong quantity lies outside (``told_apart``).
"""

from __future__ import annotations

import math

__all__ = ["SHOWN_DIGITS", "ANSWER_ROUNDING", "SAME_US", "FLOAT_SLACK", "share_tolerance",
           "bubble_tolerance"]

#: Significant digits of the figures the step table shows (:mod:`perfkit.tables`).
SHOWN_DIGITS = 3
#: The rounding of an answer given to one decimal, in points of %.
ANSWER_ROUNDING = 0.05
#: Two figures of the step table closer than this (µs: the profiler's nanosecond) are one.
SAME_US = 1e-3
#: Points of % added to a tolerance that has no reading error, so that an answer rounded
#: at a half (12.25 to 12.3) is not lost to the binary fraction.
FLOAT_SLACK = 1e-9


def _half_unit(value: float) -> float:
    """Half a unit of the last digit of ``value`` shown to :data:`SHOWN_DIGITS` digits."""
    if value <= 0:
        return 0.0
    return 0.5 * 10.0 ** (math.floor(math.log10(value)) - SHOWN_DIGITS + 1)


def share_tolerance(part_us: float, wall_us: float) -> float:
    """The tolerance, in points of %, of ``part / wall`` read from the step table.

    Parameters
    ----------
    part_us, wall_us : float
        The exact part and the exact step, as the profile holds them.

    Returns
    -------
    float
        The farthest the share of the two figures as shown (each to
        :data:`SHOWN_DIGITS` significant digits) can lie from the exact share, plus
        :data:`ANSWER_ROUNDING`.
    """
    exact = 100 * part_us / wall_us
    hp, hw = _half_unit(part_us), _half_unit(wall_us)
    far = max(abs(100 * (part_us + hp) / (wall_us - hw) - exact),
              abs(100 * (part_us - hp) / (wall_us + hw) - exact))
    return far + ANSWER_ROUNDING


def bubble_tolerance() -> float:
    """The tolerance of the pipeline bubble's share, in points of %: the figures it comes
    from (pp, m, v) are exact, so only an answer to one decimal
    (:data:`ANSWER_ROUNDING`, and :data:`FLOAT_SLACK`)."""
    return ANSWER_ROUNDING + FLOAT_SLACK
