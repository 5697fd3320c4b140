"""Every tab shows what the profile holds, and a tab with nothing says why (issue 29.1).

A CPU-only run computes on the host: its Operators tab ranks the host operators (a
MindSpore CPU profile's graph kernels, a PyTorch CPU run's ``aten::`` operators) by their
own time, never "no device operators". The numbers are checked against the raw
``trace_view.json`` read here. A tab that truly has nothing (a one-rank run's
Communication) says why in one sentence and what would fill it; an empty table says the
analysis' reason; the host allocator of a run is a memory family of its own.
"""

from __future__ import annotations

import collections
import csv
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_samples import CLUSTER_OUTPUT, shared_sample
from widget_html import panel_words

import perfkit as pk
from perfkit.tables import table
from perfkit.widgets import tab_panel
from perfkit.widgets.memory_view import HOST, component_family

ROOT = Path(__file__).resolve().parents[1]
MS_CPU = ROOT / "data" / "mindspore-cpu-tiny-llama"
KINETO_CPU = ROOT / "data" / "kineto-tiny-llama"


def _mindspore_matmul_per_step() -> tuple[int, float]:
    """Calls and time (µs) per step of MatMul, read from the raw trace: every node of
    the compiled graph runs once per step, and the recording holds a partial run and
    then two whole ones, so each node's last two launches are the two whole steps."""
    path = next(MS_CPU.glob("*/ASCEND_PROFILER_OUTPUT/trace_view.json"))
    events = json.loads(path.read_text(encoding="utf-8"))
    events = events if isinstance(events, list) else events["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    launches = collections.defaultdict(list)
    for e in sorted((e for e in events if e.get("ph") == "X"
                     and procs.get(e["pid"]) == "CPU OP"), key=lambda e: float(e["ts"])):
        launches[e["name"]].append(float(e["dur"]))
    matmuls = {n: d for n, d in launches.items()
               if n.rsplit("/", 1)[-1].startswith("MatMul-op")}
    assert {len(d) for d in launches.values()} == {2, 3}  # the partial run, then 2 steps
    return len(matmuls), sum(sum(d[-2:]) for d in matmuls.values()) / 2


def test_a_mindspore_cpu_run_shows_its_host_operators() -> None:
    panel = tab_panel("Operators", str(MS_CPU))
    text = panel_words(panel)
    assert "no device operators" not in text.lower() and panel.charts
    assert "Top 15 by host self time" in text and "device time" not in text
    calls, time_us = _mindspore_matmul_per_step()
    # the table's MatMul row: type | category | host self time | share | calls | mean
    row = re.search(r"\| MatMul \| compute \| ([\d,.]+) \| ([\d.]+) \| ([\d,.]+) \|", text)
    assert row, text[:2000]
    assert float(row.group(1).replace(",", "")) == pytest.approx(time_us, rel=5e-4)
    assert float(row.group(3)) == calls == 45
    # the basis is said: the host's own time, the CPU being the device
    assert "A CPU-only run: host operators by self time" in text
    # no Ascend notion on a CPU run, no empty PMU column
    assert "AI CPU" not in text and "| bound |" not in text


def test_a_pytorch_cpu_run_says_host_time_in_its_operator_table() -> None:
    panel = tab_panel("Operators", str(KINETO_CPU))
    text = panel_words(panel)
    assert "host self time per rank and step, mean over ranks" in text
    assert "aten::mm" in text and "device time" not in text
    encoding = panel.charts[0].chart.to_dict()["encoding"]
    tips = {t["field"]: t.get("title") for t in encoding["tooltip"]}
    assert tips["ms"] == "host self time per rank and step, mean over ranks (ms)"
    assert tips["share"] == "share of host self time"


def test_a_one_rank_run_says_why_it_has_no_communication() -> None:
    # the profile does not record its world size: the note says what it knows, that the
    # one loaded rank recorded no collective, not that the run had one rank
    text = panel_words(tab_panel("Communication", str(MS_CPU)))
    assert text == ("No communication: the one loaded rank recorded no collective (no "
                    "communication tables, communication tasks or host collectives such as "
                    "NCCL, HCCL or gloo) and the profile does not say how many ranks the run "
                    "had; a one-rank run has none (a profile of a run over several ranks "
                    "would fill this tab).")


def test_a_recorded_one_rank_run_says_it_is_one() -> None:
    from perfkit.profile import Profile, ProfileMeta
    from perfkit.widgets.tabs.communication import empty_communication_note

    assert empty_communication_note(Profile(ProfileMeta("test", world_size=1), {})) == (
        "No communication: this is a one-rank run, so it has no collectives (a profile of a "
        "run over several ranks would fill this tab).")


@pytest.mark.shared_samples
def test_a_lone_kernel_details_shows_its_collectives() -> None:
    """msprof-analyze's kernel_details.csv records 19 HCCL tasks (~346 ms) and no
    communication.json: the tab shows them per kind (numbers read here from the raw CSV)
    and the exposed share the Overview quotes, never "No communication"."""
    import csv

    from shared_samples import shared_sample

    folder = shared_sample("wild/msa_kernel_details")
    with (folder / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    hccl = [r for r in rows if r["Accelerator Core"] == "HCCL"]
    kinds = collections.defaultdict(list)
    for r in hccl:
        kinds[r["Type"].removeprefix("hcom_").strip("_").lower()].append(
            float(r["Duration(us)"]))
    text = panel_words(tab_panel("Communication", str(folder)))
    assert "No communication" not in text
    assert "from the device's communication tasks" in text
    assert f"each of its {len(hccl)} communication tasks counts as one collective" in text
    for kind, durs in kinds.items():  # collective | calls | time (ms) | ...
        row = re.search(rf"\| {kind} \| (\d+) \| ([\d,.]+) \|", text)
        assert row, (kind, text[:1500])
        assert int(row.group(1)) == len(durs)
        assert float(row.group(2).replace(",", "")) == pytest.approx(sum(durs) / 1e3,
                                                                     rel=5e-3)
    # exposed share of the step: communication time under no compute task, over the span
    # of all tasks (the one step's wall)
    spans = [(float(r["Start Time(us)"]), float(r["Start Time(us)"])
              + float(r["Duration(us)"]), r["Accelerator Core"] == "HCCL") for r in rows]
    compute = _union([(a, b) for a, b, comm in spans if not comm])
    comm = _union([(a, b) for a, b, is_comm in spans if is_comm])
    hidden = sum(max(0.0, min(b, d) - max(a, c)) for a, b in comm for c, d in compute)
    wall = max(b for _, b, _ in spans) - min(a for a, _, _ in spans)
    exposed = (sum(b - a for a, b in comm) - hidden) / wall
    section = text.split("Communication hidden behind computation", 1)[1]
    assert f"| {100 * exposed:.1f} |" in section and round(100 * exposed, 1) == 66.8


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of intervals, as disjoint sorted intervals."""
    out: list[list[float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def test_the_host_allocator_is_a_memory_family_of_its_own() -> None:
    assert component_family("host") == HOST
    panel = tab_panel("Memory", str(KINETO_CPU))
    assert panel.family.value == HOST  # the CPU run's only memory, drawn
    assert panel.charts and "| host allocator | host | allocated | 4.86 |" in panel_words(panel)


def test_an_empty_table_says_the_analysis_reason() -> None:
    frame = pd.DataFrame({"name": pd.Series(dtype="string")})
    frame.attrs["notes"] = ["no link matrix (comm_matrix) in this profile"]
    assert table(frame, caption="Links").html() == (
        "<p class='pk-note'><b>Links</b>: nothing to show (no link matrix (comm_matrix) in "
        "this profile).</p>")


def test_a_value_far_below_its_columns_unit_keeps_its_own_unit() -> None:
    """64 B in a column of GiB keeps its unit, and then so does every cell of the column,
    whose header names no unit: a header's unit is the unit of every cell under it."""
    frame = pd.DataFrame({"peak_bytes": [4.61 * 2**30, 64.0], "time_us": [2e6, 0.5],
                          "size_bytes": [3 * 2**30, 2**30]})
    cells = table(frame).text
    assert list(cells["peak"]) == ["4.61 GiB", "64 B"]
    assert list(cells["time"]) == ["2.00 s", "500 ns"]  # under a microsecond: ns (format.py)
    assert list(cells["size (GiB)"]) == ["3.00", "1.00"]  # no tiny value: the unit on top


def test_the_loader_gives_mindspore_cpu_operators_their_self_time() -> None:
    ops = pk.load(MS_CPU, cache=False).ops
    # graph kernels run one after another on one thread: nothing nests, self = duration
    assert ops["self_us"].tolist() == pytest.approx(ops["dur_us"].tolist())


def test_host_collectives_of_a_gpu_job_are_not_shown_as_fully_hidden() -> None:
    """The H100 trace reduces its CUDA tensors with gloo: its collectives run on host
    threads and no communication kernel reaches the device (read from the raw trace), so
    the device's step split holds no communication: the overlap table must say it is not
    measured instead of "0 µs exposed of 0 µs"."""
    import gzip

    trace = ROOT / "tests" / "data" / "kineto_llama_h100" / "rank0.pt.trace.json.gz"
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    assert not [e for e in events if e.get("cat") == "kernel" and "nccl" in e["name"].lower()]
    assert any(str(e.get("name", "")).startswith("gloo:") for e in events)
    text = panel_words(tab_panel("Communication", str(trace.parent)))
    assert "| allreduce |" in text  # the collectives are shown
    section = text.split("Communication hidden behind computation", 1)[1]
    assert "on host threads (gloo)" in section and "not measured" in section
    assert "exposed, median" not in section


def _table_after(text: str, caption: str) -> dict[str, str]:
    """The one-row table that follows ``caption`` in a tab's text: {header: cell}."""
    cells = [c.strip() for c in text.split(caption, 1)[1].split(" | ")]
    n = next(i for i, c in enumerate(cells) if re.fullmatch(r"[\d,.]+", c))
    return dict(zip(cells[:n], cells[n:2 * n], strict=True))


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_the_communication_tab_counts_exposed_communication_as_the_overview_does() -> None:
    """The cluster output's ranks 8-15 wait 178-195 ms per step in pipeline receives,
    which msprof-analyze counts in "Communication(Not Overlapped)". The Overview splits
    that bubble from the exposed communication; the Communication tab must give the same
    exposed figure (msprof-analyze's "... and Exclude Receive" column, read here), not
    the 185 ms median, rank 11 most exposed, 53.9 % of the step that held the bubble."""
    folder = shared_sample(CLUSTER_OUTPUT) / "cluster_analysis_output"
    with open(folder / "cluster_step_trace_time.csv", newline="", encoding="utf-8") as fh:
        rows = {int(r["Index"]): r for r in csv.DictReader(fh) if r["Type"] == "rank"}

    def col(name: str) -> dict[int, float]:
        return {k: float(r[name]) for k, r in rows.items()}

    exposed = col("Communication(Not Overlapped and Exclude Receive)")
    bubble = col("Bubble")
    step = {k: float(r["Computing"]) + float(r["Communication(Not Overlapped)"])
            + float(r["Free"]) for k, r in rows.items()}
    comm_text = panel_words(tab_panel("Communication", str(folder)))
    table = _table_after(comm_text,
                         "Communication hidden behind computation, over the ranks (per step: "
                         "each rank's mean over its 1 step, as the findings count it)")
    ms = {k: float(v.replace(",", "")) for k, v in table.items() if "(ms)" in k}
    assert ms["exposed, median over ranks (ms)"] == pytest.approx(
        np.median(list(exposed.values())) / 1e3, rel=5e-3)
    assert ms["exposed, min (ms)"] == pytest.approx(min(exposed.values()) / 1e3, rel=5e-3)
    assert ms["exposed, max (ms)"] == pytest.approx(max(exposed.values()) / 1e3, rel=5e-3)
    assert int(table["most exposed rank"]) == max(exposed, key=exposed.__getitem__) == 7
    assert ms["pipeline bubble, median (ms)"] == pytest.approx(
        np.median(list(bubble.values())) / 1e3, rel=5e-3)
    share = float(table["exposed share of the step, median (%)"])
    assert share == pytest.approx(100 * np.median([exposed[k] / step[k] for k in rows]),
                                  abs=0.05)
    # the same exposed time in the Overview's steps table, whose split of the step is of
    # the parts summed over the ranks (so that it adds up to 100 %), and the advice's
    # least exposed rank
    overview = panel_words(tab_panel("Overview", str(folder)))
    section = overview.split("Steps: each step's time over the ranks", 1)[1].split(
        "What was opened", 1)[0]
    assert "summed over the ranks" in section and "exposed communication (%)" in section
    summed = 100 * sum(exposed.values()) / sum(step.values())
    cells = [float(c) for c in re.findall(r"\| (\d+\.\d) (?=\|)", section)]
    assert any(c == pytest.approx(summed, abs=0.1001) for c in cells), (summed, cells)
    assert f"rank {min(exposed, key=exposed.__getitem__)}, which waits for no other rank, " \
           f"communicates {min(exposed.values()) / 1e3:.1f} ms" in panel_words(
               tab_panel("Advice", str(folder)))
    waiting = sum(b > 0 for b in bubble.values())
    assert f"leaves out the pipeline bubble: {waiting} of the 16 ranks wait" in comm_text


@pytest.mark.shared_samples
def test_a_summary_only_export_says_why_it_has_no_timeline() -> None:
    """msprof-analyze's cluster summary has no event to place in time: the Timeline tab
    says what the folder holds (its files, read here, and its ranks, counted from the
    CSV's rank rows), why nothing is drawn and what to open instead, never "Could not
    finish the Timeline tab: ... (got 11)"; the pickers of step and ranks are hidden."""
    folder = shared_sample(CLUSTER_OUTPUT) / "cluster_analysis_output"
    with open(folder / "cluster_step_trace_time.csv", newline="", encoding="utf-8") as fh:
        ranks = {r["Index"] for r in csv.DictReader(fh) if r["Type"] == "rank"}
    panel = tab_panel("Timeline", str(folder))
    text = panel_words(panel)
    assert "Could not finish" not in text and "(got " not in text
    assert text.startswith("No timeline: this folder is msprof-analyze's cluster summary "
                           f"(cluster_analysis_output) of {len(ranks)} ranks")
    for name in sorted(p.name for p in folder.iterdir()):
        assert name in text
    assert "no device task or host operator with its start and duration" in text
    assert "*_ascend_pt" in text and "trace_view.json" in text
    assert panel.controls.layout.display == "none"
    assert not panel.charts
