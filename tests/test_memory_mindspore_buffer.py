"""The MindSpore scheme keeps an fp16 gradient buffer only when gradients accumulate (several
micro-batches, or a pipeline: the seed's rule), and the figure's note says the buffer only
then. Bytes per parameter written out (``t`` the optimizer shard): fp16 weights ``2/t``, fp32
Adam m, v ``8/t``, the fp16 buffer ``2`` whole."""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit.widgets.summary import memory_breakdown, metrics_summary

GIB = 2**30


def _llama2_7b_parameters() -> int:
    """Embedding and untied output ``V·h``, per layer ``4h²`` attention, ``3·h·f`` gated
    MLP and two RMSNorm weights, a final norm."""
    v, h, f, layers = 32000, 4096, 11008, 32
    return 2 * v * h + layers * (4 * h * h + 3 * h * f + 2 * h) + h


@pytest.mark.parametrize(("micro_batches", "shard", "per_param", "buffer"), [
    (1, 1, 2 + 8, False),          # no accumulation: weights and moments only
    (1, 8, (2 + 8) / 8, False),
    (4, 1, 2 + 8 + 2, True),       # accumulating over 4 micro-batches: + the fp16 buffer
    (4, 8, (2 + 8) / 8 + 2, True),
])
def test_the_buffer_is_said_and_counted_only_when_gradients_accumulate(
        micro_batches, shard, per_param, buffer) -> None:
    model = pk.ModelSpec.preset("llama2-7b")
    par = pk.ParallelConfig(dp=8, num_micro_batches=micro_batches, optimizer_shard=shard)
    row = metrics_summary(model, "ascend-910b", par, 1.0,
                          static_scheme="mindspore").set_index("key").loc["static_gib"]
    assert row["value"] * GIB == pytest.approx(per_param * _llama2_7b_parameters(), rel=1e-9)
    note = row["note"]
    assert ("gradient buffer (gradients accumulate over the 4 micro-batches)" in note) \
        is buffer
    assert "when accumulating" not in note
    if not buffer:
        assert "no gradient buffer" in note
    frame = memory_breakdown(model, "ascend-910b", par, static_scheme="mindspore")
    grads = float(frame.set_index("component").loc["gradients", "bytes"])
    assert grads == pytest.approx(2 * _llama2_7b_parameters() if buffer else 0.0, rel=1e-9)
    assert frame.attrs["static_note"] == note
