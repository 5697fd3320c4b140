"""Every generated sentence reads right with 0, 1 and many: plurals, units, no nan.

The message templates of perfkit are f-strings spread over the package: the advisor's
findings (title, evidence, recommendation, details), the job's evidence, description,
missing pieces and disagreements, the loaders' notes, the errors of bad input, and
``perfkit info``. Each is rendered here on jobs and inputs chosen so that the counts in
them take the values 0, 1 and several (one rank, two ranks, four ranks; one bad row,
three bad rows; one missing rank, two missing ranks), and every text is checked against
the grammar rules of ``tests/conftest.py`` (:data:`GRAMMAR_RULES`): no "1 devices", no
"rank(s)", no "0.1 GiB", no "nan", no doubled word, no "complete a". The dashboard's
captions are checked by the same rules where every tab of every bundled profile is drawn
(``tests/test_widgets_dashboard.py``) and the notebooks' outputs where they run
(``tests/test_notebooks.py``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from shared_samples import PT_LEVEL1, shared_sample

import perfkit as pk
from perfkit.cli.fault_spec import parse_fault
from perfkit.cli.profile_text import profile_info_text
from perfkit.errors import PerfkitError
from perfkit.format import bytes_text, counted, listed, plural, time_text
from perfkit.io.engines.local import load
from perfkit.simulate import (
    DataLoadingStall,
    HostBound,
    MemoryPressure,
    SlowLink,
    SlowRank,
    UnfusedOperators,
    simulate,
)

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests" / "data"
HW = pk.Hardware.preset("ascend-910b")
TINY = pk.ModelSpec.preset("llama2-7b").replace(num_layers=2, vocab_size=1024, name="tiny")
#: simulated jobs whose counts are 1, 2 and 4 ranks, with faults that make rules speak
JOBS = {
    "one-rank": (pk.ParallelConfig(dp=1, num_micro_batches=1),
                 (HostBound(600.0), DataLoadingStall(20_000.0))),
    "two-ranks": (pk.ParallelConfig(dp=2, num_micro_batches=2), (UnfusedOperators(),)),
    "dp2-pp2": (pk.ParallelConfig(dp=2, pp=2, num_micro_batches=2), (SlowRank(3, 1.5),)),
    "four-ranks": (pk.ParallelConfig(dp=4, num_micro_batches=2),
                   (SlowRank(1, 1.3), SlowLink(2, 3, 0.2), MemoryPressure(0.97, 5000.0))),
}
#: profiles of other kinds: a CPU MindSpore rank, a 2-rank CPU Kineto run, a GPU run
OTHERS = (ROOT / "data" / "mindspore-cpu-tiny-llama", ROOT / "data" / "kineto-tiny-llama",
          TESTS / "kineto_llama_h100")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def _profile_texts(profile: object) -> list[str]:
    """Everything perfkit writes about a profile: notes, job, findings, perfkit info."""
    texts = list(profile.meta.notes)
    job = pk.infer_job(profile)
    texts += [job.describe(), *job.missing(), *job.problems(),
              *(str(d) for d in job.evidence["detail"])]
    for f in pk.advise(profile, model=job.model, parallel=job.parallel,
                       hardware=job.hardware):
        texts += [f.title, f.evidence, f.recommendation, f.details]
    texts.append(profile_info_text(profile, n_findings=30))
    return texts


def _check(texts: list[str], grammar) -> None:
    problems = sorted({p for t in texts for p in grammar(str(t))})
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------------------- helpers

@pytest.mark.parametrize(("n", "text"), [(0, "0 ranks"), (1, "1 rank"), (2, "2 ranks"),
                                         (1.0, "1 rank"), (1024, "1,024 ranks")])
def test_counted_takes_the_number_of_its_count(n: float, text: str) -> None:
    assert counted(n, "rank") == text


def test_plurals_and_lists() -> None:
    assert [counted(n, "micro-batch") for n in (1, 8)] == ["1 micro-batch", "8 micro-batches"]
    assert [plural(n, "has", "have") for n in (0, 1, 2)] == ["have", "has", "have"]
    assert [listed(x) for x in ([], [3], [2, 3], [1, 2, 3])] == ["", "3", "2 and 3",
                                                                  "1, 2 and 3"]


@pytest.mark.parametrize(("size", "text"), [(136 * 2**20, "136 MiB"), (3 * 2**20, "3.00 MiB"),
                                            (855 * 2**10, "855 KiB"),
                                            (10_822_982_041.6, "10.1 GiB")])
def test_memory_in_the_unit_that_fits(size: float, text: str, grammar) -> None:
    assert bytes_text(size) == text and not grammar(text)


def test_the_rules_catch_the_issues_examples(grammar) -> None:
    for bad in ("= 1 devices", "16 rank(s)", "0.1 GiB", "0.00 GiB", "step nan ms",
                "expected complete a PyTorch profiler trace", "the the job"):
        assert grammar(bad), bad
    for good in ("= 1 device", "16 ranks", "136 MiB", "rank 1 of 2", "1.5 devices"):
        assert not grammar(good), good


# ----------------------------------------------------------------------------- sentences

@pytest.mark.slow
def test_findings_job_notes_and_info_on_one_two_and_four_ranks(tmp_path: Path,
                                                                grammar) -> None:
    texts = []
    for name, (parallel, faults) in JOBS.items():
        out = simulate(TINY, parallel, HW, steps=2, faults=faults, out=tmp_path / name,
                       seed=3, aic_metrics=None, trace_kernels=False)
        profile = load(out, cache=False)
        found = _profile_texts(profile)
        assert len(found) > 20, name
        texts += found
    # the rules that speak with counts did speak (so their sentences were checked)
    joined = "\n".join(texts)
    for words in ("Rank 3 computes", "slow link", "chain", "ranks", "short gaps"):
        assert words in joined, words
    _check(texts, grammar)


@pytest.mark.slow
@pytest.mark.parametrize("path", OTHERS, ids=lambda p: p.name)
def test_sentences_on_profiles_of_other_kinds(path: Path, grammar) -> None:
    _check(_profile_texts(load(path)), grammar)


def _errors_of(calls: list) -> list[str]:
    out = []
    for call in calls:
        with pytest.raises(PerfkitError) as info:
            call()
        out.append(str(info.value))
    return out


def test_errors_of_bad_input_with_one_and_several(tmp_path: Path, grammar) -> None:
    rank0 = shared_sample(PT_LEVEL1) / "rank0_ascend_pt"
    texts = []
    for n in (1, 3):  # one and several rows with more fields than the header
        rank = tmp_path / f"long{n}" / "rank0_ascend_pt"
        shutil.copytree(rank0, rank)
        csv = rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
        lines = csv.read_text(encoding="utf-8").splitlines()
        lines[1:1 + n] = [line + ",1,2" for line in lines[1:1 + n]]
        csv.write_text("\n".join(lines) + "\n", encoding="utf-8")
        texts += _errors_of([lambda rank=rank: load(rank, cache=False)])
        assert f"{counted(n, 'row')} {plural(n, 'has', 'have')} more fields" in texts[-1]
    trace = tmp_path / "trace_rank0.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}, ')
    cluster = ROOT / "data" / "simulated" / "slow-rank"
    texts += _errors_of([
        lambda: load(tmp_path / "nowhere"),
        lambda: load(trace, cache=False),
        lambda: load(cluster, ranks=[7]),
        lambda: load(cluster, ranks=[7, 8]),
        lambda: parse_fault("slow-rank:1,2,3"),
        lambda: pk.Journal.bundled().run("nope"),
    ])
    assert "rank 7 not found" in texts[-4] and "ranks 7 and 8 not found" in texts[-3]
    assert "expected a Kineto" in texts[-5] or "in full" in texts[-5]
    _check(texts, grammar)


# ----------------------------------------------------------------------------- units

@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_the_step_is_said_in_one_unit_on_a_page() -> None:
    """The job line and the Overview's card write the measured step with one formatter
    (the issue: "step 0.0401 s" beside "40.1 ms")."""
    from perfkit.widgets import dashboard

    board = dashboard(str(ROOT / "data" / "mindspore-cpu-tiny-llama"))
    job = board.job.job
    shown = time_text(job.step_time_s * 1e6)
    assert shown.endswith(" ms")
    assert f"step {shown}" in board.job.summary.value
    assert shown in board.select("Overview").static_html()
