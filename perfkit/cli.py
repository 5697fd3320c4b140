"""The ``perfkit`` command.

``perfkit serve [PATH] [--port N] [--no-browser] [--no-preheat]``
    Serve the dashboard notebook (``dashboard.ipynb``, shipped with perfkit) with Voila on
    127.0.0.1, sources stripped, tracebacks hidden, one pre-started kernel that has
    already run the notebook kept ready. ``PATH`` (a profile) reaches the notebook through
    the ``PERFKIT_PROFILE`` environment variable. The page needs no CDN: Voila runs with a
    small template (written to a temporary folder for the life of the server) that drops
    the CDN links of the stock ``lab`` template (Font Awesome CSS, Mermaid).
``perfkit info [PATH] [--findings N] [--config FILE ...]``
    Without PATH: the perfkit version and the model and hardware presets. With PATH (a
    profile): its format, framework, device, profiler level, ranks, the job read from it
    (:func:`perfkit.infer_job`: model, layout, hardware, each value's source, the figures
    MFU/HFU guarded), the steps with the measured step time, and the advisor's top
    findings for that job (:func:`profile_info_text`).
``perfkit report PATH [-o report.html] [--notebook NAME] [--timeout S] [--config FILE ...]``
    Run a guided notebook (default ``00_start_here``) on the profile and write its
    outputs as one self-contained HTML file, without code cells or CDN scripts
    (:func:`perfkit.report.write_report`), with a progress bar over the cells on stderr.
``perfkit simulate OUT [--scenario NAME | --model ... --dp ... --fault ...]``
    Write a simulated profile (:func:`perfkit.simulate.simulate`): one of the bundled
    teaching scenarios, or any model, parallel layout and faults (:func:`parse_fault`).
``perfkit notebooks [DIR] [--force]``
    Copy the guided notebooks into a working folder (default ``perfkit-notebooks``),
    keeping copies the user has edited unless ``--force`` (:func:`perfkit.workspace.
    copy_notebooks`), and print the ``jupyter lab`` command that opens them.
``perfkit journal add PATH | list | compare A B [--journal FILE] [--html FILE]``
    The tuning journal (:mod:`perfkit.journal.cli`): record a run, list the runs, say
    what changed between two.

Wherever a profile PATH is taken, ``sample:NAME`` names a bundled sample
(:func:`perfkit.samples`), e.g. ``perfkit info sample:slow-rank``.

Errors perfkit can explain are printed as one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import math
import os
import re
import shutil
import socket
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .bundled_samples import resolve_sample
from .cli_args import config_paths
from .errors import InvalidArgumentError, PerfkitError
from .resources import DASHBOARD_NAME, NOTEBOOK_PACKAGE, resource_path
from .specs import Hardware, ModelSpec, ParallelConfig

__all__ = ["ServeError", "DASHBOARD_NOTEBOOK", "PROFILE_ENV", "main", "build_parser",
           "info_text", "profile_info_text", "locate_dashboard",
           "voila_argv", "serve", "FAULTS", "parse_fault", "simulate_command",
           "notebooks_command"]

#: The dashboard ``perfkit serve`` runs: ``dashboard.ipynb`` of the notebooks that ship with
#: perfkit, found with importlib.resources (:mod:`perfkit.resources`).
DASHBOARD_NOTEBOOK = resource_path(NOTEBOOK_PACKAGE) / DASHBOARD_NAME
#: Environment variable that carries the profile path to the notebook's parameters cell.
PROFILE_ENV = "PERFKIT_PROFILE"
HOST = "127.0.0.1"
DEFAULT_PORT = 8866
TEMPLATE_NAME = "perfkit"
#: Largest websocket message the served page may send: room for the dashboard's 200 MiB
#: upload limit (perfkit.io.archive.DEFAULT_MAX_UPLOAD_BYTES) plus the message's framing.
WEBSOCKET_MAX_MESSAGE_BYTES = 256 * 2**20

# Voila template: the stock "lab" template less its CDN references. The lab template's
# notebook_css block links Font Awesome from a CDN, so it is rewritten here (same content
# otherwise) and calls the nbconvert block directly (super.super); the nbconvert lab
# template imports Mermaid from a CDN, whose block is emptied. MathJax is already removed
# by Voila's lab template.
_TEMPLATE_CONF = {"base_template": "lab"}
_TEMPLATE_INDEX = """\
{%- extends 'voila/templates/lab/index.html.j2' -%}
{% import "spinner.macro.html.j2" as spinner %}

{%- block notebook_css -%}
  {% if frontend == "voila" %}
    {{ resources.include_js("static/voila-style.js") }}
  {% endif %}
  {{ spinner.css() }}
  <style>
    .jp-mod-noOutputs.jp-mod-noInput { display: none; }
  </style>
  {{ super.super() }}
{%- endblock notebook_css -%}

{%- block html_head_js_mermaidjs -%}
{%- endblock html_head_js_mermaidjs -%}
"""


class ServeError(PerfkitError):
    """``perfkit serve`` cannot start: missing notebook or profile, busy port."""


# --------------------------------------------------------------------------------------
# info
# --------------------------------------------------------------------------------------

def info_text() -> str:
    """What ``perfkit info`` prints: version, model presets, hardware presets.

    Returns
    -------
    str
        Plain text, one preset a line; hardware peaks are dense FLOP/s of the preset's
        default dtype, memory in GiB (2**30 bytes).
    """
    lines = [f"perfkit {__version__}", "", "Model presets (ModelSpec.preset):",
             f"  {'name':<14}{'parameters':>12}{'layers':>8}{'hidden':>8}{'heads':>7}"
             f"{'kv':>5}{'seq':>7}  mlp"]
    for name in ModelSpec.presets():
        m = ModelSpec.preset(name)
        params = f"{m.num_parameters() / 1e9:,.2f} B"
        lines.append(f"  {name:<14}{params:>12}{m.num_layers:>8}{m.hidden_size:>8}"
                     f"{m.num_attention_heads:>7}{m.num_kv_heads:>5}{m.seq_length:>7}  "
                     f"{m.mlp}{f' MoE {m.num_experts}x top-{m.moe_top_k}' if m.is_moe else ''}")
    lines += ["", "Hardware presets (Hardware.preset):",
              f"  {'name':<14}{'dtype':>6}{'peak TFLOP/s':>14}{'memory GiB':>12}"]
    for name in Hardware.presets():
        hw = Hardware.preset(name)
        lines.append(f"  {name:<14}{hw.default_dtype:>6}{hw.peak() / 1e12:>14,.1f}"
                     f"{hw.memory_bytes / 2**30:>12,.1f}")
    return "\n".join(lines)


def _ranges(values: Sequence[int]) -> str:
    """``[0, 1, 2, 3, 7]`` -> ``"0-3, 7"``."""
    out: list[str] = []
    items = sorted(set(int(v) for v in values))
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ", ".join(out)


def _ms3(ms: float) -> str:
    """Milliseconds in the unit that fits, 3 significant digits (``1.23 s``, ``0.123 ms``)."""
    from .format import time_text

    return time_text(ms * 1e3, unit="ms" if abs(ms) < 1e3 else None)


def _pct(value: Any) -> str:
    from .format import share_text

    return "-" if share_text(value) == "–" else share_text(value)


def _wrap(text: str, indent: str, width: int = 100) -> list[str]:
    """Lines of ``text`` under ``indent``; a number and its unit stay on one line."""
    glued = re.sub(r"(\d) (%|ms|µs|s|GiB|MiB|KiB|B)(?!\w)", "\\1\xa0\\2",
                   " ".join(str(text).split()))
    lines = textwrap.wrap(glued, width=width, initial_indent=indent,
                          subsequent_indent=indent + "  ") or [indent.rstrip()]
    return [line.replace("\xa0", " ") for line in lines]


def _steps_lines(profile: Any, max_steps: int = 10) -> list[str]:
    from .analysis import measured_step_s, step_breakdown
    from .format import sig, time_text, time_unit
    from .widgets.headline import step_split, with_exposed_comm

    try:
        steps = step_breakdown(profile)
    except PerfkitError as exc:
        return [f"Steps: none ({exc})"]
    if steps.empty or "step" not in steps.columns:
        why = "; ".join(steps.attrs.get("notes", [])) or "no step found"
        return [f"Steps: none ({why})"]
    known = with_exposed_comm(steps.dropna(subset=["step_us"]))
    ids = sorted({s for s in steps["step"].dropna().tolist()})
    source = ", ".join(sorted({str(s) for s in steps.get("source", []) if s == s})) or "?"
    lines = [f"Steps: {len(ids)} ({_ranges(ids) if ids else 'unnumbered'}), "
             f"figures from {source} data"]
    step_s = measured_step_s(steps)
    if math.isnan(step_s):
        return lines + ["  measured step time: unknown (no step has a duration)"]
    lines.append(f"  measured step time: {time_text(step_s * 1e6)} (median over steps of the "
                 "slowest rank's step time)")
    split = step_split(steps)
    if not split.empty:
        parts = ", ".join(f"{r.label} {_pct(r.share)}" for r in split.itertuples())
        n_ranks, n_steps = split.attrs["ranks"], split.attrs["steps"]
        lines += _wrap(f"where the step goes: {parts} (shares of the step time summed over "
                       f"{n_ranks} rank{'s' * (n_ranks != 1)} × {n_steps} "
                       f"step{'s' * (n_steps != 1)}; they add up to 100 %)", "  ")
    has_bubble = bool(known["bubble_us"].fillna(0).gt(0).any())
    unit, size = time_unit(known["step_us"])
    head = f"step ({unit})"
    lines.append(f"  {'step':>6}  {'slowest rank':>12}  {head:>10}  {'computing':>9}  "
                 f"{'comm exposed':>12}" + (f"  {'bubble':>7}" if has_bubble else "")
                 + f"  {'free':>7}")
    slowest = known.loc[known.groupby("step", dropna=False)["step_us"].idxmax()]
    for _, row in slowest.head(max_steps).iterrows():
        step = "NA" if row["step"] != row["step"] else int(row["step"])
        share = row["comm_exposed_us"] / row["step_us"] if row["step_us"] else float("nan")
        bubble = (f"  {_pct(row.get('bubble_share')):>7}" if has_bubble else "")
        lines.append(f"  {step!s:>6}  {int(row['rank']):>12}  "
                     f"{sig(row['step_us'] / size):>10}  "
                     f"{_pct(row.get('computing_share')):>9}  {_pct(share):>12}{bubble}  "
                     f"{_pct(row.get('free_share')):>7}")
    if len(slowest) > max_steps:
        lines.append(f"  ... {len(slowest) - max_steps} more steps")
    return lines


def _job_lines(job: Any) -> list[str]:
    """The job section of ``perfkit info``: values with their sources, then the figures."""
    from .widgets.summary import job_summary

    def src(*names: str) -> str:
        return "/".join(sorted({job.source(n) for n in names}))

    lines = ["The job (perfkit.infer_job; [source] of each value):"]
    m = job.model
    if m is not None:
        lines.append(f"  {'model':<15}{m.name or 'not a preset'}: {m.num_layers} layers, "
                     f"hidden {m.hidden_size}, {m.num_attention_heads} heads "
                     f"({m.num_kv_heads} key/value), FFN {m.ffn_hidden_size} {m.mlp}, vocab "
                     f"{m.vocab_size} [{src('num_layers', 'hidden_size', 'vocab_size')}]")
    else:
        lines += _wrap(f"unknown: {job.detail('name')}", f"  {'model':<15}")
    p = job.parallel
    lines.append(f"  {'layout':<15}dp {p.dp} × tp {p.tp} × pp {p.pp}"
                 + (f" (vpp {p.vpp})" if p.vpp > 1 else "")
                 + f" = {p.world_size} devices, micro-batch {p.micro_batch_size} × "
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
        lines += _wrap(f"none: {job.detail('hardware')}", f"  {'hardware':<15}")
    for problem in job.problems():
        lines += _wrap(f"warning: {problem}", "  ")
    if job.missing():
        from .widgets.headline import throughput_figure

        tps = throughput_figure(job, job.step_time_s or float("nan"))
        if tps.text != "–":
            lines.append(f"  {'tokens/s per device':<36}{tps.text.split(' tokens')[0]}")
        lines += _wrap("other figures: not computed, the job lacks "
                       + "; ".join(job.missing()), "  ")
        return lines
    try:
        summary = job_summary(job).set_index("key")
    except PerfkitError as exc:
        return lines + _wrap(f"figures: not computed: {exc}", "  ")
    for key in ("tokens_per_s_per_device", "mfu", "hfu", "memory_gib", "predicted_step_s"):
        row = summary.loc[key]
        lines.append(f"  {row['metric']:<36}{row['text']}")
        if isinstance(row["warning"], str) and row["warning"]:
            lines += _wrap(f"warning: {row['warning']}", "    ")
    return lines


def _findings_lines(profile: Any, n_findings: int, job: Any = None) -> list[str]:
    from .advisor import advise

    findings = advise(profile) if job is None else advise(
        profile, model=job.model, parallel=job.parallel, hardware=job.hardware)
    if not findings:
        return ["Findings: none (nothing abnormal found by the advisor)"]
    shown = findings[:n_findings]
    lines = [f"Top findings ({len(shown)} of {len(findings)}, best first; "
             "perfkit.advise(profile)):"]
    for i, f in enumerate(shown, 1):
        lines += _wrap(f"{i}. [{f.severity}] {f.title}", "  ")
        stake = (f"{_ms3(f.ms_per_step)} per step ({_pct(f.score)} of the step)"
                 if f.measured else "not measurable from the profile")
        lines.append(f"     at stake: {stake}; area {f.area}; notebook {f.notebook}")
        lines += _wrap(f"evidence: {f.evidence}", "     ")
        lines += _wrap(f"next: {f.recommendation}", "     ")
    return lines


def profile_info_text(profile_or_path: Any, n_findings: int = 5,
                      config: Any = None) -> str:
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

    Raises
    ------
    ProfileError
        The path holds no profile perfkit can read.
    """
    if isinstance(profile_or_path, (str, os.PathLike)):
        from .io.detect import load

        profile = load(profile_or_path)
    else:
        profile = profile_or_path
    if isinstance(n_findings, bool) or not isinstance(n_findings, int) or n_findings < 0:
        raise InvalidArgumentError("n_findings", "must be a whole number >= 0", n_findings)
    meta = profile.meta
    ranks = getattr(profile, "ranks", None)
    if ranks:
        rank_text = f"{len(ranks)} ({_ranges(ranks)})"
    else:
        rank_text = f"1 (rank {meta.rank})" if meta.rank is not None else "1"
    facts = [("path", meta.path or str(profile_or_path)), ("format", meta.source_format),
             ("framework", meta.framework or "unknown"),
             ("device", meta.device_type or "unknown"),
             ("profiler level", meta.profiler_level or "unknown"), ("ranks", rank_text),
             ("world size", str(meta.world_size) if meta.world_size else "unknown")]
    lines = [f"Profile ({type(profile).__name__}, perfkit {__version__}):"]
    lines += [f"  {name:<15}{value}" for name, value in facts]
    for note in meta.notes:
        lines += _wrap(f"note: {note}", "  ")
    from .job import infer_job

    job = infer_job(profile, config=config)
    lines += [""] + _job_lines(job)
    lines += [""] + _steps_lines(profile)
    if n_findings:
        lines += [""] + _findings_lines(profile, n_findings, job)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# simulate
# --------------------------------------------------------------------------------------

def _fault_classes() -> dict[str, type]:
    from .simulate import faults as F

    classes = [F.SlowRank, F.SlowLink, F.UnbalancedStage, F.DataLoadingStall,
               F.UnfusedOperators, F.HostBound, F.NoOverlap, F.MemoryPressure,
               F.FullRecompute]
    return {_kebab(cls.__name__): cls for cls in classes}


def _kebab(name: str) -> str:
    """``SlowRank``, ``slow_rank``, ``Slow-Rank`` -> ``slow-rank``."""
    name = "".join("-" + c if c.isupper() else c for c in name.strip()).lstrip("-")
    return "-".join(w for w in name.lower().replace("_", "-").split("-") if w)


#: ``--fault`` names: the class names of :mod:`perfkit.simulate.faults` in kebab case.
FAULTS: tuple[str, ...] = tuple(_fault_classes())
_FAULT_ALIASES = {"data-stall": "data-loading-stall"}


def _fault_value(cls_name: str, field: dataclasses.Field, text: str) -> Any:
    kind = str(field.type)
    text = text.strip()
    where = f"--fault {cls_name}: {field.name}"
    if "None" in kind and text.lower() in ("none", "all", ""):
        return None
    try:
        if "tuple[int" in kind:
            return tuple(int(x) for x in text.split("+"))
        if "tuple[str" in kind:
            return tuple(x.strip() for x in text.split("+") if x.strip())
        if kind.startswith("int"):
            return int(text)
        if kind.startswith("float"):
            return float(text)
    except ValueError:
        want = {"int": "a whole number", "float": "a number"}
        rule = ("must be whole numbers joined by '+', e.g. 0+3" if "tuple[int" in kind else
                f"must be {want.get(kind.split()[0], kind)}")
        raise InvalidArgumentError(where, rule, text) from None
    return text


def parse_fault(spec: str) -> Any:
    """A fault of :mod:`perfkit.simulate.faults` from its command-line form.

    Syntax: ``NAME`` or ``NAME:VALUE,...`` where each value is ``field=value`` or, like
    Python's positional arguments, a bare value for the next field in order. Names are the
    class names in kebab case (:data:`FAULTS`; ``data-stall`` also works); field names may
    use ``-`` for ``_``; list fields join their items with ``+``; ``ranks=all`` is None.

    Examples: ``slow-rank:rank=3,factor=1.5``, ``slow-rank:3``, ``slow-link:2,3,0.15``,
    ``data-loading-stall:stall_us=120000,every=2,ranks=0+1``,
    ``unfused-operators:ops=rms_norm+rotary``, ``no-overlap``.

    Raises
    ------
    InvalidArgumentError
        Unknown fault or field, a value of the wrong kind, a field given twice, or a value
        the fault rejects (each message names the fault and the field).
    """
    classes = _fault_classes()
    name, _, rest = str(spec).strip().partition(":")
    name = _kebab(name)
    name = _FAULT_ALIASES.get(name, name)
    if name not in classes:
        raise InvalidArgumentError("--fault", f"unknown fault {name!r}; known: "
                                   f"{', '.join(FAULTS)}", spec)
    cls = classes[name]
    fields = [f for f in dataclasses.fields(cls) if f.init]
    by_name = {f.name: f for f in fields}
    kwargs: dict[str, Any] = {}
    positional = True
    items = [p for p in rest.split(",") if p.strip()]
    for i, item in enumerate(items):
        key, eq, text = item.partition("=")
        if eq:
            positional = False
            key = key.strip().lower().replace("-", "_")
            if key not in by_name:
                known = ", ".join(by_name) or "none"
                raise InvalidArgumentError(f"--fault {name}", f"unknown field {key!r}; its "
                                           f"fields are: {known}", spec)
            field = by_name[key]
        else:
            if not positional:
                raise InvalidArgumentError(f"--fault {name}", "a bare value cannot follow "
                                           "a field=value", spec)
            if i >= len(fields):
                rule = (f"takes at most {len(fields)} value(s) ({', '.join(by_name)})"
                        if fields else "takes no values")
                raise InvalidArgumentError(f"--fault {name}", rule, spec)
            field, text = fields[i], key
        if field.name in kwargs:
            raise InvalidArgumentError(f"--fault {name}", f"{field.name} given twice", spec)
        kwargs[field.name] = _fault_value(name, field, text)
    try:
        return cls(**kwargs)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"--fault {name}: {exc.parameter}", exc.rule,
                                   exc.value) from None
    except TypeError:  # a required field is missing
        missing = [f.name for f in fields if f.name not in kwargs
                   and f.default is dataclasses.MISSING]
        raise InvalidArgumentError(f"--fault {name}", f"needs {', '.join(missing)}, e.g. "
                                   f"{name}:{missing[0]}=...", spec) from None


_SIM_MARKER = "perfkit_simulation"


def _is_simulated_rank(path: Path) -> bool:
    """A rank folder written by :func:`perfkit.simulate.simulate`."""
    if not (path.is_dir() and path.name.endswith(("_ascend_pt", "_ascend_ms"))):
        return False
    try:
        meta = json.loads((path / "profiler_metadata.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and _SIM_MARKER in meta


#: ``perfkit simulate`` options that describe the job (not allowed with ``--scenario``).
_JOB_OPTIONS = ("model", "num_layers", "seq_length", "hardware", "dp", "tp", "pp", "vpp",
                "micro_batch_size", "num_micro_batches", "optimizer_shard", "recompute",
                "recompute_layers", "faults", "efficiency", "light", "allow_oom")


def _recompute_layers(text: str | None) -> int | tuple[int, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise InvalidArgumentError("--recompute-layers", "must be a whole number or one per "
                                   "pipeline stage joined by ',', e.g. 4,0", text) from None
    return values[0] if len(values) == 1 else values


def _preset(cls: Any, option: str, name: str) -> Any:
    if name not in cls.presets():
        raise InvalidArgumentError(option, f"unknown preset; known: {', '.join(cls.presets())}",
                                   name)
    return cls.preset(name)


def simulate_command(args: argparse.Namespace) -> int:
    """``perfkit simulate``: validate, simulate into a temporary folder, then move in.

    OUT may be missing (created), empty, or hold rank folders of an earlier simulation
    (they are replaced). Anything else in OUT needs ``--force``, and is then left as it
    is. A failed simulation leaves OUT untouched.
    """
    from .simulate import scenarios as S
    from .simulate import simulate

    faults = tuple(parse_fault(spec) for spec in (args.faults or []))
    if args.scenario is not None:
        given = [f"--{k.replace('_', '-')}".replace("--faults", "--fault")
                 for k in _JOB_OPTIONS if getattr(args, k) is not None]
        if given:
            raise InvalidArgumentError("--scenario", "sets the model, layout, hardware and "
                                       f"faults itself; drop {', '.join(given)}")
        if args.scenario not in S.scenario_names():
            raise InvalidArgumentError("--scenario", "must be one of "
                                       f"{', '.join(S.scenario_names())}", args.scenario)
        scenario = S.scenario(args.scenario)
        what = f"scenario {scenario.name} ({scenario.title})"
        ranks = scenario.num_ranks
        steps = args.steps if args.steps is not None else scenario.steps

        def run(out: Path) -> Path:
            return S.write_scenario(scenario, out, seed=args.seed, steps=steps,
                                    framework=args.framework)
    else:
        model = _preset(ModelSpec, "--model", args.model or "llama2-13b")
        changes = {k: v for k, v in (("num_layers", args.num_layers),
                                     ("seq_length", args.seq_length)) if v is not None}
        if changes:
            model = model.replace(**changes)
        layout = {k: getattr(args, k) for k in ("dp", "tp", "pp", "vpp", "micro_batch_size",
                                                 "num_micro_batches", "optimizer_shard",
                                                 "recompute") if getattr(args, k) is not None}
        parallel = ParallelConfig(recompute_layers=_recompute_layers(args.recompute_layers),
                                  **layout)
        parallel.validate(model)
        hardware = _preset(Hardware, "--hardware", args.hardware or "ascend-910b")
        steps = 3 if args.steps is None else args.steps
        ranks = parallel.dp * parallel.tp * parallel.pp
        what = (f"{model.name} ({model.num_layers} layers) on {hardware.name}, dp {parallel.dp}"
                f" x tp {parallel.tp} x pp {parallel.pp}, {parallel.num_micro_batches} "
                f"micro-batch(es)" + (f", faults: {', '.join(map(repr, faults))}"
                                      if faults else ""))
        light = {"aic_metrics": None, "trace_kernels": False} if args.light else {}
        extra = {} if args.efficiency is None else {"efficiency": args.efficiency}

        def run(out: Path) -> Path:
            return simulate(model, parallel, hardware, steps=steps, faults=faults,
                            seed=args.seed, out=out, framework=args.framework,
                            allow_oom=bool(args.allow_oom), **light, **extra)

    out = Path(args.out).expanduser()
    if out.exists() and not out.is_dir():
        raise InvalidArgumentError("OUT", "is a file; give a folder for the rank folders",
                                   str(out))
    old = [p for p in out.iterdir() if _is_simulated_rank(p)] if out.is_dir() else []
    others = sorted(p.name for p in out.iterdir() if p not in old) if out.is_dir() else []
    if others and not args.force:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise InvalidArgumentError(
            "OUT", f"{out} is not empty and is not the output of an earlier perfkit simulate "
            f"(it holds {shown}); choose a new folder, or pass --force to write next to "
            "what is there (nothing of it is deleted)")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    print(f"perfkit simulate: {what}; {ranks} rank(s), {steps} step(s)", file=sys.stderr,
          flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix=".perfkit-simulate-", dir=out) as tmp:
            run(Path(tmp))
            for p in old:
                shutil.rmtree(p)
            for p in sorted(Path(tmp).iterdir()):
                p.rename(out / p.name)
    except BaseException:
        if created and not any(out.iterdir()):
            out.rmdir()  # only the empty folder made above
        raise
    size = sum(f.stat().st_size for p in out.iterdir() if _is_simulated_rank(p)
               for f in p.rglob("*") if f.is_file())
    replaced = f" (replaced {len(old)} rank folder(s) of an earlier simulation)" if old else ""
    print(f"wrote {ranks} rank folder(s), {steps} step(s), {size / 1e6:.1f} MB to {out}"
          f"{replaced}\nopen it with: perfkit info {out}   or in Python: "
          f"perfkit.load({str(out)!r})")
    return 0


# --------------------------------------------------------------------------------------
# serve
# --------------------------------------------------------------------------------------

def locate_dashboard(notebook: str | os.PathLike[str] | None = None) -> Path:
    """The dashboard notebook, or a :class:`ServeError` saying where it was looked for.

    Parameters
    ----------
    notebook : path, optional
        Defaults to :data:`DASHBOARD_NOTEBOOK` (``dashboard.ipynb`` of the notebooks that
        ship inside the perfkit package).
    """
    path = Path(DASHBOARD_NOTEBOOK if notebook is None else notebook)
    if not path.is_file():
        why = ("this perfkit installation lacks its notebooks; reinstall it from its wheel, "
               "or with 'pip install -e .' in a checkout" if notebook is None else
               "give the path of a notebook")
        raise ServeError(f"dashboard notebook not found: {path} ({why})")
    return path


def _check_port(port: int) -> None:
    if not 1 <= port <= 65535:
        raise ServeError(f"--port: must be in 1..65535 (got {port})")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            why = "already in use" if exc.errno == errno.EADDRINUSE else str(exc)
            raise ServeError(f"--port: cannot listen on {HOST}:{port} ({why}); "
                             "choose another port with --port N") from exc


def voila_argv(notebook: Path, port: int, open_browser: bool, template: str | None = None,
               preheat: bool = True) -> list[str]:
    """Command-line arguments for Voila (without the program name).

    Parameters
    ----------
    notebook : Path
        The notebook to serve.
    port : int
        Port on 127.0.0.1; Voila may not try another one (``port_retries=0``), so the URL
        printed before serving is the one served.
    open_browser : bool
        False adds ``--no-browser``.
    template : str, optional
        Voila template name (``--template``).
    preheat : bool
        Keep one kernel that has already run the notebook ready for the next visitor
        (Voila's ``preheat_kernel`` with a pool of one): the page then shows its charts
        without waiting for a kernel to start and the profile to load.
    """
    argv = [str(notebook), f"--port={port}", f"--Voila.ip={HOST}", "--Voila.port_retries=0",
            "--strip_sources=True", "--show_tracebacks=False"]
    if preheat:
        argv += ["--preheat_kernel=True", "--pool_size=1"]
    if template:
        argv.append(f"--template={template}")
    if not open_browser:
        argv.append("--no-browser")
    return argv


def _voila_data_root() -> Path | None:
    """The Jupyter data folder holding Voila's stock ``lab`` template, if any.

    Our template extends ``voila/templates/lab/index.html.j2``; Voila only finds it when
    its data folder is on the Jupyter path, which is not the case in every environment
    (a virtual environment layered on a system Python, for one).
    """
    import sysconfig

    from jupyter_core.paths import jupyter_path

    candidates = [Path(p) for p in jupyter_path()]
    candidates += [Path(sys.prefix) / "share" / "jupyter",
                   Path(sys.base_prefix) / "share" / "jupyter",
                   Path(sysconfig.get_path("data")) / "share" / "jupyter"]
    for root in candidates:
        if (root / "voila" / "templates" / "lab" / "index.html.j2").is_file():
            return root
    return None


def _write_template(root: Path) -> None:
    folder = root / "voila" / "templates" / TEMPLATE_NAME
    folder.mkdir(parents=True)
    (folder / "conf.json").write_text(json.dumps(_TEMPLATE_CONF), encoding="utf-8")
    (folder / "index.html.j2").write_text(_TEMPLATE_INDEX, encoding="utf-8")


def serve(profile: str | os.PathLike[str] | None = None, port: int = DEFAULT_PORT,
          open_browser: bool = True, notebook: str | os.PathLike[str] | None = None,
          preheat: bool = True) -> int:
    """Serve the dashboard with Voila until interrupted (Ctrl-C or SIGTERM).

    Parameters
    ----------
    profile : path, optional
        Profile folder or file, or ``"sample:NAME"`` (a bundled sample); must exist.
        Passed to the notebook as ``PERFKIT_PROFILE``, as an absolute path.
    port : int
        Port on 127.0.0.1.
    open_browser : bool
        Whether Voila opens a browser tab.
    notebook : path, optional
        Notebook to serve (default :data:`DASHBOARD_NOTEBOOK`).
    preheat : bool
        Keep a kernel that has already run the notebook ready (see :func:`voila_argv`).

    Returns
    -------
    int
        0 once the server has stopped.

    Notes
    -----
    The kernel websocket accepts messages up to :data:`WEBSOCKET_MAX_MESSAGE_BYTES`
    (tornado's default is 10 MiB): an upload of a zipped profile travels in one message,
    and the dashboard refuses, with a message, uploads above its own (smaller) limit.

    Raises
    ------
    ServeError
        Notebook or profile missing, port not available.
    """
    path = locate_dashboard(notebook)
    profile_path = None
    if profile is not None:
        profile_path = Path(resolve_sample(profile)).expanduser().resolve()
        if not profile_path.exists():
            raise ServeError(f"profile path not found: {profile}")
    _check_port(port)

    from voila.app import Voila  # heavy import: only when serving

    saved = {name: os.environ.get(name) for name in (PROFILE_ENV, "JUPYTER_PATH")}
    stock = _voila_data_root()
    with tempfile.TemporaryDirectory(prefix="perfkit-voila-") as tmp:
        template = None
        if stock is not None:
            _write_template(Path(tmp))
            template = TEMPLATE_NAME
        else:
            print("perfkit: Voila's lab template was not found on the Jupyter path; serving "
                  "the stock template (its icon font comes from a CDN)", file=sys.stderr)
        os.environ["JUPYTER_PATH"] = os.pathsep.join(
            str(p) for p in (tmp, stock, saved["JUPYTER_PATH"]) if p)
        if profile_path is not None:
            os.environ[PROFILE_ENV] = str(profile_path)
        else:
            os.environ.pop(PROFILE_ENV, None)
        print(f"perfkit {__version__}: serving {path.name} at http://{HOST}:{port}/ "
              "(Ctrl-C to stop)", flush=True)
        try:
            Voila.launch_instance(
                argv=voila_argv(path, port, open_browser, template, preheat=preheat),
                tornado_settings={"websocket_max_message_size": WEBSOCKET_MAX_MESSAGE_BYTES})
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return 0


# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------

_EPILOG_INFO = """\
examples:
  perfkit info                          version, model and hardware presets
  perfkit info sample:slow-rank         what the profile is, its steps, its top findings
                                        (sample:NAME: a bundled sample; or a PATH)
  perfkit info PATH --findings 10       list more findings (0: skip the advisor)
  perfkit info PATH --config run.yaml   the job from a MindFormers YAML (or an HF
                                        config.json, a training log) where it differs
"""

_EPILOG_REPORT = """\
examples:
  perfkit report sample:slow-rank -o slow-rank.html
  perfkit report ~/runs/job42 -o job42.html --notebook 07_cluster --timeout 1200

The notebook runs in a Python kernel of this interpreter (ipykernel); the profile path is
injected as its PROFILE parameter. The page holds the notebook's explanations and outputs
(tables, inline SVG charts), no code and nothing fetched from another server, so it can be
mailed or archived as one file. Nothing is written into the profile folder.
"""

_EPILOG_SIMULATE = """\
faults (--fault NAME[:VALUE,...], repeatable; values are field=value or positional in the
order shown; list items are joined with '+'):
  slow-rank:rank[,factor]                       e.g. slow-rank:rank=3,factor=1.5
  slow-link:src,dst[,bandwidth_factor]          e.g. slow-link:2,3,0.15
  unbalanced-stage:stage[,factor]               e.g. unbalanced-stage:stage=1,factor=1.4
  data-loading-stall:[stall_us,every,ranks]     e.g. data-stall:stall_us=120000,every=2,ranks=0+1
  unfused-operators:[ops]                       e.g. unfused-operators:ops=rms_norm+rotary
  host-bound:[launch_us]   no-overlap   memory-pressure:[fraction,realloc_us]   full-recompute

examples:
  perfkit simulate /tmp/slow-rank --scenario slow-rank
  perfkit simulate /tmp/job --model llama2-7b --num-layers 4 --dp 4 --num-micro-batches 2 \\
      --steps 2 --fault slow-rank:rank=2,factor=1.25
  perfkit simulate /tmp/pp --dp 2 --tp 2 --pp 2 --num-layers 8 --num-micro-batches 8 --light

OUT receives one folder per rank. It may be new, empty, or hold an earlier simulation
(replaced); anything else in it needs --force and is kept. See docs/simulate.md.
"""


_EPILOG_NOTEBOOKS = """\
examples:
  perfkit notebooks                     copy into ./perfkit-notebooks
  perfkit notebooks ~/tuning            copy into ~/tuning (created if missing)
  perfkit notebooks ~/tuning --force    also overwrite the copies you changed

The notebooks open bundled samples by name (PROFILE = "sample:..." in their first cell),
so they run from any folder; set PROFILE to your own profile's folder to tune your job.
"""


def notebooks_command(args: argparse.Namespace) -> int:
    """``perfkit notebooks``: copy the guided notebooks, say what was copied or kept, and
    print the ``jupyter lab`` command."""
    import shlex

    from .workspace import copy_notebooks

    done = copy_notebooks(args.folder, force=args.force)
    for label, names in (("copied", done.copied), ("replaced (--force)", done.replaced),
                         ("already up to date", done.unchanged)):
        if names:
            print(f"{label}: {', '.join(names)}")
    if done.kept:
        print(f"kept (they differ from perfkit {__version__}'s, e.g. your edits; --force "
              f"replaces them): {', '.join(done.kept)}")
    print(f"notebooks in {done.folder}\nopen them with:\n  jupyter lab "
          f"{shlex.quote(str(done.folder))}")
    return 0


def _para(text: str) -> str:
    return textwrap.fill(text, 88)


def build_parser() -> argparse.ArgumentParser:
    """The ``perfkit`` argument parser (subcommands ``serve``, ``info``, ``report``,
    ``simulate``, ``notebooks``, ``journal``)."""
    from .report import DEFAULT_NOTEBOOK, DEFAULT_TIMEOUT_S
    from .simulate.scenarios import SCENARIOS
    from .workspace import DEFAULT_FOLDER

    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="perfkit",
        description="A workbench for tuning the training performance of large language "
                    "models.",
        epilog="Run 'perfkit COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"perfkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve_p = sub.add_parser(
        "serve", help="serve the dashboard (Voila) on 127.0.0.1",
        description="Serve the dashboard notebook that ships with perfkit with Voila on "
                    "127.0.0.1, sources stripped, no CDN needed.")
    serve_p.add_argument("path", nargs="?", default=None, metavar="PATH",
                         help="profile folder or file to show, or sample:NAME (passed to "
                              f"the notebook as {PROFILE_ENV})")
    serve_p.add_argument("--port", type=int, default=DEFAULT_PORT,
                         help=f"port on {HOST} (default {DEFAULT_PORT})")
    serve_p.add_argument("--no-browser", action="store_true",
                         help="do not open a web browser")
    serve_p.add_argument("--no-preheat", action="store_true",
                         help="start a kernel per page instead of keeping one that has "
                              "already run the dashboard ready (slower first chart, one "
                              "kernel less in memory)")

    info_p = sub.add_parser(
        "info", help="version and presets, or a summary of a profile",
        formatter_class=raw, epilog=_EPILOG_INFO,
        description=_para("Without PATH: print the perfkit version and the model and "
                          "hardware presets. With PATH: load the profile and print its "
                          "format, framework, device, profiler level, ranks and world size, "
                          "the loader's notes, the job read from it (each value's source, "
                          "MFU and HFU checked), the steps with the measured step time (per "
                          "step the slowest rank), and the advisor's top findings."))
    info_p.add_argument("path", nargs="?", default=None, metavar="PATH",
                        help="profile folder or file (anything perfkit.load reads), or "
                             "sample:NAME for a bundled sample")
    info_p.add_argument("--findings", type=int, default=5, metavar="N",
                        help="how many findings to list (default 5; 0 skips the advisor)")
    info_p.add_argument("--config", action="append", default=None, metavar="FILE",
                        help="a MindFormers YAML, HF config.json or training log that wins "
                             "over what the profile shows (repeatable)")

    report_p = sub.add_parser(
        "report", help="run a guided notebook on a profile, write one self-contained HTML",
        formatter_class=raw, epilog=_EPILOG_REPORT,
        description=_para(f"Run the guided notebook {DEFAULT_NOTEBOOK} (or --notebook) on "
                          "the profile at PATH and write its outputs as a self-contained HTML "
                          "page without code cells or CDN scripts. A progress bar over the "
                          "cells goes to stderr."))
    report_p.add_argument("path", metavar="PATH",
                          help="profile folder or file (anything perfkit.load reads), or "
                               "sample:NAME for a bundled sample")
    report_p.add_argument("-o", "--output", default="report.html", metavar="FILE",
                          help="HTML file to write (default report.html; replaced if it "
                               "exists; its folder must exist)")
    report_p.add_argument("--notebook", default=DEFAULT_NOTEBOOK, metavar="NAME",
                          help=f"guided notebook name or .ipynb path (default "
                               f"{DEFAULT_NOTEBOOK})")
    report_p.add_argument("--timeout", type=float, default=float(DEFAULT_TIMEOUT_S),
                          metavar="S",
                          help=f"seconds each cell may run (default {DEFAULT_TIMEOUT_S})")
    report_p.add_argument("--no-progress", action="store_true",
                          help="no progress bar on stderr")
    report_p.add_argument("--config", action="append", default=None, metavar="FILE",
                          help="a MindFormers YAML, HF config.json or training log that "
                               "wins over what the profile shows (the notebook's CONFIG; "
                               "repeatable)")

    sim_p = sub.add_parser(
        "simulate", help="write a simulated profile (a teaching scenario or your own job)",
        formatter_class=raw, epilog=_EPILOG_SIMULATE,
        description=_para("Write the profile of a training job that never ran, one folder "
                          "per rank in the Ascend text-export layout (perfkit.simulate), "
                          "with planted faults whose answer is known."))
    sim_p.add_argument("out", metavar="OUT", help="folder to write the rank folders into")
    sim_p.add_argument("--scenario", default=None, metavar="NAME",
                       help="one of the bundled scenarios of data/simulated/ (same settings "
                            "and seed, so the same files): "
                            + ", ".join(s.name for s in SCENARIOS)
                            + "; cannot be combined with the job options")
    job = sim_p.add_argument_group("the job (without --scenario)")
    job.add_argument("--model", default=None,
                     help="model preset (default llama2-13b): "
                          + ", ".join(ModelSpec.presets()))
    job.add_argument("--num-layers", type=int, default=None, metavar="N",
                     help="layers (default: the preset's)")
    job.add_argument("--seq-length", type=int, default=None, metavar="N",
                     help="sequence length (default: the preset's)")
    job.add_argument("--hardware", default=None,
                     help="hardware preset (default ascend-910b): "
                          + ", ".join(Hardware.presets()))
    for flag, what in (("--dp", "data parallel"), ("--tp", "tensor parallel"),
                       ("--pp", "pipeline stages"), ("--vpp", "virtual pipeline chunks"),
                       ("--micro-batch-size", "sequences per micro-batch"),
                       ("--num-micro-batches", "micro-batches per step"),
                       ("--optimizer-shard", "optimizer state sharded over N ranks")):
        job.add_argument(flag, type=int, default=None, metavar="N", help=f"{what} (default 1)")
    job.add_argument("--recompute", choices=("none", "selective", "full"), default=None,
                     help="recompute mode (default none)")
    job.add_argument("--recompute-layers", default=None, metavar="N[,N...]",
                     help="fully recomputed layers, one number or one per stage (e.g. 4,0)")
    job.add_argument("--fault", dest="faults", action="append", default=None,
                     metavar="NAME[:VALUE,...]",
                     help="plant a fault (repeatable); see the list below")
    job.add_argument("--efficiency", type=float, default=None,
                     help="achieved share of peak FLOP/s on matrix kernels (default 0.62)")
    job.add_argument("--allow-oom", action="store_true", default=None,
                     help="write the profile even when the job does not fit the device's "
                          "memory (it is refused otherwise)")
    job.add_argument("--light", action="store_true", default=None,
                     help="small files: no PMU columns, no per-kernel events in "
                          "trace_view.json")
    sim_p.add_argument("--steps", type=int, default=None, metavar="N",
                       help="training steps (default 3, or the scenario's)")
    sim_p.add_argument("--seed", type=int, default=0,
                       help="noise seed; same inputs and seed give the same bytes (default 0)")
    sim_p.add_argument("--framework", choices=("pytorch", "mindspore"), default="pytorch",
                       help="torch_npu (*_ascend_pt) or MindSpore (*_ascend_ms) layout "
                            "(default pytorch)")
    sim_p.add_argument("--force", action="store_true",
                       help="write into a folder that holds other files (they are kept)")

    nb_p = sub.add_parser(
        "notebooks", help="copy the guided notebooks into a working folder",
        formatter_class=raw, epilog=_EPILOG_NOTEBOOKS,
        description=_para("Copy the guided notebooks (00_start_here ... 10_tuning_journal) that "
                          "ship with perfkit into DIR, and print the jupyter lab command "
                          "that opens them. A notebook already in DIR with other content "
                          "(your edits) is kept unless --force."))
    nb_p.add_argument("folder", nargs="?", default=DEFAULT_FOLDER, metavar="DIR",
                      help=f"working folder, created if missing (default {DEFAULT_FOLDER})")
    nb_p.add_argument("--force", action="store_true",
                      help="overwrite notebooks in DIR that differ from perfkit's (your "
                           "edits to them are lost)")
    from .journal.cli import add_parser as add_journal_parser

    add_journal_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``perfkit`` command; returns the exit status.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, 2 on a usage error, a :class:`~perfkit.errors.PerfkitError` or any
        other error (its message printed on stderr as one line, no traceback), 130 when
        interrupted.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else 2
    try:
        if args.command == "info":
            if args.path is None:
                print(info_text())
            else:
                path = resolve_sample(args.path)  # "sample:NAME" -> the bundled sample
                if not Path(path).expanduser().exists():
                    raise PerfkitError(f"profile path not found: {args.path}")
                print(profile_info_text(path, n_findings=args.findings,
                                        config=config_paths(args.config)))
            return 0
        if args.command == "report":
            from .report import write_report

            configs = config_paths(args.config)
            path = write_report(args.path, args.output, notebook=args.notebook,
                                timeout=args.timeout, progress=not args.no_progress,
                                params={"CONFIG": configs} if configs else None)
            print(f"wrote {path}")
            return 0
        if args.command == "simulate":
            return simulate_command(args)
        if args.command == "notebooks":
            return notebooks_command(args)
        if args.command == "journal":
            from .journal.cli import run_command as journal_command

            return journal_command(args)
        if args.command == "serve":
            return serve(args.path, port=args.port, open_browser=not args.no_browser,
                         preheat=not args.no_preheat)
        parser.print_help()
        return 2
    except PerfkitError as exc:
        print(f"perfkit: error: {' '.join(str(exc).splitlines())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C before Voila's loop runs (it handles its own)
        print("perfkit: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI's boundary: one line, never a traceback
        text = " ".join(str(exc).split())[:500]
        print(f"perfkit: error: unexpected {type(exc).__name__}{': ' + text if text else ''} "
              "(please report this)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
