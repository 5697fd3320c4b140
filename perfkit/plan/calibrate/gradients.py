"""The gradient size a calibration reduces at: the element size the profile's own reductions
move (:attr:`perfkit.Job.reduced_gradient`, read on an eager or a lazy cluster alike), where
the layout makes every reduction the gradients'; else the scheme's guess stays."""

from __future__ import annotations

from typing import Any

from ...analysis.reduced_dtype import reductions_are_gradients
from ...calc.rates import Rates
from .result import CalibratedJob

__all__ = ["read_gradient_bytes"]


def read_gradient_bytes(inferred: Any, job: CalibratedJob, rates: Rates,
                        terms: list[tuple[str, float, str]]) -> Rates:
    """``rates`` with ``gradient_bytes`` set to what the profile's reductions move.

    Only where the starting rates leave it open (``Rates.gradient_bytes`` None) and every
    all-reduce / reduce-scatter of the job's layout is a gradient reduction
    (:func:`~perfkit.analysis.reduced_dtype.reductions_are_gradients`: data parallelism
    without tensor, context or expert parallelism); the term added says what was read.

    Parameters
    ----------
    inferred : perfkit.Job
        The job read from the profile (its ``reduced_gradient``).
    job : CalibratedJob
        The calibrating run (its layout).
    rates : Rates
    terms : list
        The calibration's terms, appended to.
    """
    if rates.gradient_bytes is not None or not reductions_are_gradients(job.parallel):
        return rates
    # what the profile's own reductions move wins over the scheme's guess (the job's one
    # reading, which its Memory tab and figures count in static memory too:
    # perfkit.Job.gradient_bytes)
    reduced = inferred.reduced_gradient
    if reduced is None:
        return rates
    size = float(reduced.element_bytes)
    terms.append(("gradient_bytes", size, reduced.evidence))
    return rates.replace(gradient_bytes=size)
