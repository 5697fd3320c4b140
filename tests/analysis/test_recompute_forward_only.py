"""Recompute on a profile of a forward pass only: the reason given is the true one.

TraceLens's TimeSformer trace on an H100 (``shared/samples/wild/tl_timesformer_h100``) runs
attention as batched matmuls around a softmax, forward only. Read here with gzip and json:
its PyTorch host operators (none of autograd's backward ones) and its attention chains
(``aten::bmm`` → ``aten::softmax`` → ``aten::bmm`` in time order on one thread). The
recompute evidence must say that recompute cannot be seen because there is no backward
pass, not that there is no attention; the Recompute tab shows that sentence.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from html import unescape

import pytest
from shared_samples import shared_sample

import perfkit as pk
from perfkit.analysis import recompute_evidence

pytestmark = pytest.mark.shared_samples

BACKWARD = re.compile(r"Backward|autograd::engine|backward")
_TAGS = re.compile(r"<[^>]+>")


def _raw(name: str) -> dict:
    """PyTorch operators, backward operators and bmm-softmax-bmm chains of the raw trace."""
    (trace,) = shared_sample(f"wild/{name}").glob("*.json.gz")
    with gzip.open(trace, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    per_thread = defaultdict(list)
    for e in ops:
        if e["name"] in ("aten::bmm", "aten::softmax"):
            per_thread[(e.get("pid"), e.get("tid"))].append((e["ts"], e["name"]))
    chains = 0
    for seq in per_thread.values():
        names = [n for _, n in sorted(seq)]
        chains += sum(names[i - 1:i + 2] == ["aten::bmm", "aten::softmax", "aten::bmm"]
                      for i in range(1, len(names) - 1))
    return {"aten": sum(e["name"].startswith("aten::") for e in ops),
            "backward": sum(bool(BACKWARD.search(e["name"])) for e in ops),
            "chains": chains}


def test_recompute_says_there_is_no_backward_pass_not_no_attention() -> None:
    raw = _raw("tl_timesformer_h100")
    assert raw["aten"] >= 50 and raw["backward"] == 0
    assert raw["chains"] > 0  # attention there is: batched matmuls around a softmax
    seen = recompute_evidence(pk.load(shared_sample("wild/tl_timesformer_h100"),
                                      progress=False))
    assert seen.empty
    notes = " ".join(seen.attrs.get("notes", []))
    assert "no attention task" not in notes
    assert "no backward kernels: recompute cannot be seen" in notes
    assert f"none of the profile's {raw['aten']:,} PyTorch operators" in notes


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_recompute_tab_gives_that_reason() -> None:
    from widget_html import panel_html

    from perfkit.widgets import dashboard

    raw = _raw("tl_timesformer_h100")
    board = dashboard(str(shared_sample("wild/tl_timesformer_h100")), background_bytes=None)
    board.select("Recompute")
    html = re.sub(r"<style>.*?</style>", "", panel_html(board.panels["Recompute"]),
                  flags=re.S)
    text = re.sub(r"\s+", " ", unescape(_TAGS.sub(" ", html)))
    assert "no attention task" not in text
    assert (f"no backward kernels: recompute cannot be seen, since none of the profile's "
            f"{raw['aten']:,} PyTorch operators is an autograd or *Backward one: it runs a "
            "forward pass only") in text
