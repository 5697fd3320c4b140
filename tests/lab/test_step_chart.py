"""The lab's step charts split each rank's step as the dashboard's Overview does.

The ``job_steps`` and ``cluster_steps`` views draw the step per rank. They stacked
Computing, Communication (Not Overlapped) and Free only: each bar was the device span,
without the Preparing that the Overview (and the step_ms column beside the chart, and the
throughput answer) counts in the step, and a pipeline's receive wait was drawn as
communication. On the intro pack (seed 11) student-2 (pp 2, a data-loading stall) saw a
594.4 ms bar for rank 0 where the Overview draws 781.6 ms: the 187.2 ms of Preparing,
the very stall planted in that job, was missing, and the 183.6 ms bubble was labelled
communication.

Each chart's data are checked against every rank's ``step_trace_time.csv`` read here with
``csv`` (parts, their values, the bar's total), and against the chart the Overview tab
draws for the same profile.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from perfkit import charts as C
from perfkit.lab.app import Sheet
from perfkit.widgets import dashboard

pytestmark = pytest.mark.xdist_group("lab")

#: The Overview's words for each part, and how step_trace_time.csv gives it (µs).
PARTS = {
    "computing": lambda r: r["Computing"],
    "exposed communication": lambda r: max(r["Communication(Not Overlapped)"] - r["Bubble"],
                                           0.0),
    "pipeline bubble": lambda r: r["Bubble"],
    "free (device idle)": lambda r: r["Free"],
    "before the first device task (data, launch)": lambda r: r["Preparing"],
}
#: Parts the Overview leaves out when no rank has them above 0.
OPTIONAL = {"pipeline bubble": "Bubble",
            "before the first device task (data, launch)": "Preparing"}


def _raw(profile: Path) -> dict[int, dict[str, float]]:
    """Rank -> its one row of step_trace_time.csv (µs); the rank from profiler_info."""
    out = {}
    for d in profile.iterdir():
        (info,) = d.glob("profiler_info_*.json")
        with (d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").open(newline="") as f:
            (row,) = list(csv.DictReader(f))
        out[int(info.stem.rsplit("_", 1)[1])] = {k: float(v) for k, v in row.items()}
    return out


def _drawn(sheet: Sheet, view: str, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    """The data of the one chart the view draws (caught on its way to SVG)."""
    charts: list[Any] = []
    real = C.chart_to_svg

    def catch(chart: Any, *args: Any, **kwargs: Any) -> str:
        charts.append(chart)
        return real(chart, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(C, "chart_to_svg", catch)
        page = sheet.show(view).value
    assert "class='pk-error'" not in page and "chart not drawn" not in page
    (chart,) = charts
    return chart.data


def _check_against_raw(data: pd.DataFrame, raw: dict[int, dict[str, float]],
                       table: pd.DataFrame, where: str) -> None:
    wanted = {p for p in PARTS
              if p not in OPTIONAL or any(r[OPTIONAL[p]] > 0 for r in raw.values())}
    assert sorted(data["rank"].unique()) == sorted(raw), where
    for rank, row in raw.items():
        mine = data[data["rank"] == rank].set_index("part")["ms"]
        assert set(mine.index) == wanted, (where, rank, set(mine.index) ^ wanted)
        for part in wanted:
            assert math.isclose(mine[part], PARTS[part](row) / 1e3, rel_tol=1e-9,
                                abs_tol=1e-9), (where, rank, part)
        wall = (row["Computing"] + row["Communication(Not Overlapped)"] + row["Free"]
                + row["Preparing"])
        assert math.isclose(mine.sum(), wall / 1e3, rel_tol=1e-9), (where, rank)
        # the bar is the step_ms the table beside it shows
        step_ms = table.loc[table["rank"] == rank, "step_ms"].iloc[0]
        assert math.isclose(mine.sum(), step_ms, rel_tol=1e-9), (where, rank)


def _check_pack(pack: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    key = json.loads((pack / "instructor" / "key.json").read_text())
    checked = 0
    for student, entry in key["entries"].items():
        sheet = Sheet(pack / student)
        for view, which, table in (("job_steps", "job", sheet.evidence.job_steps),
                                   ("cluster_steps", "cluster", sheet.evidence.cluster_steps)):
            raw = _raw(pack / student / entry["settings"][which]["path"])
            _check_against_raw(_drawn(sheet, view, monkeypatch), raw, table(),
                               f"{student} {view}")
            checked += 1
    return checked


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_the_step_charts_split_the_step_as_the_overview_counts_it(
        intro_pack: Path, advanced_pack: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every student's two step charts: the Overview's parts, Preparing included, whose
    sum is the step (Computing + Communication(Not Overlapped) + Free + Preparing)."""
    assert _check_pack(intro_pack, monkeypatch) == 2 * 6
    assert _check_pack(advanced_pack, monkeypatch) == 2 * 2


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
@pytest.mark.parametrize("student", ["student-1", "student-2"])
def test_the_job_chart_is_the_overview_chart(intro_pack: Path, student: str,
                                             tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A data-parallel student (1) and a pipeline student with a data-loading stall (2):
    the lab draws the job's steps bar for bar and part for part as the dashboard's
    Overview tab does."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = intro_pack / student
    lab = _drawn(Sheet(folder), "job_steps", monkeypatch)
    board = dashboard(str(folder / "profiles" / "job"))
    (widget,) = board.select("Overview").charts
    overview = widget.chart.data

    def bars(frame: pd.DataFrame) -> dict[tuple[int, str, str], float]:
        return {(int(r), str(s), str(p)): float(ms) for r, s, p, ms in
                zip(frame["rank"], frame["step"], frame["part"], frame["ms"], strict=True)}

    mine, theirs = bars(lab), bars(overview)
    assert set(mine) == set(theirs)
    for k, ms in theirs.items():
        assert math.isclose(mine[k], ms, rel_tol=1e-12, abs_tol=1e-12), k
