"""What changed between two runs of the journal: the job, the metrics, the step, the
operators, the findings, and one sentence that says it.

:func:`compare_records` works on two :class:`~perfkit.journal.record.RunRecord` (what the
journal stores), so a comparison needs no profile: the operator diff is
:func:`perfkit.analysis.compare.compare_totals` of the stored per-step tables, the same
diff :func:`perfkit.analysis.compare_profiles` makes of the profiles. :func:`change_sentence`
writes the comparison the way a tuning log reads: "pipeline 1→2, step −14 %, bubble +1.2 %
of the step, recompute FLOPs −25 %".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._shares import rounded_split
from ..analysis.compare import compare_profiles, compare_totals
from ..errors import InvalidArgumentError
from ..format import MISSING, WARNING_MARK
from ..job import JOB_FIELDS
from .record import METRIC_KEYS, RunRecord, flops_text
from .record.basis import BASE_PARTS, basis_of, uneven_steps_note

__all__ = ["RunComparison", "compare_records", "change_sentence", "job_diff", "metrics_diff",
           "breakdown_diff", "operators_diff", "findings_diff", "JOB_DIFF_COLUMNS",
           "METRICS_DIFF_COLUMNS", "BREAKDOWN_DIFF_COLUMNS", "FINDINGS_DIFF_COLUMNS",
           "SENTENCE_FIELDS", "MINUS"]

#: The minus sign of the sentence (U+2212, as in print).
MINUS = "\u2212"
JOB_DIFF_COLUMNS = ("field", "kind", "base", "new", "changed", "base_source", "new_source")
METRICS_DIFF_COLUMNS = ("key", "metric", "unit", "base", "new", "delta", "delta_pct",
                        "base_text", "new_text", "warning")
BREAKDOWN_DIFF_COLUMNS = ("part", "base_us", "new_us", "delta_us", "delta_pct", "base_share",
                          "new_share", "delta_share")
FINDINGS_DIFF_COLUMNS = ("rule", "status", "base_title", "new_title", "severity",
                         "base_ms_per_step", "new_ms_per_step", "base_count", "new_count")

#: Job fields the sentence names when they change, in its order, with their words.
SENTENCE_FIELDS: dict[str, str] = {
    "pp": "pipeline", "vpp": "virtual stages", "tp": "tensor parallel",
    "dp": "data parallel", "cp": "context parallel", "ep": "expert parallel",
    "world_size": "devices", "micro_batch_size": "micro-batch size",
    "num_micro_batches": "micro-batches", "global_batch_size": "global batch",
    "seq_length": "sequence", "recompute": "recompute",
    "recompute_layers": "full-recompute layers", "sequence_parallel": "sequence parallel",
    "optimizer_shard": "optimizer shard", "zero_stage": "ZeRO stage",
    "name": "model", "num_layers": "layers", "hidden_size": "hidden",
    "num_attention_heads": "heads", "num_kv_heads": "key/value heads",
    "ffn_hidden_size": "FFN", "vocab_size": "vocabulary", "mlp": "MLP",
    "num_experts": "experts", "moe_top_k": "top-k", "dtype": "dtype",
    "hardware": "hardware",
}
#: Most job changes the sentence names before "and N more".
MAX_SENTENCE_CHANGES = 6
_PART_WORDS = {"wall_us": "step", "step_us": "device span", "computing_us": "computing",
               "comm_not_overlapped_us": "exposed communication",
               "overlapped_us": "overlapped communication", "free_us": "free",
               "bubble_us": "bubble", "preparing_us": "preparing"}


@dataclass(frozen=True)
class RunComparison:
    """What changed from one run (``base``) to another (``new``).

    Attributes
    ----------
    base_label, new_label : str
    job : pandas.DataFrame
        Field by field (:data:`JOB_DIFF_COLUMNS`): the value of each side as text, whether
        it changed, and each side's source (profile, config, user, default).
    metrics : pandas.DataFrame
        :data:`METRICS_DIFF_COLUMNS`; ``delta_pct`` of the base; a figure a guard flagged
        has no value (its text says "⚠ not plausible").
    breakdown : pandas.DataFrame
        :data:`BREAKDOWN_DIFF_COLUMNS`: the job's step and its parts; ``delta_share``
        is the change of the part's share of the step (a fraction: 0.012 = 1.2 points).
    operators : pandas.DataFrame
        :data:`perfkit.analysis.compare.COMPARE_COLUMNS`, per (rank, step);
        ``attrs["notes"]`` says whether it came from the stored tables or the profiles.
    findings : pandas.DataFrame
        :data:`FINDINGS_DIFF_COLUMNS`, one row per advisor rule: ``status`` is
        ``appeared``, ``disappeared`` or ``kept``.
    operators_source : str
        ``"stored"`` or ``"profiles"``.
    """

    base_label: str
    new_label: str
    job: pd.DataFrame = field(repr=False)
    metrics: pd.DataFrame = field(repr=False)
    breakdown: pd.DataFrame = field(repr=False)
    operators: pd.DataFrame = field(repr=False)
    findings: pd.DataFrame = field(repr=False)
    operators_source: str = "stored"

    @property
    def job_changes(self) -> pd.DataFrame:
        """The job fields that changed, measurements (step time, peak memory) left out.

        Empty with the note "no job setting changed between the two runs" when none did
        (a table of it says that, not "nothing in this profile").
        """
        j = self.job
        out = j[j["changed"] & (j["kind"] != "measured")].reset_index(drop=True)
        if out.empty:
            out.attrs["notes"] = ["no job setting changed between the two runs"]
        return out

    @property
    def mismatches(self) -> list[str]:
        """What makes the two runs not like for like, in words (empty when nothing does):
        another hardware, another precision (the job's ``dtype``), or an inference step
        against a training one (the advisor's ``workload_fit`` finding, which only an
        inference step has). A step time compared across them measures the change of
        kind, not a tuning change."""
        out = []
        j = self.job.set_index("field")
        for name, words in (("hardware", "hardware"), ("dtype", "precision")):
            if name in j.index and bool(j.loc[name, "changed"]) and \
                    MISSING not in (j.loc[name, "base"], j.loc[name, "new"]):
                out.append(f"{words} {j.loc[name, 'base']}→{j.loc[name, 'new']}")
        f = self.findings.set_index("rule")
        if "workload_fit" in f.index:
            status = f.loc["workload_fit", "status"]
            if status == "appeared":
                out.append("the new run is an inference step, the base run is not")
            elif status == "disappeared":
                out.append("the base run is an inference step, the new run is not")
        return out

    @property
    def appeared(self) -> pd.DataFrame:
        """Findings the new run has and the base run had not."""
        return self.findings[self.findings["status"] == "appeared"].reset_index(drop=True)

    @property
    def disappeared(self) -> pd.DataFrame:
        """Findings the base run had and the new run has not."""
        return self.findings[self.findings["status"] == "disappeared"].reset_index(drop=True)

    def metric(self, key: str) -> pd.Series:
        """One row of :attr:`metrics` (base, new, delta, delta_pct ...)."""
        rows = self.metrics[self.metrics["key"] == key]
        if rows.empty:
            raise InvalidArgumentError("key", "must be one of " + ", ".join(METRIC_KEYS), key)
        return rows.iloc[0]

    def sentence(self) -> str:
        """The comparison in one line (:func:`change_sentence`)."""
        return change_sentence(self)

    def __str__(self) -> str:
        return f"{self.base_label} → {self.new_label}: {self.sentence()}"


# --------------------------------------------------------------------------------------
# the parts
# --------------------------------------------------------------------------------------

def _show(text: Any) -> str:
    """A stored job value (JSON text) for people: ``null`` → ``–``, lists as ``[1, 0]``."""
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return str(text)
    if value is None:
        return "–"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def job_diff(base: RunRecord, new: RunRecord) -> pd.DataFrame:
    """The two jobs field by field (:data:`JOB_DIFF_COLUMNS`), in the order of
    :data:`perfkit.job.JOB_FIELDS`."""
    b = base.job.set_index("field")
    w = new.job.set_index("field")
    rows = []
    for name in [f for f in JOB_FIELDS if f in b.index or f in w.index]:
        bv = b["value"].get(name)
        wv = w["value"].get(name)
        rows.append({"field": name,
                     "kind": (b["kind"].get(name) if name in b.index else w["kind"].get(name)),
                     "base": _show(bv) if bv is not None else "–",
                     "new": _show(wv) if wv is not None else "–",
                     "changed": not _same_json(bv, wv),
                     "base_source": b["source"].get(name), "new_source": w["source"].get(name)})
    return pd.DataFrame(rows, columns=list(JOB_DIFF_COLUMNS))


def _same_json(a: Any, b: Any) -> bool:
    try:
        x = json.loads(a) if isinstance(a, str) else a
        y = json.loads(b) if isinstance(b, str) else b
    except ValueError:
        return a == b
    if isinstance(x, float) or isinstance(y, float):
        try:
            return math.isclose(float(x), float(y), rel_tol=1e-9)
        except (TypeError, ValueError):
            return False
    return x == y


def _num(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return v


def metrics_diff(base: RunRecord, new: RunRecord) -> pd.DataFrame:
    """The metrics of both runs side by side (:data:`METRICS_DIFF_COLUMNS`):
    ``delta = new − base``, ``delta_pct = 100 · delta / base`` (NaN where a side has no
    value, or a guard flagged it)."""
    b = base.metrics.set_index("key")
    w = new.metrics.set_index("key")
    keys = [k for k in METRIC_KEYS if k in b.index or k in w.index]
    rows = []
    for key in keys:
        side = b if key in b.index else w
        bv = _num(b["value"].get(key)) if key in b.index else float("nan")
        wv = _num(w["value"].get(key)) if key in w.index else float("nan")
        delta = wv - bv
        warnings = [s for s in (b["warning"].get(key) if key in b.index else None,
                                w["warning"].get(key) if key in w.index else None)
                    if isinstance(s, str) and s]
        rows.append({"key": key, "metric": side["metric"][key], "unit": side["unit"][key],
                     "base": bv, "new": wv, "delta": delta,
                     "delta_pct": 100.0 * delta / bv if bv and math.isfinite(bv) else np.nan,
                     "base_text": b["text"].get(key, "–") if key in b.index else "–",
                     "new_text": w["text"].get(key, "–") if key in w.index else "–",
                     "warning": "; ".join(warnings) or None})
    out = pd.DataFrame(rows, columns=list(METRICS_DIFF_COLUMNS))
    for col in ("base", "new", "delta", "delta_pct"):
        out[col] = out[col].astype(float)
    return out


def breakdown_diff(base: RunRecord, new: RunRecord) -> pd.DataFrame:
    """The job's step and its parts side by side (:data:`BREAKDOWN_DIFF_COLUMNS`).

    Each share is of the run's own step, ``wall_us`` (the device span and the wait before
    the first device task, :mod:`perfkit.journal.record.basis`), the step time its metrics
    give; computing, communication not overlapped, free and the wait are rounded together
    (:func:`perfkit._shares.rounded_split`) so that what is shown adds up to 100.0 %, and
    the device span's share is the sum of its three rounded parts.
    ``attrs["notes"]`` names the basis of a run recorded before the journal kept the job's
    step (:data:`~perfkit.journal.record.basis.OLD_BASIS`).
    """
    b = base.breakdown.set_index("part")
    w = new.breakdown.set_index("part")
    parts = [p for p in _PART_WORDS if p in b.index or p in w.index]
    out = pd.DataFrame({"part": parts,
                        "base_us": [_num(b["us"].get(p)) for p in parts],
                        "new_us": [_num(w["us"].get(p)) for p in parts],
                        "base_share": [_num(b["share"].get(p)) for p in parts],
                        "new_share": [_num(w["share"].get(p)) for p in parts]})
    split = out["part"].isin(BASE_PARTS)
    if split.any():
        rounded = rounded_split(out.loc[split, ["base_share", "new_share"]].T).T
        out.loc[split, ["base_share", "new_share"]] = rounded
        span = out["part"].isin(BASE_PARTS[:3])  # the device span: the step less the wait
        if span.sum() == 3 and "step_us" in set(out["part"]):
            out.loc[out["part"] == "step_us", ["base_share", "new_share"]] = \
                out.loc[span, ["base_share", "new_share"]].sum(min_count=3).to_numpy()
    out["delta_us"] = out["new_us"] - out["base_us"]
    out["delta_pct"] = 100.0 * out["delta_us"] / out["base_us"].where(out["base_us"] > 0)
    out["delta_share"] = out["new_share"] - out["base_share"]
    out = out[list(BREAKDOWN_DIFF_COLUMNS)].astype(
        {c: float for c in BREAKDOWN_DIFF_COLUMNS if c != "part"})
    out.attrs["notes"] = [f"Run '{r.label}' was {basis_of(r.breakdown)}."
                          for r in (base, new) if basis_of(r.breakdown)]
    out.attrs["notes"] += [n for n in (uneven_steps_note(r.breakdown, r.label)
                                       for r in (base, new)) if n]
    return out


def operators_diff(base: RunRecord, new: RunRecord, by: str = "category",
                   n: int | None = None) -> pd.DataFrame:
    """The operator diff from the stored tables: :func:`perfkit.analysis.compare.
    compare_totals` of both runs' per-(rank, step) totals — what
    :func:`perfkit.analysis.compare_profiles` gives for the two profiles.

    A task name that a run's table left out (it keeps the
    :data:`~perfkit.journal.record.MAX_OPERATOR_NAMES` longest) is NaN on that side, not 0.
    """
    if by not in ("category", "name"):
        raise InvalidArgumentError("by", "must be 'category' or 'name'", by)

    def side(record: RunRecord) -> pd.DataFrame:
        ops = record.operators
        t = ops[ops["grouping"] == by].set_index("key")[["count", "us"]].astype(float)
        return t.rename_axis(None)

    b, w = side(base), side(new)
    out = compare_totals(b, w)
    if by == "name":
        for prefix, record, kept in (("base", base, b), ("new", new, w)):
            if record.operator_names_total > len(kept):
                unknown = ~out["key"].isin(kept.index)
                for col in ("count", "us", "share"):
                    out.loc[unknown, f"{prefix}_{col}"] = np.nan
                out.loc[unknown, ["delta_us", "delta_pct"]] = np.nan
    if n is not None:
        out = out.head(n).reset_index(drop=True)
    out.attrs["notes"] = [f"operator time per (rank, step) by {by}, from the tables stored "
                          "in the journal (the totals compare_profiles diffs)"]
    return out


def findings_diff(base: RunRecord, new: RunRecord) -> pd.DataFrame:
    """The advisor's findings of both runs by rule (:data:`FINDINGS_DIFF_COLUMNS`).

    A rule that fired several times counts once, with its milliseconds per step summed
    (NaN when none was measured) and its first title. Order: appeared, disappeared, kept;
    within each, most milliseconds at stake first.
    """
    def by_rule(record: RunRecord) -> pd.DataFrame:
        f = record.findings
        if f.empty:
            return pd.DataFrame(columns=["title", "severity", "ms", "count"])
        g = f.groupby("rule", sort=False)
        return pd.DataFrame({"title": g["title"].first(), "severity": g["severity"].first(),
                             "ms": g["ms_per_step"].sum(min_count=1),
                             "count": g.size()})

    b, w = by_rule(base), by_rule(new)
    rules = list(dict.fromkeys([*b.index, *w.index]))
    rows = []
    for rule in rules:
        in_b, in_w = rule in b.index, rule in w.index
        status = "kept" if in_b and in_w else "appeared" if in_w else "disappeared"
        rows.append({"rule": rule, "status": status,
                     "base_title": b["title"][rule] if in_b else None,
                     "new_title": w["title"][rule] if in_w else None,
                     "severity": (w if in_w else b)["severity"][rule],
                     "base_ms_per_step": float(b["ms"][rule]) if in_b else np.nan,
                     "new_ms_per_step": float(w["ms"][rule]) if in_w else np.nan,
                     "base_count": int(b["count"][rule]) if in_b else 0,
                     "new_count": int(w["count"][rule]) if in_w else 0})
    out = pd.DataFrame(rows, columns=list(FINDINGS_DIFF_COLUMNS))
    if out.empty:
        return out
    order = out["status"].map({"appeared": 0, "disappeared": 1, "kept": 2})
    stake = out["new_ms_per_step"].fillna(out["base_ms_per_step"]).fillna(0.0)
    out = out.assign(_o=order, _s=-stake).sort_values(["_o", "_s"], kind="mergesort")
    return out.drop(columns=["_o", "_s"]).reset_index(drop=True)


def compare_records(base: RunRecord, new: RunRecord, *, profiles: tuple[Any, Any] | None = None,
                    by: str = "category", n: int | None = None) -> RunComparison:
    """Compare two stored runs.

    Parameters
    ----------
    base, new : RunRecord
        From :meth:`perfkit.journal.Journal.record` (or :func:`perfkit.journal.measure_run`).
    profiles : (Profile, Profile), optional
        The two profiles: the operator diff is then :func:`perfkit.analysis.compare_profiles`
        of them, else it comes from the stored tables (:func:`operators_diff`).
    by : {"category", "name"}
    n : int, optional
        Keep the ``n`` operator rows that moved most.

    Returns
    -------
    RunComparison
    """
    if profiles is not None:
        operators = compare_profiles(profiles[0], profiles[1], by=by, n=n)
        operators.attrs["notes"] = [f"operator time per (rank, step) by {by}, from the "
                                    "profiles (compare_profiles)"]
        source = "profiles"
    else:
        operators = operators_diff(base, new, by=by, n=n)
        source = "stored"
    return RunComparison(base_label=str(base.label), new_label=str(new.label),
                         job=job_diff(base, new), metrics=metrics_diff(base, new),
                         breakdown=breakdown_diff(base, new), operators=operators,
                         findings=findings_diff(base, new), operators_source=source)


# --------------------------------------------------------------------------------------
# the sentence
# --------------------------------------------------------------------------------------

def _signed(value: float, digits: int = 0) -> str:
    """``+5``, ``−14`` (a real minus sign); ``±0`` when it rounds to zero."""
    text = f"{abs(value):.{digits}f}"
    if float(text) == 0:
        return "±" + text
    return ("+" if value > 0 else MINUS) + text


def _pct_digits(value: float) -> int:
    return 1 if abs(value) < 10 else 0


def _field_change(row: pd.Series, job: pd.DataFrame) -> str:
    name = row["field"]
    base, new = row["base"], row["new"]
    if name == "recompute_layers":  # None means "all" under full recompute, "none" else
        rec = job.set_index("field")["base"].get("recompute"), \
            job.set_index("field")["new"].get("recompute")
        base = ("all" if rec[0] == "full" else "none") if base == "–" else base
        new = ("all" if rec[1] == "full" else "none") if new == "–" else new
        if base == new:
            return ""
    return f"{SENTENCE_FIELDS.get(name, name.replace('_', ' '))} {base}→{new}"


def change_sentence(comparison: RunComparison) -> str:
    """The comparison in one line, the way a tuning log reads.

    Returns
    -------
    str
        E.g. ``"pipeline 1→2, data parallel 16→8, step +5.3 %, bubble +11.8 % of the
        step, peak memory −37 %"``: first a warning when the runs are not like for like
        (:attr:`RunComparison.mismatches`: ``"⚠ not like for like (hardware
        ascend-910b→h100; precision fp32→bf16; ...)"``), then the job settings that
        changed (in the order of :data:`SENTENCE_FIELDS`: layout, batch, recompute, model,
        hardware; at most
        :data:`MAX_SENTENCE_CHANGES`, then "and N more job changes"), then the measured
        step time (relative change), tokens/s per device when the devices, the batch or
        the sequence length changed (else it says what the step's change says), the
        pipeline bubble's share of the job's step (the change in percentage points,
        written "% of the step"), the recompute FLOPs per step (theory for the job,
        relative change) and the measured peak memory (relative change). A figure either
        run lacks, or that did not move, is left out (the step is always said); "no
        change recorded" when nothing is left.
    """
    if not isinstance(comparison, RunComparison):
        raise InvalidArgumentError("comparison", "must be a RunComparison (Journal.compare)",
                                   type(comparison).__name__)
    parts: list[str] = []
    if comparison.mismatches:
        parts.append(f"{WARNING_MARK} not like for like ("
                     + "; ".join(comparison.mismatches) + ")")
    changes = comparison.job_changes
    order = {name: i for i, name in enumerate(SENTENCE_FIELDS)}
    changes = changes.assign(_o=changes["field"].map(order).fillna(len(order))) \
        .sort_values("_o", kind="mergesort")
    # a change the warning names already (hardware, precision) is not said twice
    said = [s for s in (_field_change(r, comparison.job) for _, r in changes.iterrows())
            if s and s not in comparison.mismatches]
    if len(said) > MAX_SENTENCE_CHANGES:
        more = len(said) - MAX_SENTENCE_CHANGES
        said = said[:MAX_SENTENCE_CHANGES] + [f"and {more} more job change"
                                              + ("s" if more > 1 else "")]
    parts += said
    m = comparison.metrics.set_index("key")

    def relative(key: str, words: str, always: bool = False) -> None:
        if key not in m.index:
            return
        pct = m["delta_pct"][key]
        if pd.notna(pct) and math.isfinite(pct) and (always or abs(pct) >= 0.05):
            parts.append(f"{words} {_signed(pct, _pct_digits(pct))} %")

    relative("step_time_s", "step", always=True)
    sized = [k for k in ("devices", "global_batch_size", "seq_length") if k in m.index]
    if any(pd.notna(m["delta"][k]) and m["delta"][k] != 0 for k in sized):
        relative("tokens_per_s_per_device", "tokens/s per device")
    bd = comparison.breakdown.set_index("part")
    if "bubble_us" in bd.index:
        d = bd["delta_share"]["bubble_us"]
        if pd.notna(d) and abs(d) >= 0.0005:
            parts.append(f"bubble {_signed(100 * d, 1)} % of the step")
    if "recompute_flops_per_step" in m.index:
        b, w = m["base"]["recompute_flops_per_step"], m["new"]["recompute_flops_per_step"]
        if pd.notna(b) and pd.notna(w) and not (b == 0 and w == 0):
            if b > 0:
                pct = 100.0 * (w - b) / b
                if abs(pct) >= 0.05:
                    parts.append(f"recompute FLOPs {_signed(pct, _pct_digits(pct))} %")
            else:
                parts.append(f"recompute FLOPs 0→{flops_text(w)} per step")
    relative("peak_memory_bytes", "peak memory")
    return ", ".join(parts) if parts else "no change recorded"
