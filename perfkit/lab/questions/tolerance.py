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

from ...format import bytes_unit, sig, time_unit

__all__ = ["SHOWN_DIGITS", "ANSWER_ROUNDING", "SAME_US", "FLOAT_SLACK", "share_tolerance",
           "bubble_tolerance", "shown_half_unit", "memory_tolerance", "step_tolerance"]

#: Significant digits of the figures the step table shows (:mod:`perfkit.tables`).
SHOWN_DIGITS = 3
#: The rounding of an answer given to one decimal, in points of %.
ANSWER_ROUNDING = 0.05
#: Two figures of the step table closer than this (µs: the profiler's nanosecond) are one.
SAME_US = 1e-3
#: Added to a tolerance (points of %, GiB, s) that has no reading error, or none beyond
#: the figure's own rounding, so that an answer rounded
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


def shown_half_unit(value: float, unit_size: float) -> float:
    """Half a unit of the last digit :func:`perfkit.format.sig` writes for ``value`` in a
    unit of ``unit_size`` (its :data:`SHOWN_DIGITS` significant digits, or every integer
    digit of a larger figure), back in the units of ``value``."""
    text = sig(value / unit_size, SHOWN_DIGITS).replace(",", "")
    decimals = len(text.partition(".")[2])
    return 0.5 * 10.0 ** -decimals * unit_size


def memory_tolerance(static_bytes: float, activation_bytes: float) -> float:
    """The tolerance, in GiB, of a layout's memory need read from the calculator.

    The calculator shows static memory, activation memory and their sum each with
    :data:`SHOWN_DIGITS` significant digits in the binary unit that fits
    (:func:`perfkit.format.bytes_text`). An answer is either the sum as shown or the two
    parts as shown added up; the tolerance is the farther of the two readings' roundings,
    plus :data:`FLOAT_SLACK`.

    Parameters
    ----------
    static_bytes, activation_bytes : float
        The exact model states and activations of the busiest device.

    Returns
    -------
    float
        GiB.
    """
    def half(b: float) -> float:
        return shown_half_unit(b, bytes_unit([b])[1]) if b > 0 else 0.0
    whole = half(static_bytes + activation_bytes)
    parts = half(static_bytes) + half(activation_bytes)
    return max(whole, parts) / 2**30 + FLOAT_SLACK


def step_tolerance(step_s: float, column_s: list[float]) -> float:
    """The tolerance, in seconds, of a step read from the planner's table.

    The table writes its step column in one unit, the one that fits the column's median
    (:func:`perfkit.format.time_unit`), with :data:`SHOWN_DIGITS` significant digits; the
    question asks seconds, so an answer is that figure in seconds or the step to
    :data:`SHOWN_DIGITS` digits in seconds. The tolerance is the wider of the two half
    units of the last digit, plus :data:`FLOAT_SLACK`.

    Parameters
    ----------
    step_s : float
        The exact step of the row asked about.
    column_s : list of float
        Every step the table shows (its unit depends on them all).

    Returns
    -------
    float
        Seconds.
    """
    size_us = time_unit([1e6 * s for s in column_s])[1]
    return max(shown_half_unit(step_s, size_us / 1e6), shown_half_unit(step_s, 1.0)) \
        + FLOAT_SLACK
