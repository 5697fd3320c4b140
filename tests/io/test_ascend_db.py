"""Ascend DB export (SQLite), checked with the sqlite3 module on the real sample."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from shared_samples import PT_DB_LEVEL1, sample

import perfkit.io.engines.local as detect
from perfkit.profile import Cluster, Profile

pytestmark = pytest.mark.shared_samples  # every test reads the real DB export
DATA = sample(PT_DB_LEVEL1)
OUT0 = DATA / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
DB0 = OUT0 / "ascend_pytorch_profiler_0.db"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def _q(db: Path, sql: str):
    con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_db_file_and_rank_dir():
    p = detect.load(DB0, cache=False)
    assert isinstance(p, Profile)
    assert p.meta.source_format == "ascend_db" and p.meta.rank == 0
    assert p.meta.profiler_level == "Level1"
    q = detect.load(DATA / "rank0_ascend_pt", cache=False)
    assert len(q.kernels) == len(p.kernels)


def test_kernels_and_steps_match_sqlite():
    p = detect.load(DB0, cache=False)
    (n_compute,) = _q(DB0, "select count(*) from TASK t join COMPUTE_TASK_INFO c "
                      "on c.globalTaskId = t.globalTaskId")[0]
    (n_comm,) = _q(DB0, "select count(*) from COMMUNICATION_OP")[0]
    assert len(p.kernels) == n_compute + n_comm
    (dur_ns,) = _q(DB0, "select sum(t.endNs - t.startNs) from TASK t join COMPUTE_TASK_INFO c "
                   "on c.globalTaskId = t.globalTaskId")[0]
    k = p.kernels
    assert k.loc[k["category"] != "communication", "dur_us"].sum() == pytest.approx(dur_ns / 1e3)
    (row,) = _q(OUT0 / "analysis.db", "select step, computing, free from StepTraceTime")
    s = p.steps.iloc[0]
    assert s["step"] == int(row[0])
    assert s["computing_us"] == pytest.approx(row[1])
    assert s["free_us"] == pytest.approx(row[2])
    (elapse_ms,) = _q(OUT0 / "analysis.db", "select sum(elapse_time) from CommAnalyzerTime")[0]
    assert p.comm_ops["elapse_us"].sum() == pytest.approx(elapse_ms * 1000)
    (n_mem,) = _q(DB0, "select count(*) from MEMORY_RECORD")[0]
    assert (p.memory["source"] == "memory_record").sum() == n_mem


def test_cluster_of_db_ranks():
    c = detect.load(DATA, cache=False)
    assert isinstance(c, Cluster) and c.ranks == [0, 1] and not c.failed


def test_database_is_opened_read_only(tmp_path):
    import os
    import shutil

    user = tmp_path / "job"
    shutil.copytree(DATA, user)

    def tree():
        return {str(p): (p.stat().st_size, p.stat().st_mtime_ns)
                for p in user.rglob("*")}

    before = tree()
    c = detect.load(user)
    c.tables()
    assert tree() == before  # no -journal / -wal / -shm files, nothing touched
    assert not any(name.endswith(("-wal", "-shm", "-journal")) for name in os.listdir(
        user / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"))


def test_the_chip_named_in_npu_info_chooses_the_hardware():
    from perfkit.analysis.efficiency.hardware import read_device
    named = sorted({r[0] for r in _q(DB0, "select name from NPU_INFO")})
    assert named  # the real export records its chip
    p = detect.load(DB0, cache=False)
    assert p.meta.extra["devices"] == named
    reading = read_device(p)
    # "Ascend910B" names the generation: the generic preset, and the page says so
    assert named == ["Ascend910B"] and reading.hardware.name == "ascend-910b"
    assert not reading.assumed and "not the chip model" in reading.why


def test_an_export_without_npu_info_names_no_device(tmp_path):
    import shutil
    db = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / DB0.name
    db.parent.mkdir(parents=True)
    shutil.copy(DB0, db)
    con = sqlite3.connect(db)
    con.execute("drop table NPU_INFO")
    con.commit()
    con.close()
    p = detect.load(db, cache=False)
    assert p.meta.extra["devices"] == []


def test_a_total_op_info_row_of_the_db_is_not_an_operation(tmp_path):
    # the text export's "Total Op Info" (a step's sums) may reach analysis.db as an
    # operation name; such a row would list every link and count every millisecond twice
    import shutil

    dst = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    shutil.copytree(OUT0, dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    db = dst / "analysis.db"
    con = sqlite3.connect(db)
    try:
        for t in ("CommAnalyzerMatrix", "CommAnalyzerTime", "CommAnalyzerBandwidth"):
            cols = [r[1] for r in con.execute(f"pragma table_info({t})")]
            sel = ", ".join("'Total Op Info'" if c == "hccl_op_name" else c for c in cols)
            con.execute(f"insert into {t} select {sel} from {t}")  # every row again
        con.commit()
    finally:
        con.close()
    want = {t: _q(OUT0 / "analysis.db", f"select count(*) from {t}")[0][0]
            for t in ("CommAnalyzerMatrix", "CommAnalyzerTime")}
    (bw_ops,) = _q(OUT0 / "analysis.db", "select count(*) from (select distinct step, type, "
                   "hccl_op_name, group_name, transport_type from CommAnalyzerBandwidth)")[0]
    (elapse_ms,) = _q(OUT0 / "analysis.db", "select sum(elapse_time) from CommAnalyzerTime")[0]
    p = detect.load(dst.parent, cache=False)
    assert len(p.comm_matrix) == want["CommAnalyzerMatrix"]
    assert len(p.comm_ops) == want["CommAnalyzerTime"]
    assert len(p.comm_bandwidth) == bw_ops
    assert p.comm_ops["elapse_us"].sum() == pytest.approx(elapse_ms * 1000)
    assert "Total Op Info" not in set(p.comm_matrix["name"].dropna())


def test_the_pmu_pipe_ratios_are_read_from_task_pmu_info():
    """The export recorded aic_metrics=PipeUtilization (``profiler_info_0.json``) and wrote
    the ratios to TASK_PMU_INFO, which the loader did not read: ``perfkit check`` then
    asked for the switch the run had already set, and operator_bound stayed empty."""
    import json

    info = json.loads((DATA / "rank0_ascend_pt" / "profiler_info_0.json").read_text())
    assert "PIPE_UTILIZATION" in json.dumps(info)
    raw = _q(DB0, "select p.globalTaskId, s.value, p.value from TASK_PMU_INFO p "
                  "join STRING_IDS s on s.id = p.name where s.value = 'aic_mac_ratio'")
    by_task = {task: value for task, _, value in raw}
    starts = dict(_q(DB0, "select t.globalTaskId, t.startNs from TASK t "
                          "join COMPUTE_TASK_INFO c on c.globalTaskId = t.globalTaskId"))
    p = detect.load(DB0, cache=False)
    k = p.kernels
    assert int(k["aic_mac_ratio"].notna().sum()) == len(set(by_task) & set(starts))
    # the values are the table's, one per task that ran a compute kernel
    shown = k.dropna(subset=["aic_mac_ratio"])
    assert sorted(round(v, 9) for v in shown["aic_mac_ratio"]) == \
        sorted(round(float(by_task[t]), 9) for t in set(by_task) & set(starts))
    import perfkit as pk

    bound = pk.analysis.operator_bound(p)
    assert len(bound) and set(bound["bound"]) <= {"compute", "memory", "latency"}


def test_a_damaged_pmu_table_leaves_the_kernels_and_says_why(tmp_path):
    """TASK_PMU_INFO is extra counters: a copy whose table lost its value column loads
    with every kernel, no PMU column, and a note naming the table (not a failed load)."""
    import shutil

    user = tmp_path / "job"
    shutil.copytree(DATA / "rank0_ascend_pt", user / "rank0_ascend_pt")
    db = user / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / DB0.name
    for extra in db.parent.glob(DB0.name + "-*"):  # a WAL left by a writer elsewhere
        extra.unlink()
    con = sqlite3.connect(db)
    con.execute("alter table TASK_PMU_INFO rename to OLD")
    con.execute("create table TASK_PMU_INFO (globalTaskId INTEGER, name INTEGER)")
    con.commit()
    con.close()
    p = detect.load(db, cache=False)
    whole = detect.load(DB0, cache=False)
    assert len(p.kernels) == len(whole.kernels)
    assert not any(c.endswith("_ratio") for c in p.kernels.columns)
    assert any("TASK_PMU_INFO could not be read" in n for n in p.meta.notes), p.meta.notes


def test_a_metric_given_twice_keeps_its_first_value(tmp_path):
    """A task whose ratio appears twice in TASK_PMU_INFO (a damaged or re-exported table)
    keeps the first value, as the table lists them; the other tasks are untouched."""
    import shutil

    user = tmp_path / "job"
    shutil.copytree(DATA / "rank0_ascend_pt", user / "rank0_ascend_pt")
    db = user / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / DB0.name
    for extra in db.parent.glob(DB0.name + "-*"):
        extra.unlink()
    con = sqlite3.connect(db)
    (task, name, first), = con.execute(
        "select p.globalTaskId, p.name, p.value from TASK_PMU_INFO p join STRING_IDS s "
        "on s.id = p.name where s.value = 'aic_mac_ratio' and p.value > 0 limit 1")
    con.execute("insert into TASK_PMU_INFO values (?, ?, ?)", (task, name, 0.999))
    con.commit()
    con.close()
    changed = detect.load(db, cache=False).kernels["aic_mac_ratio"].dropna()
    whole = detect.load(DB0, cache=False).kernels["aic_mac_ratio"].dropna()
    assert sorted(changed) == sorted(whole) and 0.999 not in set(changed)
    assert first in set(changed)
