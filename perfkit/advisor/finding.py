"""A finding: what was seen, what it costs per step, what to change; its severity.

A measured finding carries the step time at stake (``ms_per_step``) and its share of the
measured step (``score``), from which its severity follows (:data:`SEVERITY_THRESHOLDS`);
an unmeasured one has ``score=0``, ``ms_per_step=NaN`` and severity ``warning`` or
``info``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..analysis.steps import FAR_STEP, far_steps
from ..format import share_text, time_text

__all__ = ["Finding", "severity_of", "measured", "unmeasured", "NOTEBOOKS",
           "SEVERITY_THRESHOLDS", "SEVERITY_ORDER", "share_of_step", "step_basis_note",
           "STEP_BASIS_TOLERANCE", "FAR_STEP"]

#: Notebook to open for each area (the guided notebooks of DESIGN.md).
NOTEBOOKS = {
    "steps": "00_start_here.ipynb",
    "step_trace": "04_communication.ipynb",  # a MindSpore step trace's phases (the tail)
    "operators": "03_operators.ipynb",
    "communication": "04_communication.ipynb",
    "memory": "05_memory.ipynb",
    "recompute": "06_recompute.ipynb",
    "cluster": "07_cluster.ipynb",
    "host": "07_cluster.ipynb",
    "metrics": "01_metrics.ipynb",
}

#: (severity, lowest share of the step at stake) for measured findings.
SEVERITY_THRESHOLDS = (("high", 0.10), ("medium", 0.03), ("low", 0.01))
#: Severities from the most to the least urgent (``warning``: not measurable, but risky).
SEVERITY_ORDER = ("high", "medium", "low", "warning", "info")


def severity_of(score: float) -> str:
    """Severity of a measured finding from its share of the step at stake."""
    for name, lo in SEVERITY_THRESHOLDS:
        if score >= lo:
            return name
    return "info"


@dataclass(frozen=True)
class Finding:
    """One thing to fix (or to know), with its evidence and the step time at stake.

    Attributes
    ----------
    severity : str
        ``"high"``, ``"medium"``, ``"low"``, ``"info"`` (measured: from ``score``), or
        ``"warning"`` / ``"info"`` for a finding whose cost cannot be measured.
    area : str
        ``steps``, ``operators``, ``communication``, ``memory``, ``recompute``,
        ``cluster``, ``host`` or ``metrics``.
    title : str
        What was seen, in one line of plain words.
    evidence : str
        The numbers that show it.
    recommendation : str
        What to change, in the profiled framework's terms.
    notebook : str
        The notebook where the analysis is shown.
    score : float
        Share of the measured step time at stake (ranking key); 0 when not measured.
    rule : str
        Name of the rule that produced the finding.
    ms_per_step : float
        Milliseconds per training step at stake (NaN when not measured).
    measured : bool
        Whether ``ms_per_step`` comes from the measurement.
    details : str
        Rule id and the statistics behind the finding (for experts and bug reports).
    step_ms : float
        The step ``score`` is a share of, in ms: the advisor's measured step, the mean
        over steps of the slowest rank's step and the preparing before it (NaN when not
        measured). A view whose own step time differs says so (:func:`share_of_step`).
    step_basis : str
        Which steps ``step_ms`` is of, in words, where the time at stake is per step over
        some of the steps only (those the profile measures it in) and ``step_ms`` is the
        mean over the same steps (``"step 1, the only step with its communication
        measured"``); empty for the advisor's measured step.
    """

    severity: str
    area: str
    title: str
    evidence: str
    recommendation: str
    notebook: str
    score: float = 0.0
    rule: str = ""
    ms_per_step: float = float("nan")
    measured: bool = True
    details: str = ""
    step_ms: float = float("nan")
    step_basis: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict."""
        return dataclasses.asdict(self)


class _MeasuredStep(Protocol):
    """What a measured finding needs of the advisor's context: the measured step."""

    @property
    def step_us(self) -> float: ...


def measured(ctx: _MeasuredStep, rule: str, area: str, us_per_step: float, title: str,
             evidence: str, recommendation: str, details: str = "",
             step_us: float | None = None, step_basis: str = "") -> Finding:
    """A measured finding: ``us_per_step`` at stake, share and severity from it.

    The share is of the advisor's measured step (``ctx.step_us``), or, where the time at
    stake is per step over some steps only, of ``step_us``, the mean step over those
    steps, which ``step_basis`` names (:attr:`Finding.step_basis`): a time and the step
    it is a share of are then over the same steps.
    """
    us = float(us_per_step) if np.isfinite(us_per_step) else 0.0
    us = max(0.0, us)
    own = step_us is not None and bool(np.isfinite(step_us)) and step_us > 0
    step = float(step_us) if own else ctx.step_us
    share = us / step if np.isfinite(step) and step > 0 else 0.0
    share = float(min(1.0, share))
    return Finding(severity=severity_of(share), area=area, title=title, evidence=evidence,
                   recommendation=recommendation,
                   notebook=NOTEBOOKS.get(area, NOTEBOOKS["metrics"]), score=share,
                   rule=rule, ms_per_step=us / 1e3, measured=True,
                   details=f"rule {rule}" + (f"; {details}" if details else ""),
                   step_ms=step / 1e3 if np.isfinite(step) and step > 0 else float("nan"),
                   step_basis=step_basis if own else "")


#: A view's step time and a finding's basis (:attr:`Finding.step_ms`) further apart than
#: this share: the finding's share names its basis.
STEP_BASIS_TOLERANCE = 0.05


def _other_basis(f: Finding, shown_step_ms: float | None) -> bool:
    """Whether ``f``'s share is of another step than ``shown_step_ms`` (see
    :data:`STEP_BASIS_TOLERANCE`)."""
    basis = f.step_ms
    return shown_step_ms is not None and bool(np.isfinite(basis)) and shown_step_ms > 0 \
        and abs(basis - shown_step_ms) > STEP_BASIS_TOLERANCE * shown_step_ms


def share_of_step(f: Finding, shown_step_ms: float | None = None) -> str:
    """A measured finding's share as a view writes it beside its own step time.

    ``"27.4 % of the step"`` where the view shows no step time or one within
    :data:`STEP_BASIS_TOLERANCE` of the finding's basis (:attr:`Finding.step_ms`); else
    ``"27.4 % of 294 ms"``, so that it does not read as a share of the step shown
    (:func:`step_basis_note` says once what that basis is); a finding whose share is of
    the mean over some steps only says which (:attr:`Finding.step_basis`): ``"87.3 % of
    47.6 ms, step 1, the only step with its communication measured"``.
    """
    if f.step_basis:
        return f"{share_text(f.score)} of {time_text(f.step_ms * 1e3)}, {f.step_basis}"
    if _other_basis(f, shown_step_ms):
        return f"{share_text(f.score)} of {time_text(f.step_ms * 1e3)}"
    return f"{share_text(f.score)} of the step"




def _far_steps(steps: Any, shown_step_ms: float) -> str:
    """``"; step 1 takes 2.38 s (13 times the median: a warm-up), which counts in the
    mean, not in the median"``: the steps of a step breakdown whose slowest rank's wall
    (``step_us`` + ``preparing_us``) is above :data:`FAR_STEP` times the median step
    (:func:`perfkit.analysis.steps.far_steps`);
    empty when none is, or without a breakdown."""
    if steps is None or getattr(steps, "empty", True) or "step_us" not in steps.columns:
        return ""
    far = far_steps(steps)
    if far.empty:
        return ""
    first = steps["step"].min()
    said = [f"step {int(k)} takes {time_text(v)} ({v / (shown_step_ms * 1e3):.0f} times the "
            f"median{': a warm-up' if k == first else ''})" for k, v in far.items()]
    one = len(said) == 1
    return (f"; {', '.join(said)}, which count{'s' if one else ''} in the mean, not in the "
            "median")


def step_basis_note(findings: list[Finding], shown_step_ms: float | None,
                    ranks: int | None = None, steps: Any = None) -> str | None:
    """Why the findings' shares are of another step than the one a view shows, or None.

    The advisor's step is the mean over steps of the slowest rank's step with the
    preparing before it (a data-loading wait lies there); a view's step time is the
    median over the steps of the same (:func:`perfkit.analysis.measured_step_s`): they
    differ where one step is far from the others (a warm-up, a checkpoint). A profile of
    one rank (``ranks``) has no slowest rank: the step is said to be that rank's. With
    the step breakdown (``steps``), a step far longer than the others (:data:`FAR_STEP`)
    is named, as the reason the two differ.
    """
    other = next((f for f in findings if f.measured and not f.step_basis
                  and _other_basis(f, shown_step_ms)), None)
    if other is None or shown_step_ms is None:
        return None
    whose = "the one rank's step" if ranks == 1 else "the slowest rank's step"
    return (f"shares of {time_text(other.step_ms * 1e3)}, the mean over steps of {whose} "
            "and the preparing before it; the step time shown, "
            f"{time_text(shown_step_ms * 1e3)}, is the median over the steps"
            + _far_steps(steps, shown_step_ms))


def unmeasured(rule: str, area: str, title: str, evidence: str, recommendation: str,
               severity: str = "warning", details: str = "") -> Finding:
    """A finding whose time cost cannot be measured (its own section, after the rest)."""
    return Finding(severity=severity, area=area, title=title, evidence=evidence,
                   recommendation=recommendation,
                   notebook=NOTEBOOKS.get(area, NOTEBOOKS["metrics"]), score=0.0, rule=rule,
                   ms_per_step=float("nan"), measured=False,
                   details=f"rule {rule}; time cost not measurable from the profile"
                   + (f"; {details}" if details else ""))
