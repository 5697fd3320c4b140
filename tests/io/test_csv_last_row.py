"""A device task list whose last row has no line end: kept when only an unread cell can be
cut, dropped when a cut could shorten a figure.

msprof-analyze's ``compute_advice_v2/kernel_details.csv`` (its unit-test input) ends
without a newline after a complete row of 46 fields; perfkit dropped that task (1.58 µs of
the 10,061.159 µs the file lists). A row that has every field can still be cut inside its
*last* field (``17902.5`` cut to ``179``, issue 31): every other field ends with a comma,
so it is whole. The kernel loader keeps such a row when its last column is none of the
columns the device task figures are built from, and reads that one cell as missing;
when the last column is one of them (duration, start, name, ...), the row is dropped as
before. The raw files are read here with ``csv`` and bytes, never through perfkit.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest
from raw_ascend import distinct_tasks
from shared_samples import shared_sample

import perfkit as pk

pytestmark = pytest.mark.shared_samples

ADVICE_V2 = "ascend/msprof-analyze-tests/compute_advice_v2"


def _rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))


def _csv_bytes(rows: list[list[str]], last_cut_to: int | None = None) -> bytes:
    """Rows written as CSV; the last row without its newline, its last field cut to
    ``last_cut_to`` characters when given."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    data = buf.getvalue().encode("utf-8").rstrip(b"\n")
    if last_cut_to is not None:
        last = rows[-1][-1]
        assert data.endswith(last.encode()) and len(last) > last_cut_to
        data = data[:len(data) - len(last) + last_cut_to]
    return data


def _once(header: list[str], rows: list[list[str]]) -> list[list[str]]:
    """The rows of distinct tasks (:func:`raw_ascend.distinct_tasks`): the file writes two
    of its tasks more than once, which perfkit counts once."""
    dicts = [dict(zip(header, r, strict=False), _i=str(i)) for i, r in enumerate(rows)]
    kept = {int(d["_i"]) for d in distinct_tasks(dicts)}
    return [r for i, r in enumerate(rows) if i in kept]


def _load(folder: Path) -> pk.Profile:
    return pk.load(folder, cache=False, progress=False)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def test_compute_advice_v2_keeps_its_last_task():
    folder = shared_sample(ADVICE_V2)
    raw = (folder / "kernel_details.csv").read_bytes()
    header, *rows = _rows(raw)
    assert not raw.endswith(b"\n") and len(rows[-1]) == len(header)  # whole, no line end
    col = {h: i for i, h in enumerate(header)}
    last = rows[-1]
    prof = _load(folder)
    k = prof.kernels
    once = _once(header, rows)
    assert len(k) == len(once) and once[-1] is last
    assert k["name"].iloc[-1] == last[col["Name"]]
    assert k["dur_us"].iloc[-1] == float(last[col["Duration(us)"]])
    assert k["wait_us"].iloc[-1] == float(last[col["Wait Time(us)"]])
    assert k["dur_us"].sum() == pytest.approx(
        math.fsum(float(r[col["Duration(us)"]]) for r in once), rel=1e-12)
    # the one cell a cut could have shortened is read as missing, never as its text
    assert header[-1] == "cube_utilization(%)" and last[-1] == "0"
    assert math.isnan(k["cube_utilization_pct"].iloc[-1])
    assert k["cube_utilization_pct"].iloc[:-1].tolist() == [float(r[-1]) for r in once[:-1]]
    said = [n for n in prof.meta.notes if n.startswith("kernel_details.csv")]  # its own
    shown = raw.decode("utf-8").splitlines()[-1][:60] + "..."
    assert said == [f"kernel_details.csv line {len(rows) + 1}: the file ends without a "
                    f"newline after its last row; the row is kept, as all its "
                    f"{len(header)} fields are there, but its last cell "
                    f"(cube_utilization(%)) may be cut short and is read as missing "
                    f"({shown!r})"]


def test_a_cut_number_in_the_unread_last_column_is_missing_not_smaller(tmp_path):
    """The first task (cube_utilization 79.295) moved to the end and cut to ``79``."""
    header, *rows = _rows((shared_sample(ADVICE_V2) / "kernel_details.csv").read_bytes())
    moved = [*rows[1:], rows[0]]
    assert rows[0][-1] == "79.295"
    (tmp_path / "kernel_details.csv").write_bytes(_csv_bytes([header, *moved], 2))
    k = _load(tmp_path).kernels
    dur = header.index("Duration(us)")
    assert len(k) == len(_once(header, moved))
    assert k["dur_us"].iloc[-1] == float(rows[0][dur])
    assert math.isnan(k["cube_utilization_pct"].iloc[-1])  # never 79
    assert k["dur_us"].sum() == pytest.approx(
        math.fsum(float(r[dur]) for r in _once(header, moved)), rel=1e-12)


@pytest.mark.parametrize("column", ["Duration(us)", "Name"])
def test_a_last_row_whose_last_column_is_read_is_still_dropped(tmp_path, column):
    """With ``column`` written last, a cut there (``185.504`` to ``18``) would be read as
    a shorter figure or a different name: the row is dropped, as a cut one."""
    header, *rows = _rows((shared_sample(ADVICE_V2) / "kernel_details.csv").read_bytes())
    at = header.index(column)

    def moved(r: list[str]) -> list[str]:
        return [*r[:at], *r[at + 1:], r[at]]

    table = [moved(header), *(moved(r) for r in [*rows[1:], rows[0]])]
    (tmp_path / "kernel_details.csv").write_bytes(_csv_bytes(table, 2))
    prof = _load(tmp_path)
    k = prof.kernels
    dur = header.index("Duration(us)")
    assert len(k) == len(_once(header, rows[1:]))  # the first task, moved last, dropped
    assert k["dur_us"].sum() == pytest.approx(
        math.fsum(float(r[dur]) for r in _once(header, rows[1:])), rel=1e-12)
    assert any("file ends mid-row" in n and "last row dropped" in n for n in prof.meta.notes)


def test_an_open_quote_in_the_last_row_is_still_dropped(tmp_path):
    """A last row cut inside its quoted last field (the field count can still be full)."""
    header, *rows = _rows((shared_sample(ADVICE_V2) / "kernel_details.csv").read_bytes())
    table = [[*h, "Note"] for h in [header]] + [[*r, "x"] for r in rows[:-1]] \
        + [[*rows[-1], "a, b"]]
    data = _csv_bytes(table)
    assert data.endswith(b'"a, b"')
    (tmp_path / "kernel_details.csv").write_bytes(data[:-1])  # the closing quote cut
    prof = _load(tmp_path)
    assert len(prof.kernels) == len(_once(header, rows[:-1]))
    assert any("last row dropped" in n for n in prof.meta.notes)
