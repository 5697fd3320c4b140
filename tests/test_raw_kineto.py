"""tests/raw_kineto.py parses a trace once per test process, and again when the file changes:
the readings after the first are those of the file as it is, never of an older version."""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import raw_kineto
from raw_kineto import forget, raw_device_steps, raw_events, raw_outside, raw_walls, raw_windows


def _trace(kernel_us: str, extra: list[dict[str, Any]] | None = None) -> str:
    """One ProfilerStep#1 (1000-1100 µs) launching one kernel at 1020 µs that lasts
    ``kernel_us`` (written as given), and one kernel launched before the trace began."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 1000, "dur": 100},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 1010, "dur": 2, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1020,
         "dur": "KERNEL", "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "early", "pid": 0, "tid": 7, "ts": 990,
         "dur": 5, "args": {"correlation": 99}},
        *(extra or []),
    ]
    return json.dumps({"traceEvents": events}).replace('"KERNEL"', kernel_us)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file raw_kineto parses from here on (a fresh, empty cache that keeps files of
    any size; ``raising=False``: a reader without a cache fails the counts, not the set-up)."""
    monkeypatch.setattr(raw_kineto, "_SMALL", 0, raising=False)
    monkeypatch.setattr(raw_kineto, "_PARSED", OrderedDict(), raising=False)
    monkeypatch.setattr(raw_kineto, "_WINDOWS", {}, raising=False)
    monkeypatch.setattr(raw_kineto, "_OUTSIDE", {}, raising=False)
    seen: list[str] = []
    load = json.load

    def counted(fh: Any, **kw: Any) -> Any:
        seen.append(Path(fh.name).name)
        return load(fh, **kw)

    monkeypatch.setattr(raw_kineto.json, "load", counted)
    return seen


def test_a_trace_is_parsed_once_for_every_reading(tmp_path: Path, parses: list[str]) -> None:
    path = tmp_path / "rank0.json"
    path.write_text(_trace("30.5"))
    # by hand: the kernel 1020-1050.5 µs, then the device idle until the span ends at
    # 1100 µs: 50.5 + 49.5 = 80 µs; the early kernel (launch not in the trace) is in no step
    assert raw_device_steps(path) == ({1: Decimal("80.0")}, True)
    assert raw_walls(path) == {1: Decimal("100.0")}  # and 20 µs of wait from 1000 µs
    assert raw_outside(path) == [(Decimal(990), Decimal(995))]
    windows, spans, on_device = raw_windows(path)
    assert windows == {1: [1020, Decimal("1050.5"), False]} and on_device
    assert spans == [(1000, 1100, 1)]
    assert len(raw_events(path)) == 4
    assert parses == ["rank0.json"]
    # each caller gets its own lists: changing one changes no later reading
    windows[1][1] = Decimal(0)
    raw_events(path).clear()
    raw_outside(path).clear()
    assert raw_windows(path)[0] == {1: [1020, Decimal("1050.5"), False]}
    assert len(raw_events(path)) == 4 and raw_outside(path) == [(Decimal(990), Decimal(995))]
    assert parses == ["rank0.json"]


def test_a_changed_trace_is_parsed_again(tmp_path: Path, parses: list[str]) -> None:
    path = tmp_path / "rank0.json"
    path.write_text(_trace("30.5"))
    assert raw_device_steps(path)[0] == {1: Decimal("80.0")}
    # another size: the kernel lasts 40.25 µs, the idle tail 1060.25-1100 µs
    path.write_text(_trace("40.25"))
    assert raw_device_steps(path)[0] == {1: Decimal("80.00")}
    assert raw_windows(path)[0] == {1: [1020, Decimal("1060.25"), False]}
    # the same size, a later modification time: the kernel lasts 44.25 µs
    before = path.stat()
    path.write_text(_trace("44.25"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    assert path.stat().st_size == before.st_size
    assert raw_windows(path)[0] == {1: [1020, Decimal("1064.25"), False]}
    assert raw_outside(path) == [(Decimal(990), Decimal(995))]
    assert parses == ["rank0.json"] * 3


def test_the_least_recently_read_trace_is_dropped(tmp_path: Path, parses: list[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(raw_kineto, "_KEEP", 2, raising=False)
    paths = [tmp_path / f"rank{r}.json" for r in range(3)]
    for p in paths:
        p.write_text(_trace("30.5"))
    for p in (*paths[:2], paths[0], paths[2]):  # rank1 is then the least recently read
        assert raw_walls(p) == {1: Decimal("100.0")}
    assert parses == ["rank0.json", "rank1.json", "rank2.json"]
    assert raw_walls(paths[0]) == raw_walls(paths[2]) == {1: Decimal("100.0")}
    assert raw_walls(paths[1]) == {1: Decimal("100.0")}  # parsed again
    assert parses == ["rank0.json", "rank1.json", "rank2.json", "rank1.json"]
    assert len(raw_kineto._PARSED) == len(raw_kineto._WINDOWS) == 2


def test_a_small_file_is_parsed_at_each_reading(tmp_path: Path, parses: list[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "rank0.json"
    path.write_text(_trace("30.5"))
    monkeypatch.setattr(raw_kineto, "_SMALL", path.stat().st_size + 1)
    assert raw_events(path) == raw_events(path)
    assert parses == ["rank0.json"] * 2 and not raw_kineto._PARSED


def test_forgotten_traces_are_parsed_again(tmp_path: Path, parses: list[str]) -> None:
    path = tmp_path / "rank0.json"
    path.write_text(_trace("30.5"))
    assert raw_walls(path) == raw_walls(path) == {1: Decimal("100.0")}
    assert parses == ["rank0.json"]
    forget()
    assert not raw_kineto._PARSED and not raw_kineto._WINDOWS and not raw_kineto._OUTSIDE
    assert raw_walls(path) == {1: Decimal("100.0")}
    assert parses == ["rank0.json"] * 2
