"""Events of a Chrome trace written twice, dropped before any table is built from them.

A trace whose events were all written twice (a tool that appended its buffer again, two
copies of one trace pasted into one file) doubles every figure perfkit derives: the
collectives and their time, each operator's device time, the memory peak. The tables
also check their own rows (:mod:`perfkit.io.canonical.repeated_rows`), but by then the
tables built from the copies (communication, launches, memory) are already counted
twice, so the copies are dropped here, from the decoded events, where they can be told
from real events:

* **complete events** (``ph: X``) that carry an id (Kineto's ``correlation`` or
  ``External id``, unique to one launch or one operator): one equal to an earlier one in
  every field read, its id included, is that event again;
* **instants** that carry the allocator's running totals (``Total Allocated``): two
  allocations at the same nanosecond with the same size and the same totals after them
  are one sample recorded twice. PyTorch <= 1.9 writes sizes only, where two equal
  allocations within one microsecond look alike: those are dropped only where the
  trace's events with an id were written twice too, and kept with a note otherwise (the
  1.9 sample of ``../shared/samples/wild`` has none among its 12,838 samples);
* **flow events** (launch arrows): equal in every field, one arrow.

Complete events without an id (Ascend's ``trace_view.json`` host operators, MindInsight's
timeline) are left to the tables' own check: nested operators of one name can share a
start there.

The check costs a sort of one integer column per kind (a trace is nearly in time order:
about 35 ms for 1.6 million events): only the rows whose timestamp repeats are compared
in full.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...format import counted, plural
from ..canonical.repeated_rows import exact_repeats
from .columns import _NA_NS
from .events import ChromeTrace

__all__ = ["ID_COLUMNS", "drop_events_written_twice"]

#: The ids one complete event alone carries (a launch's correlation, an operator's
#: ``External id``).
ID_COLUMNS = ("correlation", "external_id")


def _exact_repeats(frame: pd.DataFrame, eligible: np.ndarray) -> np.ndarray:
    """Rows of ``frame`` (among ``eligible``) equal in every column to an earlier one."""
    ts = frame["ts_ns"].to_numpy()  # int64 ns, exact; the missing sentinel not eligible
    return exact_repeats(frame, list(frame.columns), ts, eligible & (ts != _NA_NS),
                         as_text=False)


def _dropped(frame: pd.DataFrame, eligible: np.ndarray) -> tuple[pd.DataFrame, int]:
    """``frame`` without its exact repeats among ``eligible`` rows, and how many."""
    copies = _exact_repeats(frame, eligible)
    n = int(copies.sum())
    return (frame.loc[~copies] if n else frame), n


def _has(frame: pd.DataFrame, column: str) -> np.ndarray:
    """Where ``frame`` has a value in ``column`` (nowhere when it lacks the column)."""
    return frame[column].notna().to_numpy(bool) if column in frame.columns \
        else np.zeros(len(frame), dtype=bool)


def drop_events_written_twice(trace: ChromeTrace, name: str) -> list[str]:
    """Drop from ``trace`` (in place) the events written twice; one note per kind dropped.

    Parameters
    ----------
    trace : ChromeTrace
        The decoded trace (:func:`perfkit.io.chrome.decode.read_chrome_trace`).
    name : str
        The file's name, which leads each note.

    Returns
    -------
    list of str
        The notes: how many events of each kind were copies, and the 1.9-style memory
        samples that repeat but could not be told from real ones.
    """
    notes: list[str] = []

    def say(n: int, what: str, rest: str) -> None:
        verb = plural(n, "repeats", "repeat")
        notes.append(f"{name}: {counted(n, what)} {rest.format(repeat=verb)}")

    x = trace.x
    with_id = np.logical_or.reduce([_has(x, c) for c in ID_COLUMNS])
    trace.x, doubled = _dropped(x, with_id)
    if doubled:
        say(doubled, "complete event", "with an id (correlation or External id) {repeat} an "
            "earlier one in every field, written twice: the copies dropped before any table "
            "was built")
    if "ts_ns" in trace.instants.columns:
        trace.instants, n = _dropped(trace.instants, _has(trace.instants, "total_allocated"))
        if n:
            say(n, "memory sample", "{repeat} an earlier one in every field, its running "
                "totals included, written twice: the copies dropped")
        ins = trace.instants
        alike = _exact_repeats(ins, ~_has(ins, "total_allocated") & _has(ins, "bytes"))
        n = int(alike.sum())
        if n and doubled:  # the trace's events were written twice: these samples too
            trace.instants = ins.loc[~alike]
            say(n, "memory sample", "without running totals (PyTorch <= 1.9: sizes only) "
                "{repeat} an earlier one at the same time, as the trace's events with an id "
                "do: written twice, the copies dropped")
        elif n:
            say(n, "memory sample", "without running totals (PyTorch <= 1.9: sizes only) "
                "{repeat} an earlier one at the same time: kept, since two allocations of "
                "one size in the same microsecond look the same as a sample written twice")
    if "ts_ns" in trace.flows.columns:
        trace.flows, n = _dropped(trace.flows, np.ones(len(trace.flows), dtype=bool))
        if n:
            say(n, "flow event", "(launch arrows) {repeat} an earlier one in every field: "
                "the copies dropped")
    return notes
