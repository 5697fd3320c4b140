"""Every answer of a pack's key, re-derived without the lab's code.

For each student of the packs, each answer in ``instructor/key.json`` is derived again
from the settings the key records (the simulator's inputs: model, layout, faults) with
plain arithmetic, or from the student's raw files read here with the ``csv`` / ``json``
modules and plain text matching (``step_trace_time.csv``, ``kernel_details.csv``,
``communication.json``, the IR dump), never through ``perfkit.lab``. Only the planner's
answer is derived with perfkit's planner itself (with the key's settings), and its step
checked against :func:`perfkit.estimate_step` for the layout it names.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import perfkit as pk

pytestmark = pytest.mark.xdist_group("lab")

GIB = 2**30
#: What the fault question must answer for each planted fault (the pack's vocabulary).
FAULT_WORDS = {"DataLoadingStall": "data-loading stall", "UnfusedOperators": "unfused operators",
               "MemoryPressure": "memory pressure",
               "UnbalancedStage": "unbalanced pipeline stage",
               "FullRecompute": "full recompute where selective was configured",
               "NoOverlap": "gradient communication not overlapped"}


# ---- raw readers -----------------------------------------------------------------------

def _rank_dirs(profile: Path) -> dict[int, Path]:
    """Rank -> its folder's ASCEND_PROFILER_OUTPUT (rank from profiler_info_<rank>.json)."""
    out = {}
    for d in profile.iterdir():
        info = list(d.glob("profiler_info_*.json"))
        if info:
            out[int(info[0].stem.rsplit("_", 1)[1])] = d / "ASCEND_PROFILER_OUTPUT"
    return dict(sorted(out.items()))


def _steps(profile: Path) -> dict[int, dict[str, float]]:
    """Rank -> its (single) row of step_trace_time.csv, as floats."""
    out = {}
    for rank, d in _rank_dirs(profile).items():
        with (d / "step_trace_time.csv").open(newline="") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 1, "one step per profile"
        out[rank] = {k: float(v) for k, v in rows[0].items()}
    return out


def _step_us(row: dict[str, float]) -> float:
    """The device span: Computing + Communication(Not Overlapped) + Free."""
    return row["Computing"] + row["Communication(Not Overlapped)"] + row["Free"]


def _wall_us(row: dict[str, float]) -> float:
    """The step's wall time: the device span and the wait before it (Preparing)."""
    return _step_us(row) + row["Preparing"]


def _exposed_us(row: dict[str, float]) -> float:
    """Exposed communication: Communication(Not Overlapped) less the pipeline bubble
    (Bubble, the receive wait of a pipeline stage), as the dashboard counts it."""
    return max(row["Communication(Not Overlapped)"] - row["Bubble"], 0.0)


def _kernel_totals(profile: Path) -> dict[tuple[str, str], float]:
    """(kernel name, input shapes) -> device time summed over ranks, compute kernels only."""
    totals: dict[tuple[str, str], float] = defaultdict(float)
    for d in _rank_dirs(profile).values():
        with (d / "kernel_details.csv").open(newline="") as f:
            for row in csv.DictReader(f):
                if row["Accelerator Core"] == "HCCL":
                    continue
                totals[(row["Name"], row["Input Shapes"].strip('"'))] += \
                    float(row["Duration(us)"])
    return totals


def _collective_times(profile: Path) -> dict[str, float]:
    """Elapse, transit and wait (ms) of every collective, summed over ranks."""
    out: dict[str, float] = defaultdict(float)
    for d in _rank_dirs(profile).values():
        data = json.loads((d / "communication.json").read_text())
        for step in data.values():
            for op in step["collective"].values():
                info = op["Communication Time Info"]
                out["elapse"] += info["Elapse Time(ms)"]
                out["transit"] += info["Transit Time(ms)"]
                out["wait"] += info["Wait Time(ms)"]
    return out


# ---- arithmetic --------------------------------------------------------------------------

def _layer_forward_flops(m: dict[str, Any]) -> float:
    """Forward FLOPs per token of one decoder layer: every matrix product, attention scores
    non-causal (Q·K^T and scores·V: 2·s·(heads·head_dim) each, multiply-add = 2)."""
    h, s, f = m["hidden_size"], m["seq_length"], m["ffn_hidden_size"]
    qw = m["num_attention_heads"] * m["head_dim"]
    kvw = m["num_kv_heads"] * m["head_dim"]
    return 2 * h * (qw + 2 * kvw) + 4 * s * qw + 2 * qw * h + 2 * 3 * h * f


def _flops_per_token(m: dict[str, Any]) -> float:
    """Forward + backward (3 × forward) of the layers and the output projection."""
    return 3 * (m["num_layers"] * _layer_forward_flops(m) + 2 * m["hidden_size"]
                * m["vocab_size"])


def _tokens_per_s_per_device(student: Path, settings: dict[str, Any]) -> float:
    job = settings["job"]
    p, m = job["parallel"], job["model"]
    step_s = max(_wall_us(r) for r in _steps(student / job["path"]).values()) / 1e6
    gbs = p["dp"] * p["micro_batch_size"] * p["num_micro_batches"]
    return gbs * m["seq_length"] / step_s / (p["dp"] * p["tp"] * p["pp"])


def _params_per_device(m: dict[str, Any], p: dict[str, Any]) -> float:
    """Parameters on the most loaded device of a Llama layout (no biases, untied head)."""
    h, v, f, tp, pp = m["hidden_size"], m["vocab_size"], m["ffn_hidden_size"], p["tp"], p["pp"]
    qw = m["num_attention_heads"] * m["head_dim"]
    kvw = m["num_kv_heads"] * m["head_dim"]
    per_layer = (h * qw + 2 * h * kvw + qw * h) / tp + 3 * h * f / tp + 2 * h
    base, extra = divmod(m["num_layers"], pp)
    layers = [base + (1 if s < extra else 0) for s in range(pp)]
    embedding, head = v * h / tp, h + v * h / tp
    if pp == 1:
        return layers[0] * per_layer + embedding + head
    return max(layers[0] * per_layer + embedding, layers[-1] * per_layer + head)


def _activation_per_layer(m: dict[str, Any], p: dict[str, Any]) -> float:
    """Korthikanti et al. 2022, Table 2 (the seed's dynamic-memory table), 16-bit."""
    s, h, a = m["seq_length"], m["hidden_size"], m["num_attention_heads"]
    b, t, sp = p["micro_batch_size"], p["tp"], p["sequence_parallel"] and p["tp"] > 1
    sbh = s * b * h
    if p["recompute"] == "full":
        return 2 * sbh / t if sp else 2 * sbh
    if p["recompute"] == "selective":
        return 34 * sbh / t if sp else sbh * (10 + 24 / t)
    return sbh * (34 + 5 * a * s / h) / t if sp else sbh * (10 + 24 / t + 5 * a * s / (h * t))


def _memory_need_gib(layout: dict[str, Any]) -> float:
    m, p = layout["model"], layout["parallel"]
    n = _params_per_device(m, p)
    accumulate = p["num_micro_batches"] > 1 or p["pp"] > 1
    static = 10 * n / p["optimizer_shard"] + (2 * n if accumulate else 0)
    base, extra = divmod(m["num_layers"], p["pp"])
    layers = [base + (1 if s < extra else 0) for s in range(p["pp"])]
    act = max(min(p["pp"] - s, p["num_micro_batches"]) * layers[s] * _activation_per_layer(m, p)
              for s in range(p["pp"]))
    return (static + act) / GIB


def _matmul_intensity(shapes: str) -> float:
    """FLOPs per byte of (m × k) @ (k × n) in a 2-byte type: 2mkn / 2(mk + kn + mn)."""
    (m, k), (k2, n) = [tuple(int(x) for x in s.split(",")) for s in shapes.split(";")]
    assert k == k2
    return 2 * m * k * n / (2 * (m * k + k * n + m * n))


# ---- the IR dump, as text ------------------------------------------------------------------

_NODE = re.compile(r"^\s+%\d+\([^)]*\) = (?:PrimFunc_)?(\w+)\(")
_SCOPE = re.compile(r"# Fullname with scope: \((.*)\)")


def _ir_nodes(path: Path) -> list[dict[str, Any]]:
    """Every node of the dump with its op, flags and (layer, cells, op segment) scope."""
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    out = []
    for i, line in enumerate(lines):
        node = _NODE.match(line)
        if not node:
            continue
        scope = next((m.group(1) for m in map(_SCOPE.search, lines[i + 1:i + 4]) if m), "")
        parts = scope.split("/")
        layer, cells = None, []
        for j, seg in enumerate(parts):
            if seg.endswith("-LLamaDecodeLayer") and seg.split("-")[0].isdigit():
                layer = int(seg.split("-")[0])
                cells = [p.split("-")[0] for p in parts[j + 1:-1]]
        instance = re.search(r"\{instance name: (\w+)\}", line)
        out.append({"op": node.group(1), "layer": layer, "cells": cells,
                    "grad": scope.startswith("Gradients/"),
                    "names": {node.group(1).lower(), instance.group(1) if instance else ""},
                    "marked": "recompute: Bool(1)" in line,
                    "duplicated": "duplicated: Bool(1)" in line})
    return out


def _selects(pattern: str, node: dict[str, Any]) -> bool:
    """A MindFormers pattern (pieces split on the two characters \\.) selects the node: the
    pieces walk its cells, the last may name the operator or a cell it sits in."""
    pieces = pattern.split(r"\.")
    cells = node["cells"]
    if len(pieces) <= len(cells):
        return all(re.fullmatch(p, c) for p, c in zip(pieces, cells, strict=False))
    if len(pieces) == len(cells) + 1:
        return all(re.fullmatch(p, c) for p, c in zip(pieces, cells, strict=False)) and \
            any(re.fullmatch(pieces[-1], n) for n in node["names"] if n)
    return False


# ---- the test ----------------------------------------------------------------------------------

def _derive(student: Path, settings: dict[str, Any], entry: dict[str, Any],
            qid: str) -> Any:
    job = settings["job"]
    hw = pk.Hardware.preset(job["hardware"])
    if qid == "throughput":
        return _tokens_per_s_per_device(student, settings)
    if qid == "mfu":
        return 100 * _flops_per_token(job["model"]) * \
            _tokens_per_s_per_device(student, settings) / hw.peak()
    if qid == "hfu":
        m = job["model"]
        extra = m["num_layers"] * _layer_forward_flops(m) \
            if job["faults"][0]["fault"] == "FullRecompute" else 0.0
        return 100 * (_flops_per_token(m) + extra) * \
            _tokens_per_s_per_device(student, settings) / hw.peak()
    if qid == "bubble":
        p = settings["pipeline"]
        return 100 * (p["pp"] - 1) / (p["vpp"] * p["num_micro_batches"])
    if qid == "memory_need":
        return _memory_need_gib(settings["layout"])
    if qid == "memory_fit":
        usable = hw.memory_bytes * 0.9 / GIB
        return "fits" if _memory_need_gib(settings["layout"]) <= usable else "does not fit"
    if qid in ("top_operator", "operator_intensity"):
        totals = _kernel_totals(student / job["path"])
        if qid == "operator_intensity":
            totals = {k: v for k, v in totals.items() if "MatMul" in k[0]}
        name, shapes = max(totals, key=totals.__getitem__)
        if qid == "top_operator":
            return f"{name} ({shapes})"
        assert (name, shapes) == (entry["facts"]["operator"], entry["facts"]["input_shapes"])
        return _matmul_intensity(shapes)
    if qid == "operator_bound":
        facts = entry["facts"]
        if "MatMul" in facts["operator"]:
            ridge = hw.peak() / hw.memory_bandwidth
            return "compute-bound" if _matmul_intensity(facts["input_shapes"]) > ridge \
                else "memory-bound"
        # an element-wise kernel does a few FLOPs per element and moves at least
        # 2 bytes per element in and out: far below the ridge point
        assert facts["kind"] == "elementwise"
        return "memory-bound"
    if qid == "exposed_comm":
        row = _steps(student / job["path"])[0]
        return 100 * _exposed_us(row) / _wall_us(row)
    if qid == "step_bubble":
        row = _steps(student / job["path"])[0]
        return 100 * row["Bubble"] / _wall_us(row)
    if qid in ("wait_or_transit", "wait_share"):
        times = _collective_times(student / settings["cluster"]["path"])
        if qid == "wait_share":
            return 100 * times["wait"] / times["elapse"]
        kind = settings["cluster"]["faults"][0]["fault"]
        derived = "wait" if times["wait"] > times["transit"] else "transit"
        assert derived == ("wait" if kind == "SlowRank" else "transit"), (kind, times)
        return next(o for o in entry["options"] if o.startswith(derived))
    if qid == "slow_component":
        f = settings["cluster"]["faults"][0]
        if f["fault"] == "SlowRank":
            return f"rank {f['rank']}"
        a, b = sorted((f["src"], f["dst"]))
        return f"link {a}-{b}"
    if qid == "fault":
        return FAULT_WORDS[job["faults"][0]["fault"]]
    if qid in ("recompute_effective", "recompute_mul"):
        rc = settings["recompute"]
        full = rc["recompute"][0]
        nodes = [n for n in _ir_nodes(student / "ir" / "recompute_validate.ir.gz")
                 if n["layer"] is not None and n["layer"] >= full and not n["grad"]]
        if qid == "recompute_effective":
            taken = [p for p in rc["select_recompute"]
                     if any(n["duplicated"] and _selects(p, n) for n in nodes)]
            return taken or ["none of them"]
        ffn = rc["select_recompute"][0].split(r"\.")[0]
        muls = [n for n in nodes if n["op"] == "Mul" and n["cells"] == [ffn]]
        assert muls
        if any(n["duplicated"] for n in muls):
            return next(o for o in entry["options"] if o.startswith("yes"))
        if any(n["marked"] for n in muls):
            return next(o for o in entry["options"] if "marked, but" in o)
        return next(o for o in entry["options"] if "not even marked" in o)
    if qid in ("planner_layout", "planner_step"):
        plan = settings["planner"]
        model = pk.ModelSpec(**plan["model"])
        rows = pk.plan.search(model, pk.Hardware.preset(plan["hardware"]),
                              plan["num_devices"], plan["global_batch_size"],
                              space=pk.plan.SearchSpace(**plan["space"]),
                              efficiency=plan["efficiency"], comm_efficiency=0.8)
        top = rows.iloc[0]
        parallel = pk.ParallelConfig(dp=int(top["dp"]), tp=int(top["tp"]), pp=int(top["pp"]),
                                     num_micro_batches=int(top["num_micro_batches"]),
                                     optimizer_shard=int(top["dp"]),
                                     recompute=str(top["recompute"]))
        estimate = pk.estimate_step(model, parallel, pk.Hardware.preset(plan["hardware"]),
                                    efficiency=plan["efficiency"], comm_efficiency=0.8)
        assert math.isclose(estimate.step_s, float(top["step_s"]), rel_tol=1e-9)
        if qid == "planner_step":
            return estimate.step_s
        return (f"dp {parallel.dp} · tp {parallel.tp} · pp {parallel.pp} · "
                f"{parallel.recompute} recompute")
    raise AssertionError(f"no independent derivation for {qid}")


#: Tolerance of the re-derivation: the key holds full precision, so only rounding differs.
REL = 1e-9


def _check_pack(pack: Path) -> int:
    key = json.loads((pack / "instructor" / "key.json").read_text())
    checked = 0
    for student, entry in key["entries"].items():
        settings = entry["settings"]
        for qid, a in entry["answers"].items():
            derived = _derive(pack / student, settings, a, qid)
            if a["kind"] == "number":
                assert math.isclose(a["answer"], derived, rel_tol=REL), (student, qid,
                                                                         a["answer"], derived)
            elif a["kind"] == "choices":
                assert sorted(a["answer"]) == sorted(derived), (student, qid)
            else:
                assert a["answer"] == derived, (student, qid, a["answer"], derived)
                assert derived in a["options"], (student, qid)
            if "truth" in a:
                assert a["truth"] == a["answer"], (student, qid)
            # the settings each answer names are those of the student
            assert all(a["settings"][k] == settings[k] for k in a["settings"])
            checked += 1
    return checked


def test_intro_key_is_right(intro_pack: Path) -> None:
    assert _check_pack(intro_pack) == 6 * 15


def test_advanced_key_is_right(advanced_pack: Path) -> None:
    assert _check_pack(advanced_pack) == 2 * 18


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_exposed_communication_answer_is_the_share_of_the_step_the_dashboard_shows(
        intro_pack: Path) -> None:
    """The exposed_comm answer is rank 0's exposed communication over its step, the step
    time of the Overview (the device span and the Preparing before it), read here from
    rank 0's step_trace_time.csv. It divided Communication(Not Overlapped) by the device
    span alone, and kept the pipeline bubble in: student-2 (pp 2, a data-loading stall)
    was told 30.9 % (183.6 ms / 594.4 ms), where the Overview splits that step into a
    bubble of 183.59 ms and a few µs of exposed communication, of a 781.6 ms step."""
    key = json.loads((intro_pack / "instructor" / "key.json").read_text())
    asked = 0
    for student, entry in key["entries"].items():
        job = entry["settings"]["job"]
        row = _steps(intro_pack / student / job["path"])[0]
        wall = (row["Computing"] + row["Communication(Not Overlapped)"] + row["Free"]
                + row["Preparing"])
        exposed = row["Communication(Not Overlapped)"] - row["Bubble"]
        assert math.isclose(exposed, row["Communication(Not Overlapped and Exclude Receive)"],
                            rel_tol=1e-9, abs_tol=1e-6)
        if "exposed_comm" not in entry["answers"]:
            continue  # a pipeline job (see the test below)
        asked += 1
        got = entry["answers"]["exposed_comm"]["answer"]
        assert math.isclose(got, 100 * exposed / wall, rel_tol=REL), (student, got)
        # the figure the Communication tab shows for rank 0 (its one step)
        overlap = pk.analysis.comm_overlap(pk.load(intro_pack / student / job["path"],
                                                   cache=False, progress=False))
        shown = overlap.loc[overlap["rank"] == 0, "exposed_share"].iloc[0]
        assert math.isclose(got, 100 * shown, rel_tol=REL), (student, got, shown)
    assert asked >= 2


def _asked_what(pack: Path) -> list[tuple[str, dict[str, Any], dict[str, float]]]:
    key = json.loads((pack / "instructor" / "key.json").read_text())
    return [(student, entry, _steps(pack / student / entry["settings"]["job"]["path"])[0])
            for student, entry in key["entries"].items()]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_a_pipeline_student_is_asked_the_bubble_their_communication_holds(
        intro_pack: Path, advanced_pack: Path) -> None:
    """On a pipeline alone (dp 1, tp 1) rank 0's Communication(Not Overlapped) is the
    stage's receive wait, the bubble: its exposed communication, the answer once asked,
    was a few µs (intro seed 11: student-2 0.0006 %, student-4 0.00008 %), within the
    question's 0.3-point tolerance of 0, so answering 0 was right and the bubble the
    exercise was about went unasked. A pipeline student is now asked the bubble's share of
    the step (rank 0's Bubble over Computing + Communication(Not Overlapped) + Free +
    Preparing, from step_trace_time.csv read here), a student of a job with collectives
    exposed communication; either way an answer of 0 is wrong."""
    kinds = set()
    for pack in (intro_pack, advanced_pack):
        for student, entry, row in _asked_what(pack):
            p = entry["settings"]["job"]["parallel"]
            answers = entry["answers"]
            pipeline, collectives = p["pp"] > 1, p["dp"] * p["tp"] * p["cp"] > 1
            assert ("step_bubble" in answers) == pipeline, student
            assert ("exposed_comm" in answers) == collectives, student
            for qid, part_us in (("exposed_comm", _exposed_us(row)),
                                 ("step_bubble", row["Bubble"])):
                if qid not in answers:
                    continue
                kinds.add(qid)
                a = answers[qid]
                share = 100 * part_us / _wall_us(row)
                assert math.isclose(a["answer"], share, rel_tol=REL), (student, qid)
                # 0 is outside the tolerance: the student has to read the figure
                assert share > a["abs_tol"] and a["rel_tol"] < 1, (student, qid, share)
            if pipeline:  # the share the Communication tab shows beside the bubble
                overlap = pk.analysis.comm_overlap(pk.load(
                    pack / student / entry["settings"]["job"]["path"], cache=False,
                    progress=False))
                shown = overlap.loc[overlap["rank"] == 0, "bubble_share"].iloc[0]
                assert math.isclose(answers["step_bubble"]["answer"], 100 * shown,
                                    rel_tol=REL), student
    assert kinds == {"exposed_comm", "step_bubble"}


def test_key_settings_reproduce_the_profiles(intro_pack: Path, tmp_path: Path) -> None:
    """The simulator settings of key.json give the student's profile back, byte for byte."""
    key = json.loads((intro_pack / "instructor" / "key.json").read_text())
    job = key["entries"]["student-2"]["settings"]["job"]
    faults = [getattr(pk, f["fault"])(**{k: tuple(v) if isinstance(v, list) else v
                                         for k, v in f.items() if k != "fault"})
              for f in job["faults"]]
    out = pk.simulate(pk.ModelSpec(**job["model"]), pk.ParallelConfig(**job["parallel"]),
                      pk.Hardware.preset(job["hardware"]), steps=job["steps"], faults=faults,
                      seed=job["seed"], out=tmp_path / "job", **job["simulate"])
    mine = intro_pack / "student-2" / job["path"]
    files = sorted(p.relative_to(mine) for p in mine.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    for rel in files:
        assert (mine / rel).read_bytes() == (out / rel).read_bytes(), rel


def test_answers_differ_between_students(intro_pack: Path) -> None:
    key = json.loads((intro_pack / "instructor" / "key.json").read_text())
    answers = {s: e["answers"] for s, e in key["entries"].items()}
    for qid in ("throughput", "mfu", "exposed_comm", "step_bubble", "memory_need",
                "planner_step"):
        values = [a[qid]["answer"] for a in answers.values() if qid in a]
        assert len(values) >= 2 and len({round(v, 9) for v in values}) == len(values), qid
    for (s1, a1), (s2, a2) in itertools.combinations(answers.items(), 2):
        differ = sum(q not in a2 or a1[q]["answer"] != a2[q]["answer"] for q in a1)
        assert differ >= 7, (s1, s2, differ)
    # the class sees every planted problem kind, one per student
    kinds = {e["settings"]["job"]["faults"][0]["fault"] for e in key["entries"].values()}
    assert kinds == set(FAULT_WORDS)
