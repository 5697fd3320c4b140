"""An Ascend rank's tables handed over before its trace_view.json (perfkit.io.preview.tables_first).

The load of an Ascend rank decodes ``trace_view.json`` on a thread of its own while it
reads the CSV and JSON tables; a listener gets those tables before the load waits for the
trace, and the dashboard works out the job (throughput, MFU) from them meanwhile
(:mod:`perfkit.io.preview.tables`). Checked here on perfkit's simulated Llama 2 13B rank
(``data/simulated``, which holds a trace_view.json) and the real torch_npu Level1 ranks of
the shared samples:

* the tables handed over are the full load's but ``ops``, row for row, their times the same
  instants (each on its own origin), and the kernels are those of the raw
  ``kernel_details.csv`` read with ``csv``; the kernels hold only the columns the job is
  read from (:data:`perfkit.io.ascend.csv.JOB_COLUMNS`), and the job worked out from them
  is the one worked out from every column (on every simulated set and both real ranks);
* listening changes nothing in the load; nobody listening builds nothing; a listener that
  fails is ignored; a MindSpore CPU profile (no device tables) hands nothing over;
* in the dashboard, with the trace's decoding held, the Overview's throughput card is the
  simulated job's tokens (from the simulator's own settings in profiler_metadata.json) over
  the step of the raw step_trace_time.csv, saying where it comes from, and the MFU card
  says it counts a training step, which the trace may gainsay; the whole profile's cards
  replace them.
"""

from __future__ import annotations

import csv
import json
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from shared_samples import PT_LEVEL1, shared_sample

import perfkit as pk
from perfkit.io.ascend import text as ascend
from perfkit.io.ascend.csv import JOB_COLUMNS
from perfkit.io.preview import tables_first
from perfkit.profile import Profile

ROOT = Path(__file__).resolve().parents[1]
SIMULATED = ROOT / "data" / "simulated" / "llama2-13b-baseline-dp16" / \
    "node0_200000_20251121000100000_ascend_pt"
CPU = next((ROOT / "data" / "mindspore-cpu-tiny-llama").glob("*_ascend_ms"))


def _handed_over(path: Path) -> tuple[Any, list[tuple[Any, dict[str, pd.DataFrame]]]]:
    """``path`` loaded (cache off) while listening: the profile and what was handed over."""
    got: list[tuple[Any, dict[str, pd.DataFrame]]] = []
    with tables_first.listen(lambda meta, tables: got.append((meta, tables))):
        profile = pk.load(path, cache=False)
    return profile, got


def _rank_samples() -> list[Path]:
    return [SIMULATED]


def _real_ranks() -> list[Path]:
    return sorted(shared_sample(PT_LEVEL1).glob("*_ascend_pt"))


def _raw_kernels(rank_dir: Path) -> tuple[int, Decimal]:
    """Rows of the raw kernel_details.csv and the sum of their Duration(us) (``csv``)."""
    with open(rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="",
              encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return len(rows), sum((Decimal(r["Duration(us)"].strip()) for r in rows), Decimal(0))


def _check_handed_over(rank_dir: Path) -> None:
    profile, got = _handed_over(rank_dir)
    assert len(got) == 1, "the tables are handed over once"
    meta, tables = got[0]
    final = profile.tables()
    assert "ops" not in tables
    assert {n for n, f in final.items() if len(f)} - {"ops"} <= set(tables)
    assert meta.rank == profile.meta.rank and meta.path == profile.meta.path
    assert any("trace_view.json still being read" in n for n in meta.notes)
    shift_us = (meta.origin_ns - profile.meta.origin_ns) / 1e3
    early_tables = Profile(meta, tables).tables()  # as the dashboard reads them
    for name in tables:
        early, whole = early_tables[name], final[name]
        if name == "kernels":  # the job's columns only, in the same order
            kept = {*JOB_COLUMNS, "rank", "category", "start_us"}
            assert list(early.columns) == [c for c in whole.columns if c in kept]
            assert len(early.columns) < len(whole.columns)
        else:
            assert list(early.columns) == list(whole.columns), name
        assert len(early) == len(whole), name
        for col in early.columns:
            if col.endswith("_us"):
                # a duration is the same; an instant too, each on its own origin (the
                # trace's earliest timestamp may move the full load's): within rounding
                a, b = pd.to_numeric(early[col]), pd.to_numeric(whole[col])
                assert ((a - b).abs().max() < 1e-3) or \
                    ((a + shift_us - b).abs().max() < 1e-3) or not len(a), (name, col)
                assert a.isna().equals(b.isna()), (name, col)
            else:
                pd.testing.assert_series_equal(early[col], whole[col], check_names=False,
                                               obj=f"{name}.{col}")
    count, total = _raw_kernels(rank_dir)
    kernels = early_tables["kernels"]
    assert len(kernels) == count
    assert abs(Decimal(str(kernels["dur_us"].sum())) - total) < Decimal("0.01")


def test_the_tables_handed_over_are_the_load_without_its_trace() -> None:
    for rank_dir in _rank_samples():
        _check_handed_over(rank_dir)


@pytest.mark.shared_samples
def test_the_real_ranks_hand_over_their_tables() -> None:
    ranks = _real_ranks()
    assert len(ranks) == 2
    for rank_dir in ranks:
        _check_handed_over(rank_dir)


def _job_ranks() -> list[Path]:
    """A rank of every simulated set whose ranks have a trace_view.json."""
    sets = sorted(p for p in (ROOT / "data" / "simulated").iterdir() if p.is_dir())
    ranks = [min(s.glob("*_ascend_pt")) for s in sets if any(s.glob("*_ascend_pt"))]
    return [r for r in ranks if (r / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").exists()]


def _check_job_of(rank_dir: Path) -> None:
    """The job of the tables handed over is the job of the same tables with every column
    of kernel_details.csv (the full load's, but its trace)."""
    profile, got = _handed_over(rank_dir)
    (meta, tables), = got
    whole = {n: f for n, f in profile.tables().items() if n != "ops"}
    early = pk.infer_job(Profile(meta, tables))
    assert early == pk.infer_job(Profile(profile.meta, whole)), rank_dir


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_job_needs_only_the_columns_handed_over() -> None:
    ranks = _job_ranks()
    assert len(ranks) >= 6
    for rank_dir in ranks:
        _check_job_of(rank_dir)


@pytest.mark.shared_samples
def test_the_real_ranks_job_needs_only_the_columns_handed_over() -> None:
    for rank_dir in _real_ranks():
        _check_job_of(rank_dir)


def _tables_equal(a: Any, b: Any) -> None:
    for name, frame in a.tables().items():
        pd.testing.assert_frame_equal(frame, getattr(b, name), obj=name)
    assert a.meta.notes == b.meta.notes and a.meta.origin_ns == b.meta.origin_ns


def test_listening_changes_nothing_in_the_load() -> None:
    plain = pk.load(SIMULATED, cache=False)
    listened, got = _handed_over(SIMULATED)
    assert got
    _tables_equal(plain, listened)


def test_nobody_listening_builds_nothing(monkeypatch) -> None:
    calls: list[bool] = []
    real = ascend._assemble

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(bool(kwargs.get("handed_over")))
        return real(*args, **kwargs)
    monkeypatch.setattr(ascend, "_assemble", counted)
    pk.load(SIMULATED, cache=False)
    assert calls == [False]
    _handed_over(SIMULATED)
    assert calls == [False, True, False]


def test_a_failing_listener_is_ignored() -> None:
    def fails(meta: Any, tables: Any) -> None:
        raise RuntimeError("the listener broke")
    plain = pk.load(SIMULATED, cache=False)
    with tables_first.listen(fails):
        listened = pk.load(SIMULATED, cache=False)
    _tables_equal(plain, listened)


def test_a_damaged_kernel_file_hands_nothing_over_and_fails_as_without(tmp_path: Path) -> None:
    """kernel_details.csv zero-padded midway: the early read fails quietly, and the load
    refuses the file as it does when nobody listens (naming it)."""
    import shutil

    from perfkit.errors import ProfileError
    rank = tmp_path / SIMULATED.name
    shutil.copytree(SIMULATED, rank)
    csv_file = rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    data = csv_file.read_bytes()
    csv_file.write_bytes(data[:len(data) // 2] + b"\x00" * 4096 + data[len(data) // 2:])
    with pytest.raises(ProfileError) as plain:
        pk.load(rank, cache=False)
    got: list[Any] = []
    with tables_first.listen(lambda meta, tables: got.append(tables)), \
            pytest.raises(ProfileError) as listened:
        pk.load(rank, cache=False)
    assert got == []
    assert "kernel_details.csv" in str(plain.value)
    assert str(listened.value) == str(plain.value)


def test_a_cpu_profile_hands_nothing_over() -> None:
    """A MindSpore CPU profile has no device tables: nothing to work the job out from."""
    profile, got = _handed_over(CPU)
    assert got == [] and profile.meta.device_type == "cpu"


def _raw_step_s(rank_dir: Path) -> float:
    """The rank's step from the raw step_trace_time.csv: Computing + Communication(Not
    Overlapped) + Free + Preparing (µs; one step), in seconds."""
    with open(rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="",
              encoding="utf-8") as fh:
        (row,) = list(csv.DictReader(fh))
    parts = ("Computing", "Communication(Not Overlapped)", "Free", "Preparing")
    return sum(float(row[p]) for p in parts) / 1e6


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_overview_shows_the_throughput_of_the_tables_read_first(monkeypatch) -> None:
    import re

    from widget_html import panel_html

    from perfkit.format import number_text
    from perfkit.io.preview import tables as preview_tables
    from perfkit.widgets.dashboard import Dashboard

    monkeypatch.setattr(preview_tables, "MIN_TRACE_BYTES", 0)
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    go, real = threading.Event(), ascend.read_chrome_trace

    def held(*args: Any, **kwargs: Any) -> Any:  # the trace is decoded once released
        assert go.wait(120), "the test never released the trace"
        return real(*args, **kwargs)
    monkeypatch.setattr(ascend, "read_chrome_trace", held)
    board = Dashboard(background_bytes=0)
    assert board.load_profile(str(SIMULATED))
    deadline = time.monotonic() + 120
    while "the rank&#x27;s other tables" not in (html := panel_html(board.panels["Overview"])):
        assert time.monotonic() < deadline, "the tables read first never showed"
        time.sleep(0.05)
    settings = json.loads((SIMULATED / "profiler_metadata.json").read_text())[
        "perfkit_simulation"]
    par = settings["parallel"]
    sequences = par["micro_batch_size"] * par["num_micro_batches"] * par["dp"]
    tokens = sequences * settings["model"]["seq_length"]
    expected = number_text(tokens / par["dp"] / _raw_step_s(SIMULATED)) + \
        " tokens/s per device"
    card = re.search(r"<div class='pk-k'>throughput</div><div class='pk-v'>([^<]*)<"
                     r"/div><div class='pk-n'>([^<]*)<", html)
    assert card is not None and card.group(1) == expected, card and card.groups()
    assert "from kernel_details.csv and the rank&#x27;s other tables (1 step), read first" \
        in card.group(2)
    # the MFU counts a training step: only the trace's host operators can say it is one
    mfu = re.search(r"<div class='pk-k'>MFU</div><div class='pk-v'>([^<]*)<"
                    r"/div><div class='pk-n'>([^<]*)<", html)
    assert mfu is not None and mfu.group(1).endswith("%"), mfu and mfu.groups()
    assert "counted as a training step (forward and backward): the host operators of " \
        "trace_view.json, still being read, may say it is not one" in mfu.group(2)
    # the job line says where the Overview's job comes from, not that it comes later
    line = board.job.summary.value
    assert "read first from kernel_details.csv and the rank&#x27;s other tables " \
        "(1 step); the whole profile&#x27;s follows" in line, line
    go.set()
    assert board.wait(120) and board.error is None
    final = panel_html(board.panels["Overview"])
    card = re.search(r"<div class='pk-k'>throughput</div><div class='pk-v'>([^<]*)<", final)
    assert card is not None and card.group(1) == expected
    assert "read first" not in final and "read first" not in board.job.summary.value
    assert "counted as a training step" not in final
