"""The advisor's finding on configured recompute follows the mode the configuration asks.

A profile that shows no attention kernels cannot show recompute, so the rule reads the
mode from the configuration: a MindFormers YAML written here (``recompute_config``:
``recompute: True`` is full recompute of every layer, even with ``select_recompute`` set;
a per-stage list recomputes that many layers in full; ``select_recompute`` alone is
selective). The share of recomputation is counted here by hand from the YAML's shapes:
per token, a layer's forward is ``2·(4h²) + 2·3·h·f`` for its projections and gated MLP
plus ``4·s·h`` for its attention core, the logits ``2·h·V``; training is three forwards;
full recompute adds one layer forward, selective one attention core.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_samples import sample, shared_sample

import perfkit as pk

pytestmark = pytest.mark.shared_samples

#: A real MindSpore profile (MindInsight's test data) whose operators name no attention.
PROFILE = "wild/mi_prof"
H, F, L, S, V = 1024, 2816, 8, 2048, 32000
LAYER = 2 * 4 * H * H + 2 * 3 * H * F + 4 * S * H
MODEL = 3 * (L * LAYER + 2 * H * V)


def _yaml(tmp_path: Path, recompute: str) -> Path:
    path = tmp_path / "llama.yaml"
    path.write_text(f"""\
runner_config:
  batch_size: 1
parallel_config:
  data_parallel: 1
  model_parallel: 1
  pipeline_stage: 2
  micro_batch_num: 4
recompute_config:
{recompute}
model:
  model_config:
    type: LlamaConfig
    seq_length: {S}
    hidden_size: {H}
    num_layers: {L}
    num_heads: 16
    vocab_size: {V}
    intermediate_size: {F}
""", encoding="utf-8")
    return path


def _finding(tmp_path: Path, recompute: str) -> pk.Finding | None:
    model, parallel, _ = pk.read_mindformers_config(_yaml(tmp_path, recompute))
    profile = pk.load(shared_sample(PROFILE), cache=False)
    assert pk.analysis.recompute_evidence(profile).empty  # nothing to count in the profile
    found = [f for f in pk.advise(profile, model=model, parallel=parallel)
             if f.area == "recompute"]
    assert len(found) <= 1
    return found[0] if found else None


def _share(extra: float) -> str:
    return f"{100 * extra / (MODEL + extra):.1f} %"


def test_full_recompute_in_the_yaml_gives_full_figures_and_advice(tmp_path: Path) -> None:
    found = _finding(tmp_path, "  recompute: True\n  select_recompute: ['feed_forward\\.mul']")
    assert found is not None
    assert "every layer in full" in found.title
    assert f"about {_share(L * LAYER)} of the computation is recomputation" in found.evidence
    # the advice is to recompute less than every layer, with the added work counted
    assert f"adds {100 * L * LAYER / MODEL:.1f} %" in found.recommendation
    assert "select_recompute" in found.recommendation  # a MindSpore profile: its terms
    assert found.severity == "info" and not found.measured


def test_full_layers_per_stage_are_counted(tmp_path: Path) -> None:
    found = _finding(tmp_path, "  recompute: [2, 1]")
    assert found is not None
    assert "3 layers in full" in found.title
    assert f"about {_share(3 * LAYER)} of the computation" in found.evidence


def test_selective_recompute_is_not_advised_as_its_own_remedy(tmp_path: Path) -> None:
    found = _finding(tmp_path, "  recompute: False\n  select_recompute: ['feed_forward\\.mul']")
    assert found is not None
    assert "selectively" in found.title
    assert f"about {_share(L * 4 * S * H)} of the computation" in found.evidence
    assert "selective recompute" not in found.recommendation.replace(
        "Selective recompute costs little", "")


def test_no_recompute_configured_gives_no_finding(tmp_path: Path) -> None:
    assert sample(PROFILE).exists()
    assert _finding(tmp_path, "  recompute: False") is None
