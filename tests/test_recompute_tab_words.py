"""The Recompute tab says what its table counts and whom its IR check is for.

The table counts attention passes (forward against backward), not operators; the IR check
reads a MindSpore graph dump, so on a PyTorch profile the tab says the boxes hold the
bundled example, not the open job (the walk of session 32 found both unsaid). The
bundled Kineto trace is a PyTorch run (its ``distributedInfo`` names gloo, read by the
loader); the bundled MindSpore CPU run is MindSpore's.
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest
from widget_html import panel_words

from perfkit.widgets import tab_panel

DATA = Path(__file__).resolve().parents[1] / "data"


def _words(html_text: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html_text)).split())


def test_the_ir_check_says_whom_it_is_for() -> None:
    pytorch = tab_panel("Recompute", str(DATA / "kineto-tiny-llama"))
    said = _words(pytorch.ir_note.value)  # above the IR boxes, below the tab's body
    assert said.startswith("This check is for MindSpore (MindFormers' select_recompute)")
    assert "which a PyTorch run does not write" in said
    mindspore = tab_panel("Recompute", str(DATA / "mindspore-cpu-tiny-llama"))
    said = _words(mindspore.ir_note.value)  # a walk: nothing said the boxes are an example
    assert said.startswith("The boxes start on the bundled example: the MindFormers guide's")
    assert "Put your own dump's path" in said


@pytest.mark.slow  # a 16-rank dashboard: about 6 s on a busy 2-core machine
def test_the_table_counts_attention_passes() -> None:
    """The bundled Llama2-13B sample's table: its columns name what is counted, attention
    passes, not operators."""
    words = panel_words(tab_panel("Recompute", "simulated/llama2-13b-baseline-dp16"))
    assert "attention passes forward, median" in words
    assert "attention passes backward, median" in words
    assert "forward ops" not in words


def test_the_ir_check_says_its_problems_in_words() -> None:
    """A walk: the IR check's table showed "neighbour_not_recomputed" and "not_marked",
    cut its explanations mid-word, and doubled the patterns' backslashes ('a\\\\.b', as
    Python's repr writes them, not as a YAML holds them)."""
    panel = tab_panel("Recompute", str(DATA / "mindspore-cpu-tiny-llama"))
    panel.check_ir()  # the bundled example dump and its patterns
    words = _words("".join(c.value for c in panel.ir_result.children))
    assert "marked, but a neighbour is kept: no clone was made" in words
    assert "neighbour_not_recomputed" not in words and "not_marked" not in words
    assert r"Add 'feed_forward\.w1\.reshape' to select_recompute." in words
    assert "\\\\" not in words and "…" not in words

