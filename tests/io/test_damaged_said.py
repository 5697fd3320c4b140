"""Damaged input is never read silently (issue 67 pt 4): each kind gives a clear
PerfkitError, or a correct load with a note naming file and field; ``perfkit info``, the
report and the dashboard's "What was opened" show every note the API holds
(:func:`perfkit.notes.every_note`); a rank exported as text and as a database is one run.

Every input is a copy, damaged here, of the project's own profiles (``data/``,
``tests/data``), or of shared samples read in place; expected values are read from the
files with :mod:`csv` / :mod:`json`.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
from pathlib import Path

import pytest
from shared_samples import PT_DB_LEVEL1, PT_LEVEL1, sample

import perfkit as pk
from perfkit.cli import main
from perfkit.notes import every_note
from perfkit.widgets.overview import profile_facts

ROOT = Path(__file__).resolve().parents[2]
SIM2 = ROOT / "data" / "simulated" / "llama2-7b-tp2"
CO = ROOT / "tests" / "data" / "msprof_analyze_level1" / "cluster_analysis_output"
KL0 = ROOT / "data" / "kineto-tiny-llama" / "rank0.pt.trace.json.gz"


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return list(csv.reader(fh))


def _write(path: Path, rows: list[list[str]]) -> None:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    path.write_text(buf.getvalue())


def _sim(tmp_path: Path) -> tuple[Path, Path]:
    d = tmp_path / "sim"
    shutil.copytree(SIM2, d)
    return d, sorted(d.glob("*_ascend_*"))[1]


def test_metadata_group_name_of_the_wrong_type_is_said(tmp_path: Path) -> None:
    d, r1 = _sim(tmp_path)
    f = r1 / "profiler_metadata.json"
    md = json.loads(f.read_text())
    gid = next(iter(md["parallel_group_info"]))
    members = md["parallel_group_info"][gid]["global_ranks"]
    own = md["parallel_group_info"][gid]["group_rank"]
    md["parallel_group_info"][gid]["group_name"] = 7
    f.write_text(json.dumps(md))
    c = pk.load(d, cache=False, progress=False)
    assert c.ranks == [0, 1] and not c.failed
    said = [n for n in c.meta.notes if n.startswith("rank 1: profiler_metadata.json")]
    assert said and "group_name 7" in said[0] and gid in said[0], c.meta.notes
    assert c[1].meta.groups[gid] == {"group_name": None, "group_rank": own,
                                     "global_ranks": members}


def test_metadata_environment_not_an_object_is_said(tmp_path: Path) -> None:
    d, r1 = _sim(tmp_path)
    f = r1 / "profiler_metadata.json"
    md = json.loads(f.read_text())
    md["ENV_VARIABLES"] = "HCCL_BUFFSIZE=200"
    f.write_text(json.dumps(md))
    c = pk.load(d, cache=False, progress=False)
    assert "rank 1: profiler_metadata.json: ENV_VARIABLES is text, not an object: the " \
           "environment is unknown" in c.meta.notes


def test_a_kernel_without_duration_is_said_and_info_prints_it(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    d, r1 = _sim(tmp_path)
    f = r1 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    rows = _rows(f)
    col = rows[0].index("Duration(us)")
    rows[3][col] = ""
    rows[6][col] = "-2.5"
    _write(f, rows)
    c = pk.load(d, cache=False, progress=False)
    mine = [n for n in every_note(c) if "kernel_details.csv" in n and n.startswith("rank 1")]
    assert any("1 missing dur_us" in n and repr(rows[3][rows[0].index("Name")]) in n
               for n in mine), mine  # the file, the field and the row's kernel named
    assert any("1 negative dur_us" in n for n in mine), mine
    assert int(c[1].kernels["dur_us"].isna().sum()) == 2
    assert main(["info", str(d), "--findings", "0"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "1 missing dur_us" in out and "1 negative dur_us" in out
    facts = profile_facts(c)
    notes = facts[facts["fact"] == "note"]["value"].tolist()
    assert any("1 missing dur_us" in n for n in notes)


def test_every_note_adds_a_rank_note_and_a_failed_rank(tmp_path: Path) -> None:
    d, r1 = _sim(tmp_path)
    c = pk.load(d, cache=False, progress=False)
    c[1].meta.notes.append("kernels: a note recorded after the cluster's")
    c.failed[5] = "rank5/kernel_details.csv: damaged"
    notes = every_note(c)
    assert "rank 1: kernels: a note recorded after the cluster's" in notes
    assert "rank 5 not loaded: rank5/kernel_details.csv: damaged" in notes
    assert len(notes) == len(set(notes))
    assert all(n in notes for n in c.meta.notes)


def test_cluster_output_steps_in_words_and_missing_marker(tmp_path: Path) -> None:
    d = tmp_path / "co" / "cluster_analysis_output"
    shutil.copytree(CO, d)
    f = d / "cluster_step_trace_time.csv"
    rows = _rows(f)
    ranks = [int(r[2]) for r in rows[1:] if r[1] == "rank"]
    free = rows[0].index("Free")
    rows = [rows[0]] + [[f"step{k}", *r[1:]] for k in (1, 2) for r in rows[1:]]
    rows[2][free] = "n/a"  # step 1, the second rank row
    _write(f, rows)
    c = pk.load(d, cache=False, progress=False)
    assert c.ranks == ranks
    for r in ranks:
        assert sorted(c[r].steps["step"].astype(int)) == [1, 2]
    assert any("Step: 4 rows naming the step in words" in n for n in c.meta.notes)
    assert any("Free: 1 rank row without a number (data row 2)" in n for n in c.meta.notes)
    second = c[ranks[1]].steps.sort_values("step")["free_us"].to_numpy()
    assert second[0] != second[0] and second[1] == float(rows[4][free])


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize("gz", [False, True])
def test_a_utf16_kineto_trace_loads_as_its_utf8_copy(tmp_path: Path, gz: bool) -> None:
    raw = gzip.decompress(KL0.read_bytes())
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain = tmp_path / "a" / "rank0.json"
    plain.write_bytes(raw)
    data = raw.decode().encode("utf-16")
    wide = tmp_path / "b" / ("rank0.json.gz" if gz else "rank0.json")
    wide.write_bytes(gzip.compress(data, 1) if gz else data)
    a = pk.load(plain, cache=False, progress=False)
    b = pk.load(wide, cache=False, progress=False)
    events = json.loads(raw)["traceEvents"]
    cpu_ops = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    assert len(b.ops) == len(a.ops) and len(a.ops) >= cpu_ops
    assert (b.ops["name"] == a.ops["name"]).all()
    assert any("UTF-16 text, converted to UTF-8" in n for n in b.meta.notes)


def test_the_runs_of_utf16_traces_are_those_of_their_utf8_copies(tmp_path: Path) -> None:
    """World size and start read from UTF-16 traces as from the UTF-8 ones."""
    for enc in ("utf-8", "utf-16"):
        (tmp_path / enc).mkdir()
        for r in (0, 1):
            raw = gzip.decompress((KL0.parent / f"rank{r}.pt.trace.json.gz").read_bytes())
            (tmp_path / enc / f"rank{r}.json").write_bytes(raw.decode().encode(enc))
    a, b = pk.runs(tmp_path / "utf-8"), pk.runs(tmp_path / "utf-16")
    assert [(r.world_size, r.start_ns, r.ranks) for r in b] == \
        [(r.world_size, r.start_ns, r.ranks) for r in a]
    base = json.loads(gzip.decompress(KL0.read_bytes()))["distributedInfo"]["world_size"]
    assert a[0].world_size == base


@pytest.mark.shared_samples
def test_a_text_and_a_db_export_of_one_recording_are_one_run(tmp_path: Path) -> None:
    text_src = sample(PT_LEVEL1) / "rank0_ascend_pt"
    db_src = sample(PT_DB_LEVEL1) / "rank0_ascend_pt"
    d = tmp_path / "exports"
    t = d / "text" / "rank0_ascend_pt"
    shutil.copytree(text_src, t, copy_function=shutil.copyfile)
    shutil.copytree(db_src, d / "db" / "rank0_ascend_pt", copy_function=shutil.copyfile)
    for p in [t, *t.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    # two recordings (their profiler_info differ): two runs, as before
    assert len(pk.runs(d)) == 2
    # one recording, exported twice: the same collection start and end
    shutil.copyfile(db_src / "profiler_info_0.json", t / "profiler_info_0.json")
    info = json.loads((t / "profiler_info_0.json").read_text())
    assert info["start_info"] and info["end_info"]
    runs = pk.runs(d)
    assert len(runs) == 1 and runs[0].formats == ("ascend_text",)
    c = pk.load(d, cache=False, progress=False)
    note = next(n for n in c.meta.notes if "exported twice" in n)
    assert "ascend_pytorch_profiler_0.db" in note and "text export" in note
    kernels = _rows(t / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    assert len(c[0].kernels) == len(kernels) - 1


@pytest.mark.shared_samples
def test_both_exports_in_one_rank_folder_say_which_was_read(tmp_path: Path) -> None:
    """export_type=[text, db] writes both into one ASCEND_PROFILER_OUTPUT: the text export
    is read (it holds kernel_details.csv and trace_view.json), and a note says so."""
    src = sample(PT_LEVEL1) / "rank0_ascend_pt"
    t = tmp_path / "rank0_ascend_pt"
    shutil.copytree(src, t, copy_function=shutil.copyfile)
    db = sample(PT_DB_LEVEL1) / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    for f in db.iterdir():
        shutil.copyfile(f, t / "ASCEND_PROFILER_OUTPUT" / f.name)
    p = pk.load(t, cache=False, progress=False)
    assert p.meta.source_format == "ascend_text"
    note = next(n for n in p.meta.notes if "exported twice" in n)
    assert "both in rank0_ascend_pt/ASCEND_PROFILER_OUTPUT" in note
    assert "ascend_pytorch_profiler_0.db" in note and "from the text export" in note
    rows = _rows(t / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    assert len(p.kernels) == len(rows) - 1
