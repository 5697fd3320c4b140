"""``plan.calibrate`` with the fused library kernels' element-wise count, for the tests whose
figures were fixed with it (the measured H100 sets' modules).

Given no rates, :func:`perfkit.plan.calibrate` reads the count from the profile (``"amp"``
on those sets: tests/plan/test_elementwise_read.py); these tests pass ``rates=Rates()``
so that their documented numbers and expected failures stay the ones they describe.
"""

from __future__ import annotations

from typing import Any

from perfkit import plan
from perfkit.calc.rates import Rates

__all__ = ["library_calibrate"]


def library_calibrate(*args: Any, **kwargs: Any) -> plan.Calibration:
    """``plan.calibrate(*args, rates=Rates(), **kwargs)`` (``rates`` given wins)."""
    return plan.calibrate(*args, rates=kwargs.pop("rates", Rates()), **kwargs)
