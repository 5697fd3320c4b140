"""Issue 68 ("Fast again"): the first answers read and import only what they need.

The speed targets are measured by ``benchmarks/summary.py``; these tests check, without a
clock, the behaviour that gives them, each in a fresh interpreter on this tree where it
matters (what a process has imported, which cache files it has read):

- a cached reopen of a Kineto pair reads ``steps.parquet`` for the step breakdown and
  not ``kernels.parquet`` (the Kineto reader's Preparing is already the device's wait,
  so there is nothing to clip), and the breakdown's Preparing is the 100 µs from each
  ``ProfilerStep#`` start to its first kernel, worked out here from the trace;
- ``pk.analysis.step_breakdown`` imports the step analysis, not every analysis, and a
  cached reopen imports no trace parser (Kineto, Ascend, the Chrome-trace decoder);
- ``perfkit info`` does not import the simulator (only its own subcommand is built) and
  works out the step breakdown once (the job, the steps and the advisor share it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Three steps per rank: ProfilerStep#N starts at t0, its two kernels at t0 + 100 and
#: t0 + 400 µs (200 µs each); the next step starts 1,000 µs later.
_T0 = 1000.0
_FIRST_KERNEL_AFTER_US = 100.0


def _write_pair(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for rank in (0, 1):
        events, corr = [], 0
        for i, step in enumerate((5, 6, 7)):
            t0 = _T0 + i * 1000
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                           "pid": 1, "tid": 1, "ts": t0, "dur": 900.0, "args": {}})
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,
                           "tid": 1, "ts": t0 + 10, "dur": 50.0,
                           "args": {"External id": i + 1}})
            for j in range(2):
                corr += 1
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                               "pid": 1, "tid": 1, "ts": t0 + 20 + 5 * j, "dur": 4.0,
                               "args": {"correlation": corr, "External id": i + 1}})
                events.append({"ph": "X", "cat": "kernel", "name": "ampere_sgemm",
                               "pid": 0, "tid": 7,
                               "ts": t0 + _FIRST_KERNEL_AFTER_US + 300 * j, "dur": 200.0,
                               "args": {"device": 0, "stream": 7, "correlation": corr,
                                        "External id": i + 1}})
        (folder / f"rank{rank}.json").write_text(json.dumps({
            "traceEvents": events,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}}))


def _fresh(code: str, cache: Path, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter on this tree; the JSON it prints last."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PERFKIT_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_REOPEN = """
import json, sys
import perfkit as pk
import perfkit.io.cache.store as cache
reads = []
read_frame = cache.read_frame
def counted(f, *a, **k):
    reads.append(f.name)
    return read_frame(f, *a, **k)
cache.read_frame = counted
p = pk.load(sys.argv[1], progress=False)
after_load = list(reads)
b = pk.analysis.step_breakdown(p)
after_breakdown = list(reads)
analyses = sorted(m for m in sys.modules if m.startswith("perfkit.analysis."))
parsers = sorted(m for m in ("perfkit.io.ascend.text", "perfkit.io.kineto.tables",
                             "perfkit.io.chrome.decode", "perfkit.io.cann.raw",
                             "perfkit.io.preview.steps", "msgspec",
                             "concurrent.futures.process") if m in sys.modules)
n_kernels = len(p.kernels)
print(json.dumps({"format": p.meta.source_format, "after_load": after_load,
                  "after_breakdown": after_breakdown, "after_kernels": list(reads),
                  "preparing": b["preparing_us"].tolist(), "analyses": analyses,
                  "parsers": parsers,
                  "kernels": n_kernels}))
"""


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_a_cached_reopen_reads_the_kernels_only_when_asked(tmp_path: Path) -> None:
    _write_pair(tmp_path / "pair")
    cache = tmp_path / "cache"
    first = _fresh(_REOPEN, cache, str(tmp_path / "pair"))  # parses, writes the cache
    again = _fresh(_REOPEN, cache, str(tmp_path / "pair"))  # reopens from the cache
    assert first["format"] == again["format"] == "kineto"
    assert again["after_load"] == []
    assert again["after_breakdown"] == ["steps.parquet", "steps.parquet"]  # one per rank
    assert again["after_kernels"].count("kernels.parquet") == 2  # read once asked for
    assert again["kernels"] == 2 * 3 * 2  # two ranks, three steps, two kernels each
    # each step's Preparing: its ProfilerStep# start to its first kernel, from the trace
    assert again["preparing"] == [_FIRST_KERNEL_AFTER_US] * 6
    assert first["preparing"] == again["preparing"]


def test_the_step_breakdown_imports_the_step_analysis_not_every_analysis(
        tmp_path: Path) -> None:
    _write_pair(tmp_path / "pair")
    out = _fresh(_REOPEN, tmp_path / "cache", str(tmp_path / "pair"))
    assert "perfkit.analysis.steps" in out["analyses"]
    for other in ("cluster", "efficiency", "operators", "communication", "memory",
                  "compare", "timeline", "recompute"):
        assert f"perfkit.analysis.{other}" not in out["analyses"], other


@pytest.mark.slow  # two fresh processes, one of them parsing: about 2 s on 2 cores
def test_a_cached_reopen_imports_no_trace_parser(tmp_path: Path) -> None:
    """The second open is served from the cache: neither the Kineto parser nor the Ascend
    reader (nor the Chrome-trace decoder under both) is imported for it, nor what only a
    parse needs (the JSON decoder, the raw CANN reader, the quick preview of ``wait=False``,
    the process pool of a parallel parse)."""
    _write_pair(tmp_path / "pair")
    first = _fresh(_REOPEN, tmp_path / "cache", str(tmp_path / "pair"))
    again = _fresh(_REOPEN, tmp_path / "cache", str(tmp_path / "pair"))
    assert "perfkit.io.kineto.tables" in first["parsers"]  # the first open parsed the trace
    assert again["after_load"] == [] and again["parsers"] == []


_INFO = """
import io, json, sys
import perfkit.analysis.steps as steps
from perfkit.cli.parser import main
calls = []
inner = steps._step_breakdown
def counted(profile, derive):
    calls.append(derive)
    return inner(profile, derive)
steps._step_breakdown = counted
out, sys.stdout = sys.stdout, io.StringIO()
rc = main(["info", sys.argv[1]])
text, sys.stdout = sys.stdout.getvalue(), out
print(json.dumps({"rc": rc, "calls": calls, "text": text,
                  "simulate": "perfkit.simulate" in sys.modules}))
"""


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_perfkit_info_works_out_the_steps_once_and_imports_no_simulator(
        tmp_path: Path) -> None:
    out = _fresh(_INFO, tmp_path / "cache", "sample:slow-rank")
    assert out["rc"] == 0
    assert "Top findings" in out["text"] and "Steps" in out["text"]
    assert out["calls"] == ["auto"]
    assert out["simulate"] is False


def test_the_other_commands_still_parse_after_info_builds_its_own(tmp_path: Path) -> None:
    from perfkit.cli.parser import build_parser

    whole = build_parser()
    assert whole.parse_args(["simulate", str(tmp_path), "--dp", "2"]).dp == 2
    alone = build_parser("info")
    assert alone.parse_args(["info", "sample:slow-rank"]).run.__module__ == \
        "perfkit.cli.commands.info"
