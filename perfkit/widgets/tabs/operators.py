"""The Operators tab: device time per operator, over the ranks, the roofline,
unfused chains, element-wise chains (:mod:`perfkit.widgets.operator_chains`) and AI CPU
operators; on a CPU-only run, the host operators' self time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as W
import pandas as pd

from ... import analysis as A
from ... import charts as C
from ..._text_dtype import TEXT
from ...analysis._util import table
from ...analysis.recorded import (
    recorded_pairs,
    recorded_profile,
    recorded_steps_text,
    unrecorded_text,
)
from ...tables import column_format, over_ranks, shorten, with_values
from ..load_notes import TABLE_WORDS, notes_about
from ..markup import STYLE, describe_error, error, frame_html, note
from ..operator_chains import chains_html
from .base import (
    ALL_RANKS,
    Context,
    Tab,
    html_widget,
    rank_picker,
    ranks_of,
    set_ranks,
    shows_all,
)

__all__ = ["OperatorsTab", "ai_cpu_html", "empty_operators_note", "sequences_note",
           "MEAN_OVER_RANKS", "OPERATOR_TABLES"]

#: The table the Operators tab draws, and what its notes call it: the loader's notes about
#: it, or about the file it was read from (kernel_details.csv), are said under the AI CPU
#: operators.
OPERATOR_TABLES = {"kernels": TABLE_WORDS["kernels"]}

#: The statistic over the ranks of the chart and of the table beside it (one for both).
MEAN_OVER_RANKS = "mean over ranks"


def _sentence(text: str) -> str:
    """``text`` as a sentence: capital first letter, full stop at the end."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?", ")")) else text + "."


def _cpu_only(profile: Any) -> bool:
    """Whether the profile is a CPU-only run (its operators are the host's)."""
    return getattr(getattr(profile, "meta", None), "device_type", None) == "cpu"


def _time_word(profile: Any) -> str:
    """What the operators' time is: the device's, or the host's own (self) time of a
    CPU-only run (:func:`perfkit.analysis.top_operators`)."""
    return "host self time" if _cpu_only(profile) else "device time"


def _ascend(profile: Any) -> bool:
    """Whether the profile comes from an Ascend NPU (AI CPU is one of its cores)."""
    return getattr(getattr(profile, "meta", None), "device_type", None) == "npu"


def empty_operators_note(profile: Any, top: pd.DataFrame | None = None) -> str:
    """Why the Operators tab has nothing, and what would fill it, in one sentence.

    When :func:`perfkit.analysis.top_operators` (``top``) left every device task out,
    its notes say why. (Where no step's tasks were recorded in full, the tab shows the
    totals of the tasks recorded instead: ``recorded_only=False``.)"""
    why = [str(n) for n in (top.attrs.get("notes", []) if top is not None else [])]
    if why:
        return _sentence("No operators: " + "; ".join(why))
    if _cpu_only(profile):
        return ("No operators: this CPU-only profile has no host operators with their "
                "times (a PyTorch profile with ProfilerActivity.CPU, or a MindSpore CPU "
                "profile with its trace_view.json, would fill this tab).")
    return ("No operators: this profile has no device tasks (a torch_npu or MindSpore "
            "export with kernel_details.csv or op_summary, or a Kineto trace with its GPU "
            "kernels, would fill this tab).")


def sequences_note(steps: pd.DataFrame) -> str:
    """Which steps the roofline and the unfused chains are over, in one sentence, when
    the device tasks of some steps were not recorded in full
    (:func:`perfkit.analysis.recorded.recorded_profile` left them out); that there are
    none, and which steps were recorded in part, when no step was recorded in full."""
    if recorded_pairs(steps) == 0:
        return ("No roofline, unfused chains or element-wise chains: no step's device tasks "
                f"were recorded in full (those of {unrecorded_text(steps)} only in part), "
                "and a fragment of a step does not show its operators' sequences.")
    which = recorded_steps_text(steps) or "every step"
    return ("The roofline and the unfused chains are over the steps whose device tasks were "
            f"recorded in full ({which}); the tasks of the other steps are left out, as a "
            "fragment of a step does not show its operators.")


def _one_rank(profile: Any, rank: int) -> Any:
    """The Profile of ``rank`` (a Cluster's member, or the profile itself)."""
    return profile[rank] if getattr(profile, "ranks", None) else profile


def _per_rank(profile: Any, func: Callable[..., pd.DataFrame], **kwargs: Any) -> pd.DataFrame:
    """``func(rank_profile, **kwargs)`` for every rank, with a ``rank`` column."""
    frames = []
    for r in ranks_of(profile):
        f = func(_one_rank(profile, r), **kwargs)
        if len(f):
            frames.append(f.assign(rank=r))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _with_absent_ranks(per: pd.DataFrame, by: str, keys: list[str]) -> pd.DataFrame:
    """The rows of ``per`` (:func:`perfkit.analysis.top_operators` of each rank, with a
    ``rank`` column) for the operators ``keys``, with a row of 0 µs per step for each rank
    that has device tasks but none of an operator: its figure for that operator is 0, as
    the mean over the ranks counts it."""
    if per.empty:
        return per
    ranks = pd.unique(per["rank"])
    per = per[per[by].astype(str).isin(keys)]
    grid = pd.MultiIndex.from_product([keys, ranks], names=["_key", "rank"])
    have = pd.MultiIndex.from_arrays([per[by].astype(str), per["rank"]])
    missing = grid[~grid.isin(have)]
    per = per[[by, "rank", "per_step_us"]]
    if not len(missing):
        return per
    zeros = pd.DataFrame({by: missing.get_level_values(0),
                          "rank": missing.get_level_values(1), "per_step_us": 0.0})
    return pd.concat([per, zeros], ignore_index=True)


def ai_cpu_html(ai_cpu: pd.DataFrame, word: str = "device time", totals: bool = False
                ) -> str:
    """The table of :func:`perfkit.analysis.ai_cpu_operators` on the basis of the top
    operators' table above it: per rank and step, per call, share of the device time.

    Its columns that say nothing here are left out: ``key`` repeats the type, ``core`` and
    ``ai_cpu`` are the same on every row (the title says AI CPU), a column no AI CPU task
    has a value for (its roofline bound) is empty; the sums over every rank and step
    (``count``, ``total_us``) are the per-step figures times the (rank, step) pairs.
    ``totals``: those sums are shown instead, over the tasks recorded, where no step's
    tasks were recorded in full (the top operators' table then shows totals too).
    """
    time, calls = ("total_us", "count") if totals else ("per_step_us", "calls_per_step")
    basis = "over the tasks recorded" if totals else "per rank and step"
    cols = [c for c in ("type", "name", time, calls, "mean_us", "max_us", "share", "bound")
            if c in with_values(ai_cpu)]
    return frame_html(ai_cpu, "Operators on AI CPU", columns=cols,
                      headers={"name": "example task", time: word, calls: "calls",
                               "mean_us": "mean", "max_us": "longest call",
                               "share": f"share of {word}"},
                      scope={time: basis, calls: basis, "mean_us": "per call"},
                      max_rows=10)


def _loading(profile: Any) -> list[W.Widget]:
    """The loader's notes about the device tasks, or none."""
    loading = notes_about(profile, OPERATOR_TABLES)
    return [html_widget("".join(note(n) for n in loading))] if loading else []


class OperatorsTab(Tab):
    """Device time per operator type or task name: chart (click an operator for its task
    names or its ranks), the table over ranks, the roofline, unfused chains, AI CPU."""

    title = "Operators"
    waits_for = "the operator tables (device tasks and host operators)"

    def __init__(self, ctx: Context) -> None:
        self.group = W.Dropdown(options=[("operator type", "type"), ("task name", "name")],
                                value="type", description="group by",
                                style={"description_width": "initial"},
                                layout=W.Layout(width="230px"))
        self.top_n = W.IntSlider(value=15, min=5, max=40, step=1, description="top",
                                 continuous_update=False, style={"description_width": "initial"},
                                 layout=W.Layout(width="280px"))
        self.rank = rank_picker("ranks", statistic="mean")
        self.detail = W.HTML()
        self._by: pd.DataFrame | None = None
        #: Whether the chart shows totals over every task recorded, no step being recorded
        #: in full (:func:`perfkit.analysis.top_operators`, ``recorded_only=False``).
        self._partial = False
        super().__init__(ctx, [self.group, self.top_n, self.rank])
        self.controls = self.children[0]  # hidden where the profile has no operator
        for widget in (self.group, self.top_n, self.rank):
            widget.observe(lambda _change: self.refresh(), names="value")

    def show(self, profile: Any) -> None:
        super().show(profile)
        set_ranks(self.rank, ranks_of(profile), statistic="mean")

    def build(self, profile: Any) -> list[W.Widget]:
        by, n, rank = self.group.value, self.top_n.value, self.rank.value
        scope = profile if shows_all(self.rank) else _one_rank(profile, rank)
        top = A.top_operators(scope, by=by, n=None)
        self._partial = False
        self.controls.layout.display = ""
        if top.empty:  # no step recorded in full: the tasks recorded, as totals
            whole = A.top_operators(scope, by=by, n=None, recorded_only=False)
            if whole.empty:
                # no operator at all (on the whole profile): no controls that do nothing
                if scope is profile:
                    self.controls.layout.display = "none"
                return [html_widget(note(empty_operators_note(profile, top))),
                        *_loading(profile)]
            top, self._partial = whole, True
        self._by = top
        what = "operator type" if by == "type" else "task name"
        word = _time_word(profile)
        over = rank == ALL_RANKS and len(ranks_of(profile)) > 1
        who = MEAN_OVER_RANKS if over else ("" if shows_all(self.rank) else f"rank {rank}")
        if self._partial:
            where = "summed over the ranks" if over else who
            chart = C.top_operators_chart(
                top, label=by, n=n, value="total_us", select=True, time_word=word,
                value_title=f"{word} of the tasks recorded"
                            + (f", {where}" if where else "") + " (ms)",
                title=f"{word.capitalize()} of the device tasks recorded by {what}, no step "
                      "recorded in full (" + (f"{where}; " if where else "")
                      + "click a bar for details)")
        else:
            chart = C.top_operators_chart(
                top, label=by, n=n, value="per_step_us", select=True, time_word=word,
                value_title=f"{word} per rank and step, {who} (ms)" if over else None,
                title=f"{word.capitalize()} per rank and step by {what} ("
                      + (f"{who}; " if who else "") + "click a bar for details)")
        shows = "task names" if by == "type" else "ranks"
        self.detail = W.HTML(STYLE + note(f"Click a bar to see its {shows}."))
        out: list[W.Widget] = [self.chart(chart, self._on_pick), self.detail,
                               html_widget(self._table(profile, top, by, n, rank))]
        # say where the times come from (a CPU-only run's host operators) and which
        # tasks and steps the figures per step are over
        said = [str(t) for t in top.attrs.get("notes", [])]
        if said:
            out.append(html_widget("".join(note(_sentence(t)) for t in said)))
        # the task sequences (roofline, unfused chains) of the steps recorded in full only,
        # as the advisor reads them: a fragment of a step is not the step's operators
        tasks = recorded_profile(scope)
        if self._partial:  # no step to read them in: said once, not as empty tables
            out.append(html_widget(note(sequences_note(table(scope, "steps")))))
            tasks = scope
        else:
            out += self._roofline(tasks, said)
            # the table, then its notes in their own widget (wrapped at the page's width)
            unfused = A.unfused_savings(tasks)
            out += [html_widget(h) for h in self._unfused(unfused, rank) if h]
            # the runs of element-wise kernels the advisor's chains finding counts
            chains = self._chains(profile, tasks, unfused)
            if chains:
                out.append(html_widget(chains))
        if tasks is not scope:
            out.append(html_widget(note(sequences_note(table(scope, "steps")))))
        ai_cpu = A.ai_cpu_operators(scope, recorded_only=not self._partial)
        if not _cpu_only(profile) and (len(ai_cpu) or _ascend(profile)):  # an Ascend notion
            out.append(html_widget(ai_cpu_html(ai_cpu, word, totals=self._partial)))
        return out + _loading(profile)

    def _table(self, profile: Any, top: pd.DataFrame, by: str, n: int, rank: int) -> str:
        """The top ``n`` with every figure on one basis: per rank and step (calls too),
        per call for the mean.

        Over the ranks, the time and the calls are the chart's statistic, the mean over
        the ranks (:func:`perfkit.analysis.top_operators` of the cluster: the sum over
        every rank and step divided by the number of (rank, step) pairs), beside the
        smallest and largest rank's own figure and the slowest rank. A rank with device
        tasks but none of an operator's counts as 0 µs for it, in the mean as in the
        smallest figure, so that an operator only some ranks run (the first stage's
        embedding, one rank's extra kernels) is not shown at its one rank's figure.
        """
        keys = top.head(n)[by].astype(str).tolist()
        word = _time_word(profile)
        if self._partial:  # totals over the tasks recorded: no step's figures
            cols = [c for c in (by, "category", "total_us", "share", "count", "mean_us",
                                "bound") if c in top.columns
                    and (c != "bound" or top[c].notna().any())]
            return frame_html(top.head(n), f"Top {n} by {word} of the device tasks recorded"
                              + ("" if shows_all(self.rank) else f", rank {rank}"),
                              columns=cols, scope={"total_us": "over the tasks recorded",
                                                   "count": "over the tasks recorded",
                                                   "mean_us": "per call"},
                              headers={"total_us": word, "count": "calls", "mean_us": "mean",
                                       "share": f"share of {word}"})
        if rank != ALL_RANKS or len(ranks_of(profile)) == 1:
            cols = [c for c in (by, "category", "per_step_us", "share", "calls_per_step",
                                "mean_us", "bound") if c in top.columns
                    and (c != "bound" or top[c].notna().any())]  # no PMU: no verdict
            scope = {"per_step_us": "per rank and step", "calls_per_step": "per rank and step",
                     "mean_us": "per call"}
            title = f"Top {n} by {word}" + ("" if shows_all(self.rank) else f", rank {rank}")
            return frame_html(top.head(n), title, columns=cols, scope=scope,
                              headers={"per_step_us": word, "calls_per_step": "calls",
                                       "mean_us": "mean", "share": f"share of {word}"})
        spread = over_ranks(_with_absent_ranks(
            _per_rank(profile, A.top_operators, by=by, n=None), by, keys),
            [by], ["per_step_us"], sort=False)
        head = top.head(n)[[by, "category", "per_step_us", "share", "calls_per_step",
                            "mean_us"]]
        merged = head.merge(spread.drop(columns=["per_step_median_us"]).astype(
            {by: TEXT}), left_on=head[by].astype(TEXT), right_on=by, how="left",
            suffixes=("", "_ranks"))
        merged = merged.drop(columns=[c for c in ("key_0", f"{by}_ranks")
                                      if c in merged.columns])
        headers = {"per_step_us": f"{word} per rank and step, {MEAN_OVER_RANKS}",
                   "per_step_min_us": "min over ranks", "per_step_max_us": "max over ranks",
                   "worst_rank": "slowest rank",
                   "calls_per_step": f"calls per rank and step, {MEAN_OVER_RANKS}",
                   "mean_us": "mean per call, all ranks", "share": f"share of {word}"}
        cols = [by, "category", "per_step_us", "per_step_min_us", "per_step_max_us",
                "worst_rank", "share", "calls_per_step", "mean_us"]
        # the mean, the smallest and the largest rank's figure in one unit (the mean's), so
        # that they compare at a glance (each fitted alone, 37,566 µs stood beside 50.2 ms)
        unit = column_format(merged.head(n), "per_step_us").unit
        return frame_html(merged, f"Top {n} by {word} per rank and step, over "
                                  f"{len(ranks_of(profile))} ranks", columns=cols,
                          headers=headers, max_rows=n,
                          units=dict.fromkeys(("per_step_min_us", "per_step_max_us"), unit))

    def _on_pick(self, points: list[dict[str, Any]]) -> None:
        keys = [p["full"] for p in points if "full" in p]
        if not keys or self.profile is None:
            self.detail.value = STYLE + note("Click a bar to see its details; double-click "
                                             "to clear.")
            return
        key, by = keys[0], self.group.value
        rank = self.rank.value
        scope = self.profile if shows_all(self.rank) else _one_rank(self.profile, rank)
        # no step recorded in full: totals over the tasks recorded, as the chart's bars
        whole = {"recorded_only": False} if self._partial else {}
        time, calls = ("total_us", "count") if self._partial else ("per_step_us",
                                                                   "calls_per_step")
        basis = "over the tasks recorded" if self._partial else "per rank and step"
        try:
            if by == "type":
                names = A.top_operators(scope, by="name", n=None, **whole)
                names = names[names["type"].astype(str) == key]
                self.detail.value = STYLE + frame_html(
                    names, f"Task names of type {key}", columns=[
                        "name", "input_shapes", time, calls, "mean_us"],
                    scope={time: basis, calls: basis, "mean_us": "per call"},
                    headers={time: _time_word(scope), calls: "calls",
                             "mean_us": "mean"}, max_rows=15)
            else:
                per = _per_rank(self.profile, A.top_operators, by="name", n=None, **whole)
                per = per[per["name"].astype(str) == key].sort_values(time, ascending=False)
                each = "recorded" if self._partial else "per step"
                self.detail.value = STYLE + frame_html(
                    per, f"{shorten(key, 60)} on each rank",
                    columns=["rank", time, calls, "mean_us", "max_us"],
                    headers={time: f"{_time_word(scope)} {each}", calls: f"calls {each}",
                             "mean_us": "mean per call", "max_us": "longest call"},
                    max_rows=32)
        except Exception as exc:  # noqa: BLE001 - shown in the page
            self.detail.value = error(describe_error(exc, "the operator's details"))

    def _roofline(self, profile: Any, said: list[str]) -> list[W.Widget]:
        """The roofline chart and its notes, less those ``said`` under the table above (the
        tasks of no step, which both tables leave out, are counted once on the page)."""
        eff = A.operator_efficiency(profile)
        if eff.empty or not (eff["achieved_tflops"] > 0).any():
            why = [n for n in eff.attrs.get("notes", [])
                   if not n.startswith("no device tasks") and str(n) not in said]
            return [html_widget(note(_sentence("No roofline: " + "; ".join(
                why or ["no operator with shapes that perfkit can price"]))))]
        hw, _why = A.infer_hardware(profile)
        chart = C.roofline_chart(eff, bandwidth_gbps=hw.memory_bandwidth / 1e9 if hw else None,
                                 title="Roofline: one point per operator and shapes, sized by "
                                       "time (scroll to zoom, drag to pan)"
                                       + (f" ({hw.name})" if hw else ""))
        notes = [str(n).replace("the column problem says why", "the table below says why")
                 for n in eff.attrs.get("notes", []) if str(n) not in said]
        over = eff[eff["problem"].notna().to_numpy(bool)] if "problem" in eff else eff.iloc[:0]
        above = [html_widget(frame_html(
            # the measured rate is in the problem's words, in the unit of its roofline (a
            # memory-bound row's GB/s; its TFLOP/s column read 0)
            over, "Operators measured above their roofline, and why", columns=[
                "key", "input_shapes", "input_dtypes", "problem"],
            headers={"key": "operator"},
            wrap=("problem", "input_shapes"), max_rows=12))] if len(over) else []
        return [self.chart(chart), html_widget("".join(note(_sentence(n)) for n in notes)),
                *above]

    def _chains(self, profile: Any, tasks: Any, unfused: pd.DataFrame) -> str:
        """The element-wise chains of ``tasks``
        (:func:`perfkit.widgets.operator_chains.chains_html`) on the job's hardware,
        without the unfused attention chains' kernels where the advisor's attention finding
        counts them, as its element-wise chains finding."""
        job = self.ctx.job.job
        findings = self.ctx.findings(profile)
        attention = any(f.rule == "attention_not_fused" and f.measured for f in findings)
        patterns = unfused["pattern"] if "pattern" in unfused.columns else ()
        return chains_html(tasks, getattr(job, "hardware", None), attention,
                           len(ranks_of(profile)) == 1 or not shows_all(self.rank),
                           patterns=patterns)

    def _unfused(self, chains: pd.DataFrame, rank: int) -> tuple[str, str]:
        """The unfused-chains table (``chains``: :func:`perfkit.analysis.unfused_savings`)
        and the notes on its savings (HTML)."""
        # the attention row's saving is the advisor's (roofline); the others' sum - max
        notes = "".join(note(_sentence(n)) for n in chains.attrs.get("saving_notes", []))
        if chains.empty or rank != ALL_RANKS or "rank" not in chains.columns:
            return frame_html(chains, "Unfused chains a fused kernel could replace",
                              columns=[c for c in ("pattern", "occurrences", "total_us",
                                                   "saving_us", "saving_rule", "example",
                                                   "fused_replacement")
                                       if c in chains.columns],
                              headers={"total_us": "time", "saving_us": "saving",
                                       "saving_rule": "saving assumes"},
                              scope={"total_us": "summed over steps"}), notes
        spread = over_ranks(chains, ["pattern"], ["saving_us"],
                            keep={"occurrences": "median", "saving_rule": "first",
                                  "example": "first", "fused_replacement": "first"})
        return frame_html(spread, "Unfused chains a fused kernel could replace (saving over "
                                  "the profiled steps, per rank)",
                          columns=["pattern", "saving_median_us", "saving_min_us",
                                   "saving_max_us", "worst_rank", "occurrences",
                                   "saving_rule", "example", "fused_replacement"],
                          headers={"saving_median_us": "saving, median over ranks",
                                   "saving_min_us": "min", "saving_max_us": "max",
                                   "occurrences": "occurrences per rank",
                                   "saving_rule": "saving assumes"}), notes
