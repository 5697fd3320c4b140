"""The Communication tab says once that a format does not record the collectives' split.

Its own sentence ("Not recorded in this profile: the collectives' group, transit share,
...") says, in the profile's format, what the collectives lack and what would give it. The
loaders' notes under it said the same again on raw CANN output (``wild/mi_prof``: a whole
note on msprof's master-stream rule) and on legacy MindSpore output (``wild/mi_run1``: "start
and elapse only; hccl_raw_1.csv, when present, adds the wait"); those clauses are left out,
the rest of each note is still said. A Kineto trace's note names the kernels its
collectives were read from (``wild/ds_train``: DeepEP's), not a bare "the communication
kernels". The collectives are counted here in the raw files (json), not through perfkit.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from raw_mindspore import mi_run1
from shared_samples import shared_sample
from widget_html import panel_words

from perfkit.widgets import tab_panel

pytestmark = pytest.mark.shared_samples


def _sentences_on(text: str, word: str) -> list[str]:
    """The sentences of ``text`` (split after '.', ')' or a table cell and a space, before a
    capital) that hold ``word``."""
    return [s for s in re.split(r"(?<=[.)|]) (?=[A-Z])", text) if word in s]


def _calls(text: str, kind: str) -> int:
    """The calls of collective ``kind`` in the tab's table: ``kind | calls | ...``."""
    row = re.search(rf"\| {kind} \| ([\d,]+) \|", text) or re.search(
        rf"(?:^| ){kind} \| ([\d,]+) \|", text)
    assert row, text[:1500]
    return int(row.group(1).replace(",", ""))


def _raw_cann_allreduces(root: Path) -> int:
    """AllReduce collectives in the HCCL process of every device's exported timeline."""
    n = 0
    for f in sorted(root.glob("PROF_*/device_*/timeline/msprof_*.json")):
        events = json.loads(f.read_text(encoding="utf-8"))
        hccl = {e["pid"] for e in events if e.get("name") == "process_name"
                and e["args"]["name"] == "HCCL"}
        n += sum(1 for e in events if e.get("ph") == "X" and e["pid"] in hccl
                 and "AllReduce" in e["name"])
    return n


def test_raw_cann_output_says_its_missing_split_once() -> None:
    root = shared_sample("wild/mi_prof")
    raw = _raw_cann_allreduces(root)
    assert raw == 20  # one per iteration file: 10 iterations on each of 2 devices
    text = panel_words(tab_panel("Communication", str(root)))
    assert _calls(text, "allreduce") == raw
    # the tab's sentence says the split is missing and what gives it; the loader's
    # note saying the same (msprof's master-stream rule) is not said again
    said = _sentences_on(text, "transit")
    assert len(said) == 1 and said[0].startswith("Not recorded in this profile"), said
    assert "master-stream" not in text and "start and elapse only" not in text
    # the loader's other note about these tables is still said, once
    assert text.count("the links' ranks within their group are the HCCL ranks") == 1


def test_legacy_mindspore_says_its_missing_split_once() -> None:
    root = shared_sample("wild/mi_run1")
    phases = mi_run1(root)["phases"]  # the step trace's all-reduce phases (pid 10000)
    assert len(phases) == 3542 and all("_parallel_" in e["name"] for e in phases)
    text = panel_words(tab_panel("Communication", str(root)))
    assert _calls(text, "allreduce") == len(phases)
    said = _sentences_on(text, "transit")
    assert len(said) == 1 and said[0].startswith("Not recorded in this profile"), said
    # the hccl_raw file, which would give the wait, is named in that sentence only
    hccl_raw = _sentences_on(text, "hccl_raw")
    assert hccl_raw == said and "adds the wait" not in text
    # where the collectives come from is still said, once
    source = "Collectives: the step trace's all-reduce phases"
    assert text.count(source) == 1
    assert "of timeline_display_1.json." in text[text.index(source):]


def test_a_kineto_note_says_what_its_collectives_were_read_from() -> None:
    path = shared_sample("wild/ds_train")
    events = json.loads((path / "train.json").read_text(encoding="utf-8"))
    events = events["traceEvents"] if isinstance(events, dict) else events
    # DeepEP's internode kernels (dispatch, combine and their notifications): the
    # collectives of this MoE step, as the tab's table counts them
    deepep = [e for e in events if e.get("cat") == "kernel"
              and "::ep::internode::" in str(e.get("name"))]
    assert len(deepep) == 32
    text = panel_words(tab_panel("Communication", str(path)))
    assert _calls(text, "alltoall") + _calls(text, "other") == len(deepep)
    assert "Rank 0, collectives: read from the communication kernels (deepep)." in text
    assert "not recorded by Kineto" not in text


def test_a_lone_kernel_details_says_once_that_communication_json_is_missing() -> None:
    """msprof-analyze's lone kernel_details.csv (``wild/msa_kernel_details``): the tab said
    that there is no communication.json in the tab's sentence on what is not recorded, and
    again in the loader's note ("communication.json not found (written from profiler level
    Level1 on; ...)"); it is said once, in the paragraph that also says how the HCCL tasks
    were counted. The tasks are counted here in the csv."""
    folder = shared_sample("wild/msa_kernel_details")
    assert not (folder / "communication.json").exists()
    with (folder / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        hccl = [r for r in csv.DictReader(fh) if r["Accelerator Core"] == "HCCL"]
    assert len(hccl) == 19
    text = panel_words(tab_panel("Communication", str(folder)))
    assert f"each of its {len(hccl)} communication tasks counts as one collective" in text
    assert text.count("communication.json") == 1, text
    assert "communication.json not found" not in text
    assert len(_sentences_on(text, "transit")) == 1


def test_legacy_mindspore_names_the_file_of_its_own_rank() -> None:
    """``wild/mi_run1`` is rank 1 (its files end in ``_1``: timeline_display_1.json, ...);
    the sentence on what its collectives lack named "hccl_raw_0.csv for rank 0"."""
    root = shared_sample("wild/mi_run1")
    suffixes = {m[1] for f in (root / "profiler").iterdir()
                if (m := re.search(r"_(\d+)(?:_detail_time)?\.(?:csv|json|txt)$", f.name))}
    assert suffixes == {"1"}
    text = panel_words(tab_panel("Communication", str(root)))
    said = _sentences_on(text, "hccl_raw")
    assert len(said) == 1 and "(hccl_raw_1.csv for rank 1)" in said[0], said
    assert "hccl_raw_0" not in text and "rank 0" not in text
