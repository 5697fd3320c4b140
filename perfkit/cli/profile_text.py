"""What ``perfkit info PATH`` prints: the profile, its job, its steps, its findings."""

from __future__ import annotations

import math
import os
import re
import textwrap
from typing import Any

from .._version import __version__
from ..errors import InvalidArgumentError, PerfkitError
from ..format import counted, listed, plural, ranges_text, ranks_text
from ..job.activations import ACTIVATIONS, activation_text
from ..job.layout import PP_UNREAD
from ..job.unknowns import PANEL_TITLE, how_to_set, unknown_labels
from ..job.world import world_size_fact

__all__ = ["profile_info_text", "recording_lines"]


def _ms3(ms: float) -> str:
    """Milliseconds in the unit that fits, 3 significant digits (``1.23 s``, ``0.123 ms``)."""
    from ..format import time_text

    return time_text(ms * 1e3, unit="ms" if abs(ms) < 1e3 else None)


def _pct(value: Any) -> str:
    from ..format import share_text

    return "-" if share_text(value) == "–" else share_text(value)


def _wrap(text: str, indent: str, width: int = 100) -> list[str]:
    """Lines of ``text`` after ``indent`` (a label such as ``"  model          "`` on the
    first line only, blanks on the next ones); a number and its unit stay on one line, and
    a path or a word is never cut (at its hyphens or in its middle), so it can be copied."""
    glued = re.sub(r"(\d) (%|ms|µs|s|GiB|MiB|KiB|B)(?!\w)", "\\1\xa0\\2",
                   " ".join(str(text).split()))
    lines = textwrap.wrap(glued, width=width, initial_indent=indent,
                          subsequent_indent=" " * len(indent) + "  ", break_on_hyphens=False,
                          break_long_words=False) or [indent.rstrip()]
    return [line.replace("\xa0", " ") for line in lines]



#: The phases of a legacy MindSpore step trace, which add up to its step (column → label;
#: the same as :data:`perfkit.charts.TRACE_PHASES`, not imported: ``perfkit info`` does not
#: load the charts).
_PHASES = {"iteration_interval_us": "step interval (waiting for data)",
           "fp_and_bp_us": "forward and backward",
           "tail_us": "step tail (gradients, update)"}


def _over(n_ranks: int, n_steps: int) -> str:
    """``"1 rank × 322 steps"``."""
    return f"{n_ranks} rank{'s' * (n_ranks != 1)} × {n_steps} step{'s' * (n_steps != 1)}"


def _trace_phases(steps: Any) -> dict[str, str]:
    """The step-trace phases of ``steps`` (:data:`_PHASES`) where the profile gives them
    and no computing / communication / free split (legacy MindSpore), else ``{}``."""
    if not all(c in steps.columns for c in _PHASES):
        return {}
    return dict(_PHASES) if bool(steps[list(_PHASES)].notna().all(axis=1).any()) else {}


def _phases_text(steps: Any, phases: dict[str, str]) -> str:
    """Where the step goes by the step trace's phases: each phase summed over the rank ×
    step rows that have all of them, over the sum of their phases (which is their step)."""
    rows = steps.dropna(subset=list(phases))
    sums = {c: float(rows[c].astype("float64").sum()) for c in phases}
    total = sum(sums.values())
    parts = ", ".join(f"{label} {_pct(sums[c] / total if total > 0 else math.nan)}"
                      for c, label in phases.items())
    over = _over(int(rows["rank"].nunique(dropna=False)),
                 int(rows["step"].nunique(dropna=False)))
    return (f"where the step goes: no computing / communication / free split in this "
            f"profile; its step trace gives each step's phases instead: {parts} (shares of "
            f"the step time summed over {over}; they add up to 100 %)")


def _phase_rows(steps: Any, phases: dict[str, str], max_steps: int) -> list[str]:
    """The table of the slowest rank's step per step, with the share of each step-trace
    phase (none where the profile gives no parts of its steps)."""
    import pandas as pd

    from ..format import sig, time_unit

    unit, size = time_unit(steps["wall_us"])
    heads = {"iteration_interval_us": "interval", "fp_and_bp_us": "fwd+bwd",
             "tail_us": "tail"}
    lines = [f"  {'step':>6}  {'slowest rank':>12}  {f'step ({unit})':>10}"
             + "".join(f"  {heads[c]:>8}" for c in phases)]
    slowest = steps.loc[steps.groupby("step", dropna=False)["wall_us"].idxmax()]
    for _, row in slowest.head(max_steps).iterrows():
        step = "NA" if pd.isna(row["step"]) else int(row["step"])
        rank = "NA" if pd.isna(row["rank"]) else int(row["rank"])
        wall = row["wall_us"] if row["wall_us"] > 0 else float("nan")
        lines.append(f"  {step!s:>6}  {rank!s:>12}  {sig(row['wall_us'] / size):>10}"
                     + "".join(f"  {_pct(row[c] / wall):>8}" for c in phases))
    if len(slowest) > max_steps:
        lines.append(f"  ... {len(slowest) - max_steps} more steps")
    return lines


def _steps_lines(profile: Any, max_steps: int = 10) -> list[str]:
    import pandas as pd

    from .._shares import rounded_split
    from ..analysis import measured_step_s, step_breakdown
    from ..analysis.recorded import withheld_text
    from ..analysis.steps import step_basis, step_wall_us
    from ..format import sig, time_text, time_unit
    from ..widgets.headline import UNDIVIDED_NOTE, step_split, with_exposed_comm
    from ..widgets.slowest_steps import slowest_steps

    try:
        steps = step_breakdown(profile)
    except PerfkitError as exc:
        return [f"Steps: none ({exc})"]
    if steps.empty or "step" not in steps.columns:
        why = "; ".join(steps.attrs.get("notes", [])) or "no step found"
        return [f"Steps: none ({why})"]
    known = with_exposed_comm(steps.dropna(subset=["step_us"]))
    ids = sorted({s for s in steps["step"].dropna().tolist()})
    source = ", ".join(sorted({str(s) for s in steps.get("source", []) if pd.notna(s)})) or "?"
    n_steps = len(ids) or 1  # a trace without step marks is one unnumbered span
    lines = [f"Steps: {n_steps} ({ranges_text(ids) if ids else 'unnumbered'}), "
             f"figures from {source} data"]
    step_s = measured_step_s(steps)
    if math.isnan(step_s):
        # a step withheld as a fragment of its tasks (perfkit.analysis.recorded) says so
        why = withheld_text(steps) or "no step has a duration"
        return lines + [f"  measured step time: unknown ({why})"]
    lines.append(f"  measured step time: {time_text(step_s * 1e6)} ({step_basis(steps)})")
    split = step_split(steps)
    phases = _trace_phases(known) if not split.attrs.get("rows", 1) else {}
    if not split.empty and split.attrs.get("rows", 1):
        split = split.assign(share=rounded_split(split[["share"]].T).T["share"])
        parts = ", ".join(f"{r.label} {_pct(r.share)}" for r in split.itertuples())
        left_out = split.attrs.get("left_out", "")
        lines += _wrap(f"where the step goes: {parts} (shares of the step time summed over "
                       f"{_over(split.attrs['ranks'], split.attrs['steps'])}"
                       + (f", {left_out}" if left_out else "") + "; they add up to 100 %)",
                       "  ")
        if "computing_or_free_us" in set(split["part"]):
            before = (" and the step interval before it"
                      if "iteration_interval_us" in set(split["part"]) else "")
            lines += _wrap(UNDIVIDED_NOTE[0].upper() + UNDIVIDED_NOTE[1:] + "; each step's "
                           f"shares below are of the sum of its parts, MindSpore's own step"
                           f"{before}, "
                           "which can differ from the step time shown by up to 1 %", "  ")
    elif phases:
        lines += _wrap(_phases_text(known, phases), "  ")
    elif not split.empty:
        lines += _wrap("where the step goes: unknown (no step has its computing, exposed "
                       "communication and free time in this profile)", "  ")
    if phases or (not split.empty and not split.attrs.get("rows", 1)):
        # each step's wall time (the device span and the wait before it), as the headline
        return lines + _phase_rows(known.assign(wall_us=step_wall_us(known)), phases,
                                   max_steps)
    # each step's slowest rank, its wall time and the shares of its split, as the info
    # answer gives them; computing and free time given only together (legacy MindSpore):
    # one column for both, and the wait before MindSpore's step is the step trace's
    # interval (split_step_us)
    steps_shown = slowest_steps(known)
    slowest = steps_shown.rows
    unit, size = time_unit(slowest["wall_us"])
    heads = {"computing_us": "computing", "computing_or_free_us": "comp./idle",
             "comm_exposed_us": "comm exposed", "bubble_us": "bubble", "free_us": "free",
             "preparing_us": "wait", "iteration_interval_us": "wait"}
    widths = {"computing_us": 9, "computing_or_free_us": 9, "comm_exposed_us": 12}
    lines.append(f"  {'step':>6}  {'slowest rank':>12}  {f'step ({unit})':>10}"
                 + "".join(f"  {heads[c]:>{widths.get(c, 7)}}" for c in steps_shown.parts))
    for _, row in slowest.head(max_steps).iterrows():
        # a trace without step marks is one unnumbered step (pd.NA in an Int64 column)
        step = "NA" if pd.isna(row["step"]) else int(row["step"])
        rank = "NA" if pd.isna(row["rank"]) else int(row["rank"])
        lines.append(f"  {step!s:>6}  {rank!s:>12}  {sig(row['wall_us'] / size):>10}"
                     + "".join(f"  {_pct(row[c]):>{widths.get(c, 7)}}"
                               for c in steps_shown.parts))
    if len(slowest) > max_steps:
        lines.append(f"  ... {len(slowest) - max_steps} more steps")
    return lines


def _job_lines(job: Any) -> list[str]:
    """The job section of ``perfkit info``: values with their sources, then the figures."""
    from ..widgets.summary import job_summary

    def src(*names: str) -> str:
        return "/".join(sorted({job.source(n) for n in names}))

    lines = ["The job (perfkit.infer_job; [source] of each value):"]
    m = job.model
    if m is not None:
        lines.append(f"  {'model':<15}{m.name or 'not a preset'}: {m.num_layers} layers, "
                     f"hidden {m.hidden_size}, {m.num_attention_heads} heads "
                     f"({m.num_kv_heads} key/value), FFN {m.ffn_hidden_size} {m.mlp}, vocab "
                     f"{m.vocab_size} [{src('num_layers', 'hidden_size', 'vocab_size')}]")
    elif job.model_read_in_part():  # what was read is kept, the rest said unknown
        lines.append(f"  {'model':<15}read in part: {job.model_text(verbose=True)} "
                     f"[{src('num_layers', 'hidden_size', 'vocab_size')}] "
                     f"(see {PANEL_TITLE}, below)")
    else:
        lines.append(f"  {'model':<15}unknown (see {PANEL_TITLE}, below)")
    p = job.parallel
    lines.append(f"  {'layout':<15}dp {p.dp} × tp {p.tp} × pp {p.pp}"
                 + (f" (vpp {p.vpp})" if p.vpp > 1 else "")
                 + (f" ({PP_UNREAD})" if job.pp_unread else "")
                 + f" = {counted(p.world_size, 'device')}, micro-batch {p.micro_batch_size} × "
                   f"{p.num_micro_batches}, recompute {p.recompute}"
                 + (f" {list(p.recompute_layers)}" if isinstance(p.recompute_layers, tuple)
                    else "")
                 + f", optimizer shard {p.optimizer_shard} "
                   f"[{src('dp', 'tp', 'pp', 'micro_batch_size', 'num_micro_batches')}]")
    batch = (f"{job.global_batch_size} × {job.seq_length} tokens"
             if job.global_batch_size and job.seq_length else "unknown")
    lines.append(f"  {'batch':<15}{batch} [{src('global_batch_size', 'seq_length')}]")
    if job.hardware is not None:
        lines.append(f"  {'hardware':<15}{job.hardware.name}, {job.dtype or 'dtype unknown'} "
                     f"[{src('hardware', 'dtype')}]")
    else:
        lines.append(f"  {'hardware':<15}not known (see {PANEL_TITLE}, below)")
    if m is not None or ACTIVATIONS in job.observed:  # not for a model without attention
        read = "profile" if ACTIVATIONS in job.observed else "default"
        lines.append(f"  {'activations':<15}{activation_text(job.activation_model)} [{read}]")
    if job.attention_implementation is not None:  # the fused kernel, by its names
        lines.append(f"  {'attention':<15}{job.attention_implementation}: "
                     f"{job.attention_detail} [profile]")
    for problem in job.problems():
        lines += _wrap(f"warning: {problem}", "  ")
    if job.missing():
        from ..widgets.headline import throughput_figure

        tps = throughput_figure(job, job.step_time_s or float("nan"))
        if tps.text != "–":
            lines.append(f"  {'tokens/s per device':<36}{tps.text.split(' tokens')[0]}")
        if job.training_step() is False:  # the Overview's MFU needs only part of the model
            lines += _inference_mfu_lines(job)
        labels = unknown_labels(job, ("model", "hardware", "step_time_s"))
        if job.model_read_in_part():  # read above in part: not "not known" at all
            labels = ["the whole model" if lab == "the model" else lab for lab in labels]
        lines += _wrap(f"other figures: not computed, {listed(labels)} "
                       f"{plural(len(labels), 'is', 'are')} not known (see {PANEL_TITLE}, "
                       "below)", "  ")
        return lines
    try:
        summary = job_summary(job).set_index("key")
    except PerfkitError as exc:
        return lines + _wrap(f"figures: not computed: {exc}", "  ")
    for key in ("tokens_per_s_per_device", "mfu", "hfu", "memory_gib", "predicted_step_s"):
        row = summary.loc[key]
        lines.append(f"  {row['metric']:<36}{row['text']}")
        if job.training_step() is False and key in ("mfu", "hfu", "memory_gib",
                                                    "predicted_step_s"):
            lines += _wrap(f"({row['note']})", "    ")  # which convention: forward or not
        if isinstance(row["warning"], str) and row["warning"]:
            lines += _wrap(f"warning: {_said_above(row['warning'], job.problems())}", "    ")
    return lines


def _said_above(warning: str, problems: list[str]) -> str:
    """A figure's warning with the job's problems, printed above it in full, named once
    ("see the job's 10 warnings above"), not repeated."""
    mark = "\x00"  # a stand-in for each problem said above: no warning holds it
    for problem in problems:
        warning = warning.replace(problem, mark)

    def named(run: re.Match[str]) -> str:
        n = run.group(0).count(mark)
        return "see the job's warning above" if n == 1 else f"see the job's {n} warnings above"

    return re.sub(f"{mark}(?:; {mark})*", named, warning)


def _inference_mfu_lines(job: Any) -> list[str]:
    """The MFU line of an inference step whose job lacks what the training figures need:
    the forward pass's MFU, the Overview's (:func:`perfkit.job.inference_mfu.
    inference_mfu_figure`), with how it was counted."""
    from ..job.inference_mfu import inference_mfu_figure

    _, text, note, warning = inference_mfu_figure(job)
    lines = [f"  {'MFU':<36}{text}"] + _wrap(f"({note})", "    ")
    if warning:
        lines += _wrap(f"warning: {warning}", "    ")
    return lines


def _unknown_lines(job: Any) -> list[str]:
    """The section "What perfkit could not read": each missing field, why, what waits for
    it and how to give it (``--config`` or Python); nothing for a complete job."""
    items = job.unknowns()
    if not items:
        return []
    lines = ["", f"{PANEL_TITLE}:"]
    for u in items:
        lines += _wrap(f"{u.label}: {u.why}", "  ")
        lines += _wrap(f"needed for: {u.needed_for}", "    ")
        lines += _wrap(f"how to set it: {how_to_set(u, 'cli')}", "    ")
    return lines


def _breakdown(profile: Any) -> Any:
    """The step breakdown of ``profile``, or None where it cannot be read (the findings'
    note then names no step)."""
    from ..analysis import step_breakdown

    try:
        return step_breakdown(profile)
    except PerfkitError:
        return None


def _findings_lines(profile: Any, n_findings: int, job: Any = None) -> list[str]:
    from ..advisor import advise
    from ..advisor.finding import share_of_step, step_basis_note

    findings = advise(profile) if job is None else advise(
        profile, model=job.model, parallel=job.parallel, hardware=job.hardware)
    if not findings:
        return ["Findings: none (nothing abnormal found by the advisor)"]
    shown = findings[:n_findings]
    lines = [f"Top findings ({len(shown)} of {len(findings)}, best first; "
             "perfkit.advise(profile)):"]
    step_ms = job.step_time_s * 1e3 if job is not None and job.step_time_s else None
    basis = step_basis_note(shown, step_ms, len(getattr(profile, "ranks", None) or [0]),
                            _breakdown(profile))
    if basis:
        lines += _wrap(f"({basis})", "  ")
    for i, f in enumerate(shown, 1):
        lines += _wrap(f"{i}. [{f.severity}] {f.title}", "  ")
        stake = (f"{_ms3(f.ms_per_step)} per step ({share_of_step(f, step_ms)})"
                 if f.measured else "not measurable from the profile")
        lines.append(f"     at stake: {stake}; area {f.area}; notebook {f.notebook}")
        lines += _wrap(f"evidence: {f.evidence}", "     ")
        lines += _wrap(f"next: {f.recommendation}", "     ")
    return lines


def profile_info_text(profile_or_path: Any, n_findings: int = 5,
                      config: Any = None, run: Any = None) -> str:
    """What ``perfkit info PATH`` prints: what the profile is, its job, steps and findings.

    Parameters
    ----------
    profile_or_path : Profile, Cluster or path
        A loaded profile, or a path given to :func:`perfkit.load`.
    n_findings : int
        How many of :func:`perfkit.advise`'s findings to list (0: none, and the advisor
        does not run).
    config : path or list of paths, optional
        A MindFormers YAML, HF config.json or training log that wins over the profile
        (see :func:`perfkit.infer_job`).

    Returns
    -------
    str
        Plain text: format, framework, device, profiler level, ranks, world size and the
        loader's notes; the job read from the profile (model, layout, batch, hardware,
        each with its source; where a config disagrees with the profile; throughput,
        MFU, HFU, memory and the predicted step, flagged by :mod:`perfkit.guards` when
        they cannot be right); the steps (:func:`perfkit.analysis.step_breakdown`) with the
        measured step time (:func:`perfkit.analysis.measured_step_s`) and, per step, the
        slowest rank and its shares; the findings with their severity, milliseconds per step
        and share of the step at stake, evidence and recommendation.

    run : int or str, optional
        Which of the separate runs a folder holds to read (an id or a name of
        :func:`perfkit.runs`); a folder of several runs needs it.

    Raises
    ------
    ProfileError
        The path holds no profile perfkit can read.
    RunsFound
        The folder holds several separate runs and ``run`` is None (the message lists them).
    """
    if isinstance(profile_or_path, (str, os.PathLike)):
        from ..io.engines.local import load

        profile = load(profile_or_path, run=run)
    else:
        profile = profile_or_path
    if isinstance(n_findings, bool) or not isinstance(n_findings, int) or n_findings < 0:
        raise InvalidArgumentError("n_findings", "must be a whole number >= 0", n_findings)
    from ..io.detect.sources import format_fact  # with the loaders: `perfkit --help` needs neither

    meta = profile.meta
    rank_text = ranks_text(getattr(profile, "ranks", None), meta.rank)
    failed = sorted(map(str, getattr(profile, "failed", None) or {}))
    if failed:  # said where the ranks are counted, not only among the notes
        rank_text += (f"; {len(failed)} more not loaded (rank{'s' * (len(failed) > 1)} "
                      f"{', '.join(failed)}: see the notes)")
    from ..analysis._shared import shared_results
    from ..job import infer_job
    from ..notes import every_note

    # one block: the job, the steps and the advisor read the same step breakdown, worked
    # out once (it was worked out four times, reading the device tasks each time)
    with shared_results():
        job = infer_job(profile, config=config)  # first: a rank's tables may add their notes
        facts = [("path", meta.path or str(profile_or_path)),
                 ("format", format_fact(meta.source_format, meta.device_type)),
                 ("framework", meta.framework or "unknown"),
                 ("device", meta.device_type or "unknown"),
                 ("profiler level", meta.profiler_level or "unknown"), ("ranks", rank_text),
                 ("world size", world_size_fact(meta, job))]
        n = len(getattr(profile, "ranks", None) or [meta.rank])
        lines = [f"Profile of {'one rank' if n == 1 else counted(n, 'rank')} "
                 f"(perfkit {__version__}):"]
        if failed:
            lines += _wrap(f"warning: {len(failed)} of {n + len(failed)} ranks could not be "
                           f"loaded (rank{'s' * (len(failed) > 1)} {', '.join(failed)}): "
                           f"every figure below is of the {counted(n, 'rank')} loaded",
                           "  ")
        lines += [f"  {name:<15}{value}" for name, value in facts]
        for note in every_note(profile):
            lines += _wrap(f"note: {note}", "  ")
        lines += [""] + _job_lines(job) + _unknown_lines(job)
        lines += [""] + _steps_lines(profile)
        if n_findings:
            lines += [""] + _findings_lines(profile, n_findings, job)
        lines += [""] + recording_lines(profile, only_missing=True)
    return "\n".join(lines)


def recording_lines(profile: Any, only_missing: bool = False) -> list[str]:
    """The section "What the recording lacks" (:func:`perfkit.analysis.recording_check.
    recording_check`): per analysis, its status, what it lacks, the switch that turns it on
    and its cost; ``only_missing`` lists only what is missing (``perfkit info``)."""
    from ..analysis.recording_check import recording_check

    table = recording_check(profile)
    rows = table[table["status"] == "missing"] if only_missing else table
    profiler = table["profiler"].iloc[0] if len(table) else "the profiler"
    if profiler == "torch_npu" and not profile.meta.framework:  # an NPU export of no framework
        profiler = "torch_npu's switches: the framework is not known"
    if only_missing and rows.empty:
        return [f"What the recording lacks ({profiler}): nothing perfkit checks "
                "(perfkit check PATH lists every item)"]
    # perfkit info points at the command that lists every item; perfkit check is it
    pointer = "; perfkit check PATH" if only_missing else ""
    lines = [f"What the recording lacks ({profiler}{pointer}):"]
    for r in rows.itertuples():
        lines += _wrap(f"{r.analysis}: {r.status}"
                       + (f", no {r.lacks}" if r.lacks else "") + f" ({r.evidence})", "  ")
        if r.status in ("missing", "not applicable", "not checked"):
            lines += _wrap(f"switch: {r.switch}", "    ")
            lines += _wrap(f"cost: {r.cost}", "    ")
    return lines
