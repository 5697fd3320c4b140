"""What the student is told, and what the instructor reads: the brief and the READMEs.

:func:`brief` is the public part of a student's setup (``lab.json``'s ``brief``): the job
as a team would describe it (model, layout, batch, device, measured efficiency), the
pipeline and the layout to price, the planning job, the recompute configuration. It never
says what was planted. :func:`student_readme` and :func:`instructor_readme` are the
Markdown files of the folders.
"""

from __future__ import annotations

from typing import Any

from ..calc import flops_per_token
from ..format import share_text
from ..specs import Hardware
from .ir import CONFIG_FILE, IR_FILE, NAMINGS
from .scenario import MEMORY_RESERVE, Setup

__all__ = ["brief", "student_readme", "instructor_readme", "config_yaml"]

GIB = 2**30


def _model_card(model: Any) -> dict[str, Any]:
    return {"name": model.name, "layers": model.num_layers, "hidden_size": model.hidden_size,
            "attention_heads": model.num_attention_heads, "kv_heads": model.num_kv_heads,
            "ffn_hidden_size": model.ffn_hidden_size, "vocab_size": model.vocab_size,
            "seq_length": model.seq_length, "parameters": model.num_parameters(),
            "flops_per_token": flops_per_token(model)}


def brief(setup: Setup) -> dict[str, Any]:
    """The facts a student starts from (see the module docstring)."""
    job, cluster = setup.job, setup.cluster
    hw = Hardware.preset(job.hardware)
    p = job.parallel
    lay = setup.layout
    plan = setup.planner
    rc = setup.recompute
    return {
        "hardware": {"name": hw.name, "peak_tflops": hw.peak() / 1e12,
                     "dtype": hw.default_dtype, "memory_gib": hw.memory_bytes / GIB,
                     "usable_memory_gib": hw.memory_bytes * (1 - MEMORY_RESERVE) / GIB,
                     "memory_bandwidth_tbps": hw.memory_bandwidth / 1e12,
                     "ridge_flop_per_byte": hw.peak() / hw.memory_bandwidth},
        "job": {"path": job.path, "model": _model_card(job.model), "cut_from": job.preset,
                "dp": p.dp, "tp": p.tp, "pp": p.pp, "micro_batch_size": p.micro_batch_size,
                "num_micro_batches": p.num_micro_batches,
                "optimizer_shard": p.optimizer_shard, "recompute": p.recompute,
                "devices": p.world_size, "global_batch_size": p.global_batch_size,
                "steps": job.steps, "efficiency": job.efficiency},
        "cluster": {"path": cluster.path, "model": _model_card(cluster.model),
                    "dp": cluster.parallel.dp, "devices": cluster.parallel.world_size},
        "pipeline": setup.pipeline.to_dict(),
        "layout": {"preset": lay.preset, "layers": lay.model.num_layers,
                   "seq_length": lay.model.seq_length,
                   **{k: getattr(lay.parallel, k) for k in (
                       "dp", "tp", "pp", "micro_batch_size", "num_micro_batches",
                       "optimizer_shard", "recompute", "sequence_parallel")}},
        "planner": {"preset": plan.preset, "hardware": plan.hardware,
                    "num_devices": plan.num_devices,
                    "global_batch_size": plan.global_batch_size,
                    "efficiency": plan.efficiency, "space": plan.space_dict()},
        "recompute": {"ir": IR_FILE, "config_file": CONFIG_FILE, "config": rc.config(),
                      "naming": dict(zip(("feed_forward", "w1", "w3", "w2"),
                                         NAMINGS[rc.naming], strict=True))},
    }


def config_yaml(setup: Setup) -> str:
    """The student's recompute configuration, as a MindFormers YAML excerpt."""
    rc = setup.recompute
    lines = ["# The recompute section of the training configuration (MindFormers YAML).",
             "recompute_config:", f"  recompute: [{rc.full_layers}]",
             "  select_recompute:"]
    lines += [f"    - '{p}'" for p in rc.select]
    return "\n".join(lines) + "\n"


def student_readme(setup: Setup, questions: list[Any]) -> str:
    """The student folder's README.md."""
    b = brief(setup)
    j = b["job"]
    m = j["model"]
    job_line = (f"your job's profile (torch_npu layout, one folder per rank): {m['name']}, "
                f"a {m['layers']}-layer cut of {j['cut_from']} on {j['devices']} devices "
                f"(dp {j['dp']} × tp {j['tp']} × pp {j['pp']}), {j['num_micro_batches']} "
                f"micro-batches of {j['micro_batch_size']}, one step")
    return f"""# Tuning lab: {setup.student}

Your own data for the tuning lab. Open `lab.ipynb` (or the app your instructor serves
with `perfkit serve --lab <this folder>`), read the brief, look at the evidence, answer
each question and press **Check**: a wrong answer gets a hint, a right one an explanation.
Your answers are kept in `answers.sqlite` in this folder; you may change them until the
instructor grades the class.

## What is here

| path | what |
|---|---|
| `{j['path']}/` | {job_line} |
| `{b['cluster']['path']}/` | a four-rank data-parallel run of the same model (two layers) |
| `{IR_FILE}` | a MindSpore IR dump (after the recompute pass) of a two-layer Llama-shaped net |
| `{CONFIG_FILE}` | the recompute configuration that went with it |
| `lab.ipynb` | the questions ({len(questions)}) |
| `lab.json` | the brief and the questions, machine-readable |
| `answers.sqlite` | your answers (created at your first Check) |

Open the profiles in Python with `perfkit.load("{j['path']}")`, the dump with
`perfkit.load_ir("{IR_FILE}")`; everything else the questions need is in the brief.
"""


def instructor_readme(level: str, seed: int, students: int, questions: list[Any]) -> str:
    """The instructor folder's README.md: what the key holds and how each answer is made."""
    rows = "\n".join(f"| `{q.id}` | {q.stage} | {q.title}"
                     f"{f' (asked of {q.asked_of})' if q.asked_of else ''} | {q.kind} | "
                     f"{_tolerance(q)} | {_method(q)} |" for q in questions)
    return f"""# Lab pack: instructor's folder

{students} students, level `{level}`, seed {seed}. `perfkit lab make` with the same
seed, level and number of students writes the same pack (the same profiles, byte for byte).

* `key.json` — per student: `settings` (every input of the two simulations — model,
  layout, faults with their parameters, seeds — the pipeline and the layout to price,
  the planning job, the IR dump, its renaming and the configuration) and, per question,
  `answer`, `rel_tol` / `abs_tol` (numbers) or `options` (choices), `settings` (the parts
  of the settings the answer comes from, copied), `facts` (what else a re-derivation
  needs, e.g. which operator was asked about), `derivation` (how it was obtained, with
  the figures) and `truth` (for the choices the inputs decide: what they say).
* `answers.md` — the same, as a table per student.
* `grades.csv`, `progress.html` — written by `perfkit lab grade` (the class's answers).

Every answer is computed from the student's own files, read with perfkit as the student
would read them; the choices whose truth the simulator's inputs know (the planted problem,
the slow rank or link, wait or transit) are required to agree with those inputs before the
pack is written (a draw whose symptom is not clear is drawn again).

Students answer in their folder (`answers.sqlite`); `perfkit lab grade DIR` gathers every
folder's answers and checks them against this key (never against the students' own copy).

## The questions

A question marked "asked of" is asked only of the students whose job has that layout
(each student's `lab.json` lists their own questions; `key.json` holds their answers).

| id | stage | title | kind | tolerance | how the answer is derived |
|---|---|---|---|---|---|
{rows}
"""


def _tolerance(q: Any) -> str:
    if q.kind != "number":
        return "exact" if q.kind == "choice" else "exact set"
    if getattr(q, "tolerance_words", ""):
        return str(q.tolerance_words)
    parts = []
    if q.rel_tol:
        parts.append(f"±{share_text(q.rel_tol, 0)}")
    if q.abs_tol:
        parts.append(f"±{q.abs_tol:g} {q.unit}")
    return " or ".join(parts) or "exact"


_METHODS = {
    "throughput": "global batch × sequence / (slowest rank's step × devices); step = "
                  "Computing + Communication(Not Overlapped) + Free + Preparing "
                  "(analysis.measured_step_s)",
    "mfu": "perfkit.mfu: model FLOPs per token (exact GEMMs, non-causal) × tokens/s per "
           "device / peak",
    "hfu": "perfkit.hfu with the recompute the profile shows (analysis.recompute_evidence)",
    "bubble": "(pp − 1) / (vpp · m) of the pipeline asked about (perfkit.bubble_fraction); "
              "facts.told_apart: whether the bubble over the whole time, (pp − 1) / "
              "(vpp · m + pp − 1), lies outside the tolerance",
    "memory_need": "perfkit.static_memory (MindSpore scheme) + perfkit.activation_memory "
                   "(Korthikanti's table, peak stage) of the layout asked about; "
                   "facts.told_apart: whether activations alone and model states alone lie "
                   "outside the tolerance",
    "memory_fit": "memory_need against device memory × 0.9",
    "top_operator": "largest total device time per kernel and input shapes "
                    "(analysis.operator_efficiency)",
    "operator_bound": "FLOPs / bytes of the operator asked about against peak / HBM "
                      "bandwidth (analysis.operator_efficiency)",
    "operator_intensity": "FLOPs / bytes of the costliest operator",
    "exposed_comm": "rank 0's Communication(Not Overlapped) less its Bubble "
                    "(analysis.exposed_comm_us) / its step, Computing + Communication(Not "
                    "Overlapped) + Free + Preparing (analysis.step_wall_us, the Overview's "
                    "step time); facts.told_apart: whether not overlapped with the bubble "
                    "left in, and all the communication, lie outside the tolerance",
    "step_bubble": "rank 0's Bubble (the stage's receive wait, which Communication(Not "
                   "Overlapped) holds) / its step, Computing + Communication(Not Overlapped) "
                   "+ Free + Preparing (analysis.step_wall_us)",
    "wait_or_transit": "the cluster's all-reduce: wait share vs transit share "
                       "(analysis.comm_summary)",
    "wait_share": "the cluster's all-reduce: wait / elapsed over all ranks",
    "slow_component": "analysis.slow_ranks (computing) and analysis.slow_links",
    "fault": "the symptom the job's profile shows (lab.data.StudentData.job_symptoms)",
    "recompute_effective": "patterns whose matched nodes have clones in the backward graph "
                           "(analysis.recompute_check: duplicated > 0)",
    "recompute_mul": "the configured Mul of the MLP: duplicated, marked only, or unmarked",
    "planner_layout": "rank 1 of perfkit.plan.search (restricted space, every matrix "
                      "product at the student's efficiency, every link at 80 %)",
    "planner_step": "its step_s (compute + bubble + exposed communication); facts.told_apart: "
                    "whether the step with a term left out lies outside the tolerance",
}


def _method(q: Any) -> str:
    return _METHODS.get(q.id, q.hint)
