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

__all__ = ["Finding", "severity_of", "measured", "unmeasured", "NOTEBOOKS",
           "SEVERITY_THRESHOLDS", "SEVERITY_ORDER"]

#: Notebook to open for each area (the guided notebooks of DESIGN.md).
NOTEBOOKS = {
    "steps": "00_start_here.ipynb",
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

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict."""
        return dataclasses.asdict(self)


class _MeasuredStep(Protocol):
    """What a measured finding needs of the advisor's context: the measured step."""

    @property
    def step_us(self) -> float: ...


def measured(ctx: _MeasuredStep, rule: str, area: str, us_per_step: float, title: str,
             evidence: str, recommendation: str, details: str = "") -> Finding:
    """A measured finding: ``us_per_step`` at stake, share and severity from it."""
    us = float(us_per_step) if np.isfinite(us_per_step) else 0.0
    us = max(0.0, us)
    step = ctx.step_us
    share = us / step if np.isfinite(step) and step > 0 else 0.0
    share = float(min(1.0, share))
    return Finding(severity=severity_of(share), area=area, title=title, evidence=evidence,
                   recommendation=recommendation,
                   notebook=NOTEBOOKS.get(area, NOTEBOOKS["metrics"]), score=share,
                   rule=rule, ms_per_step=us / 1e3, measured=True,
                   details=f"rule {rule}" + (f"; {details}" if details else ""))


def unmeasured(rule: str, area: str, title: str, evidence: str, recommendation: str,
               severity: str = "warning", details: str = "") -> Finding:
    """A finding whose time cost cannot be measured (its own section, after the rest)."""
    return Finding(severity=severity, area=area, title=title, evidence=evidence,
                   recommendation=recommendation,
                   notebook=NOTEBOOKS.get(area, NOTEBOOKS["metrics"]), score=0.0, rule=rule,
                   ms_per_step=float("nan"), measured=False,
                   details=f"rule {rule}; time cost not measurable from the profile"
                   + (f"; {details}" if details else ""))
