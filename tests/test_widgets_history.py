"""The History panel and its charts: what they show comes from the journal, and a bad
journal never raises into the page."""

from __future__ import annotations

import html
import math
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from perfkit import charts as C
from perfkit.journal import Journal
from perfkit.widgets import HistoryPanel, history_panel

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "data" / "journals" / "llama2-13b-case.sqlite"


@pytest.fixture(scope="module")
def case() -> Journal:
    return Journal(CASE, readonly=True)


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_panel_shows_progression_runs_and_the_last_two_compared(case: Journal) -> None:
    panel = history_panel(case)
    assert isinstance(panel, HistoryPanel) and panel.message.value == ""
    assert panel.chart.value.lstrip().startswith("<svg")
    runs = case.runs()
    for r in runs.itertuples(index=False):
        assert html.escape(r.label) in panel.table.value
        assert f"{r.tokens_per_s_per_device:,.0f}" in panel.table.value
        assert r.mfu_text in panel.table.value
    assert (panel.base.value, panel.new.value) == (2, 3)
    sentence = case.compare(2, 3).sentence()
    assert html.escape(sentence) in panel.config_diff.value
    # config diff on top, time diff below
    assert "recompute" in panel.config_diff.value and "Metrics" in panel.time_diff.value
    assert panel.time_chart.value.count("<svg") == 2
    panel.base.value = 1  # choosing another run compares again
    assert panel.comparison.base_label == "baseline"
    assert html.escape(case.compare(1, 3).sentence()) in panel.config_diff.value
    panel.select("baseline", "pipelined")
    assert (panel.comparison.base_label, panel.comparison.new_label) == ("baseline",
                                                                         "pipelined")
    static = panel._repr_mimebundle_()["text/html"]
    assert "<svg" in static and html.escape(case.compare(1, 2).sentence()) in static


def test_panel_takes_a_path(case: Journal) -> None:
    panel = history_panel(str(CASE))
    assert panel.journal is not None and len(panel.runs) == 3


@pytest.mark.parametrize("kind", ["none", "missing", "folder", "empty", "garbage",
                                  "foreign", "number", "no runs"])
def test_panel_says_what_is_wrong_and_never_raises(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "garbage":
        path.write_bytes(b"\x00\x01 not a journal" * 50)
    elif kind == "foreign":
        with sqlite3.connect(path) as con:
            con.execute("CREATE TABLE t (x)")
    elif kind == "no runs":
        Journal(path)
    arg = {"none": None, "folder": tmp_path, "number": 42}.get(kind, path)
    panel = history_panel(arg)
    assert panel.message.value, kind
    assert panel.chart.value == "" and panel.table.value == ""
    assert panel._compare_box.layout.display == "none"
    if kind in ("missing", "empty", "garbage", "foreign", "folder"):
        assert html.escape(str(arg)) in panel.message.value
    if kind == "no runs":
        assert "no run yet" in panel.message.value


def test_unknown_run_in_select_is_a_message(case: Journal) -> None:
    panel = history_panel(case)
    panel.select("baseline", "nope")
    assert "no run" in panel.config_diff.value


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_refresh_sees_runs_added_elsewhere(case: Journal, tmp_path: Path) -> None:
    mine = case.copy_to(tmp_path / "mine.sqlite")
    mine.remove("tuned")
    panel = history_panel(str(mine.path))
    assert len(panel.runs) == 2
    Journal(mine.path).add(case.record("tuned"))
    panel.refresh()
    assert len(panel.runs) == 3 and panel.new.value == 4


def test_a_flagged_mfu_is_shown_as_its_warning(case: Journal, tmp_path: Path) -> None:
    mine = case.copy_to(tmp_path / "mine.sqlite")
    with sqlite3.connect(mine.path) as con:  # as a guard would have stored it
        con.execute("UPDATE metrics SET value = NULL, text = '123.4% ⚠ not plausible', "
                    "warning = 'MFU 123.4% is above 100 % of the peak' "
                    "WHERE key = 'mfu' AND run_id = 2")
    panel = history_panel(mine)
    assert "123.4% ⚠ not plausible" in panel.table.value
    runs = mine.runs()
    assert math.isnan(runs["mfu"].iloc[1])
    chart = C.journal_progress_chart(runs).to_dict()
    mfu_panel = chart["vconcat"][1]
    data = chart["datasets"][mfu_panel["data"]["name"]]
    assert [d["label"] for d in data] == ["baseline", "tuned"]  # the flagged one left out


def test_progress_chart_keeps_the_runs_order(case: Journal) -> None:
    runs = case.runs().iloc[::-1]  # any order the caller gives
    spec = C.journal_progress_chart(runs, title="t").to_dict()
    tokens = spec["vconcat"][0]
    assert tokens["layer"][0]["encoding"]["x"]["sort"] == list(runs["label"])
    values = spec["datasets"][tokens["data"]["name"]]
    assert [v["tokens"] for v in values] == pytest.approx(
        list(runs["tokens_per_s_per_device"]))


def test_breakdown_and_operator_charts_draw_the_comparison(case: Journal) -> None:
    cmp = case.compare("pipelined", "tuned")
    spec = C.journal_breakdown_chart(cmp.breakdown, cmp.base_label, cmp.new_label).to_dict()
    data = pd.DataFrame(spec["datasets"][spec["data"]["name"]])
    # a walk: at 1366 px the ms axis printed "1,8002,000"; overlapping labels are dropped
    assert spec["encoding"]["x"]["axis"] == {"labelOverlap": "greedy", "tickCount": 5}
    bubble = cmp.breakdown.set_index("part").loc["bubble_us"]
    got = data[data["part"] == "bubble"].set_index("run")["ms"]
    assert got["pipelined"] == pytest.approx(bubble["base_us"] / 1e3)
    assert got["tuned"] == pytest.approx(bubble["new_us"] / 1e3)
    assert set(data["part"]) == {"computing", "communication (not overlapped)", "free",
                                 "bubble", "before the first device task"}
    # all but the bubble (inside the communication) add up to the job's step
    drawn = data[data["part"] != "bubble"].groupby("run")["ms"].sum()
    step = cmp.breakdown.set_index("part").loc["wall_us"]
    assert drawn["pipelined"] == pytest.approx(step["base_us"] / 1e3)
    assert drawn["tuned"] == pytest.approx(step["new_us"] / 1e3)
    ops = cmp.operators.copy()
    ops.loc[1, "delta_us"] = float("nan")
    spec = C.journal_operators_chart(ops, n=5).to_dict()
    rows = spec["datasets"][spec["data"]["name"]]
    assert len(rows) == 5 and ops.loc[1, "key"] not in [r["key"] for r in rows]
    with pytest.raises(Exception, match="needs the columns"):
        C.journal_progress_chart(pd.DataFrame({"label": []}))


# ---- the dashboard's History tab ------------------------------------------------------

def _digest(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_dashboard_history_tab_shows_the_bundled_case_read_only(monkeypatch, tmp_path
                                                               ) -> None:
    from perfkit.widgets import dashboard

    monkeypatch.chdir(tmp_path)  # no perfkit-journal.sqlite here: the bundled case opens
    monkeypatch.delenv("PERFKIT_JOURNAL", raising=False)
    before = _digest(CASE)
    board = dashboard("simulated/slow-rank")
    tab = board.select("History")
    assert Path(tab.path.value).resolve() == CASE.resolve()
    assert tab.panel.journal is not None and tab.panel.journal.readonly
    assert len(tab.panel.runs) == len(sqlite3.connect(CASE).execute(
        "SELECT id FROM runs").fetchall()) == 3
    assert tab.add_button.disabled
    tab.add_profile()  # refused: the bundled journal is never written
    assert "read-only" in tab.status.value and _digest(CASE) == before
    # the page says the journal is perfkit's example, not runs of the profile on show
    said = html.unescape(tab.body.children[0].value)
    assert "example journal" in said and "not runs of the profile on show" in said
    assert "Llama2-13B" in said and "three simulated runs" in said
    assert len(tab.panel.runs) == 3  # as the sentence says
    assert str(CASE) not in said  # the box shows the path; the sentence does not repeat it


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_users_own_journal_gets_no_example_sentence(monkeypatch, tmp_path) -> None:
    from perfkit.widgets import dashboard

    monkeypatch.chdir(tmp_path)
    own = tmp_path / "perfkit-journal.sqlite"
    Journal.bundled().copy_to(own)
    monkeypatch.setenv("PERFKIT_JOURNAL", str(own))
    board = dashboard("simulated/slow-rank")
    tab = board.select("History")
    assert Path(tab.path.value).resolve() == own.resolve()
    text = "".join(getattr(w, "value", "") for w in tab.body.children)
    assert "example journal" not in text and not tab.add_button.disabled


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_dashboard_history_tab_adds_the_profile_on_show(monkeypatch, tmp_path) -> None:
    from perfkit.analysis import measured_step_s, step_breakdown
    from perfkit.widgets import dashboard

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFKIT_JOURNAL", raising=False)
    board = dashboard("simulated/slow-rank")
    tab = board.select("History")
    own = tmp_path / "mine" / "journal.sqlite"
    own.parent.mkdir()
    tab.path.value = str(own)
    assert not own.exists() and "creates it" in tab.body.children[0].value
    tab.label.value = "slow rank, first look"
    tab.add_profile()
    assert "Added as run 1" in tab.status.value
    runs = Journal(own, create=False).runs()
    assert list(runs["label"]) == ["slow rank, first look"]
    # the step time recorded is the profile's measured step (seconds in the journal)
    step_s = measured_step_s(step_breakdown(board.profile))
    assert math.isclose(float(runs["step_time_s"].iloc[0]), step_s, rel_tol=1e-9)
    tab.add_profile()  # the same profile again: refused, nothing added
    assert "already in the journal" in tab.status.value
    assert len(Journal(own, create=False).runs()) == 1


def test_the_breakdown_table_names_the_parts_inside_others(case: Journal) -> None:
    """The comparison's step breakdown: computing, communication not overlapped and free
    make up the step (checked on the recorded microseconds); the overlapped communication
    and the bubble lie inside them, and the table says so instead of listing them as
    siblings whose shares would add up to more than 100 %."""
    from perfkit.journal.text import time_diff_html

    cmp = case.compare("pipelined", "tuned")
    b = cmp.breakdown.set_index("part")
    for col in ("base_us", "new_us"):
        whole = b.loc[["computing_us", "comm_not_overlapped_us", "free_us"], col].sum()
        assert whole == pytest.approx(b.loc["step_us", col], rel=5e-3)
        assert b.loc["bubble_us", col] <= b.loc["comm_not_overlapped_us", col]
    html = time_diff_html(cmp)
    assert "pipeline bubble (part of communication not overlapped)" in html
    assert "communication under computing (part of computing)" in html
    assert "add up to the step" in html


def test_a_finding_worded_differently_by_each_run_shows_both_titles(case: Journal) -> None:
    """The pipelined run used full recompute and the tuned one partial: the kept finding
    carries each run's own title (from the journal's findings table), not only the new
    run's beside the old run's figures."""
    from perfkit.journal.text import time_diff_html

    cmp = case.compare("pipelined", "tuned")
    f = cmp.findings.set_index("rule")
    base, new = f.loc["recompute_headroom", ["base_title", "new_title"]]
    assert base != new
    html = time_diff_html(cmp)
    assert f"tuned: {new} / pipelined: {base}" in html


def test_history_tab_offers_to_add_only_a_profile_on_show(monkeypatch, tmp_path) -> None:
    """With nothing open (a folder of several runs, or none yet) there is no profile to
    add: the button is disabled; it is enabled once a profile is on show and the journal
    in the box is the user's."""
    from perfkit.journal import bundled_journal_path
    from perfkit.widgets.dashboard import Dashboard

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFKIT_JOURNAL", raising=False)
    board = Dashboard()
    tab = board.select("History")
    assert board.profile is None
    own = tmp_path / "journal.sqlite"
    tab.path.value = str(own)  # the user's journal, writable: still nothing to add
    assert tab.add_button.disabled
    board.load_profile("simulated/slow-rank")
    board.select("History")
    assert not tab.add_button.disabled
    tab.path.value = str(bundled_journal_path())  # the bundled case: read-only
    assert tab.add_button.disabled
    tab.path.value = str(own)
    assert not tab.add_button.disabled


def test_panel_shows_the_verdict_of_pk_compare(case: Journal) -> None:
    panel = history_panel(case)
    panel.select("baseline", "tuned")
    runs = case.runs().set_index("label")
    # the change of time per token per device is the inverse of the stored tokens/s
    gain = runs.loc["tuned", "tokens_per_s_per_device"] / runs.loc["baseline",
                                                                  "tokens_per_s_per_device"]
    assert panel.verdict.word == "faster"
    assert panel.verdict.change_pct == pytest.approx(100.0 * (1.0 / gain - 1.0), rel=1e-6)
    assert "FASTER" in panel.config_diff.value and "per token per device" in \
        panel.config_diff.value
