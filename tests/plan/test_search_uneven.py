"""The search prices the layouts whose stages the layers do not divide, and fewer
micro-batches than stages, as :func:`perfkit.plan.predict` does: Llama 3 405B's 126 layers on
8 and 16 stages (the paper's and torchtitan's layouts) were refused. That each such row is
what predict gives for its layout: tests/plan/test_search_step_model.py."""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit import plan

LLAMA405 = pk.ModelSpec.preset("llama3-405b")
H100 = pk.Hardware.preset("h100")


@pytest.fixture(scope="module")
def uneven_frame():
    space = plan.SearchSpace(tp=(8,), pp=(8, 16), cp=(1,), micro_batch_size=(1,),
                             vpp=(1, 2))
    return plan.search(LLAMA405, H100, 1024, 512, space=space, include_rejected=True)


def test_the_paper_layouts_are_searched(uneven_frame):
    assert LLAMA405.num_layers == 126 and 126 % 8 and 126 % 16
    assert set(uneven_frame["pp"]) == {8, 16}
    assert set(uneven_frame["vpp"]) == {1, 2}
    assert uneven_frame["fits"].any()
    # by default too: the powers of two dividing the devices join the layers' divisors.
    # 96 devices at tp 8 leave 12 for pp·dp: of 126's divisors 1, 2, 3 and 6 divide 12,
    # and of the powers of two 4 (8 and 16 would need 64 and 128 devices per dp rank)
    default = plan.candidates(LLAMA405, 96, 192, plan.SearchSpace(
        tp=(8,), cp=(1,), micro_batch_size=(1,), vpp=(1,), recompute=("full",),
        sequence_parallel=(True,), optimizer_shard=("dp",)))
    assert sorted(set(default["pp"])) == [1, 2, 3, 4, 6]


def test_the_split_is_torchtitans():
    """126 layers on 16 ranks, the embedding and the head each counted as a layer: 128
    effective layers, 8 per rank, so the first and last ranks hold 7 decoder layers and
    the 14 others 8. The row is priced as ``estimate_step`` with exactly that split."""
    par = pk.ParallelConfig(dp=8, tp=8, pp=16, num_micro_batches=64, recompute="full",
                            sequence_parallel=True)
    space = plan.SearchSpace(tp=(8,), pp=(16,), cp=(1,), micro_batch_size=(1,), vpp=(1,),
                             recompute=("full",), sequence_parallel=(True,),
                             optimizer_shard=("off",))
    frame = plan.search(LLAMA405, H100, 1024, 512, space=space, include_rejected=True)
    assert len(frame) == 1
    by_hand = [7] + [8] * 14 + [7]
    assert sum(by_hand) == 126
    est = pk.calc.estimate_step(LLAMA405, par, H100, stage_layers=by_hand)
    assert frame["step_s"].iloc[0] == pytest.approx(est.step_s, rel=1e-9)
    # ... and not as the even split's heavier first stage (8 layers + the embedding)
    heavier = pk.calc.estimate_step(LLAMA405, par, H100, stage_layers=[8] * 15 + [6])
    assert frame["step_s"].iloc[0] != pytest.approx(heavier.step_s, rel=1e-6)


def test_fewer_micro_batches_than_stages_pay_the_one_f_one_b_bubble():
    """With m < pp (DeepSpeed and plain 1F1B run it) the step is m + pp − 1 slots of the
    slowest stage: the bubble is (pp − 1) slots, each the slowest stage's time per
    micro-batch (its parts per micro-batch, the step's per-step fixed cost aside)."""
    model = pk.ModelSpec.preset("llama2-7b")
    space = plan.SearchSpace(tp=(1,), pp=(8,), cp=(1,), micro_batch_size=(1,), vpp=(1,),
                             recompute=("none",), sequence_parallel=(False,),
                             optimizer_shard=("off",))
    frame = plan.search(model, H100, 8, 4, space=space, include_rejected=True)
    row = frame.iloc[0]
    assert (row["pp"], row["num_micro_batches"]) == (8, 4)
    per_mb = sum(row[p] for p in ("compute_s", "recompute_s", "tp_comm_s", "cp_comm_s",
                                  "ep_comm_s", "pp_comm_s")) / 4
    overhead = pk.calc.rates.Rates().overhead_s
    per_mb += (row["overhead_s"] - overhead) / 4
    assert row["bubble_s"] == pytest.approx(7 * per_mb, rel=1e-9)
    pred = plan.predict(None, model, plan.to_parallel_config(row), H100)
    assert row["step_s"] == pytest.approx(pred.step_s, rel=1e-9)
