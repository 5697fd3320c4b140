"""The advisor prices the operators on a second thread: same findings, nothing left behind.

``advise`` starts :meth:`Context.compute_ahead` on a second thread while the rules run
in order on the first. The findings must be those of the rules run in order on one
thread; two threads asking for one shared result or one table must get it computed once;
an analysis that fails on the second thread must reach the rule that asks for it as that
rule's ``info`` finding, and the thread must be gone when ``advise`` returns.
"""

from __future__ import annotations

import contextvars
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from shared_samples import HTA, PT_LEVEL1, sample, shared_param

import perfkit as pk
from perfkit import advisor
from perfkit.advisor import registry, runner
from perfkit.advisor.context import Context
from perfkit.advisor.operators import gemm
from perfkit.analysis import _shared, efficiency
from perfkit.profile import Profile, ProfileMeta

ROOT = Path(__file__).resolve().parents[1]
H100 = pk.Hardware.preset("h100")
#: sample -> hardware to pass (None: the profile names its device)
SAMPLES = {
    "ascend": (sample(PT_LEVEL1), None),
    "kineto": (sample(HTA), H100),
    "kineto-h100": (ROOT / "tests" / "data" / "kineto_llama_h100", None),
    "simulated": (ROOT / "data" / "simulated" / "slow-rank", None),
}


def _findings(found: list[Any]) -> list[tuple[Any, ...]]:
    # an unmeasured finding's ms_per_step is NaN, which equals no NaN: compared as None
    return [(f.rule, f.severity, f.title, f.evidence, f.recommendation, f.score,
             f.ms_per_step if f.measured else None, f.details) for f in found]


def _ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "perfkit-advise-ahead"]


@pytest.mark.parametrize("name", [shared_param(n) if n in ("ascend", "kineto") else n
                                  for n in SAMPLES])
def test_advice_computed_ahead_equals_advice_in_order(name: str, monkeypatch: Any) -> None:
    path, hardware = SAMPLES[name]
    prof = pk.load(path, cache=False, progress=False)
    started: list[str] = []
    real_start = runner._start_ahead

    def start(ctx: Any) -> Any:
        thread = real_start(ctx)
        started.append("yes" if thread is not None else "no")
        return thread

    monkeypatch.setattr(runner, "_start_ahead", start)
    ahead = pk.advise(prof, hardware=hardware)
    assert started == ["yes"]  # the second thread did run
    monkeypatch.setattr(advisor, "COMPUTE_AHEAD", False)
    in_order = pk.advise(prof, hardware=hardware)
    assert started == ["yes", "no"]
    assert _findings(ahead) == _findings(in_order)
    assert ahead and not [f for f in ahead if f.title.startswith("Rule ")]
    assert not _ahead_threads()


@pytest.mark.shared_samples
def test_a_failure_on_the_second_thread_reaches_the_rule_that_asks(monkeypatch: Any) -> None:
    prof = pk.load(SAMPLES["ascend"][0], cache=False, progress=False)
    calls: list[str] = []

    def broken(*args: Any, **kwargs: Any) -> Any:
        calls.append(threading.current_thread().name)
        raise RuntimeError("planted failure")

    monkeypatch.setattr(efficiency, "operator_efficiency", broken)
    found = pk.advise(prof)
    failed = [f for f in found if f.title == "Rule gemm could not run on this profile"]
    assert len(failed) == 1 and "planted failure" in failed[0].evidence
    assert failed[0].severity == "info"
    assert calls == ["perfkit-advise-ahead"]  # computed once, on the second thread
    # the other rules still ran: the same measured findings as without the gemm rule
    monkeypatch.setattr(advisor, "RULES", tuple(r for r in advisor.RULES
                                                if r is not gemm))
    rest = pk.advise(prof)
    assert [f.title for f in found if f.measured] == [f.title for f in rest if f.measured]
    assert not _ahead_threads()


@pytest.mark.shared_samples
def test_no_pricing_ahead_without_a_known_device() -> None:
    """The pricing rules need the roofline: without it nothing is priced ahead for nothing;
    the recompute rule, which applies to any profile, still has its analyses computed
    ahead, and with no rule that reads one no second thread starts."""
    prof = pk.load(SAMPLES["kineto"][0], cache=False, progress=False)
    ctx = Context(prof, None, None, None, dict(advisor.ASSUMPTIONS))
    assert ctx.hardware is None
    plan = registry.run_order(registry.rule_of(r) for r in advisor.RULES)
    assert runner.ahead_of(plan, ctx) == ("recompute",)
    ctx.ahead = runner.ahead_of([r for r in plan if r.name != "recompute"], ctx)
    assert ctx.ahead == ()
    assert runner._start_ahead(ctx) is None


def test_shared_result_is_computed_once_when_two_threads_ask() -> None:
    frame = pd.DataFrame({"a": [1]})
    computing, release = threading.Event(), threading.Event()
    calls: list[str] = []
    got: dict[str, Any] = {}

    def slow() -> object:
        calls.append(threading.current_thread().name)
        computing.set()
        assert release.wait(10)
        return object()

    with _shared.shared_results():
        first = threading.Thread(
            target=contextvars.copy_context().run, name="first",
            args=(lambda: got.__setitem__("first", _shared.shared("x", (frame,), (), slow)),))
        first.start()
        assert computing.wait(10)
        threading.Timer(0.2, release.set).start()
        got["main"] = _shared.shared("x", (frame,), (), slow)  # waits for the first thread
        first.join(10)
    assert calls == ["first"]
    assert got["main"] is got["first"]


def test_a_table_is_built_once_when_two_threads_ask() -> None:
    building, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def provider(name: str) -> pd.DataFrame | None:
        if name != "kernels":
            return None
        calls.append(threading.current_thread().name)
        building.set()
        assert release.wait(10)
        return pd.DataFrame({"name": ["a"], "start_us": [0.0], "dur_us": [1.0]})

    prof = Profile(ProfileMeta(source_format="kineto", rank=0), provider)
    got: dict[str, pd.DataFrame] = {}
    other = threading.Thread(target=lambda: got.__setitem__("other", prof.kernels),
                             name="other")
    other.start()
    assert building.wait(10)
    threading.Timer(0.2, release.set).start()
    got["main"] = prof.kernels
    other.join(10)
    assert calls == ["other"]
    assert got["main"] is got["other"]


def test_a_rule_waiting_for_an_analysis_computes_the_next_one_queued() -> None:
    """While the second thread computes the pricing, the rule that waits for it computes
    the queued analysis after it (each once, each by one thread), then gets the pricing."""
    computing, release = threading.Event(), threading.Event()
    ran: dict[str, str] = {}

    class Probe(Context):
        def efficiency(self) -> Any:
            def slow() -> str:
                ran["efficiency"] = threading.current_thread().name
                computing.set()
                assert release.wait(10)
                return "priced"
            return self.get("eff", slow)

        def chains(self) -> Any:
            def quick() -> str:
                ran["chains"] = threading.current_thread().name
                release.set()  # the pricing may finish once the chains are done
                return "chained"
            return self.get("chains", quick)

    prof = pk.load(ROOT / "data" / "simulated" / "slow-rank", cache=False, progress=False)
    ctx = Probe(prof, None, None, H100, dict(advisor.ASSUMPTIONS))
    ahead = threading.Thread(target=ctx.compute_ahead, args=(("efficiency", "chains"),),
                             name="perfkit-advise-ahead")
    ahead.start()
    assert computing.wait(10)
    assert ctx.efficiency() == "priced"  # waits, computing the chains meanwhile
    ahead.join(10)
    assert not ahead.is_alive()
    assert ran == {"efficiency": "perfkit-advise-ahead", "chains": "MainThread"}
    assert ctx.chains() == "chained"


def test_the_memory_peak_is_read_by_the_thread_waiting_for_the_attention_passes() -> None:
    """The memory rule reads its peak (a property, not a method) ahead: queued after the
    attention passes, it is read by the rules' thread while that waits for them, not after
    them; and the rule plans it ahead where it applies (a PyTorch GPU profile with memory
    samples and a device)."""
    computing, release = threading.Event(), threading.Event()
    ran: dict[str, str] = {}

    class Probe(Context):
        def recompute(self) -> None:
            def slow() -> str:
                ran["recompute"] = threading.current_thread().name
                computing.set()
                assert release.wait(10)
                return "passes"
            self.get("recompute", slow)

        @property
        def memory_frac(self) -> Any:
            def quick() -> tuple[float, float, float]:
                ran["memory_frac"] = threading.current_thread().name
                release.set()
                return (1.0, 2.0, 0.5)
            return self.get("memfrac", quick)

    prof = pk.load(ROOT / "tests" / "data" / "kineto_llama_h100", cache=False,
                   progress=False)
    ctx = Probe(prof, None, None, H100, dict(advisor.ASSUMPTIONS))
    plan = registry.run_order(registry.rule_of(r) for r in advisor.RULES)
    assert runner.ahead_of(plan, ctx)[-2:] == ("recompute", "memory_frac")
    ahead = threading.Thread(target=ctx.compute_ahead, args=(("recompute", "memory_frac"),),
                             name="perfkit-advise-ahead")
    ahead.start()
    assert computing.wait(10)
    ctx.recompute()  # waits, reading the memory peak meanwhile
    ahead.join(10)
    assert not ahead.is_alive()
    assert ran == {"recompute": "perfkit-advise-ahead", "memory_frac": "MainThread"}
    assert ctx.memory_frac == (1.0, 2.0, 0.5)
