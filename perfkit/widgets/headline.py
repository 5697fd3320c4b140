"""The Overview's headline: step time, throughput, MFU, where the step goes, what to fix.

:func:`headline` gathers, for one profile and its job, the figures a performance engineer
reads first, each with how it was counted:

* the **measured step time** (:func:`perfkit.analysis.measured_step_s`: median over the
  steps of the slowest rank's step, with the device's wait before its first task);
* the **throughput** in tokens/s per device (:func:`perfkit.tokens_per_second_per_device`:
  global batch × sequence length / (step time × devices)), when the job knows its batch,
  sequence length and devices;
* the **MFU** when the job is complete (:func:`perfkit.widgets.summary.job_summary`), with
  the guard's warning when it cannot be right (never a plain figure above 100 %); for an
  inference step the forward pass's (:mod:`perfkit.job.inference_mfu`), which the
  job's figures and ``perfkit info`` give too;
* the **step split** (:func:`step_split`): computing, exposed communication, pipeline
  bubble, free time and the wait before the first device task as shares of the step time
  that add up to 100 %;
* the **top findings** of :func:`perfkit.advise` with the milliseconds at stake and the tab
  that shows their evidence (:data:`FINDING_TABS`).

Nothing here computes a metric beyond sums; the subtraction that separates the bubble
from the exposed communication it is part of is :func:`perfkit.analysis.steps.
exposed_comm_us`, which the Communication tab and the slow-rank check use too.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .._shares import rounded_split
from ..analysis import measured_step_s
from ..analysis.recorded import withheld_text
from ..analysis.steps import exposed_comm_us, far_steps, step_basis, step_wall_us
from ..calc import tokens_per_second_per_device
from ..errors import PerfkitError
from ..format import counted, listed, number_text, plural, share_text, time_text
from ..job import Job
from ..job.inference_mfu import inference_mfu_parts, packed_step
from ..job.unknowns import PANEL_TITLE, unknown_labels
from .summary import job_summary

__all__ = ["SPLIT_PARTS", "UNDIVIDED_NOTE", "split_parts", "undivided_split", "FINDING_TABS",
           "Figure", "Headline", "split_step_us", "with_exposed_comm", "throughput_figure",
           "mfu_figure",
           "step_split", "finding_tab", "headline", "headline_html", "split_bar_html",
           "top_findings"]

#: The parts of the step split (columns of :func:`with_exposed_comm`), in stacking order,
#: with their labels; their sum is the step time (:func:`perfkit.analysis.step_wall_us`):
#: the device span's parts, then ``preparing_us``, the device's wait before the span. A
#: legacy MindSpore step (computing and free time only together, :func:`undivided_split`)
#: has its wait as the step trace's interval instead (``iteration_interval_us``: from the
#: previous step's end to the forward pass's start), which its parts leave out
#: (:func:`split_step_us`).
SPLIT_PARTS: dict[str, str] = {
    "computing_us": "computing",
    "computing_or_free_us": "computing or device idle",
    "comm_exposed_us": "exposed communication",
    "bubble_us": "pipeline bubble",
    "free_us": "free (device idle)",
    "preparing_us": "before the first device task (data, launch)",
    "iteration_interval_us": "step interval, before the forward pass (data, launch)",
}
_SPLIT_COLORS = {"computing_us": "#4c78a8", "computing_or_free_us": "#9ecae9",
                 "comm_exposed_us": "#e45756", "bubble_us": "#f58518", "free_us": "#bab0ac",
                 "preparing_us": "#eeca3b",  # perfkit.charts.overview.WAIT_COLOR (no altair)
                 "iteration_interval_us": "#eeca3b"}  # the same wait, as the step trace has it
#: Why "computing or device idle" is one part, said once where the split shows it (a
#: table's header and a legend keep the short label of :data:`SPLIT_PARTS`).
UNDIVIDED_NOTE = ("computing or device idle is one part: the files give computing and the "
                  "device's idle time only together (the step less the communication that "
                  "runs alone)")
#: Parts left out of the split when no row has a value above 0 (not reported as a zero).
_OPTIONAL_PARTS = ("bubble_us", "preparing_us", "iteration_interval_us")
#: The step trace's interval: a part of the legacy MindSpore step only (:data:`SPLIT_PARTS`).
_INTERVAL = "iteration_interval_us"
#: The parts a profile's step table gives either apart or only together (legacy MindSpore
#: ``ascend_cluster_analyse`` files: their ``computation_time`` is the step less the
#: communication that runs alone, the device's idle time in it).
_APART, _TOGETHER = ("computing_us", "free_us"), "computing_or_free_us"


def undivided_split(breakdown: pd.DataFrame) -> bool:
    """Whether the breakdown gives computing and free time only together: no row has
    computing or free time, some has :data:`_TOGETHER`."""
    def known(part: str) -> bool:
        return part in breakdown.columns and bool(breakdown[part].notna().any())

    return known(_TOGETHER) and not any(known(p) for p in _APART)


def split_parts(breakdown: pd.DataFrame) -> dict[str, str]:
    """The parts of :data:`SPLIT_PARTS` this breakdown has: the pipeline bubble and the
    wait before the first device task only where some row has them above 0; computing and
    free time apart, or, where the profile gives them only together, that sum
    (``computing_or_free_us``) in their place, and the step trace's interval
    (``iteration_interval_us``) where some row has it above 0 (elsewhere the interval is
    ``preparing_us`` itself, raw CANN, or inside the step, not a part of its own)."""
    def present(part: str) -> bool:
        return part in breakdown.columns and bool(
            breakdown[part].astype("float64").fillna(0.0).gt(0).any())

    left_out = _APART if undivided_split(breakdown) else (_TOGETHER, _INTERVAL)
    return {k: v for k, v in SPLIT_PARTS.items()
            if k not in left_out and (k not in _OPTIONAL_PARTS or present(k))}

#: The tab that shows the evidence of a finding, per advisor area.
FINDING_TABS: dict[str, str] = {
    "steps": "Overview", "host": "Overview", "step_trace": "Overview", "operators": "Operators",
    "communication": "Communication", "cluster": "Communication", "memory": "Memory",
    "recompute": "Recompute", "metrics": "Planner",
}


def finding_tab(area: str, tabs: tuple[str, ...] = (), drawable: bool = True) -> str:
    """The tab for a finding's ``area`` (:data:`FINDING_TABS`; "Timeline" for step and host
    findings when ``tabs`` has one and the profile has events to draw, ``drawable``:
    :func:`perfkit.analysis.timeline.has_timed_events`; "Advice" for an unknown area).

    A profile of step totals only (a legacy MindSpore step trace, msprof-analyze's cluster
    summary) has no timeline: its Timeline tab says so, and its data-loading wait is on the
    Overview's step split, where its step and host findings point."""
    if area in ("steps", "host") and "Timeline" in tabs and drawable:
        return "Timeline"
    tab = FINDING_TABS.get(area, "Advice")
    return tab if not tabs or tab in tabs else "Advice"


def with_exposed_comm(breakdown: pd.DataFrame) -> pd.DataFrame:
    """The step breakdown with ``comm_exposed_us``: exposed communication less the bubble.

    ``comm_not_overlapped_us`` contains the pipeline bubble (``bubble_us``, the receive
    wait of pipeline parallelism, see :mod:`perfkit.analysis.steps`); separating them gives
    four parts that add up to the step: computing + (exposed communication − bubble) +
    bubble + free. Where the bubble is not known (NA) it is not subtracted and stays NA.

    Parameters
    ----------
    breakdown : pandas.DataFrame
        :func:`perfkit.analysis.step_breakdown`.

    Returns
    -------
    pandas.DataFrame
        A copy with ``comm_exposed_us`` (never below 0).
    """
    out = breakdown.copy()
    if "bubble_us" not in out.columns:
        out["bubble_us"] = float("nan")
    out["comm_exposed_us"] = exposed_comm_us(out)
    return out


def split_step_us(breakdown: pd.DataFrame) -> pd.Series:
    """Each row's step as its split counts it, in µs: the sum of its base parts and the
    wait before them, the whole that :func:`step_split`'s and each step's shares are of.

    ``computing + comm_not_overlapped + free + preparing``, or, where the profile gives
    computing and free time only together (legacy MindSpore), ``computing_or_free +
    comm_not_overlapped + iteration_interval + preparing``: MindSpore's own step, of
    which its ``computation_time`` is the part not spent in communication alone, and the
    step trace's interval before it (from the previous step's end to the forward pass's
    start: the wait the data-loading finding counts). MindSpore's step leaves that
    interval out: on ``cluster_propose`` it is 0.1 to 0.45 ms above the step trace's
    ``total`` less its interval, and 0.6 to 1.7 ms below ``total`` where the interval is
    0.8 to 2.1 ms. The sum is still not the step trace's ``total`` the step time column
    shows (0.06 % to 0.25 % above it there), so shares of the step trace's time would
    not add up to 100 %. Elsewhere the parts add up to the
    device span, and the sum is :func:`perfkit.analysis.step_wall_us`. A row whose base
    parts are not all known gets :func:`~perfkit.analysis.step_wall_us` (its wait still
    has a share).
    """
    together = undivided_split(breakdown)
    base = ([_TOGETHER, "comm_not_overlapped_us"] if together else
            ["computing_us", "comm_not_overlapped_us", "free_us"])
    wall = step_wall_us(breakdown) if "step_us" in breakdown.columns else \
        pd.Series(math.nan, index=breakdown.index)
    if any(c not in breakdown.columns for c in base):
        return wall
    parts = breakdown[base].astype("float64").sum(axis=1, min_count=len(base))
    for wait in ("preparing_us", *((_INTERVAL,) if together else ())):
        if wait in breakdown.columns:
            parts = parts + breakdown[wait].astype("float64").fillna(0.0)
    return parts.where(parts.notna(), wall)


def step_split(breakdown: pd.DataFrame) -> pd.DataFrame:
    """Where the step time goes, as shares that add up to 100 %.

    Each part is summed over every rank and step whose three base parts (computing,
    exposed communication, free) are known, and divided by the sum of their step times
    (the device span and the wait before it, :func:`perfkit.analysis.step_wall_us`): the
    share of the wall time of all ranks spent in each part (a time-weighted mean of the
    per-rank shares, so the shares add up to 1). Where the profile gives computing and
    free time only together (legacy MindSpore ``ascend_cluster_analyse`` files), that sum
    (``computing_or_free_us``) and the exposed communication are the base, and the step
    time their sum and the step trace's interval before it (:func:`split_step_us`):
    MindSpore's own step, of which its ``computation_time`` is the part not spent in
    communication alone, and the wait before it.

    Parameters
    ----------
    breakdown : pandas.DataFrame
        :func:`perfkit.analysis.step_breakdown`.

    Returns
    -------
    pandas.DataFrame
        One row per part of :data:`SPLIT_PARTS` (the bubble and the wait before the first
        task only when the profile reports them above 0): ``part`` (column), ``label``,
        ``us`` (summed over ranks and steps), ``share``.
        ``attrs``: ``rows`` (rank × step rows used), ``ranks``, ``steps``, ``left_out``
        (the words for the steps far from the others left out, :func:`far_steps_text`;
        ``""`` when none).

    A step far from the others (:func:`perfkit.analysis.steps.far_steps`: a warm-up whose
    slowest rank takes more than twice the median step) is left out, as the step time
    shown, a median, leaves it out; unless every step is far.
    """
    cols = ["part", "label", "us", "share"]
    if breakdown.empty:
        out = pd.DataFrame(columns=cols)
        out.attrs.update(rows=0, ranks=0, steps=0)
        return out
    data = with_exposed_comm(breakdown)
    base = ([_TOGETHER, "comm_not_overlapped_us"] if undivided_split(data) else
            ["computing_us", "comm_not_overlapped_us", "free_us"])
    data = data.dropna(subset=base)
    # a step far from the others (a warm-up) left out, as the median step time leaves it:
    # summed in, the legacy cluster's 2.38 s first step made its bubble 61 % of a 179 ms step
    far = far_steps(data)
    if len(far) and data["step"].nunique() > len(far):
        data = data[~data["step"].isin(far.index)]
    else:
        far = far.iloc[:0]
    step_total = float(split_step_us(data).sum())
    rows = []
    for part, label in split_parts(data).items():  # a part not reported is left out
        us = float(data[part].astype("float64").fillna(0.0).sum())
        rows.append({"part": part, "label": label, "us": us,
                     "share": us / step_total if step_total > 0 else math.nan})
    out = pd.DataFrame(rows, columns=cols)
    # a span without a step number (a trace without step marks) is a step of its own
    out.attrs.update(rows=len(data), ranks=int(data["rank"].nunique(dropna=False)),
                     steps=int(data["step"].nunique(dropna=False)),
                     left_out=far_steps_text(far, data))
    return out


def far_steps_text(far: pd.Series, kept: pd.DataFrame) -> str:
    """``"step 1 (2.38 s, 13 times the median step: a warm-up) left out, as the step time
    leaves it out"``, for the steps :func:`perfkit.analysis.steps.far_steps` found; ``""``
    when none."""
    if far.empty:
        return ""
    median_us = measured_step_s(kept) * 1e6
    first = min([*far.index, *kept["step"].dropna()])
    said = [f"step {int(k)} ({time_text(v)}, {v / median_us:.0f} times the median step"
            f"{': a warm-up' if k == first else ''})" for k, v in far.items()]
    them = "it" if len(said) == 1 else "them"
    return f"{listed(said)} left out, as the step time leaves {them} out"


@dataclass(frozen=True)
class Figure:
    """One headline figure: its name, its text, how it was counted, a warning and, where
    the text is one number, that number (for the JSON answers)."""

    name: str
    text: str
    note: str
    warning: str | None = None
    value: float | None = None


@dataclass
class Headline:
    """What :func:`headline` gathered (see the module docstring)."""

    figures: list[Figure] = field(default_factory=list)
    split: pd.DataFrame = field(default_factory=pd.DataFrame)
    findings: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


#: Why a figure has no job where a profile is open: reading its job failed.
JOB_UNREAD = "no job: it could not be read from this profile (the job panel says why)"


def throughput_figure(job: Job | None, step_s: float,
                      no_job: str = "no job: open a profile") -> Figure:
    """Tokens per second per device (:func:`perfkit.tokens_per_second_per_device`), or why
    not: it needs only the job's global batch, sequence length and devices, not its model
    (``no_job``: the reason where there is no job). A packed inference step
    (:func:`perfkit.job.inference_mfu.packed_step`) counts the tokens its trace shows and
    says they are not split into sequences."""
    name = "throughput"
    if job is None:
        return Figure(name, "–", no_job)
    gbs, seq = job.global_batch_size, job.seq_length
    devices = job.parallel.world_size if job.parallel is not None else None
    devices = job.world_size or devices
    if not gbs or not seq or not devices or not (step_s > 0):
        lacks = [w for w, v in (("the global batch", gbs), ("the sequence length", seq),
                                ("the devices", devices)) if not v] or ["the step time"]
        return Figure(name, "–", f"not computed: {listed(lacks)} "
                                 f"{plural(len(lacks), 'is', 'are')} not known (see “"
                                 f"{PANEL_TITLE}”)")
    tps = tokens_per_second_per_device(gbs, seq, step_s, devices)
    per_step = (f"{counted(gbs * seq, 'token')} per step, packed (the trace does not split "
                "them into sequences)," if packed_step(job) else
                f"{counted(gbs, 'sequence')} × {counted(seq, 'token')} per step")
    return Figure(name, f"{number_text(tps)} tokens/s per device",
                  f"{per_step} over "
                  f"{counted(devices, 'device')} "
                  f"[{job.source('global_batch_size')}]", value=float(tps))


def mfu_figure(job: Job | None, no_job: str = "no job: open a profile") -> Figure:
    """The job's MFU (:func:`~perfkit.widgets.summary.job_summary`, guarded), or why not
    (``no_job``: the reason where there is no job)."""
    name = "MFU"
    if job is None:
        return Figure(name, "–", no_job)
    if job.training_step() is False:  # an inference step: one forward pass, its own count
        return Figure(name, *inference_mfu_parts(job))
    if job.missing():
        labels = unknown_labels(job, ("model", "hardware", "step_time_s"))
        return Figure(name, "–", f"not computed: {listed(labels)} "
                                 f"{plural(len(labels), 'is', 'are')} not known (see “"
                                 f"{PANEL_TITLE}”)")
    try:
        summary = job_summary(job).set_index("key")
    except PerfkitError as exc:
        return Figure(name, "–", f"not computed: {exc}")
    row = summary.loc["mfu"]
    warning = row["warning"] if isinstance(row["warning"], str) and row["warning"] else None
    return Figure(name, str(row["text"]), str(row["note"]), warning)


def headline(profile: Any, breakdown: pd.DataFrame, job: Job | None,
             findings: list[Any] | None = None, n_findings: int = 3) -> Headline:
    """The Overview's headline figures (see the module docstring).

    Parameters
    ----------
    profile : Profile or Cluster
    breakdown : pandas.DataFrame
        :func:`perfkit.analysis.step_breakdown` of ``profile``.
    job : perfkit.Job or None
        The job of The job panel; None where reading it failed (the figures then say so).
    findings : list of perfkit.advisor.Finding, optional
        :func:`perfkit.advise` for the job, best first.
    n_findings : int
        How many findings to keep (measured ones first, in the advisor's order).

    Returns
    -------
    Headline
    """
    out = Headline()
    ranks = getattr(profile, "ranks", None) or [profile.meta.rank]
    step_s = measured_step_s(breakdown) if not breakdown.empty else math.nan
    if math.isnan(step_s):
        out.figures.append(Figure("step time", "–", withheld_text(breakdown)
                                  or "no step found in this profile"))
    else:
        out.figures.append(Figure("step time", time_text(step_s * 1e6),
                                  f"{step_basis(breakdown)} ({len(ranks)} "
                                  f"rank{'s' if len(ranks) != 1 else ''} loaded)"))
    # a profile is open: no job means that reading it failed
    out.figures.append(throughput_figure(job, step_s, JOB_UNREAD))
    out.figures.append(mfu_figure(job, JOB_UNREAD))
    out.split = step_split(breakdown)
    out.findings = top_findings(findings or [], n_findings)
    return out


def top_findings(findings: list[Any], n: int = 3) -> list[Any]:
    """The first ``n`` findings, measured ones first (each group in the given order)."""
    measured = [f for f in findings if getattr(f, "measured", True)]
    return (measured + [f for f in findings if f not in measured])[:n]


def split_bar_html(split: pd.DataFrame, missing: str | None = None) -> str:
    """The step split as one stacked HTML bar with a legend (shares with one decimal);
    ``missing``: what to say when no step has its parts (default: the profile has none)."""
    if split.empty or not split.attrs.get("rows", 1):
        return "<p class='pk-note'>" + html.escape(
            missing or "No step split: no step with its parts in this profile.") + "</p>"
    cells, legend = [], []
    # rounded to 0.1 % so that the shown shares add up to 100.0 %
    split = split.assign(share=rounded_split(split[["share"]].T).T["share"])
    for row in split.itertuples(index=False):
        share = float(row.share) if row.share == row.share else 0.0
        color = _SPLIT_COLORS.get(row.part, "#999")
        text = share_text(share)
        label = html.escape(str(row.label))
        cells.append(f"<div title='{label}: {text}' style='width:{max(share, 0) * 100:.3f}%;"
                     f"background:{color}'></div>")
        legend.append(f"<span><i style='background:{color}'></i>{label} "
                      f"<b>{text}</b></span>")
    ranks, steps = split.attrs.get("ranks", 0), split.attrs.get("steps", 0)
    left_out = split.attrs.get("left_out", "")
    basis = (f"share of the step time, summed over {ranks} rank{'s' if ranks != 1 else ''}"
             f" × {steps} step{'s' if steps != 1 else ''}"
             + (f" ({left_out})" if left_out else "") + "; the parts add up to 100 %"
             + (f". {UNDIVIDED_NOTE[0].upper()}{UNDIVIDED_NOTE[1:]}."
                if _TOGETHER in set(split["part"]) else ""))
    return (f"<div class='pk-split'><div class='pk-split-bar'>{''.join(cells)}</div>"
            f"<div class='pk-split-legend'>{''.join(legend)}</div>"
            f"<div class='pk-note'>{html.escape(basis)}</div></div>")


HEADLINE_CSS = (
    "<style>"
    ".pk-cards{display:flex;flex-wrap:wrap;gap:10px;margin:6px 0 8px 0}"
    ".pk-card{border:1px solid #dde;border-radius:6px;padding:8px 12px;min-width:200px;"
    "max-width:380px;flex:1 1 200px;background:#fafbfd}"
    ".pk-card .pk-k{font-size:12px;color:#555;text-transform:uppercase;letter-spacing:.04em}"
    # a long figure ("6,737 tokens/s per device") wraps at its spaces in a narrow card
    # rather than run out of it (a 1024 px window)
    ".pk-card .pk-v{font-size:22px;font-weight:600;margin:2px 0;overflow-wrap:break-word}"
    ".pk-card .pk-n{font-size:12px;color:#555}"
    ".pk-card .pk-w{font-size:12px;color:#8a6d3b;background:#fcf8e3;padding:3px 5px;"
    "border-radius:3px;margin-top:4px}"
    ".pk-split{margin:6px 0 10px 0}"
    ".pk-split-bar{display:flex;height:22px;border-radius:4px;overflow:hidden;"
    "border:1px solid #ccd;max-width:900px}"
    ".pk-split-legend{display:flex;flex-wrap:wrap;gap:14px;font-size:13px;margin:4px 0}"
    ".pk-split-legend i{display:inline-block;width:11px;height:11px;margin-right:5px;"
    "border-radius:2px;vertical-align:-1px}"
    "</style>")


def headline_html(head: Headline, split_missing: str | None = None) -> str:
    """The figures as cards, then the split bar (the findings are wired by the dashboard,
    as buttons that open their tab); ``split_missing`` as for :func:`split_bar_html`."""
    cards = []
    for f in head.figures:
        warn = f"<div class='pk-w'>⚠ {html.escape(f.warning)}</div>" if f.warning else ""
        cards.append(f"<div class='pk-card'><div class='pk-k'>{html.escape(f.name)}</div>"
                     f"<div class='pk-v'>{html.escape(f.text)}</div>"
                     f"<div class='pk-n'>{html.escape(f.note)}</div>{warn}</div>")
    return (HEADLINE_CSS + f"<div class='pk-cards'>{''.join(cards)}</div>"
            "<div><b>Where the step time goes</b></div>"
            + split_bar_html(head.split, split_missing))
