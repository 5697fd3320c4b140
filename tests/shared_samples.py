"""Where the tests find the real profiles of other projects: ``shared/samples/``.

perfkit commits only data it made (its simulator's output, profiles it recorded, outputs of
tools it ran). Profiles recorded by other projects stay, with their provenance and licences,
in the ``samples/`` folder of ``shared/`` beside the checkout (``<repository>/../shared/
samples``), or wherever ``$PERFKIT_SHARED_SAMPLES`` points. Every test, the damaged-input
corpus and the benchmarks find them through this module and nowhere else.

In a test module::

    from shared_samples import PT_LEVEL1, sample

    pytestmark = pytest.mark.shared_samples     # every test here reads one
    LEVEL1 = sample(PT_LEVEL1)                  # a path, whether or not it is there

or the mark on one test or one ``pytest.param(..., marks=pytest.mark.shared_samples)``, or
the fixture ``shared_samples`` (the folder). ``tests/conftest.py`` runs :func:`shared_root`
before each marked test: when the folder is absent the test is skipped with the reason
(:func:`absent_reason`), so a lone clone still passes, except where ``$CI`` is set
(:func:`required`): CI has ``../shared``, nothing may be skipped there, so the test fails.
``tests/test_shared_samples.py`` checks this module and that every name below exists.

The names are paths relative to ``samples/``, as its PROVENANCE.md files list them.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["ENV", "ROOT", "DEFAULT", "configured", "samples_dir", "sample", "absent_reason",
           "required", "shared_param", "shared_root", "shared_sample", "writable_copy",
           "PT_LEVEL1", "PT_DB_LEVEL1", "PT_GPT3_OLD", "CLUSTER_OUTPUT", "HTA", "MINDINSIGHT",
           "TRACE_VIEW_EXCERPT", "WILD", "KINETO_TRACES"]

#: The environment variable that names the samples folder (overrides the default).
ENV = "PERFKIT_SHARED_SAMPLES"
#: The repository root (this file is ``tests/shared_samples.py``).
ROOT = Path(__file__).resolve().parents[1]
#: Where the samples are by default: ``shared/samples`` beside the checkout.
DEFAULT = ROOT.parent / "shared" / "samples"

#: Real torch_npu 2-rank Level1 text export (Ascend/msinsight test data; a small CNN).
PT_LEVEL1 = "ascend/msinsight-pt-level1"
#: The same kind of run exported as torch_npu SQLite databases.
PT_DB_LEVEL1 = "ascend/msinsight-pt-db-level1"
#: An older (CANN 7.0 era) hand-assembled GPT-3 fixture mixing header generations.
PT_GPT3_OLD = "ascend/msinsight-pt-gpt3-old"
#: msprof-analyze's ``cluster_analysis_output`` of a 16-rank GPT-3 job.
CLUSTER_OUTPUT = "ascend/msinsight-cluster-output"
#: Two sampled ranks of a 128-rank PyTorch Kineto job (HolisticTraceAnalysis test data).
HTA = "gpu/hta-trace_filter"
#: Legacy MindInsight-era MindSpore profiler outputs (``cluster_propose``, ``run_2_normal_run``).
MINDINSIGHT = "ascend/mindinsight-legacy"
#: A torch_npu ``trace_view.json`` excerpt (msprof-analyze's unit-test data).
TRACE_VIEW_EXCERPT = "ascend/msprof-analyze-tests/timeline_advice/trace_view.json"
#: The real profiles users bring, one of each kind (``wild/``, each folder's name).
WILD = ("ds_train", "k_resnet50_nw0", "k_resnet50_nw4", "mi_prof", "mi_run1",
        "msa_kernel_details", "tl_b200_eager", "tl_ddp_resnet18_mi300", "tl_qwen_h100",
        "tl_timesformer_h100")
#: Every real Kineto trace of the samples, by a short name: the wild ones and HTA's two ranks.
KINETO_TRACES = {
    "k_resnet50_nw0": "wild/k_resnet50_nw0/worker0.1623143089861.pt.trace.json.gz",
    "k_resnet50_nw4": "wild/k_resnet50_nw4/worker0.1623212756351.pt.trace.json.gz",
    "ds_train": "wild/ds_train/train.json",
    "tl_ddp_resnet18_mi300": "wild/tl_ddp_resnet18_mi300/train_resnet18.json.gz",
    "tl_qwen_h100": "wild/tl_qwen_h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "tl_b200_eager": "wild/tl_b200_eager/eager_trace.json.gz",
    "tl_timesformer_h100": "wild/tl_timesformer_h100/timesformer.json.gz",
    "hta_rank0": f"{HTA}/sampled_rank-0.json.gz",
    "hta_rank1": f"{HTA}/sampled_rank-1.json.gz",
}


def configured() -> Path:
    """The shared samples folder as configured (``$PERFKIT_SHARED_SAMPLES`` or
    :data:`DEFAULT`), whether or not it exists."""
    env = os.environ.get(ENV, "").strip()
    return Path(env).expanduser() if env else DEFAULT


def samples_dir() -> Path | None:
    """The shared samples folder, or None when it is not there."""
    path = configured()
    return path if path.is_dir() else None


def sample(name: str) -> Path:
    """The path of one shared sample (relative to ``samples/``), whether or not it exists.

    For module-level constants and parameter lists; a test that reads it carries the mark
    ``shared_samples``, which skips or fails it when the folder is absent.
    """
    return configured() / name


def absent_reason() -> str:
    """Why :func:`samples_dir` is None, in words fit for a skip message."""
    env = os.environ.get(ENV, "").strip()
    where = f"${ENV}={env}" if env else f"{DEFAULT} (set ${ENV} to use another folder)"
    return (f"the real profiles of other projects are not here: no folder at {where}; "
            "they are never committed to perfkit (see tests/shared_samples.py)")


def required() -> bool:
    """Whether an absent folder fails instead of skipping: under CI (``$CI`` set)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def shared_param(*values: Any, **kwargs: Any) -> Any:
    """``pytest.param(*values)`` marked ``shared_samples``: one parameter of a list that
    reads a shared sample (the others run without the folder)."""
    import pytest

    return pytest.param(*values, marks=pytest.mark.shared_samples, **kwargs)


def shared_root() -> Path:
    """The shared samples folder, for a test; skips it (under CI: fails it) when absent."""
    import pytest

    root = samples_dir()
    if root is None:
        if required():
            pytest.fail(f"$CI is set but {absent_reason()}")
        pytest.skip(absent_reason())
    return root


def shared_sample(name: str) -> Path:
    """The path of one shared sample, for a test; skips (or, under CI, fails) when absent.

    Parameters
    ----------
    name : str
        Path relative to ``samples/``, e.g. :data:`PT_LEVEL1` or
        ``"gpu/hta-trace_filter/sampled_rank-1.json.gz"``.

    Returns
    -------
    pathlib.Path
        The file or folder (read-only: copy it into ``tmp_path`` before changing anything).
    """
    import pytest

    path = shared_root() / name
    if not path.exists():
        pytest.fail(f"the shared samples folder has no {name!r} (looked for {path})")
    return path


def writable_copy(src: Path, dst: Path, ignore: Callable[..., Any] | None = None) -> Path:
    """Copy a shared sample (file or folder) to ``dst``, which the test may then change.

    The shared files are read-only (mode 444, folders 555) and :func:`shutil.copytree`
    keeps modes: the copy gets the owner's write permission back, so that tests that
    damage or extend it work for any user, not only root. ``ignore`` is
    :func:`shutil.copytree`'s (e.g. ``shutil.ignore_patterns("trace_view.json")``).
    """
    if src.is_dir():
        shutil.copytree(src, dst, ignore=ignore, copy_function=shutil.copyfile)
        paths = [dst, *dst.rglob("*")]
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        paths = [dst]
    for p in paths:
        p.chmod(p.stat().st_mode | stat.S_IWUSR | (stat.S_IXUSR if p.is_dir() else 0))
    return dst
