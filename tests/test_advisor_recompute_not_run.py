"""A configuration that recomputes in full, on a profile whose attention shows no rerun.

``data/simulated/llama2-7b-tp2`` (perfkit's own simulation) recomputes nothing: its
``kernel_details.csv`` holds as many FlashAttentionScore tasks as FlashAttentionScoreGrad
ones (counted here with ``csv``). A configuration saying full recompute is then not the
run that was profiled, and the finding must say so instead of claiming that the profile
has no attention kernels to count. Selective recompute reruns no attention kernel of its
own, so there the counts cannot confirm it, and the finding says that.
"""

from __future__ import annotations

import csv
from pathlib import Path

import perfkit as pk

SAMPLE = Path(pk.__file__).resolve().parent.parent / "data" / "simulated" / "llama2-7b-tp2"


def _attention_counts() -> tuple[int, int]:
    """(forward, backward) FlashAttentionScore tasks of rank 0's raw kernel list."""
    path = next(SAMPLE.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
    forward = backward = 0
    with path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["Type"] == "FlashAttentionScore":
                forward += 1
            elif row["Type"] == "FlashAttentionScoreGrad":
                backward += 1
    return forward, backward


def _finding(recompute: str, layers: tuple[int, ...] | None = None) -> pk.Finding:
    profile = pk.load(SAMPLE, cache=False, progress=False)
    model = pk.ModelSpec(num_layers=32, hidden_size=4096, num_attention_heads=32,
                         seq_length=4096, vocab_size=32000, ffn_hidden_size=11008,
                         mlp="gated")
    parallel = pk.ParallelConfig(tp=2, recompute=recompute, recompute_layers=layers)
    found = [f for f in pk.advise(profile, model=model, parallel=parallel)
             if f.area == "recompute"]
    assert len(found) == 1, [f.title for f in found]
    return found[0]


def test_full_recompute_configured_but_not_in_the_profile_is_called_out() -> None:
    forward, backward = _attention_counts()
    assert forward > 0 and forward == backward  # the raw file: no attention rerun
    found = _finding("full")
    assert "no attention kernels" not in found.evidence
    assert "attention forward / backward tasks = 1.00" in found.evidence
    assert "check that this configuration is the one the profiled run used" in found.evidence


def test_some_layers_in_full_are_called_out_too() -> None:
    found = _finding("none", (4,))
    assert "check that this configuration is the one the profiled run used" in found.evidence


def test_selective_recompute_cannot_show_in_attention_counts() -> None:
    found = _finding("selective")
    assert "no attention kernels" not in found.evidence
    assert "selective recompute reruns no attention kernel" in found.evidence
