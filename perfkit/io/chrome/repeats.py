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
from .columns import _NA_NS
from .events import ChromeTrace

__all__ = ["ID_COLUMNS", "drop_events_written_twice"]

#: The ids one complete event alone carries (a launch's correlation, an operator's
#: ``External id``).
ID_COLUMNS = ("correlation", "external_id")


def _exact_repeats(frame: pd.DataFrame, eligible: np.ndarray) -> np.ndarray:
    """Rows of ``frame`` (among ``eligible``) equal in every column to an earlier one."""
    ts = frame["ts_ns"].to_numpy()
    where = np.flatnonzero(eligible & (ts != _NA_NS))
    out = np.zeros(len(frame), dtype=bool)
    if len(where) < 2:
        return out
    starts = ts[where]
    order = np.argsort(starts, kind="stable")  # fast: a trace is nearly in time order
    same = np.flatnonzero(starts[order][1:] == starts[order][:-1])
    if not len(same):
        return out
    rows = where[np.unique(order[np.r_[same, same + 1]])]  # a start another row has too
    out[rows[frame.iloc[rows].duplicated(keep="first").to_numpy()]] = True
    return out


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
    x = trace.x
    ids = [c for c in ID_COLUMNS if c in x.columns]
    doubled = False
    if ids and len(x) > 1:
        has_id = np.logical_or.reduce([x[c].notna().to_numpy(bool) for c in ids])
        copies = _exact_repeats(x, has_id)
        if copies.any():
            trace.x = x.loc[~copies]
            n = int(copies.sum())
            doubled = True
            notes.append(f"{name}: {counted(n, 'complete event')} with an id "
                         f"(correlation or External id) {plural(n, 'repeats', 'repeat')} an "
                         "earlier one in every field, written twice: the copies dropped "
                         "before any table was built")
    ins = trace.instants
    if len(ins) > 1 and "ts_ns" in ins.columns:
        totals = ins["total_allocated"].notna().to_numpy(bool) \
            if "total_allocated" in ins.columns else np.zeros(len(ins), dtype=bool)
        copies = _exact_repeats(ins, totals)
        if copies.any():
            trace.instants = ins.loc[~copies]
            n = int(copies.sum())
            notes.append(f"{name}: {counted(n, 'memory sample')} "
                         f"{plural(n, 'repeats', 'repeat')} an earlier one in every field, "
                         "its running totals included, written twice: the copies dropped")
        kept = trace.instants
        sizes_only = ~kept["total_allocated"].notna().to_numpy(bool) \
            if "total_allocated" in kept.columns else np.ones(len(kept), dtype=bool)
        if "bytes" in kept.columns:
            sizes_only &= kept["bytes"].notna().to_numpy(bool)
        else:
            sizes_only[:] = False
        alike = _exact_repeats(kept, sizes_only)
        n = int(alike.sum())
        if n and doubled:  # the trace's events were written twice: these samples too
            trace.instants = kept.loc[~alike]
            notes.append(f"{name}: {counted(n, 'memory sample')} without running totals "
                         "(PyTorch <= 1.9: sizes only) "
                         f"{plural(n, 'repeats', 'repeat')} an earlier one at the same time, "
                         "as the trace's events with an id do: written twice, the copies "
                         "dropped")
        elif n:
            notes.append(f"{name}: {counted(n, 'memory sample')} without running totals "
                         "(PyTorch <= 1.9: sizes only) "
                         f"{plural(n, 'repeats', 'repeat')} an earlier one at the same time: "
                         "kept, since two allocations of one size in the same microsecond "
                         "look the same as a sample written twice")
    flows = trace.flows
    if len(flows) > 1 and "ts_ns" in flows.columns:
        copies = _exact_repeats(flows, np.ones(len(flows), dtype=bool))
        if copies.any():
            trace.flows = flows.loc[~copies]
            n = int(copies.sum())
            notes.append(f"{name}: {counted(n, 'flow event')} (launch arrows) "
                         f"{plural(n, 'repeats', 'repeat')} an earlier one in every field: "
                         "the copies dropped")
    return notes
