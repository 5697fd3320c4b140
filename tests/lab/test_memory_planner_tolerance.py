"""The memory and planner answers against the wrong quantities beside them.

``memory_need`` asks a layout's model states plus activations. Its ±3 % accepted the
activations alone wherever model states were under 3 % of the need (intro seed 11,
student 6: 96.0 GiB of activations for a 97.72 GiB need). ``planner_step`` asks the
planner's predicted step; its ±2 % accepted the step with a term left out (advanced
seed 5, student 2: compute + bubble 59.48 s for 59.64 s). Both tolerances are now the
student's own, from the rounding of the figures they read (the calculator's and the
planner table's 3 significant digits), and the key says whether the wrong quantities can
be told apart. Memory is worked out here by hand from the layout in the key (the seed's
static accounting and the activation table of the reference's calculators.md §2-4);
the planner's figures are read from the planner the student runs.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
from raw_lab import carried, shown

import perfkit as pk
from perfkit.lab.key import is_right
from perfkit.plan import SearchSpace

pytestmark = pytest.mark.xdist_group("lab")

GIB = 2**30


def _half(v: float) -> float:
    """Half a unit of the third significant digit of ``v`` (0.01 ≤ v < 1000, where the
    figure shown has exactly three significant digits)."""
    assert 0.01 <= v < 1000
    return 0.5 * 10 ** (math.floor(math.log10(v)) - 2)


def _memory_by_hand(lay: dict[str, Any]) -> tuple[float, float]:
    """Static (MindSpore: 10 B per parameter / optimizer shard, + 2 B of gradient when
    accumulating or pipelining) and activation bytes (Korthikanti's table per layer ×
    the L/p layers × the min(p, m) micro-batches the first stage holds) of a dense
    Llama layout."""
    m, p = lay["model"], lay["parallel"]
    h, a, kv, f = m["hidden_size"], m["num_attention_heads"], m["num_kv_heads"], \
        m["ffn_hidden_size"]
    hd, L, V, s = m["head_dim"], m["num_layers"], m["vocab_size"], m["seq_length"]
    t, pp, mb, b = p["tp"], p["pp"], p["num_micro_batches"], p["micro_batch_size"]
    assert m["mlp"] == "gated" and m["bias"] == "none" and not m["tied_embeddings"]
    assert L % pp == 0 and m["num_experts"] == 1
    per_layer = (2 * h * a * hd + 2 * h * kv * hd + 3 * h * f) / t + 2 * h
    first = L // pp * per_layer + V * h / t
    last = L // pp * per_layer + h + V * h / t
    n = first + last - L // pp * per_layer if pp == 1 else max(first, last)
    grads = 2 * n if (mb > 1 or pp > 1) else 0.0
    static = 10 * n / p["optimizer_shard"] + grads
    sbh, sp, rc = s * b * h, p["sequence_parallel"] and t > 1, p["recompute"]
    if rc == "full":
        act_layer = 2 * sbh / (t if sp else 1)
    elif rc == "selective":
        act_layer = 34 * sbh / t if sp else sbh * (10 + 24 / t)
    else:
        act_layer = sbh / t * (34 + 5 * a * s / h) if sp else \
            sbh * (10 + 24 / t + 5 * a * s / (h * t))
    return static, act_layer * L // pp * min(pp, mb)


def test_the_memory_checker_rejects_activations_alone_and_model_states_alone(
        intro_pack: Path, advanced_pack: Path) -> None:
    """Per student: the need by hand; the tolerance by hand from the calculator's
    3-significant-digit figures (the total as shown, or the two parts as shown added);
    activations alone and model states alone are wrong where they lie outside it, and the
    key says which; an answer read from the calculator is right."""
    seen = 0
    for pack in (intro_pack, advanced_pack):
        key = json.loads((pack / "instructor" / "key.json").read_text())
        for student, entry in key["entries"].items():
            a = entry["answers"]["memory_need"]
            static, act = _memory_by_hand(a["settings"]["layout"])
            need = (static + act) / GIB
            tol = max(_half(need), _half(static / GIB) + _half(act / GIB))
            apart = all(abs(w - need) > tol for w in (act / GIB, static / GIB))
            print(f"{pack.name} {student}: need {need:.3f} GiB, activations {act / GIB:.3f},"
                  f" states {static / GIB:.3f}, tolerance ±{tol:.3f}: "
                  f"{'told apart' if apart else 'cannot be told apart'}")
            seen += 1
            assert math.isclose(a["answer"], need, rel_tol=1e-9)
            for wrong in (act / GIB, static / GIB):
                assert is_right(a, wrong) is (abs(wrong - need) <= tol), (student, wrong)
            assert a["rel_tol"] == 0 and math.isclose(a["abs_tol"], tol, rel_tol=1e-6)
            assert a["facts"]["told_apart"] is apart
            assert is_right(a, shown(need))
            assert is_right(a, shown(static / GIB) + shown(act / GIB))
            check, asked = carried(pack, student, "memory_need")
            assert math.isclose(check["abs_tol"], tol, rel_tol=1e-6)
            assert math.isclose(asked["abs_tol"], tol, rel_tol=1e-6)
            assert ("cannot mark it wrong" in a["derivation"]) is not apart
    assert seen == 8


def _planner_rows(job: dict[str, Any]) -> list[dict[str, float]]:
    """The eight rows the planner's table shows, from the planner the student runs (every
    matrix product at the student's efficiency, every link at 80 %): its compute is the
    layers', their recompute's, the optimizer's and the fixed overhead; ``stage_work`` what
    one stage does per micro-batch times the micro-batches (compute, recompute and the
    layers' own traffic), which sets the bubble."""
    plan = pk.plan.search(pk.ModelSpec.preset(job["preset"]),
                          pk.Hardware.preset(job["hardware"]), job["num_devices"],
                          job["global_batch_size"], space=SearchSpace(**job["space"]),
                          efficiency=job["efficiency"], comm_efficiency=0.8).head(8)
    rows = plan[["step_s", "bubble_s", "exposed_comm_s", "pp",
                 "num_micro_batches"]].copy()
    rows["compute_s"] = plan["compute_s"] + plan["recompute_s"] + plan["optimizer_s"] \
        + plan["overhead_s"]
    rows["stage_work_s"] = plan["compute_s"] + plan["recompute_s"] + plan["tp_comm_s"] \
        + plan["cp_comm_s"] + plan["ep_comm_s"] + plan["pp_comm_s"]
    return rows.to_dict("records")


def test_the_planner_checker_rejects_the_step_with_a_term_left_out(
        intro_pack: Path, advanced_pack: Path) -> None:
    """Per student: the table's first row; the step is the sum of its terms and the bubble
    is (pp − 1) / m of the stage's work (1F1B); the tolerance by hand: half a unit of the third
    digit of the step in the column's unit (minutes where the median step is a minute or
    more) or in seconds, the wider; the step less a term is wrong where it lies outside,
    and the key says which."""
    seen = 0
    for pack in (intro_pack, advanced_pack):
        key = json.loads((pack / "instructor" / "key.json").read_text())
        for student, entry in key["entries"].items():
            a = entry["answers"]["planner_step"]
            rows = _planner_rows(a["settings"]["planner"])
            top = rows[0]
            step, compute = top["step_s"], top["compute_s"]
            bubble, exposed = top["bubble_s"], top["exposed_comm_s"]
            assert math.isclose(step, compute + bubble + exposed, rel_tol=1e-9)
            assert math.isclose(bubble, top["stage_work_s"] * (top["pp"] - 1)
                                / top["num_micro_batches"], rel_tol=1e-6, abs_tol=1e-12)
            unit = 60.0 if statistics.median(r["step_s"] for r in rows) >= 60 else 1.0
            tol = max(_half(step / unit) * unit, _half(step))
            wrongs = [w for w in (compute, compute + bubble, compute + exposed)
                      if abs(w - step) > 1e-9 * step]
            apart = all(abs(w - step) > tol for w in wrongs)
            print(f"{pack.name} {student}: step {step:.4f} s, compute {compute:.4f}, "
                  f"+bubble {compute + bubble:.4f}, +exposed {compute + exposed:.4f}, "
                  f"tolerance ±{tol:.3f} s: "
                  f"{'told apart' if apart else 'cannot be told apart'}")
            seen += 1
            assert math.isclose(a["answer"], step, rel_tol=1e-9)
            for wrong in wrongs:
                assert is_right(a, wrong) is (abs(wrong - step) <= tol), (student, wrong)
            assert a["rel_tol"] == 0 and math.isclose(a["abs_tol"], tol, rel_tol=1e-6)
            assert a["facts"]["told_apart"] is apart
            assert is_right(a, shown(step / unit) * unit) and is_right(a, shown(step))
            check, asked = carried(pack, student, "planner_step")
            assert math.isclose(check["abs_tol"], tol, rel_tol=1e-6)
            assert math.isclose(asked["abs_tol"], tol, rel_tol=1e-6)
            assert ("cannot mark it wrong" in a["derivation"]) is not apart
    assert seen == 8
