"""The advisor's rule registry: declared order and dependencies, and the rules it skips.

Each rule declares, with ``@rule``, its area, its place in the order of checks, the
tables and inputs it needs, the frameworks it applies to and the rules it reads
(``after=``). The runner must run a rule after every rule it reads, whatever their
orders; must not run a rule whose tables, inputs or framework are missing; and such a
rule, run anyway, must have had nothing to say (the skip changes no finding).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from shared_samples import CLUSTER_OUTPUT, HTA, TRACE_VIEW_EXCERPT, sample, shared_param

import perfkit as pk
from perfkit import advisor
from perfkit.advisor import registry, runner
from perfkit.advisor.context import ASSUMPTIONS, Context
from perfkit.advisor.finding import Finding, unmeasured
from perfkit.advisor.registry import Rule, registered, rule, rule_of, run_order
from perfkit.analysis._shared import shared_results
from perfkit.profile import Profile, ProfileMeta

ROOT = Path(__file__).resolve().parents[1]
#: Profiles that lack some tables: host operators only, no link matrix, no memory, ...
SPARSE = {
    "kineto-ops-only": ROOT / "data" / "kineto-tiny-llama",
    "mindspore-cpu": ROOT / "data" / "mindspore-cpu-tiny-llama",
    # other projects' profiles, read from shared/samples (tests/shared_samples.py)
    "cluster-output": sample(CLUSTER_OUTPUT),
    "trace-view": sample(TRACE_VIEW_EXCERPT).parent,
    "kineto-gpu": sample(HTA),
}
SHARED = {"cluster-output", "trace-view", "kineto-gpu"}


def _job() -> dict[str, Any]:
    return {"model": pk.ModelSpec.preset("llama2-7b"),
            "parallel": pk.ParallelConfig(dp=2, pp=2, num_micro_batches=4),
            "hardware": pk.Hardware.preset("h100")}


def _empty_profile() -> Profile:
    return Profile(ProfileMeta(source_format="kineto", rank=0, framework="pytorch",
                               device_type="gpu"), lambda name: pd.DataFrame())


def _probe(name: str, calls: list[str], **declared: Any) -> Any:
    """A rule function named ``name`` that records its calls and finds one thing."""
    def check(ctx: Context) -> list[Finding]:
        calls.append(name)
        return [unmeasured(name, "host", f"probe {name}", "seen", "nothing",
                           severity="info")]
    check.__name__ = name
    return rule("host", **declared)(check)


@pytest.fixture
def scratch_registry(monkeypatch: Any) -> None:
    """Rules registered in a test stay out of the other tests."""
    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))


def test_every_rule_runs_after_the_rules_it_reads() -> None:
    order = [r.name for r in registered()]
    assert order == [rule_of(f).name for f in advisor.RULES]
    assert len(order) == len(set(order)) == 23  # with precision, step tail, device idle
    for r in registered():
        for earlier in r.after:
            assert order.index(earlier) < order.index(r.name), (r.name, earlier)
    # the two that read others' findings, and the two that read a counted saving
    assert set(rule_of(advisor.communication.comm_wait).after) >= {"exposed_comm", "links"}
    assert rule_of(advisor.memory_recompute.memory).after == ("long_gaps",)
    assert rule_of(advisor.communication.exposed_comm).after == ("links",)
    # the element-wise chains: the fusion patterns' saving, the attention chains' kernels
    assert rule_of(advisor.operators.elementwise).after == ("unfused", "attention")


def test_after_wins_over_order_and_a_circle_is_refused() -> None:
    def spec(name: str, order: int, after: tuple[str, ...] = ()) -> Rule:
        return Rule(name, "host", order, lambda ctx: [], after=after)

    ranked = run_order([spec("c", 30), spec("a", 10, after=("c",)), spec("b", 20)])
    assert [r.name for r in ranked] == ["b", "c", "a"]
    # a rule it reads that is not run does not hold it back
    assert [r.name for r in run_order([spec("a", 10, after=("gone",))])] == ["a"]
    with pytest.raises(ValueError, match="wait for each other"):
        run_order([spec("a", 10, after=("b",)), spec("b", 20, after=("a",))])


def test_a_declaration_naming_nothing_known_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown table"):
        rule("host", order=1, needs=("kernels|opz",))
    with pytest.raises(ValueError, match="unknown area"):
        rule("gpu", order=1)
    with pytest.raises(ValueError, match="unknown framework"):
        rule("host", order=1, frameworks=("jax",))
    with pytest.raises(ValueError, match="unknown input"):
        rule("host", order=1, inputs=("tokenizer",))


@pytest.mark.parametrize("name", [shared_param(n) if n in SHARED else n
                                  for n in [*SPARSE, "empty"]])
def test_a_rule_skipped_for_its_tables_or_framework_had_nothing_to_say(name: str) -> None:
    """Run directly, every rule the runner skips on this profile finds nothing."""
    prof = _empty_profile() if name == "empty" else pk.load(SPARSE[name], cache=False,
                                                           progress=False)
    with shared_results():
        ctx = Context(prof, **_job(), assumptions=dict(ASSUMPTIONS))
        skipped = [r for r in registered() if not r.runs_on(ctx)]
        for r in registered():
            ctx.start(r.name, r.after)
            ctx.record(r.name, r.check(ctx) if r.runs_on(ctx) else [])
        for r in skipped:
            ctx.start(r.name, r.after)
            assert r.check(ctx) == [], r.name
    assert skipped
    if name == "empty":  # every table missing: only the rules that need none are left
        assert {r.name for r in registered() if r not in skipped} == {
            r.name for r in registered() if not r.needs}
    if name == "kineto-gpu":  # no AI CPU outside Ascend, whatever the tables
        assert "ai_cpu" in {r.name for r in skipped}


def test_the_runner_skips_a_rule_without_its_tables_inputs_or_framework(
        scratch_registry: None) -> None:
    calls: list[str] = []
    probes = [_probe("probe_links", calls, order=1, needs=("comm_matrix",)),
              _probe("probe_kernels", calls, order=2, needs=("kernels|ops",)),
              _probe("probe_model", calls, order=3, inputs=("model",)),
              _probe("probe_ascend", calls, order=4, frameworks=("mindspore", "ascend")),
              _probe("probe_gpu", calls, order=5, frameworks=("pytorch_gpu",)),
              _probe("probe_cpu", calls, order=6, frameworks=("pytorch_cpu",))]
    prof = pk.load(SPARSE["kineto-ops-only"], cache=False, progress=False)  # CPU + gloo
    with shared_results():
        found = runner.run(Context(prof, None, None, None, dict(ASSUMPTIONS)), probes)
    assert calls == ["probe_kernels", "probe_cpu"]
    assert [f.rule for f in found] == calls


def test_a_rule_may_read_only_the_rules_it_names(scratch_registry: None) -> None:
    def reads_named(ctx: Context) -> list[Finding]:
        ctx.findings("probe_first")
        return []

    def reads_unnamed(ctx: Context) -> list[Finding]:
        ctx.findings("probe_first")
        return []

    calls: list[str] = []
    first = _probe("probe_first", calls, order=50)
    named = rule("host", order=10, after=("probe_first",))(reads_named)
    unnamed = rule("host", order=60)(reads_unnamed)
    prof = _empty_profile()
    with shared_results():
        ctx = Context(prof, None, None, None, dict(ASSUMPTIONS))
        found = runner.run(ctx, [unnamed, named, first])
    assert calls == ["probe_first"]  # reads_named ran after it despite its lower order
    failed = [f for f in found if f.title.startswith("Rule ")]
    assert [f.rule for f in failed] == ["reads_unnamed"]
    assert "does not name it in after=" in failed[0].evidence


def test_a_new_rule_is_one_decorated_function(scratch_registry: None,
                                               monkeypatch: Any) -> None:
    calls: list[str] = []
    probe = _probe("probe_new", calls, order=5, needs=("kernels",))
    monkeypatch.setattr(advisor, "RULES", (*advisor.RULES, probe))
    prof = pk.load(ROOT / "data" / "simulated" / "llama2-7b-tp2", cache=False, progress=False)
    found = pk.advise(prof)
    assert calls == ["probe_new"]
    assert [f for f in found if f.rule == "probe_new"]
