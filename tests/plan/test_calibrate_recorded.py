"""calibrate reads its operators from the steps whose device tasks were recorded in full, as
the Operators tab does: checked against the raw kernel_details.csv and step_trace_time.csv
(read here with csv).

- A copy of ``ascend/msinsight-pt-level1`` whose rank 1 keeps only 20 tasks of its step
  (its last 20, as tests/analysis/test_lazy_recorded.py cuts it, or its first 20, a record
  that stopped early): the fragment's tasks went into the operator fit, its (rank, step)
  pair divided the optimizer's time per step, and its 20 tasks made the median kernels per
  step (the launch gap's divisor) 102 instead of rank 0's 187. The run's optimizer kernels
  (ForeachAddList / ForeachMulScalar: SGD) are renamed to torch_npu's fused AdamW kernel
  in the copy, their times kept, so that calibrate prices them as its optimizer.
- ``ascend/msinsight-pt-gpt3-old``: both ranks keep 21 and 22 tasks of a step they cover
  17 % and 5 % of; calibrate fitted memory and attention rates to those fragments (memory
  efficiency 1.0, a 3.7 ms launch gap over 18 kernels). No step recorded in full: the
  compute rates come from the steps table.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from raw_ascend import csv_rows, task_union_us
from shared_samples import PT_GPT3_OLD, PT_LEVEL1, sample

import perfkit as pk
from perfkit import plan
from perfkit.plan.predict import stage_params

pytestmark = pytest.mark.shared_samples
LEVEL1 = sample(PT_LEVEL1)
OLD = sample(PT_GPT3_OLD)
_OUT = "ASCEND_PROFILER_OUTPUT"
_ADAM = ("ApplyAdamWV2", "aclnnApplyAdamWV2_ApplyAdamWV2_ApplyAdamWV2")
MODEL = pk.ModelSpec(num_layers=4, hidden_size=1024, num_attention_heads=16,
                     seq_length=1024, vocab_size=32000, mlp="gated")
HW = pk.Hardware.preset("ascend-910b")
PAR = pk.ParallelConfig(dp=2)


def _write(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _level1_adam_cut(tmp_path: Path, keep: str) -> Path:
    """A copy of msinsight-pt-level1 with its optimizer kernels named AdamW on both ranks
    and rank 1's list cut to 20 of its tasks (``keep``: ``"last"`` or ``"first"``)."""
    root = tmp_path / "level1"
    shutil.copytree(LEVEL1, root)
    for rank in (0, 1):
        path = root / f"rank{rank}_ascend_pt" / _OUT / "kernel_details.csv"
        rows = csv_rows(path)
        for row in rows:
            if row["Type"].startswith("Foreach"):
                row["Type"], row["Name"] = _ADAM
        if rank == 1:
            rows = rows[-20:] if keep == "last" else rows[:20]
        _write(path, rows)
    return root


def _step_row(out: Path) -> dict[str, str]:
    (row,) = csv_rows(out / "step_trace_time.csv")
    return row


def _busy_us(out: Path) -> float:
    row = _step_row(out)
    return float(row["Computing"]) + float(row["Communication(Not Overlapped)"])


@pytest.mark.parametrize("keep", ["last", "first"])
def test_calibrate_fits_the_operators_of_the_steps_recorded_in_full(tmp_path, keep):
    root = _level1_adam_cut(tmp_path, keep)
    outs = [root / f"rank{r}_ascend_pt" / _OUT for r in (0, 1)]
    rows = [csv_rows(out / "kernel_details.csv") for out in outs]
    # rank 0's tasks cover its step's busy time; rank 1's 20 tasks a fraction of it
    assert task_union_us(rows[0]) >= 0.99 * _busy_us(outs[0])
    assert task_union_us(rows[1]) < 0.3 * _busy_us(outs[1])
    (step,) = {r["Step Id"] for r in rows[0]}
    adam = [[float(r["Duration(us)"]) for r in part if r["Type"] == _ADAM[0]]
            for part in rows]
    assert len(adam[0]) == 4 and len(adam[1]) == (4 if keep == "last" else 0)
    cal = plan.calibrate(pk.load(root, cache=False, progress=False), MODEL, PAR, HW)
    terms = {t: (v, how) for t, v, how in cal.terms}

    # the optimizer: its time per step is rank 0's (one step recorded in full), inverted
    # from per_param = (seconds · e_mem · bandwidth − B½) / updated parameters
    params = stage_params(MODEL, PAR, None)
    updated = float(params["dense"][0] + params["experts"][0]) / max(PAR.optimizer_shard, 1)
    per_param, how = terms["optimizer_bytes_per_param"]
    seconds = (per_param * updated + cal.rates.memory_half_bytes) / (
        cal.rates.memory_efficiency * HW.memory_bandwidth)
    assert seconds == pytest.approx(sum(adam[0]) * 1e-6, rel=1e-9)
    assert how == f"optimizer kernels: {sum(adam[0]) * 1e-3:.3g} ms per step"

    # the launch gap: the least idle step's free time (one step per rank: median over the
    # ranks' step traces, whole on both) spread over the model's kernels, so that the
    # model's idle part is that free time; the profile's own compute kernels per step
    # (rank 0's, its HCCL tasks are communication) are said beside it
    kernels = sum(r["Accelerator Core"] != "HCCL" for r in rows[0])
    assert kernels == 187
    frees = sorted(float(_step_row(out)["Free"]) for out in outs)
    gap, how = terms["kernel_gap_s"]
    assert cal.parts["overhead"] == pytest.approx((frees[0] + frees[1]) / 2 * 1e-6, rel=1e-9)
    modelled = round(cal.parts["overhead"] / gap)
    assert how == (f"the least idle step's free (idle) time (median over ranks) over the model's "
                   f"{modelled} kernels per step (the profile launches {kernels} per rank "
                   "and step)")

    # every operator term is the one rank 0's own folder gives: no fragment weighs in
    alone = plan.calibrate(pk.load(root / "rank0_ascend_pt", cache=False, progress=False),
                           MODEL, PAR, HW)
    for name in ("memory_efficiency", "gemm_efficiency", "gemm_half_flops",
                 "optimizer_bytes_per_param"):
        assert terms[name][0] == pytest.approx(dict(
            (t, v) for t, v, _ in alone.terms)[name], rel=1e-12), name
    assert ("operator rates and launch gaps fitted to the device tasks of the steps "
            f"recorded in full: step {step} of 1 on rank 0; no step of 1 on rank 1 (a "
            "fragment of a step is not the step)") in cal.notes


def test_calibrate_without_a_step_recorded_in_full_fits_the_steps_table():
    outs = [OLD / f"test_rank_{r}" / _OUT for r in (0, 1)]
    for out in outs:  # each rank's one step is a fragment
        assert task_union_us(csv_rows(out / "kernel_details.csv")) < 0.2 * _busy_us(out)
    cal = plan.calibrate(pk.load(OLD, cache=False, progress=False), MODEL, PAR, HW)
    terms = {t: v for t, v, _ in cal.terms}
    # no rate priced from the fragments' operators or kernel counts
    assert not {"memory_efficiency", "gemm_efficiency", "attention_efficiency",
                "kernel_gap_s"} & set(terms)
    steps = [_step_row(out) for out in outs]
    # the compute rates reproduce the busiest rank's Computing; the idle time is the
    # median (of two: the mean) of the ranks' Free
    computing = max(float(s["Computing"]) for s in steps) * 1e-6
    assert cal.parts["compute"] + cal.parts["recompute"] + cal.parts["optimizer"] \
        == pytest.approx(computing, rel=1e-6)
    free = sum(float(s["Free"]) for s in steps) / 2 * 1e-6
    assert terms["overhead_s"] == pytest.approx(free, rel=1e-9)
    assert ("no step's device tasks were recorded in full (no step of 1): a fragment of a "
            "step does not say how fast its operators run, so the compute rates come from "
            "the steps table") in cal.notes
