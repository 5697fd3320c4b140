"""What ``plan.search`` says when it has nothing to offer."""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit import plan


def test_a_pp_that_does_not_divide_the_layers_is_named_with_where_it_can_be_priced() -> None:
    """Llama 3 405B (126 layers) on 16 stages, its paper's layout: the search prices even
    stages only, and said just "no valid configuration"."""
    model = pk.ModelSpec.preset("llama3-405b")
    assert model.num_layers == 126 and 126 % 16
    with pytest.raises(pk.PerfkitError) as err:
        plan.search(model, pk.Hardware.preset("h100"), 8192, 2048,
                    space=plan.SearchSpace(tp=(8,), pp=(16,), cp=(1,)))
    said = str(err.value)
    assert "pp 16 does not divide the model's 126 layers" in said
    assert "stage_layers" in said
    # the split the message points to is priced
    est = pk.calc.estimate_step(model, pk.ParallelConfig(tp=8, pp=16, dp=64,
                                                         num_micro_batches=32),
                                pk.Hardware.preset("h100"), stage_layers=[7] + [8] * 14 + [7])
    assert est.step_s > 0
