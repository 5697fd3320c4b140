"""A lazy (Dask) cluster notes the device tasks of no step as the eager cluster does.

TraceLens' Qwen trace (``wild/tl_qwen_h100``, one ``ProfilerStep#6``) holds device tasks
launched before the trace began: no runtime call with their correlation id is in the
file, so they belong to no step and the figures per step leave them out, with a note.
Two clusters are built in a temporary folder (nothing is written into the project): the
Qwen trace linked as ranks 0 and 1; and the Qwen trace as rank 0 beside, as rank 1, a copy
of it without those tasks (so that one rank has some and the other none). Each is loaded
eagerly and with ``engine="dask"``; the notes must be the same, count every rank's tasks
and name the ranks that have them. The expected counts are read here from each rank's
gzip JSON (``gzip`` / ``json`` only): a device task is of no step when no runtime call
with its correlation id starts inside a ``ProfilerStep#N`` span.
"""

from __future__ import annotations

import gzip
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from shared_samples import shared_sample

import perfkit as pk
from perfkit import analysis as A
from perfkit.advisor import advise
from perfkit.analysis import _frames as F

# the whole dashboard, every tab x profile, or Dask against pandas: the slow group (README)
pytestmark = [pytest.mark.slow, pytest.mark.shared_samples]

DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME = {"cuda_runtime", "cuda_driver"}
STEP = re.compile(r"ProfilerStep#\d+")
NOTE = re.compile(r"^(\d+) device tasks? of no step( on ranks? ([\d–, ]+))? \(launched "
                  r"before the trace began or outside every step\) left out of the figures "
                  r"per step$")
#: The analyses whose figures per step leave the tasks of no step out, with a note.
ANALYSES = {
    "top_operators": lambda p: A.top_operators(p, n=None),
    "operator_efficiency": A.operator_efficiency,
    "unfused_patterns": A.unfused_patterns,
    "unfused_patterns_detail": lambda p: A.unfused_patterns(p, detail=True),
    "tiny_kernels": A.tiny_kernels,
    "elementwise_chains": A.elementwise_chains,
}


def _trace(folder: str) -> Path:
    (path,) = shared_sample(folder).glob("*.json.gz")
    return path


def _read(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _of_no_step(events: list[dict[str, Any]]) -> list[bool]:
    """For each event: whether it is a device task whose runtime call is in no
    ProfilerStep span."""
    xs = [e for e in events if e.get("ph") == "X"]
    spans = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in xs
             if e.get("cat") == "user_annotation" and STEP.fullmatch(str(e.get("name")))]
    launch = {e["args"]["correlation"]: float(e["ts"]) for e in xs
              if e.get("cat") in RUNTIME and "correlation" in e.get("args", {})}
    out = []
    for e in events:
        ts = launch.get(e.get("args", {}).get("correlation"))
        out.append(e.get("ph") == "X" and e.get("cat") in DEVICE
                   and (ts is None or not any(lo <= ts < hi for lo, hi in spans)))
    return out


@cache
def _no_step_tasks(path: Path) -> int:
    """How many device tasks of ``path`` belong to no step, read raw."""
    return sum(_of_no_step(_read(path)["traceEvents"]))


def _without_no_step(src: Path, dst: Path) -> Path:
    """A copy of the trace ``src`` at ``dst`` without its device tasks of no step."""
    trace = _read(src)
    drop = _of_no_step(trace["traceEvents"])
    trace["traceEvents"] = [e for e, d in zip(trace["traceEvents"], drop, strict=True)
                            if not d]
    with gzip.open(dst, "wt", encoding="utf-8") as fh:
        json.dump(trace, fh)
    return dst


@pytest.fixture(scope="module")
def clusters(dask_client: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """(rank files, eager cluster, lazy cluster) of each job, by name."""
    qwen = _trace("wild/tl_qwen_h100")
    stepped = _without_no_step(qwen, tmp_path_factory.mktemp("copy") / "qwen.json.gz")
    jobs = {"qwen-twice": (qwen, qwen), "qwen-and-stepped": (qwen, stepped)}
    out = {}
    for name, files in jobs.items():
        folder = tmp_path_factory.mktemp(name)
        for rank, f in enumerate(files):  # links to the files, in the test's folder
            (folder / f"trace_rank{rank}.json.gz").symlink_to(f)
        out[name] = (files, pk.load(folder, cache=False, progress=False),
                     pk.load(folder, engine="dask", client=dask_client, progress=False))
    return out


def _no_step_notes(frame: Any) -> list[str]:
    return [n for n in frame.attrs.get("notes", []) if "of no step" in n]


@pytest.mark.parametrize("job", ["qwen-twice", "qwen-and-stepped"])
@pytest.mark.parametrize("analysis", list(ANALYSES))
def test_the_lazy_cluster_notes_the_tasks_of_no_step_as_the_eager_one(
        clusters: dict[str, Any], job: str, analysis: str) -> None:
    files, eager, lazy = clusters[job]
    assert F.is_lazy(lazy.kernels) and not F.is_lazy(eager.kernels)
    per_rank = [_no_step_tasks(f) for f in files]
    assert per_rank[0] > 0  # the Qwen trace has tasks launched before the trace began
    assert per_rank[1] == (per_rank[0] if job == "qwen-twice" else 0)
    func = ANALYSES[analysis]
    (eager_note,) = _no_step_notes(func(eager))
    assert _no_step_notes(func(lazy)) == [eager_note]
    m = NOTE.match(eager_note)
    assert m, eager_note
    assert int(m.group(1)) == sum(per_rank)  # every rank's tasks, not one rank's
    named = [r for r, n in enumerate(per_rank) if n]
    assert m.group(3) == ("0–1" if named == [0, 1] else "0")
    assert m.group(2).startswith(" on ranks " if len(named) > 1 else " on rank ")


@pytest.mark.parametrize("job", ["qwen-twice", "qwen-and-stepped"])
def test_the_lazy_findings_say_what_the_eager_ones_say(clusters: dict[str, Any],
                                                       job: str) -> None:
    """The operator findings carry the note in their evidence, lazily as eagerly."""
    files, eager, lazy = clusters[job]
    want = sum(_no_step_tasks(f) for f in files)
    said = {f.rule: f.evidence for f in advise(eager)}
    lazily = {f.rule: f.evidence for f in advise(lazy)}
    noted = sorted(r for r, e in said.items() if f"{want} device tasks of no step" in e)
    assert "redundant_copies" in noted
    for rule in noted:
        assert lazily[rule] == said[rule]


@cache
def _device_tasks(path: Path) -> int:
    """How many device tasks ``path`` holds, read raw."""
    return sum(e.get("ph") == "X" and e.get("cat") in DEVICE
               for e in _read(path)["traceEvents"])


@pytest.mark.parametrize("job", ["qwen-twice", "qwen-and-stepped"])
def test_the_lazy_comparison_counts_the_steps_own_tasks(clusters: dict[str, Any],
                                                        job: str) -> None:
    """compare_profiles per step: the tasks of the steps over the (rank, step) pairs, one
    step on each rank here. The lazy cluster counted every task, those of no step too,
    over pairs that took the tasks of no step for a step of their own: for the Qwen trace
    twice, 853.5 tasks per step (3,414 over 4 pairs) rather than 1,198."""
    files, eager, lazy = clusters[job]
    in_steps = sum(_device_tasks(f) - _no_step_tasks(f) for f in files)
    for side in (eager, lazy):
        diff = A.compare_profiles(side, side)
        assert diff["base_count"].sum() == pytest.approx(in_steps / len(files)), side
        assert diff["delta_us"].abs().max() == 0.0
    pd.testing.assert_frame_equal(A.compare_profiles(lazy, lazy),
                                  A.compare_profiles(eager, eager), rtol=1e-12)
