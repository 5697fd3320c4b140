"""The Planner's ranking of layouts: one numbering, the profiled layout in its place by its
predicted step, and a sentence that says whether any layout that fits is predicted faster
than the profiled one, and by how much.

The shared H100 Kineto trace of Qwen1.5-0.5B (``wild/tl_qwen_h100``) is read here with
gzip and json: its ``ProfilerStep`` span on the GPU is the measured step. Which rows of the
search are the profiled layout, how many fit, how many are faster and by how much are
counted here on the search's own rows (:attr:`PlannerTab.ranked`), with the layout's fields
compared one by one, not with the code under test.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics

import pandas as pd
import pytest
from shared_samples import shared_sample
from widget_html import panel_html

from perfkit.format import count_text, counted, share_text, time_text
from perfkit.widgets import dashboard
from perfkit.widgets.prediction import best_layouts, ranking_sentence

QWEN = "wild/tl_qwen_h100"
BASELINE = "simulated/llama2-13b-baseline-dp16"
_TAGS = re.compile(r"<[^>]+>")


def _text(panel) -> str:
    html = re.sub(r"<style>.*?</style>", "", panel_html(panel), flags=re.S)
    return re.sub(r"\s+", " ", _TAGS.sub(" ", html)).replace("&#x27;", "'")


def _planner(profile: str):
    board = dashboard(profile, background_bytes=None)
    board.select("Planner")
    return board, board.panels["Planner"]


@pytest.fixture(scope="module")
def qwen():
    board, panel = _planner(str(shared_sample(QWEN)))
    panel.plan_button.click()  # a forward pass: its training plan is drawn on request
    return board, panel


@pytest.fixture(scope="module")
def baseline():
    return _planner(BASELINE)


def _is_profiled(ranked: pd.DataFrame, parallel) -> pd.Series:
    """Rows of the search that are the profiled layout, field by field."""
    same = pd.Series(True, index=ranked.index)
    for name in ("dp", "tp", "pp", "cp", "vpp", "micro_batch_size", "num_micro_batches",
                 "optimizer_shard", "recompute"):
        same &= ranked[name] == getattr(parallel, name)
    same &= ranked["sequence_parallel"].astype(bool) == bool(parallel.sequence_parallel)
    if parallel.recompute == "selective":
        same &= ranked["full_layers_per_stage"] == int(parallel.recompute_layers or 0)
    return same


def _others(panel, job) -> pd.DataFrame:
    """The layouts of the search that fit, the profiled one left out."""
    ranked = panel.ranked
    fits = ranked[ranked["fits"].astype(bool)]
    return fits[~_is_profiled(fits, job.parallel)]


def _check_one_ranking(best: pd.DataFrame, others: pd.DataFrame, own_step: float) -> None:
    """One numbering, step times in its order, the profiled row once, in its place: 1 +
    the other layouts that fit predicted faster; the others take the places around it."""
    ranks = [int(r) for r in best["rank"]]
    assert ranks == sorted(set(ranks)), ranks  # increasing: no number twice
    steps = best["step_s"].tolist()
    assert steps == sorted(steps)
    profiled = best["profiled"].astype(bool).tolist()
    assert sum(profiled) == 1 and (best["changes"] == "the profiled layout").sum() == 1
    own = best[profiled].iloc[0]
    assert own["step_s"] == pytest.approx(own_step, rel=1e-12)
    place = int((others["step_s"] < own_step).sum()) + 1
    assert int(own["rank"]) == place
    shown = [r for r, p in zip(ranks, profiled, strict=True) if not p]
    assert shown == [i + 1 + (i + 1 >= place) for i in range(len(shown))]
    # the others shown are the fastest of the search's, in its order
    assert best.loc[[not p for p in profiled], "step_s"].to_numpy() == pytest.approx(
        others["step_s"].to_numpy()[:len(shown)], rel=1e-12)


@pytest.mark.shared_samples
def test_qwen_none_faster_is_said_and_the_profiled_layout_ranks_once(qwen) -> None:
    """On the Qwen trace no layout that fits is predicted faster than the profiled one: the
    profiled row is rank 1 (not a second 1 after ranks 1 to 8), the others follow by
    predicted step, and the page says that none is faster instead of "the fastest"."""
    board, panel = qwen
    job, fit, best = board.job.job, panel.fit, panel.best
    (path,) = sorted(shared_sample(QWEN).glob("*.json.gz"))
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    spans = [e["dur"] for e in events if e.get("cat") == "gpu_user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    measured_s = statistics.median(spans) / 1e6
    frame = panel.comparison
    assert frame.loc[frame["run"] == "measured", "step_s"].iloc[0] == pytest.approx(
        measured_s, rel=1e-6)
    others = _others(panel, job)
    own_step = fit.prediction.step_s
    assert len(others) > 0 and (others["step_s"] >= own_step).all()  # none faster
    _check_one_ranking(best, others, own_step)
    assert int(best.loc[best["profiled"].astype(bool), "rank"].iloc[0]) == 1
    closest = float(others["step_s"].min())
    text = _text(panel)
    said = (f"None of the {count_text(len(others))} other layouts that fit is predicted "
            f"faster than the profiled layout (predicted {time_text(own_step * 1e6)})")
    assert said in text
    gap = closest - own_step
    assert (f"is predicted at {time_text(closest * 1e6)}, {time_text(gap * 1e6)} "
            f"({share_text(gap / own_step)}) slower") in text
    # the sentence compares predictions: the measured forward pass is not its reference
    sentence = ranking_sentence(panel.ranked, fit, job.parallel)
    assert time_text(measured_s * 1e6) not in sentence and said in sentence
    assert "fastest layouts that fit" not in text.lower()
    # the search note counts the trace's GPUs in words: "over 1 device", not "1 devices"
    gpus = {e["pid"] for e in events if e.get("cat") == "kernel"}
    assert f"over {counted(len(gpus), 'device')} and " in text and len(gpus) == job.world_size


def test_baseline_says_how_much_faster_the_fastest_is(baseline, grammar) -> None:
    board, panel = baseline
    job, fit, best = board.job.job, panel.fit, panel.best
    ranked = panel.ranked
    fits = ranked[ranked["fits"].astype(bool)]
    assert int(_is_profiled(fits, job.parallel).sum()) == 1  # a candidate of its own search
    others = _others(panel, job)
    own_step = fit.prediction.step_s
    _check_one_ranking(best, others, own_step)
    faster = others[others["step_s"] < own_step]
    assert 0 < len(faster) < len(others)
    fastest = float(others["step_s"].min())
    assert float(best["step_s"].iloc[0]) == pytest.approx(fastest, rel=1e-12)
    gain = own_step - fastest
    sentence = ranking_sentence(ranked, fit, job.parallel)
    assert (f"{count_text(len(faster))} of the {count_text(len(others))} other layouts that "
            f"fit are predicted faster than the profiled layout (predicted "
            f"{time_text(own_step * 1e6)})") in sentence
    assert (f"is predicted at {time_text(fastest * 1e6)}, {time_text(gain * 1e6)} "
            f"({share_text(gain / own_step)}) faster") in sentence
    assert sentence in _text(panel) and not grammar(sentence)


def test_the_profiled_layout_is_not_listed_twice_when_it_is_among_the_first(baseline) -> None:
    """The profiled layout is also a row of its own search: a table long enough to reach
    it shows it once, numbered in the one ranking."""
    board, panel = baseline
    job, fit = board.job.job, panel.fit
    others = _others(panel, job)
    place = int((others["step_s"] < fit.prediction.step_s).sum()) + 1
    best = best_layouts(panel.ranked, fit, job.parallel, n=place + 2)
    assert len(best) == place + 3  # the other layouts asked for, and the profiled one
    _check_one_ranking(best, others, fit.prediction.step_s)
    assert int(best.loc[best["profiled"].astype(bool), "rank"].iloc[0]) == place


def test_few_or_no_layouts_that_fit_read_right(baseline, grammar) -> None:
    board, panel = baseline
    job, fit, ranked = board.job.job, panel.fit, panel.ranked
    others = _others(panel, job)
    own = _is_profiled(ranked, job.parallel)
    # one other layout fits: the fastest of them
    one = ranked.assign(fits=own | (ranked.index == others.index[0]))
    sentence = ranking_sentence(one, fit, job.parallel)
    assert sentence.startswith("The only other layout that fits is predicted faster "
                               "than the profiled layout")
    best = best_layouts(one, fit, job.parallel)
    assert list(best["rank"]) == [1, 2] and bool(best["profiled"].iloc[1])
    # none fits but the profiled one
    sentence = ranking_sentence(ranked.assign(fits=own), fit, job.parallel)
    assert sentence.startswith(f"No other layout of {count_text(job.global_batch_size)} "
                               f"sequences on {count_text(job.world_size)} devices fits")
    for text in (sentence, ranking_sentence(one, fit, job.parallel)):
        assert not grammar(text), text


@pytest.mark.shared_samples
def test_another_job_size_is_not_ranked_against_the_profiled_step(qwen, grammar) -> None:
    """Searched with another global batch, the layouts' steps do not compare with the
    profiled one: the profiled row is shown apart, without a rank, and the page says why."""
    board, panel = qwen
    job = board.job.job
    before = panel.batch.value
    try:
        panel.batch.value = 4 * job.global_batch_size
        panel.search()
        best = panel.best
        own = best[best["profiled"].astype(bool)]
        assert len(own) == 1 and pd.isna(own["rank"].iloc[0])
        assert bool(best["profiled"].iloc[-1])
        ranks = [int(r) for r in best["rank"].iloc[:-1]]
        assert ranks == list(range(1, len(best)))
        ranked = panel.ranked
        assert (ranked["dp"] * ranked["micro_batch_size"] * ranked["num_micro_batches"]
                == 4 * job.global_batch_size).all()
        sentence = ranking_sentence(ranked, panel.fit, job.parallel)
        assert f"These layouts run {count_text(4 * job.global_batch_size)} sequences" \
            in sentence and "do not compare" in sentence
        assert sentence in _text(panel) and not grammar(sentence)
        # nor is it drawn among the candidates: its diamond read as the fastest of them
        import json

        from perfkit.charts.planner import PROFILED_LABEL

        (chart,) = [w for w in panel.result.children if hasattr(w, "spec")]
        assert PROFILED_LABEL not in json.dumps(chart.spec)
    finally:
        panel.batch.value = before
        panel.search()
