"""What is not a profile, a spec or a rank list is refused as the argument it is.

A walk of the Python API found ``pk.advise("sample:slow-rank")`` returning ``[]``,
``step_breakdown`` of a path or of a table returning an empty frame (read as "nothing
there"), ``hardware="nonsense"`` turning into four "could not run" findings, and
``pk.load(path, ranks=0)`` blamed on the files ("damaged file"). Objects that hold the
canonical tables as attributes stay accepted (tests/test_preparing_overlap.py reads one)."""

from __future__ import annotations

import pytest

import perfkit as pk
import perfkit.analysis as A
from perfkit.errors import InvalidArgumentError


@pytest.fixture(scope="module")
def profile() -> pk.Cluster:
    return pk.load("sample:slow-rank", progress=False)


@pytest.mark.parametrize("given", ["sample:slow-rank", 42, None])
def test_advise_refuses_what_is_not_a_profile(given: object) -> None:
    with pytest.raises(InvalidArgumentError, match="^profile_or_cluster: must be a Profile"):
        pk.advise(given)


@pytest.mark.parametrize(("name", "value", "said"), [
    ("hardware", "nonsense", "unknown hardware preset"),
    ("hardware", 123, "must be a perfkit.Hardware or a preset name"),
    ("model", "nonsense", "unknown model preset"),
    ("parallel", {"dp": 4}, "must be a perfkit.ParallelConfig")])
def test_advise_refuses_a_spec_that_is_neither_spec_nor_preset(
        profile: pk.Cluster, name: str, value: object, said: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"^{name}: {said}"):
        pk.advise(profile, **{name: value})


def test_advise_takes_preset_names(profile: pk.Cluster) -> None:
    by_name = pk.advise(profile, hardware="h100", model="llama2-7b")
    by_spec = pk.advise(profile, hardware=pk.Hardware.preset("h100"),
                        model=pk.ModelSpec.preset("llama2-7b"))
    assert [f.title for f in by_name] == [f.title for f in by_spec]
    assert not any("could not run" in f.title for f in by_name)


@pytest.mark.parametrize("analysis", [A.step_breakdown, A.top_operators, A.comm_summary])
def test_analyses_refuse_a_path_or_a_table(profile: pk.Cluster, analysis) -> None:
    with pytest.raises(InvalidArgumentError, match="load the path first, perfkit.load"):
        analysis("sample:slow-rank")
    with pytest.raises(InvalidArgumentError, match="a table alone is not enough"):
        analysis(profile.kernels)


@pytest.mark.parametrize(("args", "kwargs", "said"), [
    ((3,), {}, "^path: must be a path"),
    ((None,), {}, "^path: must be a path"),
    (("sample:slow-rank",), {"ranks": 0}, "^ranks: must be an iterable"),
    (("sample:slow-rank",), {"ranks": ["a"]}, "^ranks: must hold whole numbers"),
    (("sample:slow-rank",), {"ranks": [-1]}, "^ranks: must hold whole numbers"),
    (("sample:slow-rank",), {"ranks": 0, "wait": False}, "^ranks: must be an iterable")])
def test_load_refuses_arguments_of_the_wrong_kind(args: tuple, kwargs: dict, said: str
                                                  ) -> None:
    with pytest.raises(InvalidArgumentError, match=said):
        pk.load(*args, progress=False, **kwargs)


def test_a_rank_given_as_text_is_said_to_be_text(profile: pk.Cluster) -> None:
    with pytest.raises(KeyError, match="rank '1' is text: give the rank as a number"):
        profile["1"]
    with pytest.raises(KeyError, match="rank 9 is not in this cluster"):
        profile[9]
    assert profile[1].meta.rank == 1



def test_no_rank_to_compare_is_not_said_as_no_rank_loaded() -> None:
    """A walk: on a one-rank legacy profile whose slow-rank table is empty for want of
    metrics, the sentence said "0 ranks loaded"; it now gives the table's reason."""
    from perfkit.analysis._util import empty_frame
    from perfkit.analysis.slowest import slowest_rank_of

    table = empty_frame(["rank", "slow"], "the step breakdown has none of the metrics")
    said = slowest_rank_of(table)
    assert said.rank is None and said.compared == 0
    assert said.sentence == ("No slowest rank is named: no rank could be compared (the step "
                             "breakdown has none of the metrics).")


@pytest.mark.parametrize(("call", "said"), [
    (lambda p: A.top_operators(p, n=-1), "^n: must be a whole number >= 1"),
    (lambda p: A.top_operators(p, n=0), "^n: must be a whole number >= 1"),
    (lambda p: A.tiny_kernels(p, threshold_us=-5), "^threshold_us: must be > 0"),
    (lambda p: A.tiny_kernels(p, storm_share=0), r"^storm_share: must lie in \(0, 1\]"),
    (lambda p: A.tiny_kernels(p, min_run=0), "^min_run: must be >= 1"),
    (lambda p: A.slow_ranks(p, stages=[[0, 1], [1, 2]]),
     "^stages: a rank may be in one stage only; rank 1 in more")])
def test_analyses_refuse_arguments_out_of_range(profile: pk.Cluster, call, said: str
                                                ) -> None:
    """``top_operators(n=-1)`` gave 15 of 16 rows (pandas' ``head(-1)``); a negative
    threshold was taken."""
    with pytest.raises(InvalidArgumentError, match=said):
        call(profile)


def test_stages_that_do_not_fit_the_loaded_ranks_are_said(profile: pk.Cluster) -> None:
    """A walk: ``stages=[[0, 1], [2, 9]]`` on ranks 0-3 (9 absent, 3 in no stage) and
    ``pp=3`` over 4 ranks (stages 0 | 1 | 2,3) passed without a word."""
    assert profile.ranks == [0, 1, 2, 3]
    notes = A.slow_ranks(profile, stages=[[0, 1], [2, 9]]).attrs["notes"]
    assert "stages: rank 9 of the stages given is not loaded" in notes
    assert "stages: rank 3 is in no stage, and left out" in notes
    balance = A.stage_balance(profile, parallel=pk.ParallelConfig(dp=1, pp=3,
                                                                  num_micro_batches=3))
    assert balance["ranks"].tolist() == ["0", "1", "2,3"]
    assert ("stages: 4 ranks do not divide into pp=3 equal stages; taken in order, stage 0 "
            "holds 1, stage 1 holds 1, stage 2 holds 2") in balance.attrs["notes"]
    even = A.stage_balance(profile, parallel=pk.ParallelConfig(dp=2, pp=2,
                                                               num_micro_batches=4))
    assert not [n for n in even.attrs.get("notes") or [] if n.startswith("stages:")]


def test_deepspeed_memory_names_the_layout_field_it_needs() -> None:
    with pytest.raises(InvalidArgumentError, match=r"^parallel.zero_stage: .*set "
                                                   r"ParallelConfig\(zero_stage=2 or 3\)"):
        pk.static_memory(pk.ModelSpec.preset("llama2-7b"), pk.ParallelConfig(dp=8),
                         scheme="deepspeed")
