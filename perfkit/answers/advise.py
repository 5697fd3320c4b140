"""The ``advise`` answer: the advisor's ranked findings as plain data."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .common import envelope, finding_id, number

__all__ = ["finding_dict", "findings_list", "advise_answer"]


def finding_dict(finding: Any, rank: int) -> dict[str, Any]:
    """One :class:`~perfkit.advisor.finding.Finding` as plain data.

    ``step_share_pct`` is ``100 · score`` (the share of the measured step at stake);
    ``ms_per_step`` and ``step_ms`` are None where not measured.
    """
    measured = bool(finding.measured)
    return {
        "id": finding_id(finding.rule, finding.title),
        "rank": rank,
        "rule": finding.rule,
        "severity": finding.severity,
        "area": finding.area,
        "title": finding.title,
        "evidence": finding.evidence,
        "recommendation": finding.recommendation,
        "notebook": finding.notebook,
        "measured": measured,
        "ms_per_step": number(finding.ms_per_step) if measured else None,
        "step_ms": number(finding.step_ms),
        "step_share_pct": number(100.0 * finding.score) if measured else None,
        "step_basis": finding.step_basis,
        "details": finding.details,
    }


def findings_list(findings: Sequence[Any], limit: int | None = None) -> list[dict[str, Any]]:
    """The findings in the advisor's order (best first), ``rank`` from 1; the first
    ``limit`` only when given. Two findings with the same id get ``#2``, ``#3`` ... after
    the later ones' ids, so that every id of an answer is unique."""
    shown = list(findings)[:limit] if limit is not None else list(findings)
    out, seen = [], {}
    for i, f in enumerate(shown, 1):
        d = finding_dict(f, i)
        n = seen.get(d["id"], 0) + 1
        seen[d["id"]] = n
        if n > 1:
            d["id"] = f"{d['id']}#{n}"
        out.append(d)
    return out


def advise_answer(findings: Sequence[Any], path: str = "",
                  limit: int | None = None) -> dict[str, Any]:
    """The ``advise`` answer of :func:`perfkit.advise`'s findings.

    Parameters
    ----------
    findings : sequence of Finding
        As :func:`perfkit.advise` returns them (best first).
    path : str
        The profile they are of.
    limit : int, optional
        Keep the first ``limit`` findings (``total`` still counts all of them).

    Returns
    -------
    dict
        ``{"kind": "advise", "schema_version", "perfkit_version", "path", "total",
        "findings": [...]}``, each finding as :func:`finding_dict`.
    """
    return envelope("advise", path=str(path), total=len(findings),
                    findings=findings_list(findings, limit))
