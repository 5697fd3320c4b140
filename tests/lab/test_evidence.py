"""The step questions' answers can be computed from the evidence table the student reads.

The ``job_steps`` view (:meth:`perfkit.lab.evidence.Evidence.job_steps`) is what a student
has to answer the throughput and exposed-communication questions with. Its columns are
checked against each rank's ``step_trace_time.csv`` read here with ``csv``, and every
student's answer is recomputed from the table's rows alone and compared with the key and
with plain arithmetic on the raw file. The table showed ``step_ms`` as the device span
(Computing + Communication(Not Overlapped) + Free) and no exposed-communication column,
while the answers divide exposed communication (not overlapped − bubble) by the
Overview's step (the device span and the Preparing before it): on the intro pack (seed
11) student-2's table read 594.4 ms for a step the key counts as 781.6 ms.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from statistics import median
from typing import Any

import pytest

from perfkit.lab.evidence import Evidence
from perfkit.lab.key import read_sheet
from perfkit.lab.questions import QUESTIONS

pytestmark = pytest.mark.xdist_group("lab")

REL = 1e-9


def _raw_steps(profile: Path) -> dict[int, dict[str, float]]:
    """Rank -> its row of step_trace_time.csv (µs); the rank from profiler_info_<rank>.json."""
    out = {}
    for d in profile.iterdir():
        (info,) = d.glob("profiler_info_*.json")
        with (d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").open(newline="") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 1, "one step per profile"
        out[int(info.stem.rsplit("_", 1)[1])] = {k: float(v) for k, v in rows[0].items()}
    return out


def _wall_us(row: dict[str, float]) -> float:
    """The Overview's step: Computing + Communication(Not Overlapped) + Free + Preparing."""
    return (row["Computing"] + row["Communication(Not Overlapped)"] + row["Free"]
            + row["Preparing"])


def _tokens_per_s_per_device(settings: dict[str, Any], step_s: float) -> float:
    p, m = settings["parallel"], settings["model"]
    gbs = p["dp"] * p["micro_batch_size"] * p["num_micro_batches"]
    return gbs * m["seq_length"] / step_s / (p["dp"] * p["tp"] * p["pp"])


def _check_pack(pack: Path) -> int:
    key = json.loads((pack / "instructor" / "key.json").read_text())
    checked = 0
    for student, entry in key["entries"].items():
        job = entry["settings"]["job"]
        raw = _raw_steps(pack / student / job["path"])
        table = Evidence(pack / student, read_sheet(pack / student)).job_steps()
        assert sorted(table["rank"]) == sorted(raw)
        # the columns, against the raw file
        for _, r in table.iterrows():
            row = raw[int(r["rank"])]
            span = row["Computing"] + row["Communication(Not Overlapped)"] + row["Free"]
            assert math.isclose(r["step_ms"], _wall_us(row) / 1e3, rel_tol=REL)
            assert math.isclose(r["device_span_ms"], span / 1e3, rel_tol=REL)
            assert math.isclose(r["preparing_ms"], row["Preparing"] / 1e3, rel_tol=REL)
            exposed = row["Communication(Not Overlapped)"] - row["Bubble"]
            assert math.isclose(
                r["exposed_comm_ms"] * 1e3,
                row["Communication(Not Overlapped and Exclude Receive)"],
                rel_tol=1e-9, abs_tol=1e-6)
            assert math.isclose(r["exposed_comm_ms"], exposed / 1e3, rel_tol=1e-9,
                                abs_tol=1e-9)
        answers = entry["answers"]
        r0 = table[table["rank"] == 0].iloc[0]
        row = raw[0]
        for _, r in table.iterrows():  # the bubble column, against the raw file
            assert math.isclose(r["bubble_ms"], raw[int(r["rank"])]["Bubble"] / 1e3,
                                rel_tol=1e-9, abs_tol=1e-12)
        # exposed communication (a job with collectives) or the bubble (a pipeline):
        # rank 0's row of the table alone
        asked = [q for q in ("exposed_comm", "step_bubble") if q in answers]
        assert len(asked) == 1, (student, asked)
        if "exposed_comm" in answers:
            from_table = 100 * r0["exposed_comm_ms"] / r0["step_ms"]
            by_hand = 100 * (row["Communication(Not Overlapped)"] - row["Bubble"]) \
                / _wall_us(row)
        else:
            from_table = 100 * r0["bubble_ms"] / r0["step_ms"]
            by_hand = 100 * row["Bubble"] / _wall_us(row)
        assert math.isclose(answers[asked[0]]["answer"], from_table, rel_tol=1e-9), \
            (student, from_table)
        assert math.isclose(from_table, by_hand, rel_tol=1e-9, abs_tol=1e-12)
        # throughput: the slowest rank's step_ms of each step, the median over steps
        step_s = median(table.groupby("step")["step_ms"].max()) / 1e3
        tps = _tokens_per_s_per_device(job, step_s)
        assert math.isclose(answers["throughput"]["answer"], tps, rel_tol=1e-9), (student, tps)
        by_hand = _tokens_per_s_per_device(job, max(_wall_us(r) for r in raw.values()) / 1e6)
        assert math.isclose(tps, by_hand, rel_tol=1e-9)
        checked += 1
    return checked


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_the_step_answers_are_computable_from_the_intro_evidence(intro_pack: Path) -> None:
    """Six intro students: throughput and exposed communication from ``job_steps``."""
    assert _check_pack(intro_pack) == 6


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_step_answers_are_computable_from_the_advanced_evidence(
        advanced_pack: Path) -> None:
    """Two advanced students: the same, for the other level's pack."""
    assert _check_pack(advanced_pack) == 2


def test_the_step_hints_name_columns_of_the_step_table(intro_pack: Path) -> None:
    """The hints of the questions answered from ``job_steps`` point at the columns the
    answer is computed from, and those columns are in the table."""
    student = intro_pack / "student-1"
    columns = set(Evidence(student, read_sheet(student)).job_steps().columns)
    for qid, needed in (("throughput", {"step_ms"}),
                        ("exposed_comm", {"step_ms", "exposed_comm_ms"}),
                        ("step_bubble", {"step_ms", "bubble_ms"})):
        q = QUESTIONS[qid]
        assert "job_steps" in q.evidence
        named = set(re.findall(r"\b[a-z_]+_ms\b", q.hint))
        assert needed <= named, (qid, named)
        assert named <= columns, (qid, named - columns)
