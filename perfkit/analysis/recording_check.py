"""What a recording lacks, per analysis, and the profiler switch that turns it on.

The check reads what the loader already made of the recording — the canonical tables, the
profile's ``meta`` (profiler level, device) and the step breakdown — never the files again.
Each row is one analysis and one switch of the profiler that wrote the profile:

* PyTorch (Kineto, ``torch.profiler.profile``): ``record_shapes=True`` (operator shapes:
  FLOPs, roofline, the model read from the trace), ``profile_memory=True`` (memory over
  time), a ``schedule=`` with ``prof.step()`` each iteration (``ProfilerStep#N`` marks:
  steps), ``activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]`` (device kernels),
  ``with_stack=True`` (source lines of host operators; perfkit does not read them);
* torch_npu (``torch_npu.profiler.profile``): ``profiler_level=Level1`` in
  ``experimental_config`` (communication tables), ``aic_metrics=PipeUtilization`` (PMU
  pipe ratios: compute- or memory-bound), ``record_shapes=True`` (the host operators'
  shapes in operator_details.csv: not checked, perfkit reads the kernels' shapes),
  ``profile_memory=True`` (memory files), ``data_simplification`` (raw data kept or not);
* MindSpore (``mindspore.Profiler``): ``profile_memory=True``, ``profile_communication=True``,
  ``aic_metrics`` / ``profiler_level`` (MindSpore ≥ 2.4), a ``schedule`` with
  ``prof.step()``.

The costs are those the profilers' documentation states in words (torch.profiler API
reference, "Enabling shape and stack tracing results in additional overhead"; the
torch_npu and MindSpore profiler guides): perfkit measures none of them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .._text_dtype import TEXT
from ..errors import PerfkitError
from ..format import counted, part_share_text
from ._tasks import PMU_COMPUTE, PMU_MEMORY, PMU_RATIOS, pmu_maxima

__all__ = ["COLUMNS", "SWITCHES", "UNREAD_IN_FORMAT", "recording_check"]

#: Columns of :func:`recording_check`.
COLUMNS = ("analysis", "profiler", "status", "switch", "lacks", "evidence", "cost")

#: Per profiler and switch: the exact setting and what turning it on costs.
SWITCHES: dict[tuple[str, str], tuple[str, str]] = {
    ("torch.profiler", "shapes"): (
        "torch.profiler.profile(record_shapes=True)",
        "each operator's input shapes are kept with its event: a larger trace, and the "
        "profiler holds references to the tensors while it records (PyTorch's docs: "
        "additional overhead, possibly extra tensor copies)"),
    ("torch.profiler", "memory"): (
        "torch.profiler.profile(profile_memory=True)",
        "one event per allocation and free: the trace grows with the number of "
        "allocations; a small cost on the host per allocation"),
    ("torch.profiler", "steps"): (
        "torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, "
        "active=3), ...) and prof.step() at the end of every iteration",
        "none while recording; it limits the trace to the active steps, so it is smaller"),
    ("torch.profiler", "device"): (
        "torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, "
        "torch.profiler.ProfilerActivity.CUDA])",
        "CUPTI records every kernel and copy: a small cost per launch and a larger trace"),
    ("torch.profiler", "stack"): (
        "torch.profiler.profile(with_stack=True)",
        "the Python stack of every operator: the largest host overhead of these switches "
        "and a much larger trace; perfkit does not read stacks, turn it on only to see "
        "source lines in a trace viewer"),
    ("torch_npu", "level"): (
        "torch_npu.profiler.profile(experimental_config=torch_npu.profiler."
        "_ExperimentalConfig(profiler_level=torch_npu.profiler.ProfilerLevel.Level1))",
        "adds the communication files and the operator statistics: more data to write "
        "and a longer parse after the run"),
    ("torch_npu", "pmu"): (
        "torch_npu.profiler._ExperimentalConfig(profiler_level=torch_npu.profiler."
        "ProfilerLevel.Level1, aic_metrics=torch_npu.profiler.AiCMetrics.PipeUtilization)",
        "the AI Core counts one metric group per run; reading counters adds a little "
        "time per kernel"),
    ("torch_npu", "shapes"): (
        "torch_npu.profiler.profile(activities=[torch_npu.profiler.ProfilerActivity.CPU, "
        "torch_npu.profiler.ProfilerActivity.NPU], record_shapes=True)",
        "the operators' shapes are kept on the host: a larger output and some host "
        "overhead per operator"),
    ("torch_npu", "memory"): (
        "torch_npu.profiler.profile(profile_memory=True)",
        "one record per allocation and free: larger output, a small host cost"),
    ("torch_npu", "simplification"): (
        "torch_npu.profiler._ExperimentalConfig(data_simplification=False)",
        "keeps the raw FRAMEWORK and PROF data after the export (much more disk); perfkit "
        "reads ASCEND_PROFILER_OUTPUT only, so the default True loses nothing it reads"),
    ("mindspore", "memory"): (
        "mindspore.Profiler(profile_memory=True)",
        "one record per allocation: larger output, a small host cost"),
    ("mindspore", "communication"): (
        "mindspore.Profiler(profile_communication=True)",
        "the HCCL operators' timings are collected (on a multi-device job only): a little "
        "more output"),
    ("mindspore", "pmu"): (
        "mindspore.Profiler(profiler_level=mindspore.profiler.ProfilerLevel.Level1, "
        "aic_metrics=mindspore.profiler.AicoreMetrics.PipeUtilization) (MindSpore >= 2.4; "
        "2.0-2.3: mindspore.Profiler(aicore_metrics=1), 1 being PipeUtilization)",
        "the AI Core counts one metric group per run; reading counters adds a little "
        "time per kernel"),
    ("mindspore", "steps"): (
        "mindspore.Profiler(schedule=mindspore.profiler.schedule(wait=1, warmup=1, "
        "active=3), ...) and prof.step() at the end of every step (MindSpore >= 2.4)",
        "none while recording; it limits the output to the active steps"),
}

#: Per source format, the switches whose output perfkit does not read from it, and why:
#: their rows are "not checked", never "missing" (the switch would change nothing here).
UNREAD_IN_FORMAT: dict[str, dict[str, str]] = {
    "mindspore_legacy": {
        "memory": "perfkit reads no memory files of legacy MindInsight output (MindSpore "
                  "<= 2.3); recorded with the switch by MindSpore >= 2.4, memory_record.csv "
                  "is read",
        "pmu": "perfkit reads no PMU counters of legacy MindInsight output (its "
               "aicore_intermediate files hold per-operator averages); recorded with the "
               "switch by MindSpore >= 2.4, kernel_details.csv's ratios are read"},
    "cann_raw": {
        "memory": "raw CANN timeline files export no memory records; an export's "
                  "ASCEND_PROFILER_OUTPUT holds them",
        "pmu": "raw CANN timeline files export no PMU counters; an export's "
               "kernel_details.csv holds them"},
}

#: Share of framework operators with shapes under which the shapes count as not
#: recorded: with ``record_shapes=True`` nearly every ``cpu_op`` carries ``Input Dims``
#: (4,674 of 4,974 events in data/kineto-tiny-llama rank 0), without it a handful of
#: annotations do (2 there).
SHAPES_MIN_SHARE = 0.05


def _table(profile: Any, name: str) -> pd.DataFrame:
    try:
        t = getattr(profile, name)
    except PerfkitError:
        return pd.DataFrame()
    return t if isinstance(t, pd.DataFrame) else pd.DataFrame()


def _profiler(profile: Any) -> str:
    """``torch.profiler``, ``torch_npu`` or ``mindspore``: which profiler wrote it."""
    meta = profile.meta
    fw = (meta.framework or "").lower()
    if "mindspore" in fw:
        return "mindspore"
    if meta.source_format == "kineto":
        return "torch.profiler"
    return "torch_npu" if (meta.device_type or "").lower() == "npu" else "torch.profiler"


def _shapes_share(table: pd.DataFrame) -> float:
    if table.empty or "input_shapes" not in table.columns:
        return 0.0
    s = table["input_shapes"]
    has = s.notna() & ~s.astype(TEXT).isin(["", "[]", "N/A"])
    return float(has.mean())


def _row(profiler: str, switch: str, analysis: str, missing: bool | str | None, lacks: str,
         evidence: str) -> dict[str, Any]:
    """One row; ``missing`` True, False, None (not checked) or ``"n/a"`` (nothing of the
    kind to record in this run)."""
    setting, cost = SWITCHES[(profiler, switch)]
    status = {True: "missing", False: "recorded", None: "not checked",
              "n/a": "not applicable"}[missing]
    return {"analysis": analysis, "profiler": profiler, "status": status,
            "switch": setting, "lacks": lacks if missing is True else "", "evidence": evidence,
            "cost": cost}


def _steps_row(profile: Any, profiler: str) -> dict[str, Any]:
    from .steps import inferred_steps, step_breakdown

    try:
        b = step_breakdown(profile)
    except PerfkitError as exc:
        return _row(profiler, "steps", "steps (step time, per-step split)", True,
                    "step marks", str(exc))
    if b.empty or "step" not in b.columns or not b["step"].notna().any():
        return _row(profiler, "steps", "steps (step time, per-step split)", True,
                    "step marks: the whole recording is one span",
                    "the step breakdown has no numbered step")
    inferred = inferred_steps(b)
    if inferred:
        return _row(profiler, "steps", "steps (step time, per-step split)", True,
                    "ProfilerStep marks: perfkit had to infer the steps", inferred)
    n = int(b["step"].nunique())
    return _row(profiler, "steps", "steps (step time, per-step split)", False, "",
                f"{n} step{'s' * (n != 1)} marked by the profiler")


def _torch_rows(profile: Any) -> list[dict[str, Any]]:
    p = "torch.profiler"
    ops, kernels = _table(profile, "ops"), _table(profile, "kernels")
    share = _shapes_share(ops)
    rows = [_row(p, "shapes", "operator shapes (FLOPs, roofline, the model read from "
                 "the trace)", share < SHAPES_MIN_SHARE,
                 "operator input shapes", f"{part_share_text(share)} of {len(ops):,} host "
                 "operators carry input shapes")]
    memory = _table(profile, "memory")
    rows.append(_row(p, "memory", "memory over time and its peak", memory.empty,
                     "allocator samples", f"{len(memory):,} memory samples"))
    rows.append(_steps_row(profile, p))
    cpu = (profile.meta.device_type or "").lower() == "cpu"
    rows.append(_row(p, "device", "device kernels (GPU time, overlap, kernel efficiency)",
                     "n/a" if cpu and kernels.empty else kernels.empty, "device kernels",
                     _device_tasks(kernels) + (
                         "; the trace shows a CPU-only run (if it used a GPU, the switch "
                         "records its kernels)" if cpu else "")))
    rows.append(_stack_row(profile, p))
    return rows


def _stack_row(profile: Any, p: str) -> dict[str, Any]:
    """``with_stack``: recorded where the trace holds ``python_function`` events (the
    loader counts them, ``meta.extra["python_functions"]``); where it holds none, not
    checked rather than missing, since no analysis of perfkit needs the stacks."""
    n = (profile.meta.extra or {}).get("python_functions")
    analysis = "source lines of host operators (a trace viewer's; perfkit does not read them)"
    if not n:
        said = ("no python_function events: the stacks were not recorded, which no "
                "analysis here needs" if n == 0 else "perfkit does not read Python stacks")
        return _row(p, "stack", analysis, None, "", said)
    return _row(p, "stack", analysis, False, "",
                f"{n:,} python_function events (the Python stack, for a trace viewer)")


def _device_tasks(kernels: pd.DataFrame) -> str:
    """``"9,096 device tasks: 8,772 kernels, 324 memory copies and sets"``; the count
    alone where the table does not say which are copies (Kineto's ``gpu_memcpy`` and
    ``gpu_memset``, the ``type`` column)."""
    n = len(kernels)
    if "type" not in kernels.columns or not n:
        return f"{n:,} device tasks"
    copies = int(kernels["type"].isin(["gpu_memcpy", "gpu_memset"]).sum())
    if not copies:
        return f"{n:,} device kernels"
    return (f"{n:,} device tasks: {n - copies:,} kernels, {copies:,} memory copies and "
            "sets")


def _communication_kernels(kernels: pd.DataFrame) -> int:
    """Device tasks of the ``communication`` category (the loaders' canonical category:
    HCCL, NCCL and the other libraries' kernels), as the communication analyses pick
    them."""
    from .communication import _is_comm_task

    if kernels.empty or "category" not in kernels.columns:
        return 0
    return int(_is_comm_task(kernels).sum())


def _unread(row: dict[str, Any], switch: str, fmt: str | None) -> dict[str, Any]:
    """``row`` as "not checked" where ``fmt`` is a format perfkit does not read
    ``switch``'s output from (:data:`UNREAD_IN_FORMAT`)."""
    why = UNREAD_IN_FORMAT.get(fmt or "", {}).get(switch)
    if why is None:
        return row
    return {**row, "status": "not checked", "lacks": "", "evidence": why}


def _over_ranks(ranks: list[int], world_size: int | None) -> str:
    """Which ranks the counts are of: all of the job's, or the recorded ones of a larger
    job (a lone rank 1 is one of at least two: its operators are not "over 2 ranks")."""
    recorded = len(ranks)
    world = world_size or max(recorded, max(ranks) + 1)
    if recorded >= world:
        return f"over {counted(recorded, 'rank')}"
    job = f"a job of {'' if world_size else 'at least '}{counted(world, 'rank')}"
    if recorded == 1:
        return f"on rank {ranks[0]}, the only one recorded, of {job}"
    which = ", ".join(map(str, sorted(ranks)[:4])) + (", …" if recorded > 4 else "")
    return f"on the {recorded:,} recorded ranks ({which}) of {job}"


def _ascend_rows(profile: Any, p: str) -> list[dict[str, Any]]:
    meta = profile.meta
    level = meta.profiler_level or "unknown"
    comm = _table(profile, "comm_ops")
    ranks = [int(r) for r in (getattr(profile, "ranks", None) or [meta.rank or 0])]
    # a rank above 0 is one device of a larger job even where the world size is not said
    world = meta.world_size or max(len(ranks), max(ranks) + 1)
    kernels = _table(profile, "kernels")
    rows = []
    # HCCL tasks among the device kernels: the job spans devices even where no world size
    # or rank says so (a lone kernel_details.csv), so its communication tables are missing
    on_device = _communication_kernels(kernels)
    comm_missing = comm.empty and ((world or 1) > 1 or on_device > 0)
    ops_said = (f"{on_device:,} communication kernels ran on the device, but no "
               "communication table was read (where communication.json is in the output "
               "folder, open the folder, not one file of it)" if comm.empty and on_device
               else f"{len(comm):,} communication operators")
    said = [n for n in meta.notes if "comm_ops:" in str(n)] if comm_missing else []
    loader = f"; the loader: {said[0]}" if said else ""  # a file not in the folder, say
    if p == "torch_npu":
        rows.append(_row(p, "level", "communication (comm_ops, bandwidth, matrix)",
                         comm_missing or level == "Level0", "communication tables",
                         f"profiler level {level}; {ops_said}{loader}"))
    else:
        rows.append(_row(p, "communication", "communication (comm_ops, bandwidth, matrix)",
                         comm_missing if comm_missing or (world or 1) > 1 else "n/a",
                         "communication operators",
                         f"{ops_said} {_over_ranks(ranks, meta.world_size)}{loader}"))
    rows.append(_unread(_pmu_row(p, kernels), "pmu", meta.source_format))
    if p == "torch_npu":
        # perfkit reads the device kernels' shapes from kernel_details.csv, which torch_npu
        # always writes; record_shapes adds them to the host operators
        # (operator_details.csv), which perfkit does not read: not checked here
        share = _shapes_share(kernels)
        rows.append(_row(p, "shapes", "host operators' shapes (operator_details.csv; "
                         "perfkit's FLOPs and roofline use the kernels' shapes instead)",
                         None, "", f"{part_share_text(share)} of {len(kernels):,} device "
                         "kernels carry input shapes (kernel_details.csv, written whatever "
                         "record_shapes says)"))
    memory, op_memory = _table(profile, "memory"), _table(profile, "op_memory")
    rows.append(_unread(_row(p, "memory", "memory over time and per operator",
                             memory.empty and op_memory.empty, "memory records",
                             f"{len(memory):,} memory samples, {len(op_memory):,} operator "
                             "allocations"), "memory", meta.source_format))
    if p == "torch_npu":
        rows.append(_row(p, "simplification", "raw data kept for a later re-export",
                         None, "", "perfkit reads ASCEND_PROFILER_OUTPUT only"))
    else:
        rows.append(_steps_row(profile, p))
    return rows


def _pmu_row(p: str, kernels: pd.DataFrame) -> dict[str, Any]:
    """Whether the kernels carry the PMU pipe ratios the bound analysis reads
    (:data:`~perfkit.analysis._tasks.PMU_COMPUTE` and ``PMU_MEMORY``, which
    ``aic_metrics=PipeUtilization`` records); counters of another ``aic_metrics`` set
    (ArithmeticUtilization's ``aic_mac_fp16_ratio``, ...) are named, not taken for them."""
    pipes = pmu_maxima(kernels.head(0)) is not None
    other = sorted(c for c in kernels.columns if c.endswith("_ratio") and c not in PMU_RATIOS)
    if pipes:
        said = "PMU pipe ratios present (" + ", ".join(
            c for c in (*PMU_COMPUTE, *PMU_MEMORY) if c in kernels.columns) + ")"
    elif other:
        shown = ", ".join(other[:3]) + (", ..." if len(other) > 3 else "")
        said = (f"PMU counters of another aic_metrics set ({shown}), not the pipe ratios "
                "(aic_mac_ratio, aic_mte2_ratio, ...) the compute- or memory-bound "
                "analysis reads")
    else:
        said = f"no PMU ratio columns in {len(kernels):,} device kernels"
    return _row(p, "pmu", "compute- or memory-bound per operator (PMU pipe ratios)",
                "n/a" if kernels.empty else not pipes, "PMU pipe-ratio columns", said)


def recording_check(profile: Any) -> pd.DataFrame:
    """What the recording of ``profile`` lacks, per analysis, and the switch to turn on.

    Parameters
    ----------
    profile : Profile or Cluster

    Returns
    -------
    pandas.DataFrame
        One row per analysis (:data:`COLUMNS`): ``analysis``; ``profiler``
        (``torch.profiler``, ``torch_npu`` or ``mindspore``); ``status`` (``missing``,
        ``recorded`` or ``not checked``); ``switch``, the exact setting that records it;
        ``lacks``, what is missing (empty unless missing); ``evidence``, what the tables
        hold; ``cost``, what turning the switch on costs, in the profiler's documented words.
        ``attrs["notes"]`` is the loader's ``meta.notes``.
    """
    p = _profiler(profile)
    rows = _torch_rows(profile) if p == "torch.profiler" else _ascend_rows(profile, p)
    out = pd.DataFrame(rows, columns=list(COLUMNS))
    out.attrs["notes"] = [str(n) for n in profile.meta.notes]
    return out
