"""Every damaged input of the corpus (tests/corpus/make_corpus.py) has the outcome it must.

For each case: a clear :class:`~perfkit.errors.PerfkitError` naming the file, a partial load
with the bad rank in ``Cluster.failed``, or a correct load with a note (the numbers checked
against the intact sample). No other exception type ever escapes, each case is bounded in
time and memory, and no input tree is written to (each case's tree is snapshotted before and
after, and the whole corpus at the end).

The cases made from other projects' profiles need ``shared/samples`` beside the checkout
(``tests/shared_samples.py``); without it only the cases made from the project's own files
are built, and ``test_shared_cases_are_built`` says so (a skip; a failure under CI).
"""

from __future__ import annotations

import importlib.util
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from shared_samples import samples_dir, shared_param

import perfkit as pk
from perfkit.errors import PerfkitError
from perfkit.io._common.archive import extract_profile_archive

_spec = importlib.util.spec_from_file_location(
    "perfkit_corpus", Path(__file__).with_name("make_corpus.py"))
corpus_mod = importlib.util.module_from_spec(_spec)
sys.modules["perfkit_corpus"] = corpus_mod
_spec.loader.exec_module(corpus_mod)  # type: ignore[union-attr]

#: Whether the cases made from other projects' profiles are built (shared/samples is here).
SHARED = samples_dir() is not None


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The damaged inputs built at collection (:data:`BUILT`), intact references, and
    perfkit's cache in a temporary folder."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PERFKIT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    mp.delenv("PERFKIT_CACHE", raising=False)
    root = BUILT.root
    refs = corpus_mod.reference_inputs(tmp_path_factory.mktemp("corpus") / "refs",
                                       shared=SHARED)
    yield {"root": root, "cases": BUILT.cases, "refs": refs, "loaded": {},
           "dest": tmp_path_factory.mktemp("extracted"), "before": corpus_mod.snapshot(root)}
    mp.undo()


class _Built:
    """The corpus, built once per test process at collection (the test names are its
    cases' names) into a temporary folder removed when the process ends; the module's
    tests read these inputs rather than building another copy (some 150 MB, seconds)."""

    def __init__(self) -> None:
        # removed when the process ends (the finalizer of TemporaryDirectory), read-only
        # folders of the permission cases included
        self._scratch = tempfile.TemporaryDirectory(prefix="perfkit-corpus-")
        self.root = Path(self._scratch.name) / "inputs"
        self.cases = {c.name: c for c in corpus_mod.build(self.root, shared=SHARED)}


BUILT = _Built()
#: Name -> made from shared samples.
CASES = {name: c.shared for name, c in BUILT.cases.items()}
NAMES = list(CASES)


@pytest.mark.shared_samples
def test_shared_cases_are_built() -> None:
    """The cases made from other projects' profiles are among the parameters below."""
    assert sum(CASES.values()) >= 100


@pytest.mark.shared_samples
def test_corpus_is_large_and_covers_every_reader() -> None:
    assert len(NAMES) >= 150
    kinds = {n.split("-")[0] for n in NAMES}
    for prefix in ("kernel_details", "step_trace_time", "memory_record", "operator_memory",
                   "npu_module_mem", "communication", "communication_matrix", "profiler_info",
                   "trace_view", "db", "kineto", "cluster", "legacy", "cluster_output", "ir",
                   "log", "memory", "yaml", "hf", "zip"):
        assert prefix in kinds, prefix


def _load(kind: str, path: Path, dest: Path, **kwargs: Any) -> Any:
    if kind == "load":
        return pk.load(path, cache=kwargs.pop("cache", False), progress=False, **kwargs)
    if kind == "load_ir":
        return pk.load_ir(path)
    if kind == "training_log":
        return pk.read_training_log(path)
    if kind == "memory_log":
        return pk.read_memory_log(path)
    if kind == "mf_config":
        return pk.read_mindformers_config(path)
    if kind == "mf_model":
        return pk.ModelSpec.from_mindformers_yaml(path)
    if kind == "hf_config":
        return pk.ModelSpec.from_hf_config(path)
    if kind == "zip":
        folder = extract_profile_archive(path, dest, name=path.name)
        return pk.load(folder, cache=False, progress=False)
    raise AssertionError(kind)


def _reference(corpus: dict[str, Any], case: Any) -> Any:
    if case.ref is None:
        return None
    if case.ref not in corpus["loaded"]:
        kind = {"IR": "load_ir", "TRAIN": "training_log", "MEM": "memory_log",
                "YAML": "mf_config", "HF": "hf_config"}.get(case.ref, "load")
        corpus["loaded"][case.ref] = _load(kind, corpus["refs"][case.ref], corpus["dest"])
    return corpus["loaded"][case.ref]


def _notes(result: Any) -> list[str]:
    if hasattr(result, "meta"):
        return list(result.meta.notes)
    if hasattr(result, "attrs"):
        return list(result.attrs.get("notes", []))
    return []


def _tree(case: Any) -> Path:
    return case.path if case.path.is_dir() else case.path.parent


_PYARROW_DECODES_BAD_ROW = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning")  # pyarrow decodes a bad row's text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", [pytest.param(n, marks=_PYARROW_DECODES_BAD_ROW)
                                  if n.endswith("not-utf8") else
                                  shared_param(n) if CASES[n] else n for n in NAMES])
def test_case(corpus: dict[str, Any], name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    case = corpus["cases"][name]
    if case.skip:
        pytest.skip(case.skip)
    ref = _reference(corpus, case)
    tree = _tree(case)
    before = corpus_mod.snapshot(tree)
    dest = corpus["dest"] / name
    if case.patch is not None:
        case.patch(monkeypatch)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    error: BaseException | None = None
    result = None
    try:
        result = _load(case.kind, case.path, dest, **dict(case.kwargs))
    except PerfkitError as exc:
        error = exc
    except Exception as exc:  # noqa: BLE001 - any other type is the bug this test catches
        pytest.fail(f"{name}: {type(exc).__name__} escaped: {exc}")
    finally:
        monkeypatch.undo()
    elapsed = time.perf_counter() - start
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    assert corpus_mod.snapshot(tree) == before, f"{name}: the input tree was written to"
    assert elapsed < case.max_s, f"{name}: took {elapsed:.1f} s (limit {case.max_s} s)"
    assert grew_mb < 1024, f"{name}: peak memory grew by {grew_mb:.0f} MB"

    if case.expect == "error":
        assert error is not None, f"{name}: loaded without an error: {result!r}"
        msg = str(error)
        if case.file:
            assert case.file in msg, f"{name}: the error does not name {case.file}: {msg}"
        for w in case.words:
            assert w.lower() in msg.lower(), f"{name}: {w!r} not in: {msg}"
        return
    assert error is None, f"{name}: expected a load, got {error}"
    if case.expect == "partial":
        assert isinstance(result, pk.Cluster)
        assert set(result.failed) == set(case.failed), result.failed
        for rank in case.failed:
            msg = result.failed[rank]
            if case.file:
                assert case.file in msg, msg
            for w in case.words:
                assert w.lower() in msg.lower(), f"{name}: {w!r} not in: {msg}"
        assert result.ranks, "no rank loaded"
        assert any(n.startswith(f"rank {case.failed[0]} not loaded") for n in result.meta.notes)
    elif case.expect == "repaired":
        notes = _notes(result)
        for w in case.words:
            assert any(w.lower() in n.lower() for n in notes), \
                f"{name}: no note with {w!r}: {notes}"
    else:
        assert case.expect == "ok", case.expect
        if ref is not None and hasattr(result, "meta") and hasattr(ref, "meta"):
            added = [n for n in result.meta.notes if n not in ref.meta.notes]
            assert not [n for n in added if "set to NA" in n or "dropped" in n], added
    if hasattr(result, "tables"):
        result.tables()  # every table can be built (nothing raises later, lazily)
    if case.check is not None:
        case.check(result, ref)


def test_no_input_was_written(corpus: dict[str, Any]) -> None:
    """Whatever ran before, the corpus is exactly as built: names, sizes, times, modes."""
    assert corpus_mod.snapshot(corpus["root"]) == corpus["before"]
    assert not any(p.name.endswith(".parquet") for p in corpus["root"].rglob("*"))


@pytest.mark.shared_samples
def test_permission_cases_are_simulated_when_root() -> None:
    """As root (CI), chmod does not stop reads: the simulated cases stand in for them."""
    chmod = [n for n in NAMES if n.endswith("permission-chmod")]
    simulated = [n for n in NAMES if "permission-simulated" in n]
    assert chmod and len(simulated) >= len(chmod)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("running as root: chmod cases skipped, simulated ones ran")
