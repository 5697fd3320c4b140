"""Issue 18's findings, one by one: each is now a clear error or a correct load with a note.

Numbers are checked against arithmetic done here on the files themselves (csv + Decimal),
not against perfkit's own output. The corpus (tests/corpus) covers the same ground in bulk.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from shared_samples import HTA, MINDINSIGHT, PT_LEVEL1, sample, writable_copy

import perfkit as pk
from perfkit.errors import ConfigFileError, PerfkitError, ProfileError
from perfkit.io.canonical import validate

ROOT = Path(__file__).resolve().parents[2]
LEVEL1 = sample(PT_LEVEL1)
R0 = LEVEL1 / "rank0_ascend_pt"
OUT = "ASCEND_PROFILER_OUTPUT"
HTA0 = sample(HTA) / "sampled_rank-0.json.gz"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def _rank(tmp_path: Path) -> Path:
    return writable_copy(R0, tmp_path / "user" / "rank0_ascend_pt",
                         ignore=shutil.ignore_patterns("trace_view.json", "operator_details.csv"))


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _ns(text: str) -> int:
    return int(Decimal(text.strip().strip("\t")) * 1000)


def _origin_by_hand(rank: Path) -> int:
    """Earliest timestamp over the files the text loader reads (none of them damaged)."""
    out = rank / OUT
    stamps = [_ns(r["Start Time(us)"]) for r in _rows(out / "kernel_details.csv")]
    stamps += [_ns(r["Timestamp(us)"]) for r in _rows(out / "memory_record.csv")]
    stamps += [_ns(r["Timestamp(us)"]) for r in _rows(out / "npu_module_mem.csv")]
    stamps += [_ns(r["Allocation Time(us)"]) for r in _rows(out / "operator_memory.csv")]
    comm = json.loads((out / "communication.json").read_text())
    for step in comm.values():
        for kind in step.values():
            for key, op in kind.items():
                if key != "Total Op Info":
                    stamps.append(_ns(repr(op["Communication Time Info"]["Start Timestamp(us)"])))
    return min(stamps)


def _set_cell(path: Path, row: int, column: str, value: str) -> str:
    lines = path.read_bytes().splitlines(keepends=True)
    header = next(csv.reader([lines[0].decode()]))
    cells = next(csv.reader([lines[row + 1].decode()]))
    old = cells[header.index(column)]
    cells[header.index(column)] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerow(cells)
    lines[row + 1] = buf.getvalue().encode()
    path.write_bytes(b"".join(lines))
    return old


# ----------------------------------------------------------------------------- silent lies

@pytest.mark.shared_samples
@pytest.mark.parametrize("bad", ["17364088", "-5", "1e300", "99999999999999999999"])
def test_one_bad_timestamp_does_not_move_the_origin(tmp_path, bad):
    rank = _rank(tmp_path)
    origin = _origin_by_hand(rank)  # before the damage
    kd = rank / OUT / "kernel_details.csv"
    _set_cell(kd, 4, "Start Time(us)", bad)
    prof = pk.load(rank, cache=False)
    assert prof.meta.origin_ns == origin
    starts = prof.kernels["start_us"]
    assert np.isnan(starts.iloc[4])
    # every other kernel keeps its exact time relative to the true origin
    for i, row in enumerate(_rows(kd)[:8]):
        if i != 4:
            assert starts.iloc[i] == pytest.approx((_ns(row["Start Time(us)"]) - origin) / 1000,
                                                   abs=1e-9)
    assert any("kernel_details.csv" in n and ("NA" in n) for n in prof.meta.notes), \
        prof.meta.notes


@pytest.mark.shared_samples
@pytest.mark.parametrize("bad", ["-3.5", "1e18", "1e30"])
def test_negative_or_absurd_duration_is_na_with_a_note(tmp_path, bad):
    rank = _rank(tmp_path)
    kd = rank / OUT / "kernel_details.csv"
    _set_cell(kd, 2, "Duration(us)", bad)
    prof = pk.load(rank, cache=False)
    dur = prof.kernels["dur_us"]
    assert np.isnan(dur.iloc[2])
    expected = sum(float(r["Duration(us)"]) for i, r in enumerate(_rows(kd)) if i != 2)
    assert dur.sum() == pytest.approx(expected, rel=1e-12)
    note = next(n for n in prof.meta.notes if "dur_us" in n)
    assert "kernel_details.csv" in note and "1 " in note


@pytest.mark.shared_samples
def test_csv_cut_mid_row_drops_the_row_with_a_note(tmp_path):
    rank = _rank(tmp_path)
    kd = rank / OUT / "kernel_details.csv"
    data = kd.read_bytes()
    kd.write_bytes(data[: len(data) - 40])  # inside the last row
    complete = data[: len(data) - 40].count(b"\n") - 1  # data rows with their newline
    prof = pk.load(rank, cache=False)
    assert len(prof.kernels) == complete
    assert any("ends mid-row" in n and "last row dropped" in n for n in prof.meta.notes)


@pytest.mark.shared_samples
def test_second_header_line_is_not_a_kernel(tmp_path):
    rank = _rank(tmp_path)
    kd = rank / OUT / "kernel_details.csv"
    lines = kd.read_bytes().splitlines(keepends=True)
    n = len(lines) - 1
    kd.write_bytes(b"".join(lines[:10] + [lines[0]] + lines[10:]))
    prof = pk.load(rank, cache=False)
    assert len(prof.kernels) == n
    assert "Name" not in set(prof.kernels["name"])
    assert any("1 line repeats the header" in x for x in prof.meta.notes)


@pytest.mark.shared_samples
def test_kineto_kernel_without_dur_is_na_not_zero(tmp_path):
    data = json.loads(gzip.decompress(HTA0.read_bytes()))
    kernels = [e for e in data["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    for e in kernels:
        del e["dur"]
    f = tmp_path / "rank0.json"
    f.write_text(json.dumps(data))
    prof = pk.load(f, cache=False)
    k = prof.kernels
    assert k.loc[k["type"] == "kernel", "dur_us"].isna().all()
    assert k.loc[k["type"] != "kernel", "dur_us"].notna().all()  # memcpy/memset keep theirs
    assert len(prof.steps) and prof.steps["computing_us"].isna().all()  # not 0
    assert any("without a duration" in n for n in prof.meta.notes)


def test_truncated_ir_is_refused(tmp_path):
    text = (ROOT / "data" / "ir" / "silu_mul.ir").read_bytes()
    f = tmp_path / "g.ir"
    f.write_bytes(text[: text.rindex(b"\n", 0, len(text) // 2) + 1])
    with pytest.raises(ProfileError, match="truncated"):
        pk.load_ir(f)


def test_log_number_cut_at_the_end_is_not_parsed(tmp_path):
    log = (ROOT / "tests" / "data" / "logs" / "mf_new_trainer_pp.log").read_bytes()
    cut = log[: log.index(b"11.755612") + 3]  # "11." -> would read as 11.0
    f = tmp_path / "train.log"
    f.write_bytes(cut)
    frame = pk.read_training_log(f)
    assert 11.0 not in set(frame["loss"].dropna())
    assert len(frame) == cut[: cut.rindex(b"\n")].count(b"step:[")
    assert any("ends mid-line" in n for n in frame.attrs["notes"])
    mem = (ROOT / "tests" / "data" / "logs" / "memory_ranks.log").read_bytes()
    f = tmp_path / "mem.log"
    f.write_bytes(mem[: mem.rindex(b"62432M") + 3])  # "624"
    frame = pk.read_memory_log(f)
    assert not (frame["device_memory_bytes"].dropna() < 2**20).any()


@pytest.mark.parametrize(("text", "tied"), [('"false"', False), ('"0"', False), ("0", False),
                                            ('"no"', False), ('"true"', True), ('"yes"', True)])
def test_boolean_text_in_configs(tmp_path, text, tied):
    hf = {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100,
          "n_positions": 128, "tie_word_embeddings": json.loads(text)}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(hf))
    assert pk.ModelSpec.from_hf_config(f, seq_length=128).tied_embeddings is tied
    doc = {"model": {"model_config": {"num_layers": 2, "hidden_size": 64, "num_heads": 4,
                                      "seq_length": 128, "vocab_size": 100,
                                      "tie_word_embeddings": json.loads(text)}}}
    assert pk.ModelSpec.from_mindformers_yaml(doc).tied_embeddings is tied


@pytest.mark.parametrize(("value", "key"), [('"lots"', "hidden_size"), ("1e400", "hidden_size"),
                                            ("NaN", "hidden_size"), ("64.5", "hidden_size")])
def test_non_numeric_config_values_are_refused_naming_the_key(tmp_path, value, key):
    f = tmp_path / "config.json"
    f.write_text('{"model_type": "llama", "hidden_size": ' + value + ', "num_hidden_layers": 2, '
                 '"num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 128}')
    with pytest.raises(ConfigFileError) as err:
        pk.ModelSpec.from_hf_config(f)
    assert key in str(err.value) and str(f) in str(err.value)


@pytest.mark.shared_samples
def test_torch_npu_and_legacy_ranks_in_one_folder_are_both_kept(tmp_path):
    """A PyTorch (torch_npu) export and MindSpore legacy output are two runs: neither is
    lost, neither is merged into the other (issue 33, point 5)."""
    user = tmp_path / "mixed"
    writable_copy(R0, user / "rank0_ascend_pt")
    legacy = sample(MINDINSIGHT) / "run_2_normal_run" / "profiler"
    for f in legacy.iterdir():
        shutil.copyfile(f, user / f.name)
    with pytest.raises(pk.RunsFound) as err:
        pk.load(user, cache=False)
    runs = err.value.runs
    assert sorted(r.framework for r in runs) == ["mindspore", "pytorch"]
    formats = set()
    for r in runs:
        one = pk.load(user, run=r.id, cache=False)
        formats |= {p.meta.source_format for p in one}
        assert list(one.ranks) == [x for x in r.ranks]
    assert formats == {"ascend_text", "mindspore_legacy"}


# ----------------------------------------------------------------------------- bounded work

def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.shared_samples
def test_2gb_sparse_trace_is_refused_fast_with_bounded_memory(tmp_path):
    f = tmp_path / "rank0.json"
    f.write_bytes(gzip.decompress(HTA0.read_bytes()))
    os.truncate(f, 2 << 30)  # a trace whose second part is zeros up to 2 GB
    before = _peak_mb()
    start = time.perf_counter()
    with pytest.raises(ProfileError) as err:
        pk.load(f, cache=False)
    assert time.perf_counter() - start < 5
    assert _peak_mb() - before < 256
    assert "rank0.json" in str(err.value)


@pytest.mark.shared_samples
def test_zeros_in_the_middle_of_a_large_trace_stop_the_read(tmp_path):
    """Not sparse, no zero at either end: the block reader stops at the first NUL."""
    raw = gzip.decompress(HTA0.read_bytes())
    f = tmp_path / "rank0.json"
    with open(f, "wb") as fh:
        fh.write(raw[: len(raw) // 2])
        fh.write(bytes(80 << 20))
        fh.write(raw[len(raw) // 2:])
    start = time.perf_counter()
    with pytest.raises(ProfileError, match="NUL"):
        pk.load(f, cache=False)
    assert time.perf_counter() - start < 5


# ----------------------------------------------------------------------------- boundaries

@pytest.mark.shared_samples
def test_permission_error_does_not_sink_the_cluster(tmp_path, monkeypatch):
    import builtins

    user = tmp_path / "cl"
    writable_copy(LEVEL1, user,
                  ignore=shutil.ignore_patterns("trace_view.json", "operator_details.csv"))
    denied = str(user / "rank1_ascend_pt" / OUT / "kernel_details.csv")
    real = builtins.open

    def fake(file, *a, **k):
        if not isinstance(file, int) and os.fspath(file) == denied:
            raise PermissionError(13, "Permission denied", denied)
        return real(file, *a, **k)

    monkeypatch.setattr(builtins, "open", fake)
    monkeypatch.setattr(io, "open", fake)
    cluster = pk.load(user, cache=False)
    assert cluster.ranks == [0]
    assert "Permission denied" in cluster.failed[1] and "kernel_details.csv" in cluster.failed[1]


@pytest.mark.shared_samples
def test_unexpected_error_inside_a_reader_becomes_a_profile_error(tmp_path, monkeypatch):
    from perfkit.io.ascend import text as ascend

    def broken(*a, **k):
        raise TypeError("unsupported operand type(s)")

    monkeypatch.setattr(ascend, "_steps", broken)
    rank = _rank(tmp_path)
    with pytest.raises(ProfileError) as err:
        pk.load(rank, cache=False)
    assert "step_trace_time.csv" in str(err.value) and "TypeError" in str(err.value)


@pytest.mark.shared_samples
def test_cli_reports_any_failure_in_one_line(tmp_path, monkeypatch, capsys):
    from perfkit import cli

    rank = _rank(tmp_path)
    (rank / OUT / "kernel_details.csv").write_bytes(b"\x00\x01" * 100)
    assert cli.main(["info", str(rank)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kernel_details.csv" in err and "Traceback" not in err

    def bug(*a, **k):
        raise KeyError("boom")

    monkeypatch.setattr(cli.profile_text, "profile_info_text", bug)
    assert cli.main(["info", str(rank)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "KeyError" in err and "Traceback" not in err


def test_cli_subprocess_exit_status(tmp_path):
    f = tmp_path / "rank0.json"
    f.write_bytes(b"{\"traceEvents\": [")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PERFKIT_CACHE": "0"}
    run = subprocess.run([sys.executable, "-m", "perfkit.cli", "info", str(f)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "rank0.json" in run.stderr


# ----------------------------------------------------------------------------- the rules

def test_plausible_origin_ignores_outliers():
    base = 1_736_408_883_573_957_920
    ts = np.array([base + i * 1000 for i in range(100)] + [17_364_088_000, -5, 2**62])
    assert validate.plausible_origin(ts) == base


def test_plausible_origin_is_exact_for_every_array_kind():
    import pandas as pd
    import pyarrow as pa

    t = 1_736_408_883_573_957_921  # not representable in float64
    assert validate.plausible_origin(pd.Series([t + 5, None, t], dtype="Int64")) == t
    assert validate.plausible_origin(pa.array([None, t + 1, t], pa.int64())) == t
    assert validate.plausible_origin(np.array([np.iinfo(np.int64).min, t])) == t
    assert validate.plausible_origin(np.array([])) is None


def test_duration_bound():
    assert validate.duration_bound_us(10.0) == validate.MIN_DURATION_BOUND_US
    assert validate.duration_bound_us(7200e6) == 14400e6
    assert validate.duration_bound_us(None) == validate.WINDOW_NS / 1000


def test_messages_of_every_reader_are_perfkit_errors(tmp_path):
    """The public readers raise nothing but PerfkitErrors on a folder given as a file."""
    d = tmp_path / "x.ir"
    d.mkdir()
    for call in (pk.load_ir, pk.read_training_log, pk.read_memory_log,
                 pk.read_mindformers_config, pk.ModelSpec.from_mindformers_yaml):
        with pytest.raises(PerfkitError):
            call(d)


@pytest.mark.shared_samples
def test_a_folder_that_cannot_be_listed_is_a_failed_entry_not_a_failed_load(tmp_path,
                                                                             monkeypatch):
    user = tmp_path / "parent"
    writable_copy(R0, user / "rank0_ascend_pt",
                  ignore=shutil.ignore_patterns("trace_view.json", "operator_details.csv"))
    (user / "other_runs").mkdir()
    denied = str(user / "other_runs")
    real = os.listdir

    def listdir(p="."):
        if os.fspath(p) == denied:
            raise PermissionError(13, "Permission denied", denied)
        return real(p)

    monkeypatch.setattr(os, "listdir", listdir)
    cluster = pk.load(user, cache=False)
    assert cluster.ranks == [0]
    assert "Permission denied" in cluster.failed[denied]
