"""Numbers for people: times, shares, bytes and rates as text, never in scientific notation.

Every view of perfkit (the dashboard, the notebooks, the static report, ``perfkit info``)
writes its numbers with these functions, so a figure reads the same everywhere:

* a time in the unit that fits (µs, ms, s, then min and h) with 3 significant digits:
  ``1,878,748.726`` µs → ``"1.88 s"``; :func:`time_unit` picks one unit for a whole column;
* a share as a percentage with one decimal: ``0.889`` → ``"88.9 %"``;
* bytes in binary units: ``10_822_982_041.6`` → ``"10.1 GiB"`` (KiB, MiB, GiB, TiB are
  powers of 1024, the units the profilers' memory figures and device capacities use);
* any other number with 3 significant digits and thousands separators, and no exponent:
  ``1.878749e+06`` → ``"1,878,749"``, ``0.000123`` → ``"0.000123"``;
* a count with its noun in the right number: :func:`counted` (``"1 device"``,
  ``"16 devices"``), never ``"1 devices"`` nor ``"rank(s)"``; :func:`listed` joins words
  (``"ranks 0, 1 and 3"``).

Values at or above 100 keep all their integer digits (``"1,399 ms"``, not ``"1,400 ms"``):
three significant digits is the least precision shown, never a rounding of the integer
part. A tie rounds half to even on the value's decimal digits (:func:`sig`), so that a
figure reads the same in µs and in ms (``"530 µs"``, ``"0.530 ms"``). A missing value
(None, NaN, NA) is written ``"–"``; an infinite one ``"∞"``.

Nothing here computes a metric: the functions take a number in a stated unit and return
text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

__all__ = ["MISSING", "TIME_UNITS", "BYTE_UNITS", "sig", "number_text", "count_text",
           "time_text", "time_unit", "band_range_text", "share_text", "part_share_text",
           "signed_share_text", "bytes_text", "bytes_unit",
           "rate_text",
           "is_missing", "WARNING_MARK", "plural", "counted", "listed", "runs_text",
           "ratio_text", "world_size_text", "ranges_text", "ranks_text"]

#: Text of a missing value.
MISSING = "–"
#: What a figure that cannot be right carries when shown (:mod:`perfkit.guards`).
WARNING_MARK = "⚠"

#: Time units, largest first: (name, microseconds in one unit).
TIME_UNITS: tuple[tuple[str, float], ...] = (("h", 3.6e9), ("min", 6e7), ("s", 1e6),
                                              ("ms", 1e3), ("µs", 1.0))
#: Byte units, largest first: (name, bytes in one unit); binary (IEC) multiples.
BYTE_UNITS: tuple[tuple[str, float], ...] = (("TiB", 2.0**40), ("GiB", 2.0**30),
                                              ("MiB", 2.0**20), ("KiB", 2.0**10), ("B", 1.0))


def is_missing(value: Any) -> bool:
    """True for None, NaN, ``pd.NA`` and anything that is not a real number."""
    if value is None:
        return True
    try:
        v = float(value)
    except (TypeError, ValueError):
        return True
    return math.isnan(v)


def sig(value: float, digits: int = 3) -> str:
    """``value`` with at least ``digits`` significant digits, thousands separators and no
    exponent.

    A tie rounds half to even (Python's ``round``: ``528.5`` → ``"528"``, ``529.5`` →
    ``"530"``), decided on the value as written in decimal (its 15 significant digits, all
    that a float holds exactly), not on its binary approximation: 529.5 µs is 0.5295 ms,
    stored as 0.52949999…, and both read the same, ``"530"`` µs and ``"0.530"`` ms, where
    rounding the float gave ``"0.529"``.

    Parameters
    ----------
    value : float
    digits : int
        Significant digits of a value below ``10**digits``; larger values keep all their
        integer digits (``sig(1399.4)`` is ``"1,399"``).

    Returns
    -------
    str
        ``"0.000123"``, ``"1.88"``, ``"18.8"``, ``"188"``, ``"1,879"``, ``"–"`` when missing.
    """
    if is_missing(value):
        return MISSING
    v = float(value)
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if v == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(v)))
    decimals = max(0, digits - 1 - magnitude)
    # the value as written: 15 significant digits, or every integer digit of a larger one
    written = Decimal(f"{v:.{max(15, magnitude + 1)}g}")
    rounded = _half_even(written, decimals)
    # rounding may carry into a new digit (9.996 -> "10.00"): drop the extra decimal
    if decimals and abs(rounded) >= Decimal(10) ** (magnitude + 1):
        rounded = _half_even(written, decimals - 1)
    if rounded == 0:  # rounded to nothing: keep one digit
        rounded = _half_even(written, decimals + 1)
    return f"{rounded:,f}"


def _half_even(value: Decimal, decimals: int) -> Decimal:
    """``value`` rounded to ``decimals`` decimals, a tie to the even digit."""
    return value.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_EVEN)


def number_text(value: Any, digits: int = 3, unit: str = "") -> str:
    """A number with :func:`sig` and an optional unit after a space (``"249 TFLOP/s"``)."""
    text = sig(value, digits)
    return text if not unit or text == MISSING else f"{text} {unit}"


def count_text(value: Any) -> str:
    """A count with thousands separators (``10,432``); ``"–"`` when missing."""
    if is_missing(value):
        return MISSING
    return f"{round(float(value)):,}"


def _pick(values_us: Iterable[Any], units: tuple[tuple[str, float], ...], start: float
          ) -> tuple[str, float]:
    finite = sorted(abs(float(v)) for v in values_us
                    if not is_missing(v) and not math.isinf(float(v)) and float(v) != 0)
    if not finite:
        return next((u for u in units if u[1] == start), units[-1])
    typical = finite[len(finite) // 2]
    for name, size in units:
        if typical >= size:
            return name, size
    return units[-1]


def time_unit(values_us: Iterable[Any]) -> tuple[str, float]:
    """The unit that fits a column of times: the largest in which its median is ≥ 1.

    Parameters
    ----------
    values_us : iterable of float
        Times in microseconds (missing and zero values are ignored).

    Returns
    -------
    (str, float)
        The unit's name and its size in µs, e.g. ``("ms", 1000.0)``; ``("µs", 1.0)`` for
        an empty column.
    """
    return _pick(values_us, TIME_UNITS, 1.0)


def time_text(us: Any, unit: str | None = None, digits: int = 3) -> str:
    """A duration given in microseconds, in the unit that fits (or ``unit``).

    Parameters
    ----------
    us : float
        Microseconds.
    unit : {"µs", "ms", "s", "min", "h"}, optional
        Force this unit (a column's, from :func:`time_unit`); by default the largest in
        which the value is ≥ 1.
    digits : int
        Significant digits (:func:`sig`).

    Returns
    -------
    str
        ``"1.88 s"``, ``"206 ms"``, ``"4.5 µs"``, and below a microsecond ``"1.00 ns"``
        (where no ``unit`` is forced); ``"–"`` when missing.
    """
    if is_missing(us):
        return MISSING
    sizes = dict(TIME_UNITS)
    if unit is None and 0 < abs(float(us)) < 1:  # under a µs: ns, never "0.00100 µs"
        return f"{sig(float(us) * 1e3, digits)} ns"
    if unit is None:
        name, size = _pick([us], TIME_UNITS, 1.0)
    else:
        name = "µs" if unit == "us" else unit
        if name not in sizes:
            raise ValueError(f"unit must be one of {', '.join(sizes)}, not {unit!r}")
        size = sizes[name]
    return f"{sig(float(us) / size, digits)} {name}"


def band_range_text(low_us: Any, high_us: Any) -> str:
    """A prediction's band in words: ``"1.15 s – 1.27 s"``, or ``"up to 11.0 s"`` where
    its low end is 0 (the model's uncertainty is larger than the step, so the band bounds
    it from above only); ``"–"`` when the high end is missing."""
    if is_missing(high_us):
        return MISSING
    if is_missing(low_us) or not float(low_us) > 0:
        return f"up to {time_text(high_us)}"
    return f"{time_text(low_us)} – {time_text(high_us)}"


def share_text(fraction: Any, decimals: int = 1) -> str:
    """A fraction as a percentage: ``0.8887`` → ``"88.9 %"``; ``"–"`` when missing."""
    if is_missing(fraction):
        return MISSING
    return f"{100.0 * float(fraction):,.{decimals}f} %"


def part_share_text(fraction: Any, decimals: int = 0) -> str:
    """A share of a count as a percentage that never reads as all or none when it is
    not: ``23_622 / 23_640`` → ``"99.9 %"`` (not ``"100 %"``), ``1 / 5000`` → ``"0.02 %"``
    (not ``"0 %"``); more decimals only where ``decimals`` would round to 0 or 100, and
    ``"< 0.01 %"`` / ``"> 99.99 %"`` beyond; ``"–"`` when missing."""
    if is_missing(fraction):
        return MISSING
    f = float(fraction)
    for d in range(decimals, max(decimals, 2) + 1):
        value = round(100.0 * f, d)
        if not ((value >= 100 and f < 1) or (value <= 0 < f)):
            return share_text(f, d)
    return "< 0.01 %" if f < 0.5 else "> 99.99 %"


def signed_share_text(fraction: Any, decimals: int = 1) -> str:
    """A difference as a signed percentage: ``0.032`` → ``"+3.2 %"``, ``-0.032`` →
    ``"−3.2 %"`` (a minus sign); one that rounds to nothing is ``"0.0 %"``, never
    ``"−0.0 %"``; ``"–"`` when missing."""
    if is_missing(fraction):
        return MISSING
    text = f"{100.0 * abs(float(fraction)):,.{decimals}f}"
    if float(text.replace(",", "")) == 0:
        return f"{text} %"
    return f"{'+' if float(fraction) > 0 else '−'}{text} %"


def bytes_unit(values: Iterable[Any]) -> tuple[str, float]:
    """The binary unit that fits a column of byte counts (its median ≥ 1 of the unit)."""
    return _pick(values, BYTE_UNITS, 1.0)


def bytes_text(value: Any, unit: str | None = None, digits: int = 3) -> str:
    """A size in bytes in the binary unit that fits: ``10_822_982_041.6`` → ``"10.1 GiB"``.

    Parameters
    ----------
    value : float
        Bytes.
    unit : {"B", "KiB", "MiB", "GiB", "TiB"}, optional
        Force this unit (a column's, from :func:`bytes_unit`).
    digits : int
        Significant digits.
    """
    if is_missing(value):
        return MISSING
    sizes = dict(BYTE_UNITS)
    if unit is None:
        name, size = _pick([value], BYTE_UNITS, 1.0)
    else:
        if unit not in sizes:
            raise ValueError(f"unit must be one of {', '.join(sizes)}, not {unit!r}")
        name, size = unit, sizes[unit]
    if name == "B":
        return f"{count_text(value)} B"
    return f"{sig(float(value) / size, digits)} {name}"


def rate_text(value: Any, unit: str, digits: int = 3) -> str:
    """A rate such as tokens/s or GB/s with 3 significant digits (``"2,181 tokens/s"``)."""
    return number_text(value, digits, unit)


#: Plurals that do not add an "s" (or that keep their last letter).
_IRREGULAR = {"micro-batch": "micro-batches", "batch": "batches", "process": "processes",
              "bias": "biases", "pass": "passes", "match": "matches", "entry": "entries",
              "copy": "copies", "is": "are", "was": "were", "has": "have", "does": "do",
              "waits": "wait", "computes": "compute", "starts": "start", "spends": "spend",
              "this": "these", "it": "they", "its": "their"}


def plural(n: Any, singular: str, plural_form: str | None = None) -> str:
    """``singular`` or its plural, as fits the count ``n`` (1 takes the singular, 0 and
    any other count the plural): ``plural(2, "rank")`` is ``"ranks"``.

    Parameters
    ----------
    n : number
        The count (a float such as 1.0 counts as 1).
    singular : str
        The word for one (``"rank"``, ``"micro-batch"``, a verb such as ``"waits"``).
    plural_form : str, optional
        The word for several; default: :data:`_IRREGULAR`'s or ``singular + "s"``.
    """
    one = not is_missing(n) and float(n) == 1.0
    if one:
        return singular
    return plural_form or _IRREGULAR.get(singular, singular + "s")


def counted(n: Any, singular: str, plural_form: str | None = None) -> str:
    """A count and its noun in the right number: ``"1 device"``, ``"1,024 calls"``,
    ``"0 ranks"``; a count that is not whole keeps 3 significant digits (``"2.5 calls"``).
    """
    if is_missing(n):
        return f"{MISSING} {plural(2, singular, plural_form)}"
    v = float(n)
    text = count_text(v) if v.is_integer() else sig(v)
    return f"{text} {plural(v, singular, plural_form)}"


def listed(items: Iterable[Any], conjunction: str = "and") -> str:
    """Words joined for a sentence: ``"0"``, ``"0 and 1"``, ``"0, 1 and 3"``."""
    words = [str(x) for x in items]
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} {conjunction} {words[-1]}"


def runs_text(numbers: Iterable[int]) -> str:
    """Whole numbers as runs, for step or rank numbers: ``[1, 2, 3, 7, 9, 10]`` ->
    ``"1–3, 7, 9–10"`` (sorted, repeats once)."""
    return ranges_text(numbers, dash="–")


def ratio_text(ratio: float) -> str:
    """How many times another figure ``ratio`` is, for a sentence "X is … the Y":
    ``"2.3×"``, ``"0.017×"``, and a ratio below 1/100 as a fraction, ``"1/510,000 of"``
    (never ``2e-06×``); ``"–×"`` when missing."""
    if is_missing(ratio):
        return f"{MISSING}×"
    r = float(ratio)
    if 0 < r < 0.01:
        inverse = 1.0 / r
        step = 10 ** max(0, math.floor(math.log10(inverse)) - 1)  # two significant digits
        return f"1/{count_text(round(inverse / step) * step)} of"
    return f"{sig(r, 2)}×"


def world_size_text(world_size: Any, at_least: bool = False) -> str:
    """A profile's world size as a fact: ``"4"``, ``"unknown"``, or with ``at_least`` (one
    rank that counted it from its own communication groups, which need not reach every
    rank) ``"at least 3 (its communication groups)"``."""
    if is_missing(world_size) or not world_size:
        return "unknown"
    if at_least:
        return f"at least {count_text(world_size)} (its communication groups)"
    return count_text(world_size)


def ranges_text(values: Iterable[Any], dash: str = "-") -> str:
    """Whole numbers as runs, sorted, each once, for step or rank numbers:
    ``[0, 1, 2, 3, 7]`` -> ``"0-3, 7"`` (``dash="–"``: ``"0–3, 7"``, in a sentence)."""
    runs: list[list[int]] = []
    for n in sorted({int(v) for v in values}):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}{dash}{b}" for a, b in runs)


def ranks_text(ranks: Iterable[Any] | None, rank: Any = None) -> str:
    """The ranks of a profile as a fact, their number first: ``"4 (0-3)"`` for a Cluster's
    ``ranks``, ``"1 (rank 3)"`` for one rank's profile whose ``rank`` is known, ``"1"``
    when it is not (never a bare ``"0"``, which reads as no rank at all)."""
    listed_ranks = list(ranks) if ranks is not None else []
    if listed_ranks:
        return f"{len(listed_ranks)} ({ranges_text(listed_ranks)})"
    return "1" if is_missing(rank) else f"1 (rank {int(rank)})"
