"""The advisor gives the same findings on a lazy (Dask) cluster as on the eager one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import perfkit as pk
from perfkit.advisor import Finding

# the whole dashboard, every tab x profile, or Dask against pandas: the slow group (README)
pytestmark = pytest.mark.slow

SIM = Path(__file__).resolve().parents[1] / "data" / "simulated"
PATHS = {"slow-rank": SIM / "slow-rank", "slow-link": SIM / "slow-link",
         "sim16": SIM / "llama2-13b-tuned-dp8-pp2"}
CONTEXT = {"model": pk.ModelSpec.preset("llama2-13b"),
           "hardware": pk.Hardware.preset("ascend-910b")}
PARALLEL = {"slow-rank": pk.ParallelConfig(dp=4, num_micro_batches=4, recompute="full"),
            "slow-link": pk.ParallelConfig(dp=4, num_micro_batches=4),
            "sim16": pk.ParallelConfig(dp=8, pp=2, num_micro_batches=8)}


@pytest.fixture(scope="module")
def pair(dask_client: Any) -> Any:
    """(eager, lazy) cluster of each folder, on the module's Dask client (conftest)."""
    return {name: (pk.load(p, cache=False, progress=False),
                   pk.load(p, engine="dask", client=dask_client, progress=False))
            for name, p in PATHS.items()}


def _same_findings(lazy: list[Finding], eager: list[Finding]) -> None:
    assert [(f.rule, f.area, f.severity, f.title, f.evidence, f.recommendation)
            for f in lazy] == [(f.rule, f.area, f.severity, f.title, f.evidence,
                                f.recommendation) for f in eager]
    assert [f.score for f in lazy] == pytest.approx([f.score for f in eager], rel=0,
                                                    abs=1e-9)
    # a rule that failed on the lazy tables would show up as an info finding
    assert not [f for f in lazy if f.title.startswith("Rule ")]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PATHS))
def test_lazy_advice_equals_eager_advice(pair: Any, name: str) -> None:
    eager, lazy = pair[name]
    kw = {**CONTEXT, "parallel": PARALLEL[name]}
    _same_findings(pk.advise(lazy, **kw), pk.advise(eager, **kw))


@pytest.mark.slow
def test_lazy_advice_without_context_finds_the_slow_rank(pair: Any) -> None:
    eager, lazy = pair["slow-rank"]
    found = pk.advise(lazy)
    _same_findings(found, pk.advise(eager))
    assert found[0].rule == "slow_ranks" and found[0].title.startswith("Rank 2 computes")
    # the operator rules priced the lazy cluster's kernels too (hardware from the profile)
    assert {"elementwise_chains", "unfused_operators"} <= {f.rule for f in found}


def test_lazy_advice_finds_the_slow_link(pair: Any) -> None:
    _, lazy = pair["slow-link"]
    assert "slow_link" in [f.rule for f in pk.advise(lazy)]
