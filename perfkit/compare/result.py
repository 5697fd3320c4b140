"""What :func:`perfkit.compare` returns: :class:`Comparison`, with its JSON layout
(:meth:`Comparison.to_dict`), one table (:meth:`Comparison.to_frame`), text and HTML."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .._version import __version__
from .page import comparison_html, comparison_page, comparison_text, verdict_sentence
from .verdict import NOT_ONE_JOB, Verdict, throughput_change_pct

__all__ = ["Side", "Comparison", "SCHEMA_VERSION", "clean"]

#: Version of the JSON layout of :meth:`Comparison.to_dict` (``schema_version``).
SCHEMA_VERSION = "1"


@dataclass(frozen=True)
class Side:
    """One run of a comparison.

    Attributes
    ----------
    path, label : str
    step_ms : float
        Median over the steps of the slowest rank's wall (device span + wait before it).
    step_spread_ms : float
        Robust spread (1.4826 × MAD) of the walls of every (rank, step); NaN (None in
        JSON) for a single one.
    steps, ranks : int
    format : str
        The loader's ``source_format``.
    step_times_ms : tuple of float
        Per step, the slowest rank's wall (what the verdict compares).
    tokens_per_device : float or None
        Global batch × sequence / devices, as :func:`perfkit.infer_job` reads them.
    """

    path: str
    label: str
    step_ms: float
    step_spread_ms: float
    steps: int
    ranks: int
    format: str
    step_times_ms: tuple[float, ...] = ()
    tokens_per_device: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The side as the JSON layout has it (NaN as None)."""
        return clean({"path": self.path, "label": self.label, "step_ms": self.step_ms,
                      "step_spread_ms": self.step_spread_ms, "steps": self.steps,
                      "ranks": self.ranks, "format": self.format,
                      "step_times_ms": list(self.step_times_ms),
                      "tokens_per_device": self.tokens_per_device})


@dataclass(frozen=True)
class Comparison:
    """Run B against run A (:func:`perfkit.compare`).

    Attributes
    ----------
    a, b : Side
    verdict : Verdict
    parts : DataFrame
        ``part``, ``a_ms``, ``b_ms``, ``delta_ms``: compute, exposed communication, free,
        bubble, the wait before the step; per step of the rank that sets it (median).
    kinds : DataFrame
        ``kind``, ``a_ms``, ``b_ms``, ``delta_ms``: device time per (rank, step) by kernel
        kind, largest change first.
    operators : DataFrame
        :data:`perfkit.compare.matching.OPERATOR_COLUMNS`, largest change first.
    job_changes : DataFrame
        ``field``, ``a``, ``b``: what differs in the job and the profiles' source facts.
    gate_pct : float or None
    notes : list of str

    Notes
    -----
    B's times in ``parts``, ``kinds`` and ``operators`` are scaled to A's work per step
    where the two differ (``verdict.work_scale``).
    """

    a: Side
    b: Side
    verdict: Verdict
    parts: pd.DataFrame = field(repr=False)
    kinds: pd.DataFrame = field(repr=False)
    operators: pd.DataFrame = field(repr=False)
    job_changes: pd.DataFrame = field(repr=False)
    gate_pct: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def gate_failed(self) -> bool:
        """B slower than A beyond ``gate_pct`` and beyond the noise (False without a gate,
        or with one that cannot judge these runs: :attr:`gate_not_judged`)."""
        return self.gate_not_judged is None and self.verdict.gate_failed(self.gate_pct)

    @property
    def gate_not_judged(self) -> str | None:
        """Why the gate cannot judge these two runs, or None (it can, or there is no gate):
        a run without a step time, or two runs that are not one job (the ``not one job:``
        note). Such a gate neither passes nor fails."""
        if self.gate_pct is None:
            return None
        if not math.isfinite(self.verdict.change_pct):
            return "a run has no step time"
        unrelated = next((n for n in self.notes if n.startswith(NOT_ONE_JOB)), None)
        if unrelated is None:
            return None
        why = unrelated.removeprefix(NOT_ONE_JOB).split(": the verdict")[0].strip()
        return f"not one job: {why}"

    def to_dict(self, n_operators: int | None = None) -> dict[str, Any]:
        """The comparison in its JSON layout (``kind`` "compare", ``schema_version`` "1"):
        no NaN (None instead), times in ms, changes in %.

        Parameters
        ----------
        n_operators : int, optional
            Keep the ``n_operators`` operator rows that moved most (default all).
        """
        v = self.verdict
        ops = self.operators if n_operators is None else self.operators.head(n_operators)
        return clean({
            "kind": "compare", "schema_version": SCHEMA_VERSION,
            "perfkit_version": __version__,
            "a": self.a.to_dict(), "b": self.b.to_dict(),
            "verdict": {"word": v.word, "change_pct": v.change_pct, "noise_pct": v.noise_pct,
                        "method": v.method, "assumptions": list(v.assumptions),
                        "threshold_pct": v.threshold_given_pct, "band_pct": v.threshold_pct,
                        "basis": v.basis,
                        "work_scale": v.work_scale,
                        "throughput_change_pct": throughput_change_pct(v.change_pct)},
            "parts": _records(self.parts, ("part", "a_ms", "b_ms", "delta_ms")),
            "kinds": _records(self.kinds, ("kind", "a_ms", "b_ms", "delta_ms")),
            "operators": _records(ops, ("name", "shape", "a_ms", "b_ms", "delta_ms",
                                        "matched", "a_calls", "b_calls")),
            "job_changes": _records(self.job_changes, ("field", "a", "b")),
            "gate": {"pct": self.gate_pct,
                     "failed": None if self.gate_not_judged else self.gate_failed,
                     "not_judged": self.gate_not_judged},
            "notes": list(self.notes)})

    def to_frame(self) -> pd.DataFrame:
        """Every difference in one table: ``table`` (step, part, kind, operator), ``key``,
        ``a_ms``, ``b_ms``, ``delta_ms``; the step row first (B scaled to A's work)."""
        step = pd.DataFrame([{"table": "step", "key": "step", "a_ms": self.a.step_ms,
                              "b_ms": self.b.step_ms * self.verdict.work_scale}])
        step["delta_ms"] = step["b_ms"] - step["a_ms"]
        frames = [step]
        for name, frame, key in (("part", self.parts, "part"), ("kind", self.kinds, "kind"),
                                 ("operator", self.operators, "name")):
            if not frame.empty:
                f = frame[[key, "a_ms", "b_ms", "delta_ms"]].rename(columns={key: "key"})
                frames.append(f.assign(table=name))
        out = pd.concat(frames, ignore_index=True)
        return out[["table", "key", "a_ms", "b_ms", "delta_ms"]]

    def text(self, n_operators: int = 10) -> str:
        """The comparison for a terminal (what ``perfkit compare`` prints)."""
        return comparison_text(self, n_operators)

    def html(self, n_operators: int = 20) -> str:
        """The comparison as a self-contained HTML page (no script, no remote link)."""
        return comparison_page(self, n_operators)

    def _repr_html_(self) -> str:
        return comparison_html(self)

    def headline(self) -> str:
        """One sentence: "B is 28.6 % faster than A per token per device (band …)"."""
        return verdict_sentence(self.verdict, self.a.label, self.b.label, self.a.step_ms,
                                self.b.step_ms)


def _records(frame: pd.DataFrame, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    if frame is None or frame.empty:
        return []
    out = []
    for row in frame.to_dict("records"):
        out.append({c: row.get(c) for c in columns})
    return out


def clean(value: Any) -> Any:
    """``value`` with every NaN / NA as None and numpy scalars as Python ones (for JSON)."""
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if value is None or value is pd.NA:
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
