"""What ``plan.search`` says when it has nothing to offer."""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit import plan


def test_a_pp_that_leaves_a_stage_without_a_layer_is_named() -> None:
    """A 4-layer model on 8 stages: even torchtitan's uneven split (the embedding and the
    head each counted as a layer: 6 effective layers over 8 stages) leaves stages empty,
    and the message says which pp and why, not just "no valid configuration"."""
    model = pk.ModelSpec(num_layers=4, hidden_size=512, num_attention_heads=8,
                         seq_length=256, vocab_size=1000)
    with pytest.raises(pk.PerfkitError) as err:
        plan.search(model, pk.Hardware.preset("h100"), 8, 16,
                    space=plan.SearchSpace(tp=(1,), pp=(8,), cp=(1,)))
    said = str(err.value)
    assert "pp 8 leaves a stage without a decoder layer" in said
    assert "4 layers" in said
