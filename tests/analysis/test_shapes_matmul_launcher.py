"""A kernel launched by a matrix product's aclnn call is a product only if its type is one.

torch_npu names a device kernel ``<aclnn launcher>_<implementation>_<kernel type>``. A
product's launcher (``aclnnMm``, ``aclnnAddmm``, ``aclnnMatmul``, ...) runs the MatMul
kernel, but may also run a ``MemSet`` before it (``aclnnMm_MatMulCommon_MemSet``, type
``MemSet``, no input shapes: ``N/A``), or a ``TransData`` or a ``Cast``. Only the MatMul is
a matrix product: the shape records (:func:`shape_records`) keep a kernel as one by its
own type, not by its launcher's name.

The ``.db`` export of ``ascend/msinsight-pt-db-level1`` writes the ``MemSet``'s shapes as
the text ``N/A``, so its five ``aclnnMm_..._MemSet`` tasks per rank were kept as products
(in the ``kernel_details.csv`` of ``ascend/msinsight-pt-level1`` the same ``N/A`` cell is
read as missing, so they were not; a launcher's ``TransData`` or ``Cast`` with shapes
was). The expected counts are read here from the raw files (sqlite3, opened immutable,
and csv): the tasks whose type is a MatMul and whose input shapes are recorded, per rank.
"""

from __future__ import annotations

import csv
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_samples import PT_DB_LEVEL1, PT_LEVEL1, shared_param, shared_sample, writable_copy

import perfkit as pk
from perfkit.analysis.shapes import shape_records
from perfkit.profile import Profile, ProfileMeta

_OUT = "ASCEND_PROFILER_OUTPUT"
#: A product's aclnn launcher at the start of a torch_npu kernel name.
_LAUNCHER = re.compile(r"^aclnn(?:Mm|Addmm|Matmul|BatchMatMul|Bmm)_")
#: A matrix product's kernel type.
_MATMUL_TYPE = re.compile(r"(?i)^(?:Batch)?MatMul")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def _has_shapes(text: str | None) -> bool:
    return bool(text) and text.strip().strip('"') not in ("", "N/A")


def _raw_db(root: Path) -> dict[int, tuple[int, int]]:
    """Per rank: the tasks a product's launcher ran whose type is a MatMul with shapes, and
    those of another type (read with sqlite3)."""
    out = {}
    for db in sorted(root.glob(f"rank*_ascend_pt/{_OUT}/ascend_pytorch_profiler_*.db")):
        rank = int(db.stem.rsplit("_", 1)[1])
        with sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True) as conn:
            rows = conn.execute(
                "SELECT n.value, o.value, s.value FROM COMPUTE_TASK_INFO c "
                "JOIN STRING_IDS n ON n.id = c.name JOIN STRING_IDS o ON o.id = c.opType "
                "LEFT JOIN STRING_IDS s ON s.id = c.inputShapes").fetchall()
        mine = [(typ, shp) for name, typ, shp in rows if _LAUNCHER.match(name)]
        out[rank] = (sum(bool(_MATMUL_TYPE.match(t)) and _has_shapes(s) for t, s in mine),
                     sum(not _MATMUL_TYPE.match(t) for t, _ in mine))
    return out


def _raw_csv(root: Path) -> dict[int, tuple[int, int]]:
    """:func:`_raw_db` of the ranks' ``kernel_details.csv`` (read with csv)."""
    out = {}
    for path in sorted(root.glob(f"rank*_ascend_pt/{_OUT}/kernel_details.csv")):
        rank = int(path.parent.parent.name.split("_")[0].removeprefix("rank"))
        with path.open(newline="", encoding="utf-8-sig") as fh:
            mine = [(r["Type"], r["Input Shapes"]) for r in csv.DictReader(fh)
                    if _LAUNCHER.match(r["Name"])]
        out[rank] = (sum(bool(_MATMUL_TYPE.match(t)) and _has_shapes(s) for t, s in mine),
                     sum(not _MATMUL_TYPE.match(t) for t, _ in mine))
    return out


def _launched(root: Path) -> dict[int, int]:
    """Per rank: the shape records whose name has a product's launcher."""
    recs, source = shape_records(pk.load(root, cache=False, progress=False))
    assert source == "kernels"
    names = recs["name"].astype(str)
    mine = recs[names.str.match(_LAUNCHER.pattern).to_numpy(bool)]
    return {int(r): int(n) for r, n in mine.groupby("rank").size().items()}


@pytest.mark.parametrize("name, raw", [shared_param(PT_DB_LEVEL1, _raw_db, id="db"),
                                       shared_param(PT_LEVEL1, _raw_csv, id="csv")])
def test_records_keep_only_the_products_a_product_launcher_ran(name, raw):
    root = shared_sample(name)
    expected = raw(root)
    assert expected and all(other > 0 for _, other in expected.values())  # MemSets there
    got = _launched(root)
    assert got == {rank: products for rank, (products, _) in expected.items()}


def _rewritten(tmp_path: Path) -> Path:
    """``ascend/msinsight-pt-level1`` with each ``aclnnMm_..._MemSet`` turned into a
    ``TransData`` or a ``Cast`` of the same launcher with shapes (as a launcher's layout
    change or cast of an operand is recorded)."""
    root = writable_copy(shared_sample(PT_LEVEL1), tmp_path / "level1")
    for path in root.glob(f"rank*_ascend_pt/{_OUT}/kernel_details.csv"):
        with path.open(newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
        col = {h: i for i, h in enumerate(rows[0])}
        n = 0
        for row in rows[1:]:
            if row[col["Name"]] == "aclnnMm_MatMulCommon_MemSet":
                typ = ("TransData", "Cast")[n % 2]
                row[col["Name"]] = f"aclnnMm_{typ}AiCore_{typ}"
                row[col["Type"]] = typ
                row[col["Input Shapes"]] = '"32,4096"'
                n += 1
        assert n
        with path.open("w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows(rows)
    return root


@pytest.mark.shared_samples
def test_a_launchers_transdata_and_cast_with_shapes_are_no_products(tmp_path):
    root = _rewritten(tmp_path)
    expected = _raw_csv(root)
    assert all(other > 0 for _, other in expected.values())
    assert _launched(root) == {rank: products for rank, (products, _) in expected.items()}


def _untyped(names: list[str], shapes: list[str]) -> Profile:
    """Kernels with names and shapes but no type, one after another on one stream."""
    k = pd.DataFrame({"rank": 0, "step": 1, "name": names, "stream": 1,
                      "start_us": np.arange(len(names)) * 10.0, "dur_us": 5.0,
                      "input_shapes": shapes})
    return Profile(ProfileMeta("test", rank=0), {"kernels": k})


def test_without_a_type_the_kernel_part_of_the_name_decides():
    kinds = ["MemSet", "MatMulV2", "TransData", "MatMulV3", "Cast", "BatchMatMulV2"]
    names = [f"aclnnMm_{k}Common_{k}" for k in kinds]
    recs, _ = shape_records(_untyped(names, ["32,4096;4096,4096"] * len(names)))
    assert recs["name"].tolist() == [n for n, k in zip(names, kinds, strict=True)
                                     if "MatMul" in k]

