"""The Communication tab: collectives, slow ranks and links, overlap."""

from __future__ import annotations

import re
from typing import Any

import ipywidgets as W
import pandas as pd

from ... import analysis as A
from ... import charts as C
from ..._text_dtype import TEXT
from ...format import counted, listed, time_text
from ...io.canonical.comm_words import (
    ASCEND_NO_COMM_JSON,
    CANN_UNRECORDED,
    KINETO_NONE,
    KINETO_UNRECORDED,
    LEGACY_UNRECORDED,
    comm_words_of,
)
from ...tables import over_ranks, with_values
from ..load_notes import TABLE_WORDS, notes_about
from ..markup import STYLE, frame_html, note
from .base import Context, Tab, html_widget, ranks_of

__all__ = ["CommunicationTab", "bubble_note", "empty_communication_note", "has_peers",
           "links_caption", "loading_html", "peers_note", "stages_html", "unrecorded_note",
           "COMMUNICATION_TABLES"]

#: The tables the Communication tab draws, and what its notes call them: the loader's notes
#: about them, or about the files they were read from (communication.json, ...), are said
#: at the foot of the tab.
COMMUNICATION_TABLES = {t: TABLE_WORDS[t]
                        for t in ("comm_ops", "comm_bandwidth", "comm_matrix")}


def empty_communication_note(profile: Any) -> str:
    """Why the Communication tab has nothing, and what would fill it, in one sentence.

    Only for a profile in which :func:`perfkit.analysis.comm_summary` found no collective,
    neither in its communication tables nor among its device tasks. The run is called a
    one-rank run only when the profile records a world size of one; when it does not say,
    the note says that the one loaded rank recorded none. What would fill the tab is named
    in the profile's own format (:func:`perfkit.io.canonical.comm_words.comm_words_of`): a Kineto
    trace's NCCL kernels, never an Ascend export's communication.json.
    """
    ranks = getattr(profile, "ranks", None)
    n = len(ranks) if ranks else 1
    meta = getattr(profile, "meta", None)
    recorded = getattr(meta, "world_size", None)
    world = recorded or n
    if recorded == 1:
        return ("No communication: this is a one-rank run, so it has no collectives (a "
                "profile of a run over several ranks would fill this tab).")
    if world <= 1:
        return ("No communication: the one loaded rank recorded no collective (no "
                "communication tables, communication tasks or host collectives such as "
                "NCCL, HCCL or gloo) and the profile does not say how many ranks the run "
                "had; a one-rank run has none (a profile of a run over several ranks would "
                "fill this tab).")
    return (f"No communication: no collective was recorded in the {counted(n, 'loaded rank')} "
            f"of this {world}-rank run (no communication tables, collective kernels or host "
            f"collectives such as NCCL, HCCL or gloo; {comm_words_of(profile).fill} would "
            "fill this tab).")


def unrecorded_note(profile: Any, unrecorded: list[str]) -> str:
    """What the collectives of ``profile`` do not record (``unrecorded``: columns of
    :func:`perfkit.analysis.comm_summary` with no value) and what would record them, in the
    profile's own format (:func:`perfkit.io.canonical.comm_words.comm_words_of`), in one
    sentence."""
    group = "group" in unrecorded
    split = any(c.endswith("_share") for c in unrecorded)
    why = comm_words_of(profile).unrecorded(group, split)
    shown = listed(c.replace("_share", " share") for c in unrecorded)
    return (f"Not recorded in this profile: the collectives' {shown}"
            + (f" ({why})." if why else "."))


def links_caption(rank: int, some_local: bool, all_local: bool) -> str:
    """Title of the links of a clicked ``rank`` (global rank): which links they are.

    A link of global ranks is the rank's when it is one of its ends. A link of
    group-local ranks (the profile records no rank list for its group) cannot be matched
    with a global rank, so the rank's links there are those its own matrix file recorded
    (``recorded_by``), and the title says so: links in which it is only the peer,
    recorded by other ranks, are then not among them.
    """
    if not some_local:
        return f"Links of rank {rank}"
    own = (f"the links rank {rank} recorded itself (its communication matrix), their ranks "
           "local to their communication group as the profile gives no global ranks for "
           f"them; links recorded by rank {rank}'s peers are not listed")
    if all_local:
        return f"Links of rank {rank}: {own}"
    return (f"Links of rank {rank}: by global rank where the profile maps the group's ranks, "
            f"and elsewhere {own}")


def has_peers(ranks: pd.DataFrame) -> bool:
    """Whether :func:`perfkit.analysis.slow_ranks` compared more than one rank (a chart of
    one rank against itself is four empty panels at zero)."""
    return not ranks.empty and ranks["rank"].nunique(dropna=False) > 1


def peers_note(ranks: pd.DataFrame) -> str | None:
    """What the comparison of ranks with their peers (:func:`perfkit.analysis.slow_ranks`)
    cannot tell from this few ranks, in one sentence; None when it can.

    One rank has no peers (:func:`has_peers`). Two ranks are compared, but the outlier
    test needs three, so neither is ever called slow.
    """
    if ranks.empty:
        return None
    if not has_peers(ranks):
        return ("Ranks against their peers: one rank is loaded, so it has no peers to be "
                "compared with (open the run's other ranks, e.g. the folder that holds all "
                "of them, to see whether one is slow).")
    why = "; ".join(ranks.attrs.get("notes", []))
    return f"Ranks against their peers: {why}, so no rank is flagged as slow." if why else None


#: The loaders' note that a trace has no collective at all: an empty tab says it in its
#: own words (:func:`empty_communication_note`).
_NONE_SAID = re.compile(re.escape(KINETO_NONE.removeprefix("comm_ops: ")))
#: The clauses of the loaders' notes saying that the collectives' transit / wait / idle
#: split is not recorded: Kineto's, raw CANN output's (its whole note) and legacy
#: MindSpore's (in brackets, for any rank), which :func:`unrecorded_note` says for them.
_SPLIT_SAID = re.compile("|".join((
    re.escape(f"; {KINETO_UNRECORDED}"), re.escape(CANN_UNRECORDED),
    re.escape(f" ({LEGACY_UNRECORDED})").replace(re.escape("{rank}"), r"\d+"))))
_BOTH_SAID = re.compile(f"{_NONE_SAID.pattern}|{_SPLIT_SAID.pattern}")
#: The text loader's whole note that the export has no communication.json, its level in
#: brackets: said by :func:`unrecorded_note` where that names communication.json.
_JSON_SAID = re.compile(rf"^{re.escape(ASCEND_NO_COMM_JSON)}[^)]*\)$")


def loading_html(profile: Any, said_split: bool, said_json: bool = False) -> str:
    """The loader's notes about the tab's tables (:func:`perfkit.widgets.load_notes.
    notes_about`), one note each; empty when there is none.

    Where the tab already said that the collectives' transit / wait / idle split is not
    recorded (``said_split``: :func:`unrecorded_note`), the loaders' clauses saying the same
    (:data:`perfkit.io.canonical.comm_words.KINETO_UNRECORDED`,
    :data:`~perfkit.io.canonical.comm_words.
    CANN_UNRECORDED`, :data:`~perfkit.io.canonical.comm_words.LEGACY_UNRECORDED`) are left out of
    their notes, and a note that said nothing else is left out, so that the page says it
    once; so is the note that a trace has no collective at all (:data:`~perfkit.io.
    comm_words.KINETO_NONE`), which an empty tab says in its own words. Where that
    sentence names communication.json (``said_json``), the text loader's note that the
    export has none (:data:`~perfkit.io.canonical.comm_words.ASCEND_NO_COMM_JSON`) is left out too.
    """
    said = [_BOTH_SAID if said_split else _NONE_SAID] + ([_JSON_SAID] if said_json else [])
    notes = notes_about(profile, COMMUNICATION_TABLES,
                        re.compile("|".join(p.pattern for p in said)))
    return "".join(note(n) for n in notes)


class CommunicationTab(Tab):
    """Collectives per kind and group, ranks against their peers (click a rank to filter),
    the slowest links and how much communication is hidden."""

    title = "Communication"
    waits_for = "the communication tables (collectives, bandwidth, links)"

    def __init__(self, ctx: Context) -> None:
        self.rank_detail = W.HTML()
        self._links: pd.DataFrame | None = None
        self._overlap: pd.DataFrame | None = None
        self._pickable = False  # whether a chart of the ranks is there to click
        super().__init__(ctx)

    def build(self, profile: Any) -> list[W.Widget]:
        summary = A.comm_summary(profile)
        if summary.empty:  # the loader's notes still say what it found, or left out
            return [html_widget(note(empty_communication_note(profile))
                                + loading_html(profile, said_split=False))]
        headers = {"op_type": "collective", "count": "calls", "total_us": "time",
                   "mean_us": "mean", "max_us": "longest", "transit_share": "transit",
                   "wait_share": "wait", "idle_share": "idle"}
        # one rank sums over its steps alone, and a column of how many ranks (1) says
        # nothing
        one = len(ranks_of(profile)) == 1
        cols = [c for c in ("op_type", "group", "count", "total_us", "mean_us", "max_us",
                            "transit_share", "wait_share", "idle_share",
                            *(() if one else ("ranks",)))
                if c in summary.columns]
        # what the profile does not record is said once, not shown as columns of dashes
        unrecorded = [c for c in cols if c not in with_values(summary, cols)]
        # a profile without communication tables: the device's communication tasks
        tasks = summary.attrs.get("source") == "kernels"
        out: list[W.Widget] = [html_widget(frame_html(
            summary, "Collectives: time per kind" + ("" if "group" in unrecorded
                                                     else " and group")
            + (", from the device's communication tasks" if tasks else ""),
            columns=[c for c in cols if c not in unrecorded], headers=headers,
            scope=({"total_us": "summed over steps", "mean_us": "per call",
                    "count": "summed over steps"} if one else
                   {"total_us": "summed over ranks and steps", "mean_us": "per call",
                    "count": "summed over ranks and steps"}),
            shorten_text={"group": 28}))]
        # how the tasks were counted and what they lack, in one paragraph: the missing
        # communication tables are said there once, not again by the loader's note
        lacking = unrecorded_note(profile, unrecorded) if unrecorded else ""
        said = ((f"The profile has no communication tables, so each of its "
                 f"{counted(int(summary['count'].sum()), 'communication task')} counts as "
                 "one collective and its duration as the collective's time. ")
                if tasks else "") + lacking
        if said:
            out.append(html_widget(note(said.strip())))
        bw = bandwidth_html(profile)
        if bw:
            out.append(html_widget(bw))
        job = self.ctx.job.job
        # ranks against the peers of their own pipeline stage, as the findings compare them
        ranks = A.slow_ranks(profile, parallel=getattr(job, "parallel", None))
        self._links = A.slow_links(profile)
        self._overlap = A.comm_overlap(profile)
        peers = peers_note(ranks)
        self._pickable = has_peers(ranks)
        if self._pickable:
            out.append(self.chart(C.slow_ranks_chart(ranks, select=True,
                                                     title="Ranks against their peers (click "
                                                           "a rank for its links)"),
                                  self._on_pick))
        if peers:
            out.append(html_widget(note(peers)))
        elif self._pickable:  # the rank every tab names (the Overview, the findings)
            out.append(html_widget(note(A.slowest_rank_of(ranks).sentence)))
        self.rank_detail = W.HTML()
        out.append(self.rank_detail)
        self._draw(None)
        out.append(html_widget(self._overlap_html()))
        stages = stages_html(profile, getattr(job, "parallel", None))
        if stages:
            out.append(html_widget(stages))
        said_split = any(c.endswith("_share") for c in unrecorded)
        loading = loading_html(profile, said_split, "communication.json" in lacking)
        if loading:
            out.append(html_widget(loading))
        return out

    def _on_pick(self, points: list[dict[str, Any]]) -> None:
        ranks = [int(p["rank"]) for p in points if "rank" in p]
        self._draw(ranks[0] if ranks else None)

    def _draw(self, rank: int | None) -> None:
        links = self._links if self._links is not None else pd.DataFrame()
        # links of group-local ranks (slow_links' rank_space): one row per communication
        # group and recording rank, both shown; ranks are global wherever the profile maps
        # the group's local ranks
        local = (links["rank_space"].eq("local").fillna(False) if "rank_space" in links.columns
                 else pd.Series(False, index=links.index))
        some, every = bool(local.any()), bool(len(local)) and bool(local.all())
        named = "group" in links.columns and bool(  # a group the matrix names
            links["group"].astype(TEXT).fillna("").str.strip().ne("").any())
        cols = [c for c in ("transport", *(["group"] if some and named else []),
                            *(["recorded_by"] if some else []),
                            "src_rank", "dst_rank", *(["rank_space"] if some and not every
                                                      else []),
                            "size_bytes", "time_us", "bandwidth_gbps", "median_gbps",
                            "ratio_to_median", "slow")
                if c in links.columns]
        where = " in group" if every else ""
        headers = {"size_bytes": "size", "time_us": "time", "bandwidth_gbps": "bandwidth",
                   "median_gbps": "peers' median", "ratio_to_median": "of the median (×)",
                   "src_rank": f"from rank{where}", "dst_rank": f"to rank{where}",
                   "group": "communication group", "recorded_by": "recorded by rank",
                   "rank_space": "ranks (global / local in group)"}
        shown = {"columns": cols, "headers": headers, "shorten_text": {"group": 28},
                 "scope": {"size_bytes": "summed over steps", "time_us": "summed over steps"}}
        if rank is None or links.empty:
            self.rank_detail.value = STYLE + frame_html(
                links, "Links, slowest first" + (
                    " (click a rank above to see its links)" if self._pickable else ""),
                max_rows=10, **shown)
            return
        ends = links["src_rank"].eq(rank) | links["dst_rank"].eq(rank)
        recorded = links["recorded_by"].eq(rank) if "recorded_by" in links.columns else False
        mine = links[(~local & ends.fillna(False)) | (local & recorded).fillna(False)]
        self.rank_detail.value = STYLE + frame_html(
            mine, links_caption(rank, some, every)
            + ", slowest first (double-click the chart to clear)", max_rows=20, **shown)

    def _overlap_html(self) -> str:
        """The table of how much communication computation hides: over the ranks, the
        median, min and max of the exposed communication and the most exposed rank, or, on
        a profile of one rank, that rank's figures alone (the median, min and max of one
        value are that value thrice, and it is the most exposed of one)."""
        frame = self._overlap if self._overlap is not None else pd.DataFrame()
        if frame.empty:
            return frame_html(frame, "Communication hidden behind computation")
        bubble = bool(frame["bubble_us"].fillna(0.0).gt(0).any())
        steps = int(frame["steps"].max()) if "steps" in frame.columns and len(frame) else 0
        which = frame.attrs.get("measured_steps")  # some steps only: which, in words
        if frame["rank"].nunique(dropna=False) == 1:
            rank = frame["rank"].iloc[0]
            who = "" if pd.isna(rank) else f", rank {int(rank)}"
            table = frame_html(
                frame, f"Communication hidden behind computation{who} (per step: "
                       + (which if which else
                          f"the rank's mean over its {counted(steps, 'step')}")
                       + ", as the findings count it)",
                columns=["comm_exposed_us", *(["bubble_us"] if bubble else []),
                         "communication_us", "overlap_share", "exposed_share",
                         *(["bubble_share"] if bubble else [])],
                headers={"comm_exposed_us": "exposed", "bubble_us": "pipeline bubble",
                         "communication_us": "all communication", "overlap_share": "hidden",
                         "exposed_share": "exposed share of the step",
                         "bubble_share": "bubble share of the step"})
            return table + (note(bubble_note(frame)) if bubble else "")
        values = ["comm_exposed_us", "communication_us", *(["bubble_us"] if bubble else [])]
        keep = {"overlap_share": "median", "exposed_share": "median",
                **({"bubble_share": "median"} if bubble else {})}
        spread = over_ranks(frame, [], values, keep=keep)
        columns = ["comm_exposed_median_us", "comm_exposed_min_us", "comm_exposed_max_us",
                   "worst_rank", *(["bubble_median_us"] if bubble else []),
                   "communication_median_us", "overlap_share", "exposed_share",
                   *(["bubble_share"] if bubble else [])]
        table = frame_html(
            spread, "Communication hidden behind computation, over the ranks (per step: "
                    + (f"each rank's mean over {which}" if which else
                       f"each rank's mean over its {counted(steps, 'step')}")
                    + ", as the findings count it)",
            columns=columns,
            headers={"comm_exposed_median_us": "exposed, median over ranks",
                     "comm_exposed_min_us": "exposed, min",
                     "comm_exposed_max_us": "exposed, max",
                     "worst_rank": "most exposed rank",
                     "bubble_median_us": "pipeline bubble, median",
                     "communication_median_us": "all communication, median",
                     "overlap_share": "hidden, median", "exposed_share":
                     "exposed share of the step, median",
                     "bubble_share": "bubble share of the step, median"})
        return table + (note(bubble_note(frame)) if bubble else "")


def bandwidth_html(profile: Any) -> str:
    """The algorithm and bus bandwidth per collective kind, group and rank
    (:func:`perfkit.analysis.collective_bandwidth_summary`), with how they are counted;
    empty when no collective records its size."""
    bw = A.collective_bandwidth_summary(profile)
    if bw.empty:
        return ""
    cols = [c for c in ("op_type", "group", "rank", "group_size", "count", "size_bytes",
                        "time_us", "algbw_gbps", "busbw_gbps") if c in with_values(bw, list(bw))]
    return frame_html(
        bw, "Collectives: bandwidth per kind, group and rank", columns=cols,
        headers={"op_type": "collective", "group_size": "ranks in group", "count": "calls",
                 "size_bytes": "bytes", "time_us": "time", "algbw_gbps": "algorithm bw",
                 "busbw_gbps": "bus bw"},
        scope={"size_bytes": "summed over calls", "time_us": "summed over calls"},
        shorten_text={"group": 28}) + note(
        "Algorithm bandwidth is the bytes of the calls over their time; bus bandwidth "
        "scales it as nccl-tests does, to compare with a link's: all-reduce × 2(n−1)/n, "
        "all-gather, reduce-scatter and all-to-all × (n−1)/n, broadcast and send/receive × 1, "
        "for a group of n ranks. The time is each call's whole duration, its wait for peers "
        "included, so both are lower bounds on what the links carry.")


def stages_html(profile: Any, parallel: Any = None) -> str:
    """The table of the pipeline stages' times, or ``""`` where the profile has fewer than
    two stages (or none known): no empty table.

    The rows are :func:`perfkit.analysis.stage_balance` with the job's ``parallel`` (the
    stages and the schedule the stage-imbalance finding reads): each stage's ranks, its
    step (median over its ranks and steps), its own work (``stage_us``: the step less the
    receive wait), that receive wait, and how much longer its own work is than the
    fastest stage's (``imbalance``: stage_us / fastest stage_us - 1), the figures the
    finding names; then the receive wait beyond the schedule's bubble (``excess_wait_us``)
    and a sentence (:func:`stage_note`) that says whether the imbalance is a finding.
    """
    frame = A.stage_balance(profile, parallel=parallel)
    if len(frame) < 2:
        return ""
    text = stage_note(frame)
    frame = frame.rename(columns={"imbalance": "imbalance_share"})
    return frame_html(
        frame, "Pipeline stages: each stage's own work per step (the step less its "
               "receive wait; medians over the stage's ranks and steps)",
        columns=["stage", "ranks", "step_us", "stage_us", "bubble_us", "excess_wait_us",
                 "imbalance_share"],
        headers={"stage": "pipeline stage", "ranks": "ranks", "step_us": "step",
                 "stage_us": "own work", "bubble_us": "receive wait",
                 "excess_wait_us": "receive wait beyond the schedule's bubble",
                 "imbalance_share": "longer than the fastest stage"},
        scope={"step_us": "median", "stage_us": "median", "bubble_us": "median",
               "excess_wait_us": "median"}) + (note(text) if text else "")


def stage_note(stages: pd.DataFrame) -> str:
    """One sentence under the stage table: what the imbalance costs (the
    ``stage_imbalance`` finding's figure, :func:`perfkit.analysis.stage_imbalance_us`), or
    why an imbalance in the table is no finding (the receive wait is no more than the
    schedule's bubble, (pp − 1) / micro-batches of the stage's own work). ``""`` where the
    stages are even."""
    worst = stages.loc[stages["stage_us"].idxmax()]
    if not float(worst["imbalance"]) > 0:
        return ""
    fastest = stages.loc[stages["stage_us"].idxmin()]
    cost = A.stage_imbalance_us(stages)
    theo = float(stages["theoretical_bubble"].iloc[0])
    schedule = (f"the schedule's bubble ((pp − 1) / micro-batches = {theo:.2f} of a "
                "stage's own work)" if theo == theo else "the schedule's bubble")
    slow = (f"stage {int(worst['stage'])} does {100.0 * float(worst['imbalance']):.1f} % "
            f"more own work than stage {int(fastest['stage'])}")
    if cost > 0:
        return (f"{slow[0].upper()}{slow[1:]}: the faster stages wait "
                f"{time_text(cost)} per step in receives beyond {schedule}, the cost the "
                "stage-imbalance finding (Advice) counts.")
    return (f"{slow[0].upper()}{slow[1:]}, but no stage waits in receives beyond "
            f"{schedule}: that wait is the schedule's, so the imbalance costs no time and "
            "is no finding.")


def bubble_note(overlap: pd.DataFrame) -> str:
    """What the exposed communication of :func:`perfkit.analysis.comm_overlap` leaves out
    where the profile measures a pipeline bubble, in one sentence with its figures."""
    per = overlap.set_index("rank")["bubble_us"].astype("float64")
    worst = int(per.idxmax())
    waiting = int(per.fillna(0.0).gt(0).sum())
    if len(per) == 1:  # one rank: no "all" of one, no rank that is the worst of one
        who, peak = f"rank {worst} waits", f"up to {time_text(float(per.max()))} per step"
    else:
        who = (f"all {len(per)} ranks wait" if waiting == len(per)
               else f"{waiting} of the {counted(len(per), 'rank')} "
                    f"{'waits' if waiting == 1 else 'wait'}")
        peak = f"up to {time_text(float(per.max()))} per step, rank {worst}"
    return ("Exposed communication here leaves out the pipeline bubble: "
            f"{who} in pipeline receives ({peak}), time the step table counts as "
            "communication not "
            "overlapped, but which is one stage waiting for another, not a transfer to "
            "speed up. It is counted apart, as the pipeline bubble, wherever perfkit splits "
            "the step (the Overview, the advice).")
