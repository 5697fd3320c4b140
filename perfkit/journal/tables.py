"""A run's rows in the journal's tables, and the tables read back as frames.

:func:`insert_details` writes a :class:`~perfkit.journal.record.RunRecord`'s tables (job,
metrics, breakdown, findings, operators) in the transaction that adds its run;
:func:`read_record` reads them back; :func:`runs_frame` is the one-row-a-run table of
:meth:`perfkit.journal.Journal.runs`.
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any

import pandas as pd

from .record import (
    BREAKDOWN_COLUMNS,
    FINDING_COLUMNS,
    JOB_COLUMNS,
    METRIC_COLUMNS,
    OPERATOR_COLUMNS,
    RunRecord,
)
from .record.basis import rebased
from .run import Run

__all__ = ["RUNS_COLUMNS", "insert_details", "read_record", "runs_frame"]

#: Columns of :meth:`Journal.runs`.
RUNS_COLUMNS = (
    "id", "label", "added_utc", "profiled_utc", "note", "path", "fingerprint", "job",
    "world_size", "dp", "tp", "pp", "vpp", "num_micro_batches", "recompute",
    "recompute_layers", "step_time_s", "tokens_per_s_per_device", "tokens_per_s_per_p",
    "mfu", "mfu_text", "hfu", "hfu_text", "peak_memory_gib", "computing_share",
    "comm_not_overlapped_share", "free_share", "bubble_share", "preparing_share", "n_findings",
    "top_finding", "provenance")


def _none_if_nan(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        value = value.item()
        if isinstance(value, float) and math.isnan(value):
            return None
    return value


def insert_details(conn: sqlite3.Connection, run_id: int, record: RunRecord) -> None:
    """The run's tables (in the same transaction as its row)."""
    def rows(frame: pd.DataFrame, columns: tuple[str, ...], position: bool) -> list:
        out = []
        for i, values in enumerate(frame[list(columns)].itertuples(index=False), 1):
            out.append((run_id, *([i] if position else []),
                        *(_none_if_nan(v) for v in values)))
        return out

    conn.executemany("INSERT INTO job VALUES (?, ?, ?, ?, ?, ?)",
                     rows(record.job, JOB_COLUMNS, False))
    conn.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     rows(record.metrics, METRIC_COLUMNS, True))
    conn.executemany("INSERT INTO breakdown VALUES (?, ?, ?, ?, ?)",
                     rows(record.breakdown, BREAKDOWN_COLUMNS, True))
    findings = record.findings.drop(columns=["position"])
    conn.executemany("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     rows(findings, FINDING_COLUMNS[1:], True))
    conn.executemany("INSERT INTO operators VALUES (?, ?, ?, ?, ?)",
                     rows(record.operators, OPERATOR_COLUMNS, False))


def read_record(conn: sqlite3.Connection, run: Run) -> RunRecord:
    """Everything stored for ``run``, read over ``conn``, as a
    :class:`~perfkit.journal.record.RunRecord` (``label``, ``path`` as stored)."""
    row = conn.execute("SELECT profile_bytes, source_format, framework, ranks, "
                       "job_problems, operator_names_total, perfkit_version FROM runs "
                       "WHERE id = ?", (run.id,)).fetchone()

    def frame(table: str, columns: tuple[str, ...], order: str) -> pd.DataFrame:
        cur = conn.execute(f"SELECT {', '.join(columns)} FROM {table} "
                           f"WHERE run_id = ? ORDER BY {order}", (run.id,))
        return pd.DataFrame(cur.fetchall(), columns=list(columns))

    job = frame("job", JOB_COLUMNS, "rowid")
    metrics = frame("metrics", METRIC_COLUMNS, "position")
    breakdown = frame("breakdown", BREAKDOWN_COLUMNS, "position")
    findings = frame("findings", FINDING_COLUMNS, "position")
    operators = frame("operators", OPERATOR_COLUMNS, "rowid")
    metrics["value"] = pd.to_numeric(metrics["value"], errors="coerce").astype(float)
    for col in ("us", "share"):
        breakdown[col] = pd.to_numeric(breakdown[col], errors="coerce").astype(float)
    breakdown = rebased(breakdown)  # an older run's shares: of the sum of its parts
    for col in ("ms_per_step", "score"):
        findings[col] = pd.to_numeric(findings[col], errors="coerce").astype(float)
    findings["measured"] = findings["measured"].astype(bool)
    for col in ("count", "us"):
        operators[col] = pd.to_numeric(operators[col], errors="coerce").astype(float)
    return RunRecord(
        path=run.path, fingerprint=run.fingerprint, profile_bytes=int(row[0] or 0),
        label=run.label, note=run.note, job_line=run.job_line,
        job_problems=tuple(json.loads(row[4])), job=job, metrics=metrics,
        breakdown=breakdown, findings=findings, operators=operators,
        operator_names_total=int(row[5]), source_format=row[1], framework=row[2],
        ranks=row[3], profiled_utc=run.profiled_utc, added_utc=run.added_utc,
        provenance=run.provenance, perfkit_version=row[6])


def runs_frame(conn: sqlite3.Connection) -> pd.DataFrame:
    """Every run of the journal read over ``conn``, one row each, in the order added
    (columns :data:`RUNS_COLUMNS`; see :meth:`perfkit.journal.Journal.runs`)."""
    base = pd.read_sql_query(
        "SELECT id, label, added_utc, profiled_utc, note, path, fingerprint, "
        "job_line AS job, provenance FROM runs ORDER BY id", conn)
    metrics = pd.read_sql_query("SELECT run_id, key, value, text FROM metrics", conn)
    job = pd.read_sql_query("SELECT run_id, field, value FROM job WHERE field IN "
                            "('world_size', 'dp', 'tp', 'pp', 'vpp', "
                            "'num_micro_batches', 'recompute', 'recompute_layers')", conn)
    shares = _rebased_shares(pd.read_sql_query(
        "SELECT run_id, part, us, share FROM breakdown ORDER BY run_id, position", conn))
    findings = pd.read_sql_query("SELECT run_id, position, title FROM findings", conn)
    if base.empty:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in RUNS_COLUMNS})
    out = base.set_index("id")
    for field in ("world_size", "dp", "tp", "pp", "vpp", "num_micro_batches",
                  "recompute", "recompute_layers"):
        values = job[job["field"] == field].set_index("run_id")["value"].map(json.loads)
        out[field] = values.reindex(out.index)
    value = metrics.pivot(index="run_id", columns="key", values="value") \
        if not metrics.empty else pd.DataFrame(index=out.index)
    text = metrics.pivot(index="run_id", columns="key", values="text") \
        if not metrics.empty else pd.DataFrame(index=out.index)
    for key in ("step_time_s", "tokens_per_s_per_device", "tokens_per_s_per_p", "mfu",
                "hfu"):
        out[key] = pd.to_numeric(value.get(key), errors="coerce").reindex(out.index) \
            if key in value else float("nan")
    for key in ("mfu", "hfu"):
        out[f"{key}_text"] = text[key].reindex(out.index) if key in text else None
    peak = pd.to_numeric(value["peak_memory_bytes"], errors="coerce") \
        if "peak_memory_bytes" in value else pd.Series(dtype=float)
    out["peak_memory_gib"] = (peak / 2**30).reindex(out.index)
    for part in ("computing", "comm_not_overlapped", "free", "bubble", "preparing"):
        s = shares[shares["part"] == f"{part}_us"].set_index("run_id")["share"]
        out[f"{part}_share"] = pd.to_numeric(s, errors="coerce").reindex(out.index)
    out["n_findings"] = findings.groupby("run_id").size().reindex(out.index) \
        .fillna(0).astype(int)
    first = findings[findings["position"] == 1].set_index("run_id")["title"]
    out["top_finding"] = first.reindex(out.index)
    out = out.reset_index()
    for col in ("note", "path", "profiled_utc", "provenance", "top_finding", "mfu_text",
                "hfu_text"):  # text or None, never NaN
        out[col] = out[col].astype(object).where(out[col].notna(), None)
    return out[list(RUNS_COLUMNS)]


def _rebased_shares(breakdown: pd.DataFrame) -> pd.DataFrame:
    """``run_id``, ``part``, ``share`` with every run's shares of the job's step
    (:func:`~perfkit.journal.record.basis.rebased`: an older run's of the sum of its
    parts)."""
    if breakdown.empty:
        return breakdown[["run_id", "part", "share"]]
    frames = []
    for run_id, rows in breakdown.groupby("run_id", sort=False):
        rows = rows[["part", "us", "share"]].astype({"us": float, "share": float})
        frames.append(rebased(rows.reset_index(drop=True)).assign(run_id=run_id))
    return pd.concat(frames, ignore_index=True)[["run_id", "part", "share"]]
