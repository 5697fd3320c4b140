"""``read_csv(columns=...)``: only some columns converted, every row still read and checked.

The tables an Ascend rank hands over first read only the job's columns of
``kernel_details.csv`` (:data:`perfkit.io.ascend.csv.JOB_COLUMNS`). Checked against the
same file read with Python's ``csv``: the same rows and cells, on a clean file, a file
with short rows (the careful read), a header with spaces around its names, and a file cut
mid-row; a damaged file is refused as a full read refuses it.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from perfkit.errors import ProfileError
from perfkit.io._common import collecting_notes, read_csv

HEADER = ["Step Id", "Name", "Type", "Duration(us)", "Input Shapes", "aic_mac_ratio"]
ROWS = [["1", "MatMul_1", "MatMul", "10.5", '"4,8;8,16"', "0.5"],
        ["1", "Add_2", "Add", "2.25", '"4,16;4,16"', "0.1"],
        ["2", "MatMul_3", "MatMul", "11", '"4,8;8,16"', "0.6"]]
WANTED = ["Name", "Duration(us)", "Input Shapes"]


def _write(path: Path, header: list[str], rows: list[list[str]], end: str = "\n") -> Path:
    text = "\n".join(",".join(r) for r in [header, *rows]) + end
    path.write_text(text, encoding="utf-8")
    return path


def _by_csv(path: Path, names: list[str]) -> dict[str, list[str | None]]:
    """The cells of ``names`` as Python's csv reads them ("" as None)."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header = [h.strip() for h in rows[0]]
    out: dict[str, list[str | None]] = {n: [] for n in names}
    for row in rows[1:]:
        for n in names:
            i = header.index(n)
            cell = row[i].strip() if i < len(row) else ""
            out[n].append(cell or None)
    return out


def _as_text(table) -> dict[str, list[str | None]]:
    out = {}
    for name in table.column_names:
        out[name] = [None if v is None else (f"{v:g}" if isinstance(v, float) else str(v))
                     for v in table.column(name).to_pylist()]
    return out


def _expected(path: Path) -> dict[str, list[str | None]]:
    raw = _by_csv(path, WANTED)
    raw["Duration(us)"] = [None if v is None else f"{float(v):g}" for v in raw["Duration(us)"]]
    return raw


def test_only_the_columns_asked_for(tmp_path: Path) -> None:
    path = _write(tmp_path / "k.csv", HEADER, ROWS)
    table = read_csv(path, "a test CSV", text_cols=["Input Shapes"], columns=WANTED)
    assert table.column_names == WANTED
    assert _as_text(table) == _expected(path)


def test_short_rows_are_padded_in_the_columns_asked_for(tmp_path: Path) -> None:
    rows = [ROWS[0], ["1", "Add_2", "Add", "2.25"], ROWS[2]]  # a hand-trimmed row
    path = _write(tmp_path / "k.csv", HEADER, rows)
    with collecting_notes() as notes:
        table = read_csv(path, "a test CSV", text_cols=["Input Shapes"], columns=WANTED)
    assert table.column_names == WANTED
    assert _as_text(table) == _expected(path)
    assert any("fewer fields than the header" in n for n in notes)


def test_a_header_with_spaces_is_still_found(tmp_path: Path) -> None:
    header = [f" {h} " for h in HEADER]
    path = _write(tmp_path / "k.csv", header, ROWS)
    table = read_csv(path, "a test CSV", text_cols=["Input Shapes"], columns=WANTED)
    assert table.column_names == WANTED
    assert _as_text(table) == _expected(path)


def test_a_row_cut_at_the_end_is_dropped_as_in_a_full_read(tmp_path: Path) -> None:
    path = _write(tmp_path / "k.csv", HEADER, [*ROWS, ["3", "Mul_4", "Mu"]], end="")
    part = read_csv(path, "a test CSV", text_cols=["Input Shapes"], columns=WANTED)
    whole = read_csv(path, "a test CSV", text_cols=["Input Shapes"])
    assert part.num_rows == whole.num_rows == len(ROWS)
    assert _as_text(part) == {n: _as_text(whole)[n] for n in WANTED}


def test_a_row_with_too_many_fields_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "k.csv", HEADER, [ROWS[0], [*ROWS[1], "9", "9"], ROWS[2]])
    with pytest.raises(ProfileError, match="more fields than the header"):
        read_csv(path, "a test CSV", columns=WANTED)
