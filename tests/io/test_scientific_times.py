"""Times written in scientific notation: read when exact, said plainly when too coarse.

Rank 1 of ``ascend/msinsight-pt-gpt3-old`` has a ``memory_record.csv`` whose every
``Timestamp(us)`` reads ``1.69512E+15`` (six significant digits, as a spreadsheet program
saves large numbers): each time is rounded to 10**10 µs (2.78 h), and read as a number it
would put the memory samples 77 minutes after the rank's step. Checked against the raw csv
(read here with csv and decimal): the samples keep their sizes, get no time, and a note
names the file and says why.
"""

from __future__ import annotations

import csv
import re
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from shared_samples import PT_GPT3_OLD, sample

from perfkit.io._common import to_ns
from perfkit.io.ascend import text as ascend

OLD1 = sample(PT_GPT3_OLD) / "test_rank_1"
_SCI = re.compile(r"^(\d+)\.(\d+)E\+(\d+)$")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.shared_samples
def test_memory_times_rounded_to_hours_are_left_out_with_a_note():
    out = OLD1 / "ASCEND_PROFILER_OUTPUT"
    record = _rows(out / "memory_record.csv")
    stamps = [r["Timestamp(us)"] for r in record]
    parsed = [_SCI.match(s) for s in stamps]
    assert all(parsed)  # every time of the file is in scientific notation
    digits = {len(m.group(1) + m.group(2)) for m in parsed}
    step_us = {10 ** (int(m.group(3)) - len(m.group(2))) for m in parsed}
    assert digits == {6} and step_us == {10 ** 10}
    # read as numbers they would lie far outside the rank's step
    tasks = [float(r["Start Time(us)"]) for r in _rows(out / "kernel_details.csv")]
    off = min(abs(float(Decimal(s)) - t) for s in stamps for t in tasks)
    (step,) = _rows(out / "step_trace_time.csv")
    assert off > 10 * float(step["Stage"])  # 4,622 s from a 295 ms step

    meta, tables = ascend.parse(OLD1)
    memory = tables["memory"]
    mine = memory[memory["source"] == "memory_record"]
    assert len(mine) == len(record)
    assert mine["ts_us"].isna().all()  # no time, rather than a wrong one
    raw_reserved = [float(r["Total Reserved(MB)"]) * 1024 * 1024 for r in record]
    assert mine["reserved_bytes"].tolist() == pytest.approx(raw_reserved)  # sizes kept
    said = [n for n in meta.notes if n.startswith("memory_record.csv Timestamp(us)")]
    assert len(said) == 1
    hours = 10 ** 10 / 3.6e9
    assert (f"{len(record)} of {len(record)} values are written in scientific notation "
            f"with 6 significant digits ({stamps[0]}), which rounds each time to the "
            f"nearest {hours:.2f} h") in said[0]
    assert "not readable as a number" not in said[0]


def test_a_time_in_scientific_notation_exact_to_the_microsecond_is_read():
    cells = ["1.695115378653323E+15", "1.6951153786533235e15", "1.69512E+15", "12:00"]
    got = to_ns(pa.array(cells), len(cells)).to_pylist()
    want = [int(Decimal(cells[0]) * 1000), int(Decimal(cells[1]) * 1000), None, None]
    assert got == want
