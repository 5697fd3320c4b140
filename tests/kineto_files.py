"""Tiny Kineto traces written by the tests that need a folder of runs (one step, one
operator), shared so that the run splitting and the run picker test the same files."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["write_trace"]


def write_trace(path: Path, rank: int, world: int, t0: float) -> None:
    """A one-step trace of ``rank`` in a job of ``world`` ranks, starting at ``t0`` (µs
    since the epoch), written to ``path``."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
               "ts": t0, "dur": 100.0, "args": {"External id": 1}},
              {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1,
               "tid": 1, "ts": t0, "dur": 200.0, "args": {}}]
    path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {
        "backend": "nccl", "rank": rank, "world_size": world}}))
