"""The Planner says a packed inference step's batch as the trace shows it: batch rows of
packed tokens, not sequences.

``wild/tl_b200_eager`` is one vLLM forward step of gpt-oss-120b whose linear layers take
888 packed tokens (``vllm::moe_forward``'s input dims ``(888, 2880)``, read here from the
raw trace with :mod:`raw_kineto`): the trace shows no sequences, so "1 sequence per step"
(the planner's training basis) said something the profile does not have.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from raw_kineto import raw_events
from shared_samples import sample
from test_inference_tokens_basis import B200, GPT_OSS
from widget_html import panel_words

import perfkit as pk
from perfkit.widgets import tab_panel
from perfkit.widgets.prediction import batch_text

pytestmark = pytest.mark.shared_samples


def test_the_planner_says_the_packed_steps_tokens_not_sequences(tmp_path: Path,
                                                                grammar) -> None:
    raw = raw_events(Path(sample(B200)) / "eager_trace.json.gz")
    (tokens,) = {e["args"]["Input Dims"][0][0] for e in raw
                 if e.get("cat") == "cpu_op" and e.get("name") == "vllm::moe_forward"}
    config = tmp_path / "config.json"
    config.write_text(json.dumps(GPT_OSS))
    profile = pk.load(sample(B200), progress=False)
    panel = tab_panel("Planner", profile, job=pk.infer_job(profile, config=config))
    panel.plan_button.click()  # an inference step: the training plan comes on request
    words = panel_words(panel)
    assert tokens == 888
    assert f"over 8 devices and 1 batch row of {tokens:,} packed tokens per step;" in words
    assert not re.search(r"\b1 sequence\b", words)
    # the heading above the first sentence ("Predicted 352 ms ...") once ended "against
    # predicted", a doubled word as read
    assert not grammar(words), grammar(words)


def test_a_training_batch_still_counts_sequences() -> None:
    assert batch_text(1024) == "1,024 sequences"
    assert batch_text(2, 559) == "2 batch rows of 559 packed tokens"
