"""``advise_iter`` streams the findings of ``advise`` as each becomes final.

The same findings as ``advise`` (every field), a finding held until the rules that may drop
or fold it have run (``runner.DECIDED_BY``), early stop, and errors reaching the caller.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

import perfkit as pk
from perfkit.advisor import advise_iter, runner
from perfkit.advisor.context import ASSUMPTIONS, Context
from perfkit.advisor.finding import Finding
from perfkit.advisor.registry import Rule
from perfkit.analysis._shared import shared_results

ROOT = Path(__file__).resolve().parents[1]
SIM = ROOT / "data" / "simulated"


def _key(f: Finding) -> str:
    return repr(dataclasses.astuple(f))  # NaN-safe: an unmeasured finding's ms is NaN


@pytest.mark.parametrize("name", ["data-stall", "slow-rank", "slow-link"])
def test_the_stream_holds_the_findings_of_advise(name: str) -> None:
    prof = pk.load(SIM / name, progress=False)
    streamed = list(advise_iter(prof))
    ranked = pk.advise(prof)
    assert sorted(map(_key, streamed)) == sorted(map(_key, ranked))
    assert len(streamed) == len(ranked) > 0
    # in the order found: the rules' order, but for the findings held for a later rule
    # (runner.DECIDED_BY)
    order = [r.name for r in pk.advisor.registry.registered()]
    rule_of_finding = {"data_loading": "data_loading", "host_bound": "host_bound",
                       "exposed_communication": "exposed_comm", "slow_link": "links"}
    seen = [order.index(rule_of_finding[f.rule]) for f in streamed if f.rule in rule_of_finding]
    assert seen == sorted(seen)


def _finding(rule: str, title: str, score: float) -> Finding:
    return Finding(severity="medium", area="host", title=title, evidence="e",
                   recommendation="r", notebook="n", score=score, rule=rule,
                   ms_per_step=score * 100, measured=True)


def _rule(name: str, order: int, found: list[Finding], log: list[str]) -> Rule:
    def check(ctx: Any) -> list[Finding]:
        log.append(f"ran {name}")
        return list(found)
    return Rule(name, "host", order, check)


def _run(plan: list[Rule], log: list[str], stop: threading.Event | None = None
         ) -> list[Finding]:
    prof = pk.load(SIM / "slow-rank", progress=False)
    with shared_results():
        ctx = Context(prof, None, None, None, dict(ASSUMPTIONS))
        found = runner._run_rules(ctx, plan, stop=stop,
                                  on_final=lambda f: log.append(f"final {f.title}"))
    return [f for _, f in found]


def test_a_finding_waits_for_the_rules_that_decide_it() -> None:
    log: list[str] = []
    late_start = _finding("slow_ranks", "Rank 3 starts its steps late", 0.2)
    slow = _finding("slow_ranks", "Rank 2 computes slower", 0.1)
    other = _finding("exposed_communication", "Communication exposed", 0.1)
    stall = _finding("data_loading", "The device waits for the next batch", 0.3)
    plan = [_rule("slow_ranks", 10, [late_start, slow], log),
            _rule("exposed_comm", 20, [other], log),
            _rule("data_loading", 30, [stall], log),
            _rule("last", 40, [], log)]
    _run(plan, log)
    # exposed_comm's finding is final at once; slow_ranks' wait for data_loading, which
    # drops the late start (the stall seen per rank) and keeps the slow rank
    assert log == ["ran slow_ranks", "ran exposed_comm", "final Communication exposed",
                   "ran data_loading", "final Rank 2 computes slower",
                   "final The device waits for the next batch", "ran last"]


def test_stopping_ends_the_rules_and_hands_on_what_is_held() -> None:
    log: list[str] = []
    stop = threading.Event()
    slow = _finding("slow_ranks", "Rank 2 computes slower", 0.1)

    def stopper(ctx: Any) -> list[Finding]:
        stop.set()
        return []

    plan = [_rule("slow_ranks", 10, [slow], log), Rule("stopper", "host", 20, stopper),
            _rule("data_loading", 30, [], log)]
    _run(plan, log, stop)
    assert log == ["ran slow_ranks", "final Rank 2 computes slower"]


def test_breaking_early_stops_the_worker() -> None:
    prof = pk.load(SIM / "data-stall", progress=False)
    stream = advise_iter(prof)
    first = next(stream)
    assert isinstance(first, Finding)
    stream.close()
    for t in threading.enumerate():
        if t.name == "perfkit-advise-iter":
            t.join(timeout=60)
            assert not t.is_alive()


def test_an_error_outside_the_rules_reaches_the_caller(monkeypatch: Any) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the context could not be built")

    monkeypatch.setattr(pk.advisor, "Context", broken)
    with pytest.raises(RuntimeError, match="could not be built"):
        list(advise_iter(pk.load(SIM / "slow-rank", progress=False)))
