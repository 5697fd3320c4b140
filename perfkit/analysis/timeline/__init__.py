"""Timeline: the events of one step of one or a few ranks, as swimlanes a browser can draw.

Every profiler viewer (MindStudio Insight, TensorBoard's profiler, Perfetto, Nsight Systems)
starts from a timeline. :func:`timeline` picks one step (by default a representative one:
the median-duration step of the slowest rank), the ranks to show (by default the slowest
and the fastest), and returns one row per event, laid out in lanes:

- ``lanes="streams"``: one lane per device stream (tasks that have no stream, such as HCCL
  collectives in the Ascend text export, get a lane per core type), and for a profile
  without device tasks (a CPU-only PyTorch trace) one lane per host thread and nesting
  depth;
- ``lanes="categories"``: a *computing*, a *communication* and a *free* lane, the three
  parts of :func:`perfkit.analysis.step_breakdown` drawn in time (free is the time of the
  window when no task runs).

Events that overlap on a lane (concurrent send and receive, two compute streams in the
computing lane) are spread over numbered sub-lanes (``stream 2 · 2``), so no mark hides
another.

**The event cap.** A browser draws a few thousand SVG/canvas marks smoothly; a 16-rank
LLM step has tens of thousands of kernels. Above ``max_events`` rows, tiny events that
follow each other on a lane are merged into blocks (``"37 kernels"``) by
:func:`merge_tiny_events`: the smallest duration threshold that brings the frame under the
cap is searched; a block spans its first event's start to its last event's end, and its
``dur_us`` is the *sum* of its events' durations, so the time per lane is preserved
exactly and nothing is dropped. The default cap, :data:`DEFAULT_MAX_EVENTS`, comes from a
measurement in headless Chromium (``benchmarks/bench_timeline_render.py``; figures and
method in ``docs/timeline.md``).

:func:`timeline_window` and :func:`window_events` are the two halves :func:`timeline` is
built from; :func:`perfkit.export_trace` uses them to write the same window, uncapped, as
a Chrome trace for Perfetto.

One module a job: :mod:`~perfkit.analysis.timeline.window` (the step, the ranks and their
windows), :mod:`~perfkit.analysis.timeline.events` (the events in a window),
:mod:`~perfkit.analysis.timeline.lanes` (lanes and sub-lanes),
:mod:`~perfkit.analysis.timeline.labels` (short labels, which events get one),
:mod:`~perfkit.analysis.timeline.merge` (the event cap) and
:mod:`~perfkit.analysis.timeline.swimlanes` (:func:`timeline`, the frame).
"""

from __future__ import annotations

from ...io.canonical.categories import HOST_COMM_PATTERN
from .events import EVENT_COLUMNS, window_events
from .labels import short_label
from .lanes import pack_sublanes
from .merge import DEFAULT_MAX_EVENTS, merge_tiny_events
from .swimlanes import DEFAULT_HOST_DEPTH, DEFAULT_LABELS, LANE_MODES, TIMELINE_COLUMNS, timeline
from .window import TimelineError, TimelineWindow, has_timed_events, timeline_window

__all__ = ["timeline", "timeline_window", "window_events", "merge_tiny_events",
           "short_label", "pack_sublanes", "TimelineWindow", "TimelineError", "has_timed_events",
           "TIMELINE_COLUMNS", "EVENT_COLUMNS", "DEFAULT_MAX_EVENTS", "DEFAULT_LABELS",
           "DEFAULT_HOST_DEPTH", "HOST_COMM_PATTERN", "LANE_MODES"]
