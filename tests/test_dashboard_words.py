"""The words of the dashboard's tabs, checked on real profiles.

- The Operators tab says once how many device tasks of no step it leaves out, not under
  both its table and its roofline (``wild/tl_qwen_h100``: 509 tasks launched before the
  trace began, counted here from the raw gzip JSON).
- A table's header names the unit of every cell under it: on ``wild/tl_qwen_h100`` the
  host allocator peaks at 16 B beside a framework allocator at 1.95 GiB, read here from
  the raw ``[memory]`` events, and the Memory tab writes each cell with its unit.
- No tab says the names of tables and columns that programs read (``comm_matrix``,
  ``src_rank``, ``peak_dtype``, ``…_us``, ``kernels.type``, ``steps.tasks_recorded``,
  ``allocated_bytes``) nor a plural written ``(s)``: the loaders' and analyses' notes are
  said in words, on real profiles of every loader whose notes name them (MindSpore's raw
  CANN output and legacy MindInsight files, an old torch_npu export, Kineto traces of
  PyTorch <= 1.9 and of tasks launched before the trace began). Allowed: text inside
  ``<code>`` (an identifier shown as such), and nothing else.
"""

from __future__ import annotations

import gzip
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from shared_samples import PT_DB_LEVEL1, PT_GPT3_OLD, PT_LEVEL1, shared_param, shared_sample
from widget_html import panel_html

from perfkit.format import bytes_text
from perfkit.widgets import dashboard
from perfkit.widgets.dashboard import TAB_TITLES

# the whole dashboard, every tab x profile, or Dask against pandas: the slow group (README)
pytestmark = pytest.mark.slow

H100 = str(Path(__file__).parent / "data" / "kineto_llama_h100")
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME = {"cuda_runtime", "cuda_driver"}
#: Names of tables and columns that only programs read, as they would show in a sentence.
INTERNAL = re.compile(r"comm_ops|comm_matrix|comm_bandwidth|op_memory|kernels table|"
                      r"src_rank|dst_rank|src_local|dst_local|peak_dtype|\b\w+_us\b|"
                      r"tasks_recorded|\b(?:size|allocated|reserved|active)_bytes\b|"
                      r"\b(?:kernels|steps|ops|memory)\.[a-z_]|\w\((?:s|es)\)")
_TAGS = re.compile(r"<[^>]+>")


def _text(panel: Any) -> str:
    """The words a tab shows: styles, ``<code>`` and tags taken out."""
    html = re.sub(r"<style>.*?</style>|<code>.*?</code>", "", panel_html(panel), flags=re.S)
    text = re.sub(r"\s+", " ", _TAGS.sub(" ", html))
    return text.replace("&#x27;", "'").replace("&amp;", "&")


def _raw_events(folder: Path) -> list[dict[str, Any]]:
    (path,) = folder.glob("*.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


@pytest.mark.shared_samples
def test_the_tasks_of_no_step_are_counted_once_on_the_operators_tab() -> None:
    folder = shared_sample("wild/tl_qwen_h100")
    events = [e for e in _raw_events(folder) if e.get("ph") == "X"]
    steps = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
             if str(e.get("name")).startswith("ProfilerStep#")
             and e.get("cat") == "user_annotation"]
    launch = {e["args"]["correlation"]: float(e["ts"]) for e in events
              if e.get("cat") in RUNTIME and "correlation" in e.get("args", {})}
    out = 0
    for e in events:
        if e.get("cat") in DEVICE:
            ts = launch.get(e["args"].get("correlation"))
            out += ts is None or not any(lo <= ts < hi for lo, hi in steps)
    assert out > 1
    board = dashboard(str(folder))
    board.select("Operators")
    text = _text(board.panels["Operators"])
    assert "Roofline" in text  # the roofline is drawn, with its own notes
    assert text.count(f"{out} device tasks of no step") == 1, text
    assert len(re.findall(r"\d+ device tasks? of no step", text)) == 1


@pytest.mark.shared_samples
def test_the_no_step_note_is_said_once_on_an_mi300_trace() -> None:
    board = dashboard(str(shared_sample("wild/tl_ddp_resnet18_mi300")))
    board.select("Operators")
    text = _text(board.panels["Operators"])
    assert len(re.findall(r"\d+ device tasks? of no step", text)) == 1, text


class _Cells(HTMLParser):
    """The header cells and the rows of body cells of the first HTML table fed."""

    def __init__(self) -> None:
        super().__init__()
        self.head: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("th", "td"):
            self._cell = []

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            (self.head if tag == "th" else self.rows[-1]).append("".join(self._cell).strip())
            self._cell = None


@pytest.mark.shared_samples
def test_the_memory_peaks_header_and_cells_name_one_unit() -> None:
    folder = shared_sample("wild/tl_qwen_h100")
    peaks: dict[str, float] = {}  # families: Device Type 0 the host allocator, 1 the GPU
    for e in _raw_events(folder):
        if e.get("name") == "[memory]":
            kind = "host allocator" if e["args"]["Device Type"] == 0 else "framework"
            peaks[kind] = max(peaks.get(kind, 0.0), float(e["args"]["Total Allocated"]))
    assert peaks["host allocator"] < 2**10 < 2**30 < peaks["framework"]
    board = dashboard(str(folder))
    board.select("Memory")
    cells = _Cells()
    cells.feed(board.panels["Memory"].peaks.value)
    rows = {r[0]: dict(zip(cells.head, r, strict=True)) for r in cells.rows if r}
    peak_cols = [h for h in cells.head if h.startswith("peak")]
    # one rank (one trace file): its peak, not a median, min and max of one value
    assert len(list(folder.glob("*.json*"))) == 1
    assert len(peak_cols) == 1 and not [h for h in cells.head if "median" in h or "min" in h]
    for family, peak in peaks.items():
        row = rows[family]
        assert row["quantity"] == "allocated"
        assert row[peak_cols[0]] == bytes_text(peak), row
    # a header names a unit only where every cell under it is a bare number in it
    units = re.compile(r"\((?:[^)]*, )?(B|KiB|MiB|GiB|TiB|ns|µs|ms|s)\)$")
    for col in cells.head:
        if units.search(col):
            assert all(re.fullmatch(r"[\d.,]+|–", r[col]) for r in rows.values()), col


@pytest.mark.parametrize("name", [H100, *(shared_param(s) for s in (
    "wild/tl_b200_eager", PT_LEVEL1, PT_DB_LEVEL1, PT_GPT3_OLD, "wild/mi_prof", "wild/mi_run1",
    "wild/k_resnet50_nw0", "wild/tl_qwen_h100"))])
def test_no_tab_says_the_names_of_tables_and_columns(name: str) -> None:
    path = Path(name) if Path(name).is_absolute() else shared_sample(name)
    board = dashboard(str(path))
    said = {}
    for title in TAB_TITLES:
        board.select(title)
        text = _text(board.panels[title])
        assert text.strip(), title
        found = sorted({m[0] for m in INTERNAL.finditer(text)})
        if found:
            said[title] = [text[max(0, m.start() - 80):m.end() + 40]
                           for m in INTERNAL.finditer(text)][:3]
    assert not said, said
    # the notes are still said, in words: the Overview lists every note of the loader
    board.select("Overview")
    text = _text(board.panels["Overview"])
    assert text.count(" note ") == len(board.profile.meta.notes)
