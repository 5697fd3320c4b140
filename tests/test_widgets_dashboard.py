"""The dashboard panel in-process: picker, tabs, uploads and error messages.

The browser tests (tests/browser) drive the same panel through Voila; these tests check
what each tab shows against the bundled files, and that every failure becomes a message.
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from perfkit.widgets import TAB_TITLES, bundled_profile, bundled_profiles, dashboard
from perfkit.widgets.dashboard import DEFAULT_PROFILE, describe_error, frame_html

DATA = Path(__file__).resolve().parents[1] / "data"


def _rank_folders(folder: Path) -> int:
    """Rank folders of a simulated/torch_npu export, counted on disk."""
    return sum(1 for p in folder.iterdir() if p.is_dir() and p.name.endswith("_ascend_pt"))


def _zip_folder(folder: Path, top: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                name = path.relative_to(folder).as_posix()
                zf.write(path, f"{top}/{name}" if top else name)
    return buffer.getvalue()


def _upload(board, name: str, content: bytes) -> None:
    board.upload.value = ({"name": name, "type": "application/zip", "size": len(content),
                           "content": memoryview(content),
                           "last_modified": datetime.now(timezone.utc)},)


def _html_of(panel) -> str:
    return "".join(getattr(child, "value", "") for child in panel.body.children)


@pytest.fixture(scope="module")
def board():
    return dashboard()


def test_opens_the_default_sample_with_its_ranks_and_a_chart(board) -> None:
    folder = bundled_profile(DEFAULT_PROFILE)
    assert board.source == DEFAULT_PROFILE and board.error is None
    assert f"{_rank_folders(folder)} rank(s)" in board.status.value
    assert _rank_folders(folder) == 16
    overview = board.panels["Overview"]
    assert not overview.stale and overview.message.value == ""
    assert "<svg" in _html_of(overview)
    # the other tabs wait until they are shown
    assert all(board.panels[t].stale for t in TAB_TITLES if t != "Overview")


def test_the_tabs_are_the_seven_of_the_cycle(board) -> None:
    assert TAB_TITLES == ("Overview", "Operators", "Communication", "Memory", "Recompute",
                          "Planner", "Advice")
    assert tuple(board.tabs.titles) == TAB_TITLES


@pytest.mark.slow
@pytest.mark.parametrize("name", bundled_profiles())
def test_every_tab_renders_every_bundled_profile_without_an_error(name: str) -> None:
    board = dashboard(name)
    assert board.error is None, board.error
    for title in TAB_TITLES:
        panel = board.select(title)
        assert not panel.stale
        assert "class='pk-error'" not in panel.message.value, (title, panel.message.value)
        assert panel.body.children, title


def test_operator_table_matches_the_kernel_file(tmp_path: Path) -> None:
    # one rank of the real Ascend export: count the kernels of the top type in the CSV
    import csv

    name = "ascend-real-pt-level1"
    board = dashboard(name)
    panel = board.select("Operators")
    html = _html_of(panel)
    assert "<svg" in html
    rows = []
    for path in bundled_profile(name).rglob("kernel_details.csv"):
        with path.open(newline="", encoding="utf-8") as fh:
            rows += list(csv.DictReader(fh))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["Type"]] = counts.get(row["Type"], 0) + 1
    top_type = max(counts, key=counts.get)
    assert top_type in html


def test_changing_the_grouping_changes_the_chart(board) -> None:
    panel = board.select("Operators")
    before = panel.body.children[0].value
    panel.group.value = "name"
    after = panel.body.children[0].value
    assert "<svg" in after and after != before
    panel.group.value = "type"


def test_a_bad_path_shows_a_message_and_keeps_the_profile(board, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-profile"
    assert board.load_profile(str(missing)) is False
    assert str(missing) in board.status.value and "no such file" in board.status.value
    assert "Traceback" not in board.status.value
    assert board.source == DEFAULT_PROFILE  # the last good profile stays on show
    assert "Still showing" in board.status.value
    board.path.value = str(missing)  # the text box goes the same way
    assert "class='pk-error'" in board.status.value
    assert board.load_profile(DEFAULT_PROFILE) and "pk-ok" in board.status.value


def test_a_damaged_profile_shows_what_is_wrong(tmp_path: Path) -> None:
    copy = tmp_path / "damaged"
    shutil.copytree(bundled_profile("simulated/slow-rank"), copy)
    for path in copy.rglob("kernel_details.csv"):
        path.write_text("this,is,not\na,kernel,table\n", encoding="utf-8")
    board = dashboard(str(copy))
    assert board.profile is None and board.error
    assert "kernel_details.csv" in board.status.value
    assert "Traceback" not in board.status.value
    # the page keeps working
    board.samples.value = "simulated/slow-rank"
    assert board.error is None and board.profile is not None


def test_an_uploaded_zip_opens_like_the_folder(tmp_path: Path) -> None:
    folder = bundled_profile("simulated/slow-link")
    board = dashboard()
    _upload(board, "slow-link.zip", _zip_folder(folder, top="slow-link"))
    assert board.error is None, board.error
    assert board.source == "slow-link.zip"
    assert len(board.profile.ranks) == _rank_folders(folder)
    extracted = board._upload_dir
    assert extracted is not None and extracted.is_dir()
    assert not str(extracted).startswith(str(DATA))  # extracted outside the user's folders
    assert board.upload.value == ()  # ready for the next upload
    # a second upload replaces (and removes) the first extraction
    _upload(board, "again.zip", _zip_folder(folder))
    assert board.error is None and not extracted.exists()


def test_an_upload_over_the_limit_is_refused(tmp_path: Path) -> None:
    board = dashboard(upload_limit_bytes=1000)
    _upload(board, "big.zip", _zip_folder(bundled_profile("simulated/slow-link")))
    assert "big.zip" in board.status.value and "upload limit" in board.status.value
    assert board.source == DEFAULT_PROFILE


def test_a_malicious_zip_is_refused_and_writes_nothing_outside(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("../../perfkit-evil.txt", "x")
    board = dashboard()
    _upload(board, "evil.zip", buffer.getvalue())
    assert "evil.zip" in board.status.value and "class='pk-error'" in board.status.value
    assert board.source == DEFAULT_PROFILE
    import tempfile
    assert not (Path(tempfile.gettempdir()) / "perfkit-evil.txt").exists()
    assert not (Path(tempfile.gettempdir()).parent / "perfkit-evil.txt").exists()


def test_a_file_that_is_not_a_zip_shows_a_message() -> None:
    board = dashboard()
    _upload(board, "notes.zip", b"just some text")
    assert "notes.zip" in board.status.value and "class='pk-error'" in board.status.value


def test_planner_search_draws_the_candidates_and_fills_the_step(board) -> None:
    from perfkit.analysis import step_breakdown
    from perfkit.widgets import measured_step_s

    panel = board.select("Planner")
    step = measured_step_s(step_breakdown(board.profile))
    assert board.job.controls["step_time_s"].value == pytest.approx(step, abs=1e-3)
    panel.devices.value, panel.batch.value = 16, 1024
    panel.search()
    html = "".join(child.value for child in panel.result.children)
    assert "<svg" in html and "Fastest that fit" in html
    panel.devices.value = 7  # no split of 40 heads, 40 layers and 1024 sequences over 7
    panel.search()
    assert "class='pk-error'" in panel.result.children[0].value
    assert "Traceback" not in panel.result.children[0].value


def test_recompute_tab_checks_the_bundled_ir(board) -> None:
    panel = board.select("Recompute")
    assert "Memory against time" in _html_of(panel)
    panel.check_ir()
    html = "".join(child.value for child in panel.ir_result.children)
    assert "feed_forward" in html and "class='pk-error'" not in html
    panel.ir_path.value = "/nonexistent/graph.ir"
    panel.check_ir()
    assert "/nonexistent/graph.ir" in panel.ir_result.children[0].value


def test_an_invalid_job_shows_a_message_in_the_tabs_that_use_it(board) -> None:
    board.select("Planner")
    board.job.controls["tp"].value = 3  # 40 heads are not divisible by 3
    assert "must divide" in board.job.message.value
    recompute = board.panels["Recompute"]
    recompute.refresh()
    assert "must divide" in _html_of(recompute)
    board.job.controls["tp"].value = 1
    assert board.job.message.value == ""


def test_advice_lists_the_advisors_findings() -> None:
    import perfkit as pk

    board = dashboard("simulated/slow-rank")
    html = _html_of(board.select("Advice"))
    for finding in pk.advise(board.profile):
        assert finding.title.replace("&", "&amp;")[:40] in html


def test_describe_error_and_frame_html() -> None:
    import pandas as pd

    from perfkit.errors import ProfileError

    text = describe_error(ProfileError("/x/trace.json", "truncated JSON"), "opening /x")
    assert "/x/trace.json" in text and "truncated JSON" in text
    text = describe_error(KeyError("k"), "the Memory tab")
    assert "KeyError" in text and "perfkit bug" in text
    frame = pd.DataFrame({"a": range(30), "b": ["<x>"] * 30})
    markup = frame_html(frame, "cap", max_rows=5)
    assert markup.count("<tr") == 6 and "25 more rows" in markup and "&lt;x&gt;" in markup
    assert "nothing in this profile" in frame_html(frame.head(0), "cap")


def test_static_fallback_shows_the_overview(board) -> None:
    bundle = board._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "<svg" in bundle["text/html"] and "Opened" in bundle["text/html"]
    json.dumps(bundle["text/html"])


# ---- pieces the notebooks reuse ------------------------------------------------------

def _computing_per_rank(folder: Path) -> dict[int, float]:
    """Computing time per rank, summed over steps, from each rank's step_trace_time.csv."""
    import csv

    totals = {}
    for info in folder.glob("*/profiler_info_*.json"):
        rank = int(info.stem.rsplit("_", 1)[1])
        path = info.parent / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
        with path.open(newline="", encoding="utf-8") as fh:
            totals[rank] = sum(float(r["Computing"]) for r in csv.DictReader(fh))
    return totals


def test_slow_ranks_explorer_flags_the_rank_that_computes_longest() -> None:
    import perfkit as pk
    from perfkit.widgets import slow_ranks_explorer

    folder = bundled_profile("simulated/slow-rank")
    totals = _computing_per_rank(folder)
    slowest = max(totals, key=totals.get)
    others = sorted(v for r, v in totals.items() if r != slowest)
    excess = totals[slowest] / others[len(others) // 2] - 1  # over a peer's computing
    assert excess > 0.15  # the planted fault is large
    explorer = slow_ranks_explorer(pk.load(folder))
    assert f"<b>Slow at 5%:</b> rank {slowest}</p>" in explorer.output.value
    assert "<svg" in explorer.output.value
    explorer.control.value = 0.5  # above any rank's excess
    assert "<b>Slow at 50%:</b> none</p>" in explorer.output.value


def test_bandwidth_explorer_follows_the_preset() -> None:
    import perfkit as pk
    from perfkit.widgets import bandwidth_explorer

    explorer = bandwidth_explorer(pk.load(bundled_profile("simulated/slow-link")))
    assert "nominal links of ascend-910b" in explorer.output.value
    explorer.control.value = "h100"
    assert "nominal links of h100" in explorer.output.value
    assert "<div class='pk-error'>" not in explorer.output.value


def test_tab_panel_draws_one_tab_and_rejects_unknown_titles() -> None:
    from perfkit.errors import InvalidArgumentError
    from perfkit.widgets import tab_panel

    panel = tab_panel("Operators", "simulated/slow-rank")
    assert "<svg" in _html_of(panel) and panel.message.value == ""
    with pytest.raises(InvalidArgumentError, match="Overview"):
        tab_panel("Kernels", "simulated/slow-rank")


def test_changing_the_job_redraws_the_tabs_that_use_it() -> None:
    board = dashboard("simulated/slow-rank")
    memory = board.select("Memory")
    before = _html_of(memory)
    board.select("Planner")
    board.job.controls["micro_batch_size"].value = 2  # doubles the activations
    assert board.panels["Memory"].stale and board.panels["Recompute"].stale
    after = _html_of(board.select("Memory"))
    assert after != before and "<svg" in after
