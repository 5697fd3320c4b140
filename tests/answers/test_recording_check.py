"""``perfkit check``: per analysis, what the recording lacks and the exact switch that
records it. The Kineto traces are the bundled real CPU trace (data/kineto-tiny-llama,
rank 0) with one field removed, as a recording without that switch writes it; the Ascend
ones are real torch_npu exports whose own ``profiler_info_*.json`` says how they were
recorded (read here independently of perfkit)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from answer_schema import no_nan, validate
from shared_samples import PT_GPT3_OLD, PT_LEVEL1, sample

from perfkit import cli

TRACE = Path(__file__).resolve().parents[2] / "data" / "kineto-tiny-llama" / \
    "rank0.pt.trace.json.gz"
SHAPES = "torch.profiler.profile(record_shapes=True)"
MEMORY = "torch.profiler.profile(profile_memory=True)"
STEPS = ("torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, "
         "active=3), ...) and prof.step() at the end of every iteration")
SHAPE_ARGS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")


def _trace(tmp_path: Path, name: str, drop: str | None) -> Path:
    """The bundled trace, written to ``tmp_path/name`` without what ``drop`` names:
    ``shapes`` (the cpu_ops' shape arguments and the top-level ``record_shapes``),
    ``steps`` (the ``ProfilerStep#N`` annotations) or ``memory`` (the ``[memory]``
    events and ``profile_memory``)."""
    trace = json.loads(gzip.open(TRACE, "rt").read())
    events = []
    for e in trace["traceEvents"]:
        if drop == "steps" and str(e.get("name", "")).startswith("ProfilerStep#"):
            continue
        if drop == "memory" and e.get("name") == "[memory]":
            continue
        if drop == "shapes" and e.get("cat") == "cpu_op":
            e = dict(e, args={k: v for k, v in e.get("args", {}).items()
                              if k not in SHAPE_ARGS})
        events.append(e)
    if drop == "shapes":
        trace["record_shapes"] = 0
    if drop == "memory":
        trace["profile_memory"] = 0
    trace["traceEvents"] = events
    folder = tmp_path / name
    folder.mkdir()
    (folder / "rank0.pt.trace.json").write_text(json.dumps(trace))
    return folder


def _check(path: Path | str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert cli.main(["check", str(path), "--json"]) == 0, capsys.readouterr().err
    answer = no_nan(capsys.readouterr().out)
    validate(answer, "check")
    return answer


def _by_switch(answer: dict[str, Any]) -> dict[str, str]:
    return {i["switch"]: i["status"] for i in answer["items"]}


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize(("drop", "switch"), [("shapes", SHAPES), ("steps", STEPS),
                                              ("memory", MEMORY)])
def test_kineto_without_a_switch_names_it(tmp_path: Path, drop: str, switch: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    full = _by_switch(_check(_trace(tmp_path, "full", None), capsys))
    assert full[SHAPES] == full[STEPS] == full[MEMORY] == "recorded"
    answer = _check(_trace(tmp_path, f"no-{drop}", drop), capsys)
    assert answer["profiler"] == "torch.profiler"
    status = _by_switch(answer)
    assert status[switch] == "missing"
    # only that one: the other two are still recorded
    assert [s for s in (SHAPES, STEPS, MEMORY) if status[s] == "missing"] == [switch]
    assert answer["missing"] == sum(v == "missing" for v in status.values())
    # and perfkit info lists it in its section on the recording
    assert cli.main(["info", str(tmp_path / f"no-{drop}"), "--findings", "0"]) == 0
    text = capsys.readouterr().out
    section = text.split("What the recording lacks", 1)[1]
    assert switch.split(" and prof.step()")[0].split("(", 1)[1][:20] in section
    assert "missing, no " in section and "no no " not in section  # once "no no step marks"


def _recorded_as(folder: Path) -> dict[str, Any]:
    """The profiler settings a torch_npu export wrote in its profiler_info_*.json."""
    info = json.loads(next(folder.rglob("profiler_info*.json")).read_text())
    common, experimental = info["config"]["common_config"], info["config"][
        "experimental_config"]
    return {"memory": common["profile_memory"], "level": experimental["_profiler_level"],
            "aic": experimental["_aic_metrics"]}


@pytest.mark.shared_samples
def test_torch_npu_level1_pipe_utilization() -> None:
    folder = sample(PT_LEVEL1)
    rec = _recorded_as(folder)
    assert (rec["level"], rec["aic"], rec["memory"]) == (
        "Level1", "ACL_AICORE_PIPE_UTILIZATION", True)
    import perfkit as pk
    from perfkit.analysis.recording_check import recording_check

    table = recording_check(pk.load(folder))
    assert table["profiler"].unique().tolist() == ["torch_npu"]
    for switch in ("aic_metrics", "profiler_level=", "profile_memory=True"):
        rows = table[table["switch"].str.contains(switch, regex=False)]
        assert len(rows) and set(rows["status"]) == {"recorded"}, (switch, rows.to_dict("records"))


@pytest.mark.shared_samples
def test_torch_npu_without_pipe_utilization_names_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    folder = sample(PT_GPT3_OLD)
    assert _recorded_as(folder)["aic"] == "ACL_AICORE_L0B_AND_WIDTH"  # not PipeUtilization
    answer = _check(folder, capsys)
    pmu = [i for i in answer["items"] if "aic_metrics" in i["switch"]]
    assert len(pmu) == 1 and pmu[0]["status"] == "missing"
    assert "AiCMetrics.PipeUtilization" in pmu[0]["switch"]


def test_check_s_header_does_not_point_at_itself(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", "sample:kineto-tiny-llama"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head == "What the recording lacks (torch.profiler):"
    # perfkit info's section still names the command that lists every item
    assert cli.main(["info", "sample:kineto-tiny-llama", "--findings", "0"]) == 0
    assert "(perfkit check PATH lists every item)" in capsys.readouterr().out


@pytest.mark.shared_samples
def test_a_lone_kernel_table_with_hccl_tasks_lacks_the_communication_tables(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``wild/msa_kernel_details`` is one kernel_details.csv of a torch_npu job: its HCCL
    tasks (``hcom_*``, counted here from the raw CSV) say the job spans devices, though
    no world size or rank does; the communication tables are then missing, not
    "recorded" with 0 operators (the helper's walk of session 32 found that)."""
    import csv

    path = sample("wild/msa_kernel_details/kernel_details.csv")
    with path.open(newline="", encoding="utf-8") as fh:
        hccl = sum(1 for row in csv.DictReader(fh) if row["Name"].startswith("hcom_"))
    assert hccl == 19
    answer = _check(path, capsys)
    comm = [i for i in answer["items"] if i["analysis"].startswith("communication")]
    assert len(comm) == 1 and comm[0]["status"] == "missing", comm
    assert f"{hccl} communication kernels ran on the device" in comm[0]["evidence"]
    assert "ProfilerLevel.Level1" in comm[0]["switch"]


@pytest.mark.shared_samples
def test_the_db_export_with_pipe_utilization_is_recorded(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The DB export recorded PipeUtilization (its profiler_info) into TASK_PMU_INFO; the
    check asked for the switch again because the loader did not read that table."""
    from shared_samples import PT_DB_LEVEL1

    folder = sample(PT_DB_LEVEL1)
    assert _recorded_as(folder)["aic"] == "ACL_AICORE_PIPE_UTILIZATION"
    pmu = [i for i in _check(folder, capsys)["items"] if "aic_metrics" in i["switch"]]
    assert len(pmu) == 1 and pmu[0]["status"] == "recorded", pmu


@pytest.mark.shared_samples
def test_counters_of_another_aic_metrics_set_are_not_taken_for_the_pipe_ratios(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A kernel_details.csv of ArithmeticUtilization has ``*_ratio`` columns (read from its
    header here), none of them the pipe ratios the bound analysis reads: the check called
    it recorded while operator_bound returned nothing."""
    import csv

    folder = sample("wild/msa_kernel_details")
    (table,) = folder.rglob("kernel_details*.csv")
    with table.open(encoding="utf-8") as f:
        header = next(csv.reader(f))
    ratios = [h for h in header if h.endswith("_ratio")]
    assert "aic_mac_fp16_ratio" in ratios and "aic_mac_ratio" not in ratios
    pmu = [i for i in _check(folder, capsys)["items"] if "aic_metrics" in i["switch"]]
    assert len(pmu) == 1 and pmu[0]["status"] == "missing", pmu
    assert "aic_mac_fp16_ratio" in pmu[0]["evidence"]


@pytest.mark.shared_samples
def test_device_tasks_are_counted_apart_from_memory_copies() -> None:
    """The check called every device task a kernel: on the ResNet-50 trace, 9,096 "device
    kernels" were kernels, memsets and memcpys (counted here in the raw trace)."""
    from raw_kineto import raw_events
    from shared_samples import KINETO_TRACES

    import perfkit as pk
    from perfkit.analysis.recording_check import recording_check

    trace = sample(KINETO_TRACES["k_resnet50_nw0"])
    # this old trace's categories: Kernel, Memset, Memcpy (newer ones: kernel, gpu_mem*)
    cats = [str(e.get("cat")).lower() for e in raw_events(trace) if e.get("ph") == "X"]
    kernels = cats.count("kernel")
    copies = cats.count("memcpy") + cats.count("memset")
    assert kernels and copies
    table = recording_check(pk.load(trace.parent, progress=False))
    (said,) = table.loc[table["analysis"].str.startswith("device kernels"), "evidence"]
    assert said == (f"{kernels + copies:,} device tasks: {kernels:,} kernels, {copies:,} "
                    "memory copies and sets")


@pytest.mark.shared_samples
def test_with_stack_is_recorded_where_the_trace_holds_python_stacks() -> None:
    """The check said "not checked" for ``with_stack`` on traces that hold the Python
    stack (TraceLens's Qwen trace: its ``python_function`` events, counted here in the
    raw trace); a trace without them (the bundled one) stays not checked, since no
    analysis needs the stacks."""
    from raw_kineto import raw_events
    from shared_samples import KINETO_TRACES

    import perfkit as pk
    from perfkit.analysis.recording_check import recording_check

    def stack_row(path: Path) -> Any:
        table = recording_check(pk.load(path, progress=False))
        return table.loc[table["analysis"].str.startswith("source lines")].iloc[0]

    trace = sample(KINETO_TRACES["tl_qwen_h100"])
    n = sum(e.get("ph") == "X" and e.get("cat") == "python_function"
            for e in raw_events(trace))
    assert n > 1000
    row = stack_row(trace)
    assert (row["status"], row["evidence"]) == (
        "recorded", f"{n:,} python_function events (the Python stack, for a trace viewer)")
    row = stack_row(TRACE)
    assert row["status"] == "not checked"
    assert row["evidence"].startswith("no python_function events")


@pytest.mark.shared_samples
@pytest.mark.parametrize(("name", "fmt"), [("mi_run1", "mindspore_legacy"),
                                           ("mi_prof", "cann_raw")])
def test_switches_whose_output_the_format_does_not_hold_are_not_asked_for(
        name: str, fmt: str) -> None:
    """A walk: ``check`` asked legacy MindInsight and raw CANN output for
    ``profile_memory=True`` (and the PMU switch), whose records perfkit never reads from
    those formats — the loaders' own notes say so. Those rows are "not checked", with
    why."""
    import perfkit as pk
    from perfkit.analysis.recording_check import UNREAD_IN_FORMAT, recording_check

    profile = pk.load(sample(f"wild/{name}"), progress=False)
    assert profile.meta.source_format == fmt
    table = recording_check(profile).set_index("analysis")
    for analysis, switch in (("memory over time and per operator", "memory"),
                             ("compute- or memory-bound per operator (PMU pipe ratios)",
                              "pmu")):
        assert table.loc[analysis, "status"] == "not checked"
        assert table.loc[analysis, "evidence"] == UNREAD_IN_FORMAT[fmt][switch]


@pytest.mark.shared_samples
def test_a_legacy_rank_without_its_timeline_says_so(tmp_path: Path) -> None:
    """A walk: mi_run1 without timeline_display_1.json loaded with no kernels and no
    note, a note still said the steps were aligned with the timeline, and ``check`` asked
    for profile_communication=True, whose records were in the missing file."""
    import shutil

    import perfkit as pk
    from perfkit.analysis.recording_check import recording_check

    folder = tmp_path / "profiler"
    shutil.copytree(sample("wild/mi_run1") / "profiler", folder)
    (folder / "timeline_display_1.json").unlink()
    profile = pk.load(folder, progress=False)
    notes = " ".join(str(n) for n in profile.meta.notes)
    assert "no ascend_timeline_display_1.json (nor timeline_display_1.json)" in notes
    assert "aligned with the timeline" not in notes
    assert len(profile.kernels) == 0 and len(profile.steps) > 0
    table = recording_check(profile).set_index("analysis")
    row = table.loc["communication (comm_ops, bandwidth, matrix)"]
    assert row["status"] == "missing"
    assert "neither hccl_raw_1.csv nor the timeline is in the folder" in row["evidence"]


@pytest.mark.shared_samples
def test_a_lone_rank_above_zero_is_not_counted_as_two_ranks() -> None:
    """A walk: mi_run1 holds rank 1 only (every file of it ends in ``_1``), and ``check``
    said its communication operators ran "over 2 ranks": the job has at least two, the
    recording one."""
    import perfkit as pk
    from perfkit.analysis.recording_check import recording_check

    folder = sample("wild/mi_run1") / "profiler"
    suffixes = {p.stem.rsplit("_", 1)[-1] for p in folder.iterdir()
                if p.stem.rsplit("_", 1)[-1].isdigit()}
    assert suffixes == {"1"}
    table = recording_check(pk.load(sample("wild/mi_run1"), progress=False))
    said = table.set_index("analysis").loc["communication (comm_ops, bandwidth, matrix)",
                                           "evidence"]
    assert "over 2 ranks" not in said
    assert said.endswith("on rank 1, the only one recorded, of a job of at least 2 ranks")


def test_all_but_one_operator_with_shapes_is_not_called_all(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A walk: 23,622 of ResNet-50's 23,640 host operators carry shapes, and ``check`` said
    "100 %". One operator's shapes taken from the bundled trace: the share says it."""
    trace = json.loads(gzip.open(TRACE, "rt").read())
    # the bundled trace's operators only, each with a shape but the first
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    ops = trace["traceEvents"]
    for i, e in enumerate(ops):
        e["args"] = {**e.get("args", {}), "Input Dims": [] if i == 0 else [[4, 4]]}
    assert len(ops) > 1000
    folder = tmp_path / "one-less"
    folder.mkdir()
    (folder / "rank0.pt.trace.json").write_text(json.dumps(trace))
    item = next(i for i in _check(folder, capsys)["items"] if i["switch"] == SHAPES)
    share = 100 * (len(ops) - 1) / len(ops)
    assert share > 99.9  # rounds to 100 at the whole percent
    assert item["evidence"].startswith(f"{share:.2f} % of {len(ops):,} host operators"
                                       if round(share, 1) >= 100 else
                                       f"{share:.1f} % of {len(ops):,} host operators")
    assert not item["evidence"].startswith("100 %")


def test_a_share_of_a_count_never_reads_all_or_none_when_it_is_not() -> None:
    from perfkit.format import part_share_text

    assert part_share_text(23_622 / 23_640) == "99.9 %"
    assert part_share_text(1 / 5000) == "0.02 %"
    assert part_share_text(9_999_999 / 10_000_000) == "> 99.99 %"
    assert part_share_text(1 / 10_000_000) == "< 0.01 %"
    assert (part_share_text(1.0), part_share_text(0.0), part_share_text(0.5)) == \
        ("100 %", "0 %", "50 %")
