"""The Memory tab says which memory file the loader left out, and the other loading notes
about its tables.

``ascend/msinsight-pt-gpt3-old``'s rank 0 holds an ``npu_module_mem.csv`` of 2024-08-26
beside device tasks of 2023-09-19: the loader leaves it out (perfkit.io.ascend.memory),
and the Memory tab, not only the Overview's list of notes, must say so. The file's
timestamps and the tasks' start times are read here with csv, not from perfkit.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from shared_samples import HTA, PT_GPT3_OLD, shared_sample
from widget_html import panel_words

from perfkit.widgets import tab_panel

#: msprof-analyze's advisor test data: a lone torch_npu kernel_details.csv.
MSA_KERNELS = "wild/msa_kernel_details"
#: 7 days in µs: a memory file none of whose samples lies this close to the device's tasks
#: is of another run (perfkit.io.ascend.memory).
WEEK_US = 7 * 24 * 3600e6


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _day(us: float) -> str:
    return datetime.fromtimestamp(us / 1e6, tz=timezone.utc).strftime("%Y-%m-%d")


@pytest.mark.shared_samples
def test_the_memory_tab_names_the_memory_file_of_another_run(grammar) -> None:
    old = shared_sample(PT_GPT3_OLD)
    out = old / "test_rank_0" / "ASCEND_PROFILER_OUTPUT"
    starts = [float(r["Start Time(us)"]) for r in _rows(out / "kernel_details.csv")]
    module = [float(r["Timestamp(us)"].strip()) for r in _rows(out / "npu_module_mem.csv")]
    record = [float(r["Timestamp(us)"].strip()) for r in _rows(out / "memory_record.csv")
              if r["Timestamp(us)"].strip()]
    # every sample of npu_module_mem.csv is more than 7 days from every task; some of
    # memory_record.csv's are within them (that file is of the run and is kept)
    assert min(abs(t - s) for t in (min(module), max(module))
               for s in (min(starts), max(starts))) > WEEK_US
    assert all(t > max(starts) + WEEK_US for t in module)
    assert any(abs(t - s) <= WEEK_US for t in record for s in (min(starts), max(starts)))
    tasks_day = _day(sorted(starts)[len(starts) // 2])
    days = (sorted(module)[len(module) // 2] - sorted(starts)[len(starts) // 2]) / 86_400e6
    text = panel_words(tab_panel("Memory", str(old)))
    said = re.search(r"Rank 0, memory over time: npu_module_mem\.csv left out: [^.]*\.", text)
    assert said, text[:3000]
    got = re.search(r"\(([\d-]+) to ([\d-]+)\) are ([\d,]+) days from the device tasks' "
                    r"\(([\d-]+)\)", said.group(0))
    assert got, said.group(0)
    assert got.group(1, 2, 4) == (_day(min(module)), _day(max(module)), tasks_day)
    assert abs(int(got.group(3).replace(",", "")) - days) <= 1 and days > 300
    assert "another run" in said.group(0)
    assert "memory_record.csv left out" not in text
    assert not grammar(said.group(0))


@pytest.mark.shared_samples
def test_the_memory_tab_gives_a_clusters_memory_notes_per_rank() -> None:
    """HTA's two ranks record no memory event (their raw traces have no [memory] event):
    the Memory tab says so once, for both ranks."""
    folder = shared_sample(HTA)
    for path in sorted(folder.glob("*.json.gz")):
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        assert not [e for e in events if e.get("name") == "[memory]"]
    panel = tab_panel("Memory", str(folder))
    text = panel_words(panel)
    said = ("No memory data in this profile: ranks 0 and 1, memory over time: no allocator "
            "samples in the trace; ranks 0 and 1, operator memory: not recorded by Kineto.")
    assert text.count(said) == 1, text
    assert text.count("profile_memory") == 1, text  # what would record it, said once
    assert "[memory]" not in text  # the trace's event name is not the reader's word
    # nothing to pick among: the components, quantity and ranks pickers are hidden
    assert panel.controls.layout.display == "none"


@pytest.mark.shared_samples
def test_a_profile_without_memory_data_is_told_so_once(grammar) -> None:
    """msprof-analyze's lone kernel_details.csv has no memory file beside it: the Memory
    tab says there is no memory data in one line, with the files missing and what writes
    them, instead of an empty chart's line, an empty peaks table and the theory's
    missing peak each saying it again."""
    folder = shared_sample(MSA_KERNELS)
    assert sorted(p.name for p in folder.iterdir()) == ["kernel_details.csv"]
    text = panel_words(tab_panel("Memory", str(folder)))
    said = ("No memory data in this profile: memory over time: memory_record.csv / "
            "npu_module_mem.csv not found; operator memory: operator_memory.csv not found. "
            "A profile recorded with profile_memory=True gives the memory over time, the "
            "peaks per component and the measured peak to hold against the theory.")
    assert text.count(said) == 1, text
    for again in ("profile_memory", "no memory", "above zero", "nothing in this profile",
                  "allocator samples", "not found"):
        assert text.lower().count(again.lower()) == said.lower().count(again.lower()), again
    assert "no measured peak to compare with." in text  # the theory stays, without a why
    assert not grammar(said)


def test_the_memory_tab_says_why_its_static_scheme() -> None:
    """A walk: the Memory tab said "static, MindSpore scheme" on a PyTorch-format export
    without why (a perfkit simulation made with it), where the Planner and Recompute
    tabs say it."""
    words = panel_words(tab_panel("Memory", "sample:llama2-13b-baseline-dp16"))
    assert ("The MindSpore scheme: the profile is a perfkit simulation, and its memory "
            "records were made with the MindSpore scheme.") in words
