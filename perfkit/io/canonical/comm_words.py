"""Where each format records its collectives, in words for the pages.

Every format keeps its communication somewhere of its own: a torch_npu or MindSpore text
export in ``communication.json`` (from profiler level Level1 on), its DB export in
``analysis.db``'s ``CommAnalyzer*`` tables, a PyTorch Kineto trace in its NCCL / RCCL
kernels (or a CPU-only run's host collectives, such as gloo), legacy MindSpore output in
``hccl_raw_{rank}.csv`` and its timeline, raw CANN output in the HCCL events of its
exported timeline, msprof-analyze's cluster output in ``cluster_communication.json``.
:func:`comm_words_of` gives, for a profile's format, where its collectives were read from,
what would fill a Communication tab that has none, and what would give each collective's
group and its transit / wait / idle split, so that no page sends a GPU user looking for
an Ascend file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CommWords", "comm_words", "comm_words_of", "comm_library", "KINETO_UNRECORDED",
           "KINETO_NONE", "CANN_UNRECORDED", "LEGACY_UNRECORDED", "ASCEND_NO_COMM_JSON"]

#: What the Kineto loader's ``comm_ops`` note says a trace does not record (its last
#: clause, after "; "): the Communication tab leaves it out of that note where its own
#: sentence already says the split is not recorded.
KINETO_UNRECORDED = ("the transit/wait/sync/idle split and comm_matrix are not recorded by "
                     "Kineto (a collective's size is, where record_param_comms gives it: "
                     "comm_ops.size_bytes, and analysis.collective_bandwidth gives its "
                     "bandwidths)")
#: The Kineto loader's ``comm_ops`` note for a trace with no collective at all: an empty
#: Communication tab says so in its own sentence and leaves this note out.
KINETO_NONE = "comm_ops: no communication kernel nor host collective in this trace"
#: What raw CANN output's collectives lack: the whole of its ``comm_ops`` note, after
#: "comm_ops: ". The Communication tab leaves the note out where its own sentence already
#: says the split is not recorded (:func:`comm_words` gives that sentence's reason).
CANN_UNRECORDED = ("start and elapse only; transit / wait / synchronization / idle need "
                   "msprof's master-stream rule, which the exported timeline does not mark "
                   "(an *_ascend_pt / *_ascend_ms analysis or msprof-analyze gives them)")
#: What the collectives legacy MindSpore output reads from its timeline lack: the clause in
#: brackets that ends its ``comm_ops`` note (``{rank}``: the rank's). The Communication tab
#: leaves it out where its own sentence already says the split is not recorded.
LEGACY_UNRECORDED = "start and elapse only; hccl_raw_{rank}.csv, when present, adds the wait"
#: The start of the torch_npu / MindSpore text loader's note that an export has no
#: communication.json (its level follows, in brackets). The Communication tab leaves the
#: note out where its own sentence already names communication.json as what would give
#: the collectives' group and split.
ASCEND_NO_COMM_JSON = "communication.json not found (written from profiler level Level1 on"
#: The split of a collective's time that only Ascend's analysed exports record.
_SPLIT = "its transit / wait / idle split"


@dataclass(frozen=True)
class CommWords:
    """What one format says about its collectives, each a phrase to put in a sentence.

    Attributes
    ----------
    source : str
        Where the collectives are read from ("communication.json", "the trace's NCCL
        kernels").
    fill : str
        What would fill a Communication tab that has no collective: a noun phrase, the
        subject of "... would fill this tab".
    group : str
        A clause on each collective's group: what records it, or that the format does not.
    split : str
        A clause on the transit / wait / idle split of a collective's time, as ``group``.
    both : str
        One clause for the group and the split together (the format records both in one
        place, or neither).
    """

    source: str
    fill: str
    group: str
    split: str
    both: str

    def unrecorded(self, group: bool, split: bool) -> str:
        """The clause on what records the missing group (``group``) and split (``split``)
        of the collectives; empty when neither is missing."""
        if group and split:
            return self.both
        return self.group if group else self.split if split else ""


def _who(framework: str | None) -> str:
    """The Ascend profiler that writes a text or DB export of ``framework``."""
    return {"pytorch": "torch_npu", "mindspore": "MindSpore"}.get(
        str(framework or "").lower(), "torch_npu or MindSpore")


def _same(source: str, fill: str, records: str) -> CommWords:
    """Words of a format whose one file (``records``, the subject of "gives ...") holds
    both the group and the split of each collective."""
    return CommWords(source, fill, f"{records} gives each collective's group",
                     f"{records} gives each collective's transit / wait / idle split",
                     f"{records} gives each collective's group and {_SPLIT}")


def comm_library(fmt: str | None, device_type: str | None = None,
                 vendor: str | None = None) -> str:
    """The library a Kineto trace's collectives run in: ``"NCCL"`` on NVIDIA GPUs,
    ``"RCCL"`` on AMD GPUs, ``"gloo"`` for a CPU-only run; ``""`` for other formats."""
    if str(fmt or "") != "kineto":
        return ""
    if str(device_type or "").lower() == "cpu":
        return "gloo"
    return "RCCL" if str(vendor or "").lower() == "amd" else "NCCL"


def comm_words(fmt: str | None, framework: str | None = None, library: str = "",
               rank: int | None = None) -> CommWords:
    """The words on the collectives of a profile of format ``fmt``.

    Parameters
    ----------
    fmt : str or None
        ``meta.source_format`` (:data:`perfkit.io.detect.sources.FORMATS`,
        ``"cluster_analysis_output"``; ``"cluster"`` or None when the ranks' formats differ
        or are unknown: the words then name every kind).
    framework : str or None
        ``meta.framework`` (``"pytorch"`` or ``"mindspore"``): who wrote an Ascend export.
    library : str
        For a Kineto trace, :func:`comm_library` (NCCL, RCCL or gloo).
    rank : int, optional
        The profile's (first) rank, the example of a rank's own file where the words name
        one (legacy MindSpore's ``hccl_raw_1.csv`` for rank 1); ``N`` when not known.

    Returns
    -------
    CommWords
    """
    key = str(fmt or "")
    who = _who(framework)
    if key == "ascend_text":
        return _same("communication.json",
                     "the communication.json and communication_matrix.json that a "
                     f"{who} export writes in ASCEND_PROFILER_OUTPUT from profiler level "
                     "Level1 on",
                     f"the {who} export's communication.json, written from profiler level "
                     "Level1 on,")
    if key == "ascend_db":
        return _same("analysis.db (CommAnalyzerTime)",
                     f"the communication tables that a {who} DB export writes in analysis.db "
                     "(CommAnalyzerTime, CommAnalyzerBandwidth, CommAnalyzerMatrix) from "
                     "profiler level Level1 on",
                     "the CommAnalyzerTime table of analysis.db, written from profiler level "
                     "Level1 on,")
    if key == "trace_view":
        return _same("trace_view.json",
                     f"the communication.json that a {who} export writes beside "
                     "trace_view.json in ASCEND_PROFILER_OUTPUT from profiler level Level1 on "
                     "(open that folder rather than the trace_view.json alone)",
                     "the communication.json beside trace_view.json in "
                     "ASCEND_PROFILER_OUTPUT (open that folder rather than the file alone)")
    if key == "kineto":
        return _kineto(library or "NCCL")
    if key == "mindspore_legacy":
        r = "N" if rank is None else int(rank)
        never = ("legacy MindSpore output records neither a collective's group nor its "
                 f"transit and idle time, and only a rank's hccl_raw file (hccl_raw_{r}.csv "
                 f"for rank {r}), where there is one, gives its wait; a profile of MindSpore "
                 "2.3 or later with profile_communication=True writes all of them in its "
                 "ASCEND_PROFILER_OUTPUT's communication.json")
        return CommWords("the hccl_raw files or the timeline",
                         f"each rank's hccl_raw file (hccl_raw_{r}.csv for rank {r}), which the "
                         "profiler writes with profile_communication=True, or the "
                         "communication operators of its timeline (its timeline_display or "
                         "ascend_timeline_display file)", never, never, never)
    if key == "cann_raw":
        start = ("raw CANN output gives each collective's start and duration only; the "
                 "framework's analysed export (its ASCEND_PROFILER_OUTPUT's "
                 "communication.json) or msprof-analyze gives")
        return CommWords("the HCCL events of the exported timeline",
                         "the HCCL events (process “HCCL”) that msprof --export=on writes in "
                         "each device's timeline in the PROF_ folder",
                         f"{start} its group", f"{start} {_SPLIT}",
                         f"{start} its group and {_SPLIT}")
    if key == "cluster_analysis_output":
        return _same("cluster_communication.json",
                     "the cluster_communication.json that msprof-analyze cluster writes from "
                     "the ranks' exports at profiler level Level1",
                     "msprof-analyze's cluster_communication.json")
    return _same("the communication tables",
                 "a torch_npu or MindSpore export at profiler level Level1 with its "
                 "communication.json, or a Kineto trace of the distributed run with its "
                 "communication kernels",
                 "a torch_npu or MindSpore export's communication.json")


def _kineto(library: str) -> CommWords:
    """The words of a Kineto trace whose collectives run in ``library``."""
    split = ("a Kineto trace does not split a collective's time into transit, wait and "
             "idle")
    if library == "gloo":
        fill = ("a trace of every rank recorded with ProfilerActivity.CPU (the host "
                "collectives in it, such as gloo's, are the run's communication)")
        group = "a Kineto trace's host collectives carry no group"
        return CommWords("the trace's host collectives (gloo)", fill, group, split,
                         f"{group}, and {split}")
    fill = (f"a trace of every rank recorded with ProfilerActivity.CUDA (the {library} "
            "kernels in it are the run's collectives)")
    # the argument came with Kineto's pull request 906 (April 2024, PyTorch 2.4); older
    # traces have none, or a "Process Group ID"
    group = ("a Kineto trace names a collective's group only where the profiler records "
             f"it (PyTorch 2.4 or later), in the “Process Group Name” argument of its "
             f"{library} kernels or of the record_param_comms around their launch")
    return CommWords("the trace's communication kernels", fill, group, split,
                     f"{group}, and does not split a collective's time into transit, wait "
                     "and idle")


def comm_words_of(profile: Any) -> CommWords:
    """:func:`comm_words` for a profile or a cluster: its format, framework and rank (a
    cluster's first), and for a Kineto trace the library its collectives run in (a
    cluster's from its first rank)."""
    meta = getattr(profile, "meta", None)
    fmt = getattr(meta, "source_format", None)
    extra = getattr(meta, "extra", None) or {}
    vendor = extra.get("vendor")
    if vendor is None and getattr(profile, "ranks", None):
        first = getattr(next(iter(profile), None), "meta", None)
        vendor = (getattr(first, "extra", None) or {}).get("vendor")
    library = comm_library(fmt, getattr(meta, "device_type", None), vendor)
    ranks = getattr(profile, "ranks", None)
    rank = ranks[0] if ranks else getattr(meta, "rank", None)
    return comm_words(fmt, getattr(meta, "framework", None), library, rank)
