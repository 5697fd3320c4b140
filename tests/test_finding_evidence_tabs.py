"""Every finding's "where to look" points to a tab that shows what the finding names.

Found on the real profiles of ``shared/samples``: the top finding of
``wild/tl_qwen_h100`` (element-wise chains, 9.29 ms per step) sent the user to the
Operators tab, which had no chains table; the data-loading finding of a legacy MindSpore
step trace (``mindinsight-legacy/cluster_propose``) sent them to a Timeline that says it
has nothing to draw, and that of ``wild/ds_train`` (533 µs, under 1 % of its step) to a
Timeline that leaves the wait out unsaid.

For every finding of every real GPU and Ascend profile, the Advice tab's evidence button
(the page's own pointer) is clicked, and the tab it opens must show what :data:`SHOWN`
says the finding's rule names there: the words of its table or sentence
(:func:`widget_html.panel_words`), or its chart. A rule missing from :data:`SHOWN` fails
the test: a new rule says where its evidence is.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from shared_samples import (
    CLUSTER_OUTPUT,
    HTA,
    MINDINSIGHT,
    PT_DB_LEVEL1,
    PT_GPT3_OLD,
    PT_LEVEL1,
    WILD,
    shared_sample,
)
from widget_html import panel_words

from perfkit.format import time_text

# the whole dashboard, every tab x profile, or Dask against pandas: the slow group (README)
pytestmark = [pytest.mark.slow, pytest.mark.shared_samples]

PROFILES = ([f"wild/{w}" for w in WILD]
            + [PT_LEVEL1, PT_DB_LEVEL1, PT_GPT3_OLD, CLUSTER_OUTPUT, HTA,
               f"{MINDINSIGHT}/cluster_propose", f"{MINDINSIGHT}/run_2_normal_run",
               f"{MINDINSIGHT}/PROF_000001_20230818142704322_COJGGGCANRMICFBC",
               "ascend/msprof-analyze-tests/cluster_analysis_output"])


#: Per rule, per tab it may point to: the words that tab must show (``"chart:T"``: a chart
#: whose title starts with T).
SHOWN: dict[str, dict[str, str]] = {
    "elementwise_chains": {"Operators": "Element-wise chains one fused kernel could replace"},
    "redundant_copies": {"Operators": "| copies |"},
    "unfused_operators": {"Operators": "Unfused chains a fused kernel could replace"},
    "attention_not_fused": {"Operators": "| softmax_dropout_matmul |"},
    "cast_chains": {"Operators": "| cast_chain |"},
    "cast_runs": {"Operators": "| cast_run |"},
    "gemm_below_roofline": {"Operators": "chart:Roofline"},
    "ai_cpu": {"Operators": "Operators on AI CPU"},
    "cut_task_lists": {"Operators": "recorded in full"},
    "exposed_communication": {"Communication": "exposed"},
    # a MindSpore step trace's phases: the Overview stacks them per rank
    "step_tail": {"Overview": "the step tail, which the chart below stacks per rank"},
    "comm_wait": {"Communication": "wait"},
    # the wait drawn before the step's first task, or said where too short to see; on a
    # profile with nothing to draw, the Overview's split of the step
    "data_loading": {"Timeline": "the step's first device task", "Overview": "(data, launch)"},
    # the gaps between kernels, drawn in the step (or the whole trace, without step marks)
    "host_bound": {"Timeline": "chart:", "Overview": "free (device idle)"},
    "host_stalls": {"Timeline": "chart:", "Overview": "free (device idle)"},
    # idle time of a profile without device tasks: the Overview's split of the step
    "device_idle": {"Overview": "free (device idle)"},
    "synchronisation": {"Timeline": "chart:"},
    "schedule_bubble": {"Communication": "pipeline bubble"},
    "stage_imbalance": {"Communication": "Pipeline stage"},
    "mfu": {"Planner": "Model FLOPs utilisation"},
    "mfu_inference": {"Planner": "Model FLOPs utilisation of this inference step"},
    # the matrix operators' device time the fp32 finding prices, by type
    "fp32_matrix_work": {"Operators": "Top 15 by device time"},
    # a training-only check skipped on a forward-only step: the Planner says why
    "workload_fit": {"Planner": "runs no backward pass"},
}
#: (rule, tab) whose tab does not show the finding yet, on every profile (None) or on
#: those named; none at present. Still missing, or the test says to take them out of here.
KNOWN_GAPS: dict[tuple[str, str], tuple[str, ...] | None] = {}


def _known_gap(rule: str, tab: str, name: str) -> bool:
    if (rule, tab) not in KNOWN_GAPS:
        return False
    where = KNOWN_GAPS[(rule, tab)]
    return where is None or name in where


def _walk(widgets: Any) -> list[Any]:
    out: list[Any] = []
    for w in widgets:
        out.append(w)
        out += _walk(getattr(w, "children", ()) or ())
    return out


def _chart_titles(panel: Any) -> list[str]:
    titles = []
    for c in panel.charts:
        title = c.chart.to_dict().get("title", "")
        titles.append(title.get("text", "") if isinstance(title, dict) else str(title))
    return titles


def _shows(panel: Any, what: str) -> bool:
    if what.startswith("chart:"):
        return any(t.startswith(what[6:]) for t in _chart_titles(panel))
    return what in panel_words(panel)


def _board(name: str) -> Any:
    from perfkit.widgets.dashboard import Dashboard

    board = Dashboard(background_bytes=None)
    assert board.load_profile(str(shared_sample(name))), board.error
    return board


@pytest.mark.parametrize("name", PROFILES)
def test_every_finding_points_to_a_tab_that_shows_it(name: str) -> None:
    board = _board(name)
    findings = board.context.findings(board.profile)
    advice = board.select("Advice")
    missing = []
    for f in findings:
        assert f.rule in SHOWN, f"{f.rule}: add what its tab shows to SHOWN"
        advice._draw(f.title)  # a finding picked in the Advice tab: its evidence button
        (button,) = [w for w in _walk(advice.goto.children) if type(w).__name__ == "Button"]
        tab = re.fullmatch(r"Evidence: (\w+) ›", button.description)[1]
        assert tab in SHOWN[f.rule], (f.rule, tab)
        button.click()
        panel = board.panels[tab]
        shown = _shows(panel, SHOWN[f.rule][tab])
        gap = _known_gap(f.rule, tab, name)
        assert not (shown and gap), f"{f.rule} on the {tab} tab: not a gap any more"
        if not shown and not gap:
            missing.append((f.rule, tab, SHOWN[f.rule][tab]))
        board.select("Advice")
    assert not missing, missing


def test_the_chains_finding_names_the_table_it_points_to() -> None:
    """Qwen1.5-0.5B on an H100 (one rank, one step): the chains finding's count and time
    per step are those the Operators tab's chains table says, its saving is the table's
    less the known patterns' (none here); the table's rows add up to them, and each row's
    saving is its time less what one fused kernel would take (below its time)."""
    board = _board("wild/tl_qwen_h100")
    (f,) = [f for f in board.context.findings(board.profile) if f.rule == "elementwise_chains"]
    n, time = re.match(r"(\d+) chains of 3 or more kernels over steps, ([\d.]+ [µm]?s) per "
                       r"step", f.evidence).groups()
    words = panel_words(board.select("Operators"))
    assert (f"{n} chains of 3 or more element-wise kernels in a row over the steps, {time} of "
            "device time per step.") in words
    assert f"would save {time_text(f.ms_per_step * 1e3)} per step." in words
    assert "less that of the unfused" not in words  # no RMSNorm, rotary, SwiGLU chains here
    # the copy kernels are the copies finding's, in neither the finding's chains nor the table's
    assert "copy kernels end a chain and are in none" in f.evidence
    assert "The copy kernels are in none of these chains: the copies finding counts their " \
           "time." in words
    table = words.split("Element-wise chains one fused kernel could replace (per step)")[1]
    head = "share of the saving (%) | "
    cells = table.split(head, 1)[1].split(" | ")
    rows = [cells[i:i + 6] for i in range(0, len(cells) - 6, 6)]
    assert rows and all(r[0].count(" > ") >= 1 and int(r[1]) >= 3 for r in rows)
    chains = sum(float(r[2]) for r in rows)
    assert chains == pytest.approx(int(n))
    ms = [(float(r[3]), float(r[4])) for r in rows]  # time, saving (ms per step)
    assert all(0 < s < t for t, s in ms)
    assert sum(t for t, _ in ms) == pytest.approx(float(time.split()[0]), rel=2e-3)
    assert sum(s for _, s in ms) == pytest.approx(f.ms_per_step, rel=2e-3)
    assert sum(float(r[5]) for r in rows) == pytest.approx(100, abs=0.3)
