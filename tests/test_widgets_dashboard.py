"""The dashboard panel in-process: picker, tabs, uploads and error messages.

The browser tests (tests/browser) drive the same panel through Voila; these tests check
what each tab shows against the bundled files, and that every failure becomes a message.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from datetime import datetime, timezone
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from shared_samples import PT_LEVEL1, WILD, shared_sample
from widget_html import panel_html, panel_words

from perfkit.widgets import TAB_TITLES, bundled_profile, bundled_profiles, dashboard
from perfkit.widgets.dashboard import DEFAULT_PROFILE, describe_error, frame_html

# the whole dashboard, every tab x profile, or Dask against pandas: the slow group (README)
pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parents[1] / "data"
# a number in scientific notation, and a microsecond figure with three decimals
_SCI = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[eE][+-]?\d+(?![\w])")
_US3 = re.compile(r"(?<![\d,.])[1-9][\d,]*\.\d{3}\s*(?:µs|us)\b|\d,\d{3}\.\d{3}\b")


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
    """Every HTML value in the tab's body (nested boxes included)."""
    return panel_html(panel)


def _dash_columns(page: str) -> list[tuple[str, str]]:
    """(caption, header) of each table column of ``page`` with no value in any row, only
    dashes: what the profile does not record should be said once, not shown that way. The
    step number of a trace without step marks (one row for the whole trace) is allowed."""
    found = []
    for tab in re.findall(r"<table.*?</table>", page, re.S):
        caption = re.search(r"<caption>(.*?)</caption>", tab, re.S)
        heads = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>(.*?)</th>", tab, re.S)]
        rows = [r for r in (re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
                            for row in re.findall(r"<tr>(.*?)</tr>", tab, re.S)) if r]
        for i, head in enumerate(heads):
            cells = [r[i].strip() for r in rows if i < len(r)]
            if cells and all(c in ("–", "") for c in cells) and head != "step":
                found.append((caption.group(1) if caption else "", head))
    return found


def _specs(panel) -> list[dict]:
    """The Vega-Lite specs of the tab's live charts (altair.JupyterChart widgets)."""
    return [chart.chart.to_dict() for chart in panel.charts]


@pytest.fixture(scope="module")
def board():
    return dashboard()


@pytest.fixture(scope="module")
def every_tab_shown() -> Any:
    """``every_tab_shown(name)``: the dashboard opened on the bundled profile ``name`` with
    each of its tabs shown once, in order; made once per module, shared by the tests that
    only read it (each test alone makes its own)."""
    boards: dict[str, Any] = {}

    def shown(name: str) -> Any:
        if name not in boards:
            board = dashboard(name)
            for title in TAB_TITLES:
                board.select(title)
            boards[name] = board
        return boards[name]

    return shown


def test_opens_the_default_sample_with_its_ranks_and_a_chart(board) -> None:
    folder = bundled_profile(DEFAULT_PROFILE)
    assert board.source == DEFAULT_PROFILE and board.error is None
    n = _rank_folders(folder)
    assert f"{n} rank{'s' * (n != 1)}." in board.status.value
    assert _rank_folders(folder) == 16
    # the format in words (its rank folders hold ASCEND_PROFILER_OUTPUT's CSV files), not
    # the loader's code for it
    assert any(folder.glob("*/ASCEND_PROFILER_OUTPUT/*.csv"))
    assert ": an Ascend text export, " in board.status.value
    assert "ascend_text" not in board.status.value
    overview = board.panels["Overview"]
    assert not overview.stale and overview.message.value == ""
    assert len(overview.charts) == 1 and _specs(overview)[0]["layer"][0]["mark"]["type"] == "bar"
    # the other tabs wait until they are shown
    assert all(board.panels[t].stale for t in TAB_TITLES if t != "Overview")


def test_the_tabs_follow_the_cycle(board) -> None:
    assert TAB_TITLES == ("Overview", "Timeline", "Operators", "Communication", "Memory",
                          "Recompute", "Planner", "Advice", "History")
    assert tuple(board.tabs.titles) == TAB_TITLES


@pytest.mark.slow
@pytest.mark.parametrize("name", bundled_profiles())
def test_every_tab_renders_every_bundled_profile_for_people(name: str, grammar,
                                                           every_tab_shown) -> None:
    board = every_tab_shown(name)
    assert board.error is None, board.error
    for title in TAB_TITLES:
        panel = board.select(title)
        assert not panel.stale and "pk-ready" in panel._dom_classes
        assert "class='pk-error'" not in panel.message.value, (title, panel.message.value)
        assert panel.body.children, title
        assert not _dash_columns(_html_of(panel)), (name, title, _dash_columns(_html_of(panel)))
        # numbers for people: no scientific notation, no µs with three decimals
        text = re.sub(r"<style>.*?</style>", "", panel.message.value + _html_of(panel),
                      flags=re.S)
        # table cells, headings and paragraphs are not one sentence
        text = re.sub(r"</t[hd]>|</div>|</p>|</h\d>", " | ", text)
        text = re.sub(r"<[^>]+>", " ", text)
        assert not _SCI.search(text), (name, title, _SCI.search(text).group(0))
        assert not _US3.search(text), (name, title, _US3.search(text).group(0))
        # sentences and captions (the charts' titles too) read right
        titles = " | ".join(json.dumps(spec.get("title", "")) for spec in _specs(panel))
        assert not grammar(text + " | " + titles), (name, title, grammar(text + titles))


@pytest.mark.slow
@pytest.mark.shared_samples
# k_resnet50_nw4 is the same PyTorch 1.9 trace format as k_resnet50_nw0: left out here
@pytest.mark.parametrize("name", [w for w in WILD if w != "k_resnet50_nw4"])
def test_every_tab_shows_every_wild_profile(name: str, tmp_path: Path, monkeypatch,
                                           grammar) -> None:
    """No tab of any real profile ends in an error or stays blank (a lone kernel_details.csv,
    whose rank the files do not record, once failed the Overview on its missing rank), and
    its words keep the grammar rules, as the bundled profiles' do."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    board = dashboard(str(shared_sample(f"wild/{name}")))
    assert board.error is None, board.error
    for title in TAB_TITLES:
        panel = board.select(title)
        assert not panel.stale and "pk-ready" in panel._dom_classes, (name, title)
        assert "class='pk-error'" not in panel.message.value, (name, title,
                                                                panel.message.value)
        assert panel.body.children, (name, title)
        assert not _dash_columns(_html_of(panel)), (name, title, _dash_columns(_html_of(panel)))
        assert not grammar(panel_words(panel)), (name, title, grammar(panel_words(panel)))


def test_operator_table_matches_the_kernel_file(tmp_path: Path) -> None:
    # the complete Level1 sample: count the kernels of the top type in the CSV files
    import csv

    name = "simulated/llama2-7b-tp2"
    board = dashboard(name)
    panel = board.select("Operators")
    html = _html_of(panel)
    assert panel.charts
    rows = []
    for path in bundled_profile(name).rglob("kernel_details.csv"):
        with path.open(newline="", encoding="utf-8") as fh:
            rows += list(csv.DictReader(fh))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["Type"]] = counts.get(row["Type"], 0) + 1
    top_type = max(counts, key=counts.get)
    assert top_type in html
    # every figure of the table on one basis, said in its header: per rank and step
    text = re.sub(r"<[^>]+>", "|", html)
    assert "device time per rank and step, mean over ranks" in text
    assert "calls per rank and step, mean over ranks" in text
    assert "summed over" not in text


def test_operator_calls_are_per_rank_and_step_as_the_time() -> None:
    """The issue's table: 165 ms beside 1,024 calls (all ranks) and 2.58 ms per call. Here
    the time and the calls of the top type are both per rank and step, read from the
    kernel files of the two ranks: the table shows their means over the ranks (the sums
    over the ranks and steps divided by the (rank, step) pairs), as its chart does."""
    import csv

    from perfkit.widgets import tab_panel

    folder = shared_sample(PT_LEVEL1)
    panel = tab_panel("Operators", str(folder))
    time_us: dict[str, float] = {}
    calls: dict[str, float] = {}
    pairs = 0
    for path in sorted(folder.rglob("kernel_details.csv")):
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        pairs += len({r["Step Id"] for r in rows})
        for r in rows:  # the table ranks computation: communication tasks are left out
            if not r["Type"].startswith("hcom_"):
                time_us[r["Type"]] = time_us.get(r["Type"], 0.0) + float(r["Duration(us)"])
                calls[r["Type"]] = calls.get(r["Type"], 0) + 1
    top = max(time_us, key=time_us.__getitem__)
    table = next(c.value for c in panel.body.children if "calls per rank and step" in
                 getattr(c, "value", ""))
    heads = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>.*?</th>", table)]
    row = next(tr for tr in re.findall(r"<tr>(.*?)</tr>", table) if f">{top}<" in tr)
    cells = dict(zip(heads, (re.sub(r"<[^>]+>", "", c)
                             for c in re.findall(r"<td[^>]*>.*?</td>", row)), strict=True))
    head = next(h for h in heads if h.startswith("device time per rank and step"))
    unit = {"(µs)": 1.0, "(ms)": 1e3, "(s)": 1e6}[head.rsplit(" ", 1)[1]]
    shown = float(cells[head].replace(",", "")) * unit
    assert shown == pytest.approx(time_us[top] / pairs, rel=5e-3)
    got = float(cells["calls per rank and step, mean over ranks"].replace(",", ""))
    assert got == pytest.approx(calls[top] / pairs, rel=5e-3)


def test_changing_the_grouping_changes_the_chart(board) -> None:
    panel = board.select("Operators")
    before = _specs(panel)[0]
    panel.group.value = "name"
    after = _specs(panel)[0]
    assert after != before and "task name" in after["title"]["text"] if isinstance(
        after["title"], dict) else "task name" in after["title"]
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


def _said(board) -> str:
    """The status line's words, as the page shows them (style and tags dropped)."""
    text = re.sub(r"<style.*?</style>|<[^>]+>", " ", board.status.value, flags=re.S)
    return " ".join(unescape(text).split())


def test_an_open_error_names_the_path_once_in_sentences(board, tmp_path: Path) -> None:
    """A truncated copy of the bundled Kineto trace (its first 20,000 bytes): the path
    once after "Could not open", the file and the fault, a full stop before "Still
    showing"; an empty box says to type a path (the walk of session 32 found "Could not
    finish opening X: X: ...", "gzipped a PyTorch ..." and "Could not finish opening :")."""
    folder = tmp_path / "cut"
    folder.mkdir()
    trace = Path(__file__).resolve().parents[1] / "data" / "kineto-tiny-llama" / \
        "rank0.pt.trace.json.gz"
    (folder / trace.name).write_bytes(trace.read_bytes()[:20_000])
    assert board.load_profile(str(folder)) is False
    said = _said(board)
    assert said.startswith(f"Could not open {folder}: ")
    assert said.count(f"{folder}:") == 1  # the file's own path is the folder's plus its name
    assert f"{folder / trace.name}: gzip stream is truncated" in said
    assert "gzipped a " not in said
    assert said.endswith(f"gzipped in full. Still showing {DEFAULT_PROFILE}.")
    assert board.load_profile("  ") is False
    assert _said(board).startswith("No path typed: type the folder (or file) of a profile")


def test_a_sample_by_name_is_named_as_the_picker_names_it(board) -> None:
    """``perfkit serve sample:slow-rank`` hands the page ``sample:slow-rank``: the status
    and the picker both say ``simulated/slow-rank``, never the folder it lies in."""
    assert board.load_profile("sample:slow-rank")
    assert _said(board).startswith("Opened simulated/slow-rank")
    assert board.samples.value == "simulated/slow-rank"
    assert str(bundled_profile("simulated/slow-rank")) not in board.status.value
    assert board.load_profile(DEFAULT_PROFILE)


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
    # the job's measured step, its devices and its batch start the planner
    assert board.job.job.step_time_s == pytest.approx(step)
    assert board.job.job.source("step_time_s") == "profile"
    assert (panel.devices.value, panel.batch.value) == (16, board.job.job.global_batch_size)
    panel.devices.value, panel.batch.value = 16, 1024
    panel.search()
    html = "".join(getattr(child, "value", "") for child in panel.result.children
                   if type(child).__name__ == "HTML")
    charts = [c for c in panel.result.children if type(c).__name__ == "JupyterChart"]
    assert len(charts) == 1 and "Layouts that fit, by predicted step" in html
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


def test_an_invalid_job_edit_shows_a_message_and_keeps_the_job(board) -> None:
    board.select("Planner")
    before = board.job.job
    board.job.controls["tp"].value = "3"  # 40 heads are not divisible by 3
    assert "must divide" in board.job.message.value
    assert board.job.job is before  # the tabs keep drawing the last valid job
    board.job.controls["tp"].value = "1"  # the job's own value: the message goes
    assert board.job.message.value == "" and board.job.job.source("tp") == "profile"
    board.job.controls["num_micro_batches"].value = "8"
    assert board.job.job.source("num_micro_batches") == "user"
    assert board.job.job.global_batch_size == 16 * 2 * 8  # dp x micro-batch size x count
    board.job.reset()
    assert board.job.job.source("num_micro_batches") == "profile"


def test_advice_lists_the_advisors_findings() -> None:
    import perfkit as pk

    board = dashboard("simulated/slow-rank")
    html = _html_of(board.select("Advice"))
    for finding in pk.advise(board.profile):
        assert finding.title.replace("&", "&amp;")[:40] in html


def test_advice_and_overview_say_what_the_shares_are_of_where_not_the_step_shown() -> None:
    """data-stall: the advisor's shares are of the step with the 120 ms wait before it, the
    job and the Overview show the device step; both tabs say so once (the basis is checked
    against step_trace_time.csv in tests/test_cli_info_format.py)."""
    board = dashboard("simulated/data-stall")
    for tab in ("Advice", "Overview"):
        html = _html_of(board.select(tab))
        assert "the mean over steps of the slowest rank" in html, tab
    slow = dashboard("simulated/slow-rank")  # preparing under a millisecond: nothing said
    assert "the mean over steps of the slowest rank" not in _html_of(slow.select("Advice"))


def test_describe_error_and_frame_html() -> None:
    import pandas as pd

    from perfkit.errors import ProfileError

    text = describe_error(ProfileError("/x/trace.json", "truncated JSON"), "opening /x")
    assert "/x/trace.json" in text and "truncated JSON" in text
    text = describe_error(KeyError("k"), "the Memory tab")
    assert "KeyError" in text and "perfkit bug" in text
    frame = pd.DataFrame({"a": range(30), "b": ["<x>"] * 30})
    markup = frame_html(frame, "cap", max_rows=5, folded_rows=0)
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
    assert f"<b>Slow at 5 %:</b> rank {slowest}</p>" in explorer.output.value
    assert "<svg" in explorer.output.value
    explorer.control.value = 0.5  # above any rank's excess
    assert "<b>Slow at 50 %:</b> none</p>" in explorer.output.value


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
    assert panel.charts and panel.message.value == ""
    with pytest.raises(InvalidArgumentError, match="Overview"):
        tab_panel("Kernels", "simulated/slow-rank")


def test_changing_the_job_redraws_the_tabs_that_use_it() -> None:
    board = dashboard("simulated/slow-rank")
    memory = board.select("Memory")
    before = _html_of(memory)
    board.select("Planner")
    board.job.controls["micro_batch_size"].value = "2"  # doubles the activations
    assert board.job.job.parallel.micro_batch_size == 2
    assert board.panels["Memory"].stale and board.panels["Recompute"].stale
    memory = board.select("Memory")
    after = _html_of(memory)
    assert after != before and len(memory.charts) == 2  # the timeline and the theory


# ---- the job ----------------------------------------------------------------------------

_PERCENT = re.compile(r"(MFU|HFU)</td><td class='pk-value'>([0-9.,]+)\s?%([^<]*)</td>")
# the Overview's headline card: <div class='pk-k'>MFU</div><div class='pk-v'>49.7 %</div>
_CARD = re.compile(r"<div class='pk-k'>(MFU)</div><div class='pk-v'>([0-9.,]+)\s?%([^<]*)</div>")


def _all_html(board) -> str:
    parts = [board.status.value, board.job.summary.value, board.job.warnings.value]
    for title in TAB_TITLES:
        panel = board.select(title)
        parts.append(panel.message.value + _html_of(panel))
    return "".join(parts)


@pytest.mark.parametrize("name", bundled_profiles())
def test_no_tab_shows_an_impossible_utilisation(name: str, every_tab_shown) -> None:
    board = every_tab_shown(name)
    html = _all_html(board)
    found = _PERCENT.findall(html) + _CARD.findall(html)
    for what, value, rest in found:
        assert float(value.replace(",", "")) <= 100.0, (name, what, value, rest)
    job = board.job.job
    if job.model is None or job.hardware is None:  # the views say so instead
        assert "MFU</div><div class='pk-v'>–" in html and "No figures" in html, name
    else:  # a complete job: the Overview's card and the Planner's table both show it
        assert _CARD.findall(html) and _PERCENT.findall(html), name


def test_switching_profiles_resets_the_job_and_the_measured_step() -> None:
    # the case: slow-rank's step time used to survive into the Kineto sample
    board = dashboard("simulated/slow-rank")
    slow = board.job.job
    board.job.controls["step_time_s"].value = "0.5"  # a user value on the first profile
    assert board.job.job.source("step_time_s") == "user"
    board.load_profile("kineto-tiny-llama")
    job = board.job.job
    assert job.path.endswith("kineto-tiny-llama") and job.step_time_s != slow.step_time_s
    assert set(job.evidence["source"]) <= {"profile", "default"}  # nothing carried over
    html = _all_html(board)
    assert "1394.8" not in html and "0.5 s" not in html
    # a CPU run: no hardware, so no MFU; the Overview says why
    assert "MFU</div><div class='pk-v'>–" in html and "not computed: the hardware is not " \
        "known" in html and "CPU-only run" in html


def test_a_view_without_a_model_says_so() -> None:
    board = dashboard(str(shared_sample(PT_LEVEL1)))  # a real CNN: no transformer to read
    assert board.job.job.model is None
    html = _html_of(board.select("Memory"))
    # the tab says what is missing in one line; the Overview's panel says why
    assert "No memory theory: the model is not known" in html
    assert "no attention kernel" not in html
    # a CNN (Conv2D, no attention): said once, on the Overview, to be no transformer
    assert "this is not a transformer" not in html
    assert "this is not a transformer (" in _html_of(board.select("Overview"))
    assert "No recompute trade-off" in _html_of(board.select("Recompute"))
    board.select("Planner").search()
    assert "No strategy search" in board.panels["Planner"].result.children[0].value


def test_a_config_in_the_job_panel_reaches_every_tab() -> None:
    config = Path(__file__).resolve().parent / "data" / "configs" / "llama2_13b_full.yaml"
    board = dashboard(DEFAULT_PROFILE)
    assert board.job.load_config(str(config))
    job = board.job.job
    assert job.model.num_layers == 40 and job.source("num_layers") == "config"
    assert board.job.controls["num_layers"].value == "40"
    assert "config" in board.job.sources["num_layers"].value
    assert "40 layers (config) but the profile shows 8" in board.job.warnings.value
    overview = _html_of(board.select("Overview"))
    flagged = [(w, v, r) for w, v, r in _CARD.findall(overview)
               if float(v.replace(",", "")) > 100]
    assert flagged and all("not plausible" in r for _, _, r in flagged)
    assert "the job has 40 layers" in overview
    assert "the job has 40 layers" in _html_of(board.select("Memory"))
    # back to the profile's job
    board.job.reset()
    assert board.job.job.model.num_layers == 8
    assert "<div class='pk-job-warn'>" not in board.job.warnings.value
    assert not board.job.load_config("/no/such/file.yaml")
    assert "no such file" in board.job.message.value


@pytest.mark.shared_samples
def test_a_legacy_step_trace_shows_its_phases_not_an_empty_chart(tmp_path: Path,
                                                                 monkeypatch) -> None:
    """MindInsight's step trace has no computing / communication / free split: the Overview
    says so and stacks the trace's phases, where it once drew an empty chart."""
    from perfkit import charts as C

    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    board = dashboard(str(shared_sample("wild/mi_run1")))
    panel = board.select("Overview")
    assert "phases instead, the step interval (waiting for data)" in _html_of(panel)
    (spec,) = [s for s in _specs(panel) if "per rank" in json.dumps(s.get("title", ""))]
    (rows,) = spec["datasets"].values()
    assert {r["part"] for r in rows} == set(C.TRACE_PHASES.values())
    assert sum(r["ms"] for r in rows) > 0


@pytest.mark.shared_samples
def test_a_legacy_step_trace_tabulates_its_phases_not_columns_of_dashes(
        tmp_path: Path, monkeypatch) -> None:
    """The steps table of MindInsight's step trace once showed computing, exposed
    communication and free as three columns of dashes; it now shows the trace's phases,
    each step's share read here from the raw step_trace_raw CSV (times in clock cycles)."""
    import csv

    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = shared_sample("wild/mi_run1")
    (raw,) = folder.rglob("step_trace_raw_*_detail_time.csv")
    with raw.open(newline="", encoding="utf-8") as fh:
        step2 = next(r for r in csv.DictReader(fh) if r["step_num"] == "2")
    total = float(step2["total"])
    want = [f"{100 * float(step2[c]) / total:.1f}"
            for c in ("iteration_interval", "fp_and_bp", "tail")]
    board = dashboard(str(folder))
    table = board.select("Overview").steps_table.value
    text = re.sub(r"<[^>]+>", "|", table)
    assert "and its phases (shares of the step time)" in text
    assert "forward and backward (%)" in text  # one rank's steps: no median over ranks
    assert "computing" not in text and "free" not in text
    (row,) = re.findall(r"<tr><td>2</td>(.*?)</tr>", table)
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert cells[-3:] == want, (cells, want)


@pytest.mark.shared_samples
def test_legacy_all_reduce_phases_read_the_same_on_every_tab(tmp_path: Path,
                                                             monkeypatch) -> None:
    """mi_run1's pid 10000 events are the step trace's all-reduce phases (MindInsight's
    AllReduce track): the Communication tab lists them as allreduce (once 'other'), and
    says, as the Overview does, that the steps have no computing / communication split
    (once 'no communication time'); the Timeline draws a step whose device tasks were
    recorded and says which were; no finding reads their gaps as idle time."""
    from raw_mindspore import mi_run1

    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = shared_sample("wild/mi_run1")
    raw = mi_run1(folder)
    board = dashboard(str(folder))
    assert "No computing / communication / free split" in _html_of(board.select("Overview"))
    text = unescape(re.sub(r"<[^>]+>", "|", _html_of(board.select("Communication"))))
    assert f"|allreduce||{len(raw['phases']):,}|" in text
    assert "|other|" not in text
    assert (f"the steps of this profile are not split into computing and communication (the "
            f"Overview shows the parts its step table gives), so how much of the time of its "
            f"{len(raw['phases']):,} collectives runs under computation is not measured"
            in text)
    timeline = unescape(_html_of(board.select("Timeline")))
    assert "device tasks recorded for steps 1–14 of 322" in timeline
    advice = unescape(_html_of(board.select("Advice")))
    assert "long gaps inside the step" not in advice
    assert "counted over the steps whose device tasks were recorded: steps 1–14 of 322" \
        in advice


@pytest.mark.shared_samples
def test_exposed_communication_reads_the_same_on_every_tab(tmp_path: Path,
                                                           monkeypatch) -> None:
    """mi_prof: the finding's exposed communication (rank 0, the least exposed) is the
    Communication tab's minimum over the ranks, both the mean over the steps of the raw
    Overlap Analysis track; the Overview's split counts the wait for data (the raw
    Data_aug Bounds) as the wait before the first device task, and the Timeline draws it."""
    import statistics

    from raw_mindspore import mi_prof

    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    root = shared_sample("wild/mi_prof")
    raw = mi_prof(root)
    exposed = {r: statistics.mean(t["Communication(Not Overlapped)"]
                                  for t in d["tracks"].values()) for r, d in raw.items()}
    want = f"{min(exposed.values()) / 1e3:.1f}"
    board = dashboard(str(root))
    overview = unescape(_html_of(board.select("Overview")))
    assert f"2. <b>{want} ms per step (" in overview
    text = re.sub(r"<[^>]+>", "|", _html_of(board.select("Communication")))
    (table,) = [t for t in text.split("Communication hidden behind computation")[1:2]]
    cells = [c for c in table.split("|") if re.fullmatch(r"[\d.,]+", c)]
    assert cells[1] == want  # exposed, min (ms)
    assert "mean over its 10 steps" in unescape(table)
    # the split's wait: the raw bounds over the raw steps (iteration and bound), all ranks
    wait = sum(d["bounds"].get(it, 0.0) for d in raw.values() for it in d["iters"])
    wall = wait + sum(e["dur"] for d in raw.values() for e in d["iters"].values())
    (shown,) = re.findall(r"before the first device task \(data, launch\) <b>([\d.]+) %",
                          overview)
    assert float(shown) == pytest.approx(100 * wait / wall, abs=0.06)
    (spec,) = _specs(board.select("Timeline"))
    rows = [r for data in spec["datasets"].values() for r in data]
    assert {r["track"] for r in rows if r["category"] == "wait"} == {"rank 0 · wait",
                                                                     "rank 1 · wait"}


@pytest.mark.shared_samples
def test_one_rank_is_not_charted_against_its_peers(tmp_path: Path, monkeypatch) -> None:
    """DeepEP's trace is rank 0 of 64, alone: the Communication tab once drew four empty
    panels at zero for it against itself. It now says there are no peers to compare."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = shared_sample("wild/ds_train")
    (raw,) = folder.glob("*.json")
    trace = json.loads(raw.read_text(encoding="utf-8"))
    # one trace file, of one rank of a larger run (read from the raw JSON)
    assert trace["distributedInfo"]["rank"] == 0 and trace["distributedInfo"]["world_size"] > 1
    board = dashboard(str(folder))
    panel = board.select("Communication")
    text = _html_of(panel)
    assert "one rank is loaded, so it has no peers to be compared with" in text
    assert not [s for s in _specs(panel) if "peers" in json.dumps(s.get("title", ""))]
    assert "click a rank above" not in text  # no chart of ranks to click
    # the trace's kernels carry no process group, and Kineto no transit / wait / idle
    # split: said once, instead of four columns of dashes
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert not any("Process Group Name" in e.get("args", {}) for e in kernels)
    (collectives,) = re.findall(r"<table.*?</table>", text.split("Not recorded")[0], re.S)[:1]
    assert "Collectives: time per kind<" in collectives and "transit" not in collectives
    assert "Not recorded in this profile: the collectives' group, transit share, wait share " \
           "and idle share" in unescape(text)


@pytest.mark.shared_samples
def test_two_ranks_are_charted_and_the_outlier_rule_says_why_none_is_slow(
        tmp_path: Path, monkeypatch) -> None:
    """The raw CANN output of two devices: both ranks are charted against each other, and
    the page says why neither can be flagged (the outlier rule needs three)."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = shared_sample("wild/mi_prof")
    devices = sorted(p.name for p in folder.glob("PROF_*/device_*"))
    assert devices == ["device_0", "device_1"]
    board = dashboard(str(folder))
    panel = board.select("Communication")
    text = _html_of(panel)
    (spec,) = [s for s in _specs(panel) if "peers" in json.dumps(s.get("title", ""))]
    ranks = {r["rank"] for rows in spec["datasets"].values() for r in rows}
    assert ranks == {0, 1}
    assert "a robust outlier rule needs at least 3, so no rank is flagged as slow" in text


def test_slow_ranks_explorer_on_one_rank_says_there_are_no_peers() -> None:
    import perfkit as pk
    from perfkit.widgets import slow_ranks_explorer

    folder = bundled_profile("simulated/slow-rank")
    one = sorted(p for p in folder.iterdir() if p.is_dir())[0]
    explorer = slow_ranks_explorer(pk.load(one))
    assert "<svg" not in explorer.output.value
    assert "one rank is loaded, so it has no peers" in explorer.output.value
    # the whole cluster is charted, with no such note
    explorer = slow_ranks_explorer(pk.load(folder))
    assert "<svg" in explorer.output.value and "no peers" not in explorer.output.value


@pytest.mark.shared_samples
def test_ai_cpu_table_has_no_column_of_dashes(tmp_path: Path, monkeypatch) -> None:
    """msprof-analyze's kernel_details.csv has 7 AI CPU tasks, all Cast, in its one step:
    the table shows their calls and time per step, here all of them (read from the CSV),
    without a roofline 'bound' column, which no AI CPU task has."""
    import csv

    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = shared_sample("wild/msa_kernel_details")
    with (folder / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["Accelerator Core"] == "AI_CPU"]
    assert {r["Type"] for r in rows} == {"Cast"}
    total_us = sum(float(r["Duration(us)"]) for r in rows)
    board = dashboard(str(folder))
    page = _html_of(board.select("Operators"))
    (table,) = re.findall(r"<table><caption>Operators on AI CPU</caption>.*?</table>", page,
                          re.S)
    heads = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table)]
    assert "bound" not in heads and "calls (per rank and step)" in heads
    assert "device time (µs, per rank and step)" in heads
    (row,) = re.findall(r"<tr><td[^>]*>Cast</td>(.*?)</tr>", table, re.S)
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
    assert str(len(rows)) in cells and f"{total_us:,.0f}" in cells, (cells, total_us)
    # every figure is the AI CPU tasks': one step, so 7 calls per step (not the 75 casts
    # of all cores), and an AI CPU task's name (not Cast66, an AI_VECTOR_CORE task)
    by_head = dict(zip(heads[1:], cells, strict=True))
    assert float(by_head["calls (per rank and step)"]) == len(rows), by_head
    assert by_head["example task"] == rows[0]["Name"] == "trans_Cast_5"
    assert "Cast66" not in table and "4,1025" not in table
    assert "input shapes" not in heads  # the AI CPU tasks record none (empty in the CSV)


@pytest.mark.shared_samples
def test_ranks_of_separate_runs_are_warned_about_at_the_top(tmp_path: Path,
                                                           monkeypatch) -> None:
    """Two ``kernel_details.csv`` excerpts of different runs (msprof-analyze's test data),
    each in a folder named as a rank (``rank0``, ``rank1``): nothing before parsing tells
    them apart, so perfkit merges them with a note that they look like separate runs, and
    the page says so above the tabs, where the note alone sat at the foot of the Overview.
    (msprof-analyze's test folder itself is now a folder of 3 profiles: RunsFound.)"""
    import csv

    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = shared_sample("ascend/msprof-analyze-tests")
    excerpts = sorted(folder.glob("compute_advice_v*/kernel_details.csv"))
    starts = []  # each excerpt's first device task, read from the raw files
    for csv_path in excerpts:
        with csv_path.open(newline="", encoding="utf-8") as fh:
            starts.append(min(float(r["Start Time(us)"]) for r in csv.DictReader(fh)))
    assert len(starts) == 2 and abs(starts[0] - starts[1]) > 60e6  # minutes apart
    job = tmp_path / "job"
    job.mkdir()
    for rank, csv_path in enumerate(excerpts):
        (job / f"rank{rank}").symlink_to(csv_path.parent, target_is_directory=True)
    board = dashboard(str(job))
    assert board.error is None
    assert "These ranks look like 2 separate runs" in board.status.value
    # one run: no such warning
    board = dashboard("simulated/slow-rank")
    assert "separate runs" not in board.status.value
