"""The Overview says once that the files record no rank, and which rank was assigned.

A Kineto trace without ``distributedInfo`` nor a rank in its file name
(``wild/tl_qwen_h100``) had two notes on the Overview saying the same: the loader's ("rank:
not in the trace ... nor in the file name") and the one of the rank assigned instead
("rank: not recorded in the files; 0 assigned from the folder name or position"). A lone
``kernel_details.csv`` (``wild/msa_kernel_details``, no ``profiler_info*.json``) had three:
"profiler_info*.json not found: rank and profiler level unknown", "rank unknown (no
profiler_info_{rank}.json and no rank_id)" and the assigned one. Each now has one note on
its rank, with the reason and the rank assigned; its notes on the communication files say
the profile's level in plain words ("this profile is unknown" before). The raw files are
read here with gzip / json and a folder listing.
"""

from __future__ import annotations

import gzip
import html
import json
import re
from typing import Any

import pytest
from shared_samples import shared_sample
from widget_html import panel_html

from perfkit.widgets import tab_panel

pytestmark = pytest.mark.shared_samples


def _notes(panel: Any) -> list[str]:
    """The notes of the Overview's "What was opened" table (its rows "note | ...")."""
    text = re.sub(r"<style.*?</style>", "", panel_html(panel), flags=re.S)
    text = re.sub(r"</t[hd]>", " | ", text)
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())
    return re.findall(r"\bnote \| (.*?) \|", text)


def test_a_kineto_trace_without_a_rank_says_so_once() -> None:
    folder = shared_sample("wild/tl_qwen_h100")
    (trace,) = folder.glob("*.json.gz")
    with gzip.open(trace, "rt", encoding="utf-8") as fh:
        raw = json.load(fh)
    assert "distributedInfo" not in raw  # no rank in the trace ...
    assert not re.search(r"(rank|worker)_?\d", trace.name)  # ... nor in its file name
    notes = _notes(tab_panel("Overview", str(folder)))
    assert len(notes) >= 5  # the table is read (steps, collectives, memory, ...)
    on_rank = [n for n in notes if "rank:" in n or "rank unknown" in n]
    assert on_rank == ["Rank 0: rank: not in the trace (no distributedInfo) nor in the file "
                       "name (rank3, rank_3, worker3 ...); 0 assigned from its position (the "
                       "only profile read)"], on_rank


def test_a_lone_kernel_details_says_its_rank_once() -> None:
    folder = shared_sample("wild/msa_kernel_details")
    assert [p.name for p in folder.iterdir()] == ["kernel_details.csv"]  # no profiler_info
    notes = _notes(tab_panel("Overview", str(folder)))
    on_rank = [n for n in notes if re.search(r"\brank\b", n)
               and "rank folder" not in n]  # the note on the missing rank folder says why
    assert on_rank == ["rank: not in the files (no profiler_info_{rank}.json); 0 assigned "
                       "from its position (the only profile read)"], on_rank
    assert "profiler_info*.json not found: profiler level unknown" in notes
    level = [n for n in notes if "written from profiler level" in n]
    assert len(level) == 2 and all(n.endswith("this profile's level is not known).")
                                   for n in level), level
