"""The Overview's top findings name their time at stake; a finding whose time at stake the
profile cannot measure said "cost not measurable from the profile" beside its own title
"The partial recompute costs 622 µs per step" (msprof-analyze's compute_advice_v2
kernel_details.csv: 5 forward attention tasks against 4 backward). The cost of recompute
is measured; what is not is the time a change would win back (that depends on the memory
it frees), which is the "time at stake" the list is about.

That kernel list is an excerpt of its step (25 of the 1,238 tasks its stream ran,
:mod:`perfkit.io.ascend.excerpt`): its forward and backward counts are not the step's,
so no recompute finding is read from it now; its unmeasured finding is the one that says
why the operators have none."""

from __future__ import annotations

import csv
import re

import pytest
from shared_samples import sample
from widget_html import panel_words

from perfkit.widgets import tab_panel

pytestmark = pytest.mark.shared_samples

FOLDER = sample("ascend/msprof-analyze-tests/compute_advice_v2")


def test_an_unmeasured_finding_says_its_time_at_stake_is_not_measurable() -> None:
    with open(FOLDER / "kernel_details.csv", newline="") as fh:
        types = [r["Type"] for r in csv.DictReader(fh)]
    # the kernel list's own attention tasks: forward against backward
    assert (types.count("FlashAttentionScore"), types.count("FlashAttentionScoreGrad")) == \
        (5, 4)
    words = panel_words(tab_panel("Overview", str(FOLDER)))
    line = re.search(r"\d\. ([^—]*) — No operator finding: every step's device tasks were "
                     r"recorded only in part", words)
    assert line, words
    assert line.group(1) == "time at stake not measurable from the profile"
    assert "cost not measurable" not in words
    assert "The partial recompute costs" not in words  # counts of an excerpt
