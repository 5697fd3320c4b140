"""Three MindSpore CPU runs made one after another in one folder are three runs, not one
job of 3 ranks (issue 67 pt 5).

The folder is built from the project's two real MindSpore CPU profiles (graph mode), one
of them twice, in sibling sub-folders named as the profiler names them
(``vm_{pid}_{start}_ascend_ms``) with starts 3 s and 5 s apart. A CPU profile has no rank
id, no world size and no communication group: only its time span can join it to another
profile, and these spans (read here from each ``trace_view.json`` with :mod:`json`) last
well under a second, so they do not overlap.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

import perfkit as pk

ROOT = Path(__file__).resolve().parents[2]
GRAPH = ROOT / "data" / "mindspore-cpu-tiny-llama" / "vm_25873_20261122094603391_ascend_ms"
RECOMPUTE = (ROOT / "tests" / "data" / "mindspore_cpu_recompute"
             / "vm_7632_20261123014144018_ascend_ms")
START = dt.datetime(2026, 11, 22, 9, 46, 3, 391000, tzinfo=dt.timezone.utc)
OFFSETS_S = (0, 3, 8)  # started 3 s, then 5 s, after the one before


def _span_s(folder: Path) -> float:
    events = json.loads((folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    timed = [e for e in events if e.get("ph") == "X"]
    first = min(float(e["ts"]) for e in timed)
    last = max(float(e["ts"]) + float(e["dur"]) for e in timed)
    return (last - first) / 1e6


def _ops(folder: Path) -> int:
    events = json.loads((folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    return sum(1 for e in events if e.get("ph") == "X" and e.get("pid") == 2)


@pytest.fixture()
def three_runs(tmp_path: Path) -> tuple[Path, list[Path]]:
    made = []
    for k, (sub, src) in enumerate((("graph_new", GRAPH), ("graph_legacy", RECOMPUTE),
                                    ("pynative", GRAPH))):
        stamp = (START + dt.timedelta(seconds=OFFSETS_S[k])).strftime("%Y%m%d%H%M%S%f")[:17]
        dst = tmp_path / "runs" / sub / f"vm_{4000 + k}_{stamp}_ascend_ms"
        shutil.copytree(src, dst)
        made.append(dst)
    return tmp_path / "runs", made


def test_the_spans_do_not_overlap() -> None:
    """The premise, read independently: each profile lasts less than the 3 s between
    starts."""
    assert max(_span_s(GRAPH), _span_s(RECOMPUTE)) < min(b - a for a, b in zip(
        OFFSETS_S, OFFSETS_S[1:], strict=False))


def test_three_runs_not_one_job(three_runs: tuple[Path, list[Path]]) -> None:
    root, made = three_runs
    runs = pk.runs(root)
    assert len(runs) == 3, [r.label for r in runs]
    assert [Path(r.paths[0]) for r in runs] == made  # in start order
    starts = [r.start_ns for r in runs]
    assert [round((s - starts[0]) / 1e9, 3) for s in starts] == list(OFFSETS_S)
    for r in runs:
        assert len(r.ranks) == 1 and "mindspore" in r.label
        assert "3 ranks" not in r.label
    with pytest.raises(pk.PerfkitError, match="3 separate runs found, not merged"):
        pk.load(root, cache=False)
    # each run opens its own profile: the operators of its trace_view.json
    for r, folder in zip(runs, made, strict=True):
        prof = pk.load(root, run=r.id, cache=False)
        assert prof.meta.framework == "mindspore"
        assert len(prof.ops) == _ops(folder), (r.label, len(prof.ops), _ops(folder))


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_the_dashboard_offers_the_run_picker(three_runs: tuple[Path, list[Path]]) -> None:
    from perfkit.widgets import dashboard

    root, _ = three_runs
    board = dashboard()
    assert board.load_profile(str(root)) is False
    assert "holds 3 separate runs, not merged" in board.status.value
    assert board.runs.layout.display == "flex"
    assert [run_id for _, run_id in board.runs.options[1:]] == [0, 1, 2]
    assert "dp 3" not in board.status.value
    board.runs.value = 1
    assert board.error is None and board.profile.meta.framework == "mindspore"


def test_a_rankless_folder_of_unknown_end_is_a_run_of_its_own(
        three_runs: tuple[Path, list[Path]]) -> None:
    """Without its trace_view.json the end is not known: the start alone (seconds after
    the other's) does not make the two one job."""
    root, made = three_runs
    shutil.rmtree(made[2])
    (made[1] / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").unlink()
    assert len(pk.runs(root)) == 2
