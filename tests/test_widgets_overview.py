"""Notebook helpers of perfkit.widgets.overview: bundled paths, measured step, sliders."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

import pandas as pd
import pytest

import perfkit as pk
from perfkit.errors import InvalidArgumentError
from perfkit.widgets import (
    bundled_profile,
    bundled_profiles,
    linearity_explorer,
    measured_step_s,
    metrics_summary,
    profile_facts,
    step_time_explorer,
)

__all__: list[str] = []

MODEL = pk.ModelSpec.preset("llama2-13b", num_layers=8)
HARDWARE = pk.Hardware.preset("ascend-910b")
PARALLEL = pk.ParallelConfig(dp=8, pp=2, num_micro_batches=8, optimizer_shard=8,
                             recompute="selective", recompute_layers=[1, 0])


def test_bundled_profiles_resolve_to_folders() -> None:
    names = bundled_profiles()
    assert "simulated/llama2-13b-baseline-dp16" in names
    assert "mindspore-cpu-tiny-llama" in names and "simulated" not in names
    for name in names:
        assert bundled_profile(name).is_dir()
    with pytest.raises(InvalidArgumentError, match="slow-rank"):
        bundled_profile("no-such-profile")


def test_measured_step_is_the_slowest_rank_median_over_steps() -> None:
    frame = pd.DataFrame({"rank": [0, 1, 0, 1, 0, 1], "step": [1, 1, 2, 2, 3, 3],
                          "step_us": [1.0e6, 1.2e6, 2.0e6, 1.5e6, 1.1e6, 0.9e6]})
    # per step the slowest: 1.2, 2.0, 1.1 s -> median 1.2 s
    assert measured_step_s(frame) == pytest.approx(1.2)
    assert math.isnan(measured_step_s(frame.assign(step_us=float("nan"))))
    with pytest.raises(InvalidArgumentError, match="step_us"):
        measured_step_s(frame.drop(columns="step_us"))


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_a_mindspore_cpu_run_is_not_called_an_ascend_export() -> None:
    """MindSpore writes a CPU run in the Ascend text layout (a ``*_ascend_ms`` folder), but
    what it recorded are host operators (``FRAMEWORK/cpu_op_execute_timestamp_*.txt``,
    ``cpu_framework_*.txt``) and no device task file (no ``kernel_details.csv``): the facts
    and the dashboard's status say so, not "an Ascend text export"."""
    from perfkit.widgets import dashboard

    folder = bundled_profile("mindspore-cpu-tiny-llama")
    (run,) = folder.glob("*_ascend_ms")
    assert any(run.rglob("cpu_op_execute_timestamp_*.txt"))
    assert any(run.rglob("cpu_framework_*.txt"))
    assert not any(run.rglob("kernel_details.csv"))
    facts = profile_facts(pk.load(folder)).set_index("fact")["value"]
    assert facts["format"] == "a MindSpore text export of a CPU run (ascend_text)"
    board = dashboard("mindspore-cpu-tiny-llama")
    assert ": a MindSpore text export of a CPU run, 1 rank." in board.status.value


def test_profile_facts_and_measured_step_on_a_bundled_profile() -> None:
    prof = pk.load(bundled_profile("simulated/slow-rank"))
    facts = profile_facts(prof).set_index("fact")["value"]
    # the format in words, then the loader's code for it (as ``perfkit info`` says it)
    assert facts["format"] == "an Ascend text export (ascend_text)"
    assert facts["ranks"] == "4 (0-3)"
    # the raw step_trace_time.csv of each rank, read here: a step's wall is Computing +
    # Communication(Not Overlapped) + Free (the device span) + Preparing (the wait before it)
    walls: dict[int, list[float]] = {}
    spans: dict[int, list[float]] = {}
    for f in sorted(Path(prof.meta.path).glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                                              "step_trace_time.csv")):
        for row in csv.DictReader(f.open(encoding="utf-8")):
            span = sum(float(row[c]) for c in ("Computing", "Communication(Not Overlapped)",
                                               "Free"))
            spans.setdefault(int(row["Step"]), []).append(span)
            walls.setdefault(int(row["Step"]), []).append(span + float(row["Preparing"]))
    assert len(walls) > 1 and all(len(v) == 4 for v in walls.values())
    steps = pk.analysis.step_breakdown(prof)
    assert measured_step_s(steps) == pytest.approx(
        statistics.median(max(v) for v in walls.values()) / 1e6, rel=1e-9)
    assert measured_step_s(steps, preparing=False) == pytest.approx(
        statistics.median(max(v) for v in spans.values()) / 1e6, rel=1e-9)


def test_step_time_explorer_follows_the_slider() -> None:
    panel = step_time_explorer(MODEL, HARDWARE, PARALLEL, 1.5)
    first = panel.summary.set_index("key")["value"]
    assert "tokens_per_s_per_device" in first and "mfu" in first
    expected = metrics_summary(MODEL, HARDWARE, PARALLEL, 1.5).set_index("key")["value"]
    assert first["mfu"] == pytest.approx(expected["mfu"])
    panel.slider.value = 0.75
    second = panel.summary.set_index("key")["value"]
    assert second["tokens_per_s_per_device"] == pytest.approx(
        2 * first["tokens_per_s_per_device"])
    assert "tokens/s per device" in panel.table.value


def test_step_time_explorer_shows_an_invalid_configuration() -> None:
    bad = pk.ParallelConfig(dp=1, tp=3)  # 3 does not divide 40 heads
    panel = step_time_explorer(MODEL, HARDWARE, bad, 1.0)
    assert panel.summary is None and "not valid" in panel.message.value
    with pytest.raises(InvalidArgumentError):
        step_time_explorer("llama2-13b", HARDWARE, PARALLEL, 1.0)  # type: ignore[arg-type]


def test_linearity_explorer_uses_the_calculator() -> None:
    panel = linearity_explorer(1000.0, 16)
    assert panel.value == pytest.approx(1.0)
    panel.base_throughput.value = 1250.0
    assert panel.value == pytest.approx(pk.linearity(1000.0, 1250.0, 16, 8,
                                                     throughput="per_device"))
    assert "80.0 %" in panel.result.value


def test_bundled_ir_resolves_real_dumps() -> None:
    from perfkit.widgets import bundled_ir

    path = bundled_ir("silu_mul.ir")
    assert path.is_file() and path.parent.name == "ir"
    assert pk.load_ir(bundled_ir("control.ir.gz")) is not None


def test_bundled_ir_missing_names_the_dumps() -> None:
    from perfkit.widgets import bundled_ir

    with pytest.raises(InvalidArgumentError, match="silu_mul.ir"):
        bundled_ir("no_such_dump.ir")
    with pytest.raises(InvalidArgumentError):
        bundled_ir("../ir/silu_mul.ir")  # a name, not a path


@pytest.mark.shared_samples
@pytest.mark.parametrize(("name", "trace"), [("ds_train", "train.json"),
                                             ("k_resnet50_nw0", None)])
def test_the_facts_give_the_number_of_ranks_before_which_ranks(name: str,
                                                                trace: str | None) -> None:
    # a one-rank folder read "ranks 0", as if it had none, while the banner said "1 rank"
    import gzip
    import json
    import re

    from shared_samples import sample

    from perfkit.cli.profile_text import profile_info_text

    path = sample(f"wild/{name}")
    files = sorted(path.iterdir())
    assert len(files) == 1
    if trace:  # the rank the trace records
        rank = json.loads(files[0].read_text(encoding="utf-8"))["distributedInfo"]["rank"]
    else:  # no distributedInfo: the rank its name says (worker0.<timestamp>.pt.trace...)
        with gzip.open(files[0], "rt", encoding="utf-8") as fh:
            assert "distributedInfo" not in json.load(fh)
        rank = int(re.match(r"worker(\d+)\.", files[0].name).group(1))
    prof = pk.load(path, progress=False)
    value = profile_facts(prof).set_index("fact")["value"]["ranks"]
    assert value == f"1 ({rank})"
    # the same words as perfkit info's "ranks" line
    line = next(x for x in profile_info_text(prof, n_findings=0).splitlines()
                if x.strip().startswith("ranks"))
    assert line.split(None, 1)[1] == value


@pytest.mark.shared_samples
def test_the_legacy_timeline_note_is_plain_words() -> None:
    # mi_run1's note ended "no absolute epoch in legacy files, origin_ns is None": a
    # variable's name and a raw None in the Overview's "What was opened"; the next one named
    # "hccl_raw_{rank}.csv", a placeholder, not the file of this rank
    import json

    from shared_samples import sample

    path = sample("wild/mi_run1")
    (timeline,) = (path / "profiler").glob("timeline_display_*.json")
    events = json.loads(timeline.read_text(encoding="utf-8"))
    starts = [float(e["ts"]) for e in events if e.get("ph") == "X"]
    assert min(starts) < 1e9  # µs from the timeline's start, not from the epoch (~1.7e15)
    notes = [v for f, v in profile_facts(pk.load(path, progress=False)).itertuples(index=False)
             if f == "note" and timeline.name in v]
    rank = int(timeline.stem.rsplit("_", 1)[1])
    assert notes == [f"kernels: from {timeline.name}, with times counted from the start of "
                     "that timeline (legacy MindSpore files record no date or clock time)",
                     "comm_ops: the step trace's all-reduce phases (pid 10000, "
                     "stream_{id}_parallel_{n}: from an all-reduce's start mark to its end "
                     "mark on a stream, waits included; one per stream and step) of "
                     f"{timeline.name} (start and elapse only; hccl_raw_{rank}.csv, when "
                     "present, adds the wait)"]
