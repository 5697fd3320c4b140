"""What perfkit could not read about a job: each missing field, why, and how to give it.

Every view says it once, in one place — the Overview's "What perfkit could not read"
panel, the section of the same name in ``perfkit info`` and in the static report — and
the tabs that need a missing field refer to that place in one line instead of repeating
the reason. :func:`unknowns` lists the fields; :func:`how_to_set` words the ways to give
one for each place (the dashboard's job panel, the command line, Python).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..format import listed, plural
from .fields import CORE_MODEL, field_label
from .network import NETWORK

__all__ = ["Unknown", "unknowns", "said_no_transformer", "how_to_set", "PLACES",
           "PANEL_TITLE", "unknown_labels", "unknown_line", "UNKNOWNS_WHERE"]

#: The title of the panel (and of the section in ``perfkit info`` and the report).
PANEL_TITLE = "What perfkit could not read"
#: Where the ways to set a field are worded for (:func:`how_to_set`).
PLACES = ("dashboard", "cli", "python")

#: Where a view refers its reader for the unknowns, by place: the dashboard's Overview,
#: or the job panel of a notebook.
UNKNOWNS_WHERE = {"dashboard": "on the Overview", "python": "in the job panel",
                  "cli": "in perfkit info"}

_MODEL_FILES = "a MindFormers YAML or a Hugging Face config.json"
_RUN_FILES = "a MindFormers YAML or a training log"


@dataclass(frozen=True)
class Unknown:
    """One field of the job that the profile did not give.

    Attributes
    ----------
    field : str
        The job field (``"hardware"``), or ``"model"`` for the model as a whole.
    label : str
        It in words (``"the hardware"``).
    why : str
        Why it could not be read (the job's evidence).
    needed_for : str
        The figures that wait for it.
    config : str
        The config files that carry it (empty when none does: type it instead).
    example : str
        A value to give, as keyword arguments of ``job.with_overrides``
        (``hardware="ascend-910b"``).
    box : str
        Where to type it in the dashboard's job panel (``the box hardware``).
    hint : str
        What the value is (``a preset name such as ascend-910b or h100``).
    box_hint : str
        What to type in the job panel's boxes, when it differs from ``hint``.
    """

    field: str
    label: str
    why: str
    needed_for: str
    config: str
    example: str
    box: str
    hint: str
    box_hint: str = ""


def unknowns(job: Any) -> list[Unknown]:
    """The fields ``job`` lacks that some figure needs, in the order of the job panel.

    Parameters
    ----------
    job : perfkit.Job

    Returns
    -------
    list of Unknown
        The model (when no full model could be read: the fields missing and why), the
        pipeline size where a measured pipeline bubble shows pp > 1 but no group gives it
        (:attr:`perfkit.Job.pp_unread`), the sequence length and global batch
        (throughput), the hardware and its data type (MFU, roofline, memory capacity),
        the step time (throughput, MFU) and the measured memory peak (the memory check);
        empty for a complete job.
    """
    out: list[Unknown] = []
    # an inference step's MFU counts its tokens' forward pass: it needs the widths, not
    # the sequence length or the global batch (perfkit.job.inference_mfu)
    inference = job.training_step() is False
    if job.model is None:
        missing = job.missing_model_fields()
        whole = all(n in missing for n in (*CORE_MODEL, "seq_length"))
        shown = ["its whole shape"] if whole else [field_label(n) for n in missing]
        why = job.detail("name")
        if said_no_transformer(job):  # no transformer's fields to read or to give
            seen = job.observed[NETWORK][1]
            why = (f"this is not a transformer ({seen}): perfkit's model is a "
                   "transformer's, so the figures below that need it do not apply to this "
                   "network; its measured figures (step, operators, timeline, advice) stand "
                   "without it")
        mfu = not inference or any(job.value(n) is None for n in CORE_MODEL)
        out.append(Unknown(
            "model", "the model" + (f" ({', '.join(shown)})" if shown else ""), why,
            ("MFU, " if mfu else "") + "HFU, the memory theory, the recompute trade-off "
            "and the planner",
            _MODEL_FILES, 'model="llama2-7b"', "the boxes of the Model group",
            "a preset name, or every field: num_layers=…, hidden_size=…, …",
            "num_layers, hidden_size, num_attention_heads, …"))
    elif job.seq_length is None:
        out.append(Unknown("seq_length", "the sequence length", job.detail("seq_length"),
                           "the throughput in tokens/s" + ("" if inference else " and MFU"),
                           f"{_MODEL_FILES}, or a training log", "seq_length=4096",
                           "the box seq_length", "tokens per sequence"))
    if (job.value("num_experts") or 1) > 1 and job.value("moe_top_k") is None:
        out.append(Unknown("moe_top_k", "the experts per token (top-k)",
                           job.detail("moe_top_k"), "MFU", "a Hugging Face config.json "
                           "(num_experts_per_tok)", "moe_top_k=2", "the box moe_top_k",
                           "the experts each token is routed to (2 only as an example)"))
    if job.pp_unread:
        p = job.parallel
        rest = p.tp * p.cp
        dp = max(1, (job.world_size or p.world_size) // (2 * rest))
        out.append(Unknown("pp", "the pipeline size (pp)", job.detail("pp"),
                           "dp (world size / (tp × pp)), the global batch, the memory "
                           "theory, the schedule's bubble and the planner's profiled layout",
                           "a MindFormers YAML (parallel_config.pipeline_stage)",
                           f"pp=2, dp={dp}", "the boxes pp and dp",
                           "the run's pipeline stages, 2 only as an example; dp = world "
                           "size / (tp × pp)"))
    if job.global_batch_size is None:
        out.append(Unknown("global_batch_size", "the global batch", _batch_why(job),
                           "the throughput in tokens/s" + ("" if inference else " and MFU"),
                           _RUN_FILES,
                           "global_batch_size=64", "the box global_batch_size",
                           "sequences per step"))
    if job.hardware is None:
        out.append(Unknown("hardware", "the hardware", job.detail("hardware"),
                           "MFU, HFU, the roofline, the memory capacity and the planner", "",
                           'hardware="ascend-910b"', "the box hardware",
                           "a preset name such as ascend-910b or h100: perfkit info lists "
                           "them"))
    elif job.dtype is None:
        out.append(Unknown("dtype", "the data type", job.detail("dtype"),
                           f"the peak FLOP/s of MFU ({job.hardware.default_dtype}, "
                           f"{job.hardware.name}'s default, is used meanwhile)", "",
                           'dtype="bf16"', "the box dtype", "bf16, fp16 or fp32"))
    if job.step_time_s is None:
        out.append(Unknown("step_time_s", "the step time", job.detail("step_time_s"),
                           "the throughput in tokens/s and MFU",
                           "a training log (its per_step_time)", "step_time_s=1.5",
                           "the box step_time_s", "seconds per step"))
    if job.peak_memory_bytes is None:
        out.append(Unknown("peak_memory_bytes", "the measured memory peak",
                           job.detail("peak_memory_bytes"),
                           "the check of the memory theory against the measurement", "",
                           "peak_memory_bytes=8_000_000_000", "the box peak_memory_bytes",
                           "bytes, the allocator's peak"))
    return out


def said_no_transformer(job: Any) -> bool:
    """Whether the model's line says the profile is no transformer: nothing of a
    transformer's shape known, and convolutions and no attention seen
    (:func:`perfkit.job.network.read_network`)."""
    missing = job.missing_model_fields() if job.model is None else []
    return (all(n in missing for n in (*CORE_MODEL, "seq_length"))
            and job.observed.get(NETWORK, (None, ""))[0] == "convolutional")


def _batch_why(job: Any) -> str:
    """Why the global batch is not known, where the micro-batch size is missing for the
    sequence length's reason (no attention kernel with shapes) said once, above it."""
    why, seq_why = job.detail("global_batch_size"), job.detail("seq_length")
    if job.seq_length is None and seq_why and job.detail("micro_batch_size").startswith(seq_why):
        above = "not a transformer" if said_no_transformer(job) else \
            "as the sequence length"
        return why.replace(f"({seq_why})", f"({above}, above)")
    return why


def unknown_labels(job: Any, fields: tuple[str, ...] = ()) -> list[str]:
    """The labels of the unknowns (``["the model", "the hardware"]``), all or those of
    ``fields`` (``"model"`` for the model as a whole)."""
    return [u.label.split(" (")[0] for u in unknowns(job) if not fields or u.field in fields]


def how_to_set(unknown: Unknown, place: str = "python") -> str:
    """The ways to give ``unknown`` where the reader is.

    Parameters
    ----------
    unknown : Unknown
    place : {"dashboard", "cli", "python"}
        The dashboard's job panel, the ``perfkit`` command (``--config``) or Python
        (``pk.infer_job(profile, config=...)``, ``job.with_overrides(...)``).

    Returns
    -------
    str
        One sentence, e.g. ``"Edit the job: type hardware="ascend-910b" … in its box."``
    """
    if place not in PLACES:
        raise ValueError(f"place must be one of {PLACES}, not {place!r}")
    typed = f"job.with_overrides({unknown.example})"
    if place == "dashboard":
        parts = [f"Edit the job (above the tabs) and type it in {unknown.box} "
                 f"({unknown.box_hint or unknown.hint})"]
        if unknown.config:
            parts.append(f"load {unknown.config} there")
    elif place == "cli":
        parts = [f"--config FILE with {unknown.config}"] if unknown.config else []
        parts.append(f"in Python, {typed} ({unknown.hint})")
    else:
        parts = [f"pk.infer_job(profile, config=FILE) with {unknown.config}"] \
            if unknown.config else []
        parts.append(f"{typed} ({unknown.hint})")
    return "; or ".join(parts) + "."


def unknown_line(job: Any, what: str, fields: tuple[str, ...] = (),
                 place: str = "dashboard") -> str:
    """One sentence for a view that cannot be drawn: what is missing, and where the panel
    says why (never the reason again).

    Parameters
    ----------
    job : perfkit.Job or None
    what : str
        What is not shown (``"memory theory"``).
    fields : tuple of str
        The unknowns the view needs (``("model", "hardware")``); default all of them.
    place : {"dashboard", "python", "cli"}
        Where the panel is (:data:`UNKNOWNS_WHERE`).
    """
    if job is None:
        return f"No {what}: there is no job (open a profile; its job is read from it)."
    labels = unknown_labels(job, fields) or unknown_labels(job)
    if not labels:
        return f"No {what}."
    return (f"No {what}: {listed(labels)} {plural(len(labels), 'is', 'are')} not known "
            f"(“{PANEL_TITLE}” {UNKNOWNS_WHERE.get(place, '')} says why and how to set "
            f"{plural(len(labels), 'it', 'them')}).")
