"""The gradient reduction's element size, read from the profile's own collectives.

Each expectation comes from the raw file, read here with gzip/json or sqlite3: the
``Input type`` / ``Input Dims`` args of a Kineto trace's reduction events, an Ascend DB's
``COMMUNICATION_OP`` rows (``count`` elements of ``dataType``). The data type that moves
the most bytes gives the element size; the calibration (and the Planner tab, which shows
it) then uses it instead of the scheme's guess.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from raw_ascend import hccl_reductions
from shared_samples import HTA, PT_DB_LEVEL1, shared_sample

import perfkit as pk
from perfkit import plan
from perfkit.analysis.reduced_dtype import reduced_gradient_bytes
from perfkit.calc.memory import scheme_gradient_bytes
from perfkit.calc.rates import Rates

pytestmark = pytest.mark.shared_samples

#: Bytes per element, written out for these tests (PyTorch's and HCCL's type names).
SIZES = {"float": 4, "c10::bfloat16": 2, "c10::half": 2, "double": 8, "fp32": 4,
         "fp16": 2, "bfp16": 2, "fp64": 8}
REDUCTION = re.compile(r"all_?reduce|reduce_?scatter", re.I)


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    return data["traceEvents"] if isinstance(data, dict) else data


def _kineto_reading(paths: list[Path], cats: set[str]) -> tuple[int, int]:
    """(element size of the type moving the most bytes, how many events of that type) over
    the reduction events of ``cats`` whose first input records a type and a shape."""
    moved: dict[str, float] = defaultdict(float)
    count: Counter = Counter()
    for path in paths:
        for e in _events(path):
            args = e.get("args") or {}
            if e.get("cat") not in cats or not REDUCTION.search(str(e.get("name", ""))):
                continue
            types, dims = args.get("Input type") or [], args.get("Input Dims") or []
            if not types or not dims or not dims[0] or types[0].lower() not in SIZES:
                continue
            moved[types[0]] += math.prod(dims[0]) * SIZES[types[0].lower()]
            count[types[0]] += 1
    top = max(moved, key=moved.get)
    return SIZES[top.lower()], count[top]


def test_hta_all_reduces_are_fp32_host_collectives():
    """HolisticTraceAnalysis's 128-rank job: its ``nccl:all_reduce`` spans record
    ``float`` inputs (its all-reduce kernels are filtered out of the sample)."""
    root = shared_sample(HTA)
    files = sorted(root.glob("*.json.gz"))
    size, n = _kineto_reading(files, {"user_annotation", "cpu_op"})
    got = reduced_gradient_bytes(pk.load(root, cache=False, progress=False))
    assert got is not None
    assert (got.element_bytes, got.collectives, got.source) == (size, n, "host collectives")
    assert got.dtype == "float" and got.share == 1.0


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_an_inference_steps_all_reduces_are_no_gradients():
    """The B200 eager trace (vLLM) runs 73 all-reduce kernels on bf16 tensors, and no
    backward operator at all: an inference step, whose all-reduces are the tensor-parallel
    activations', not gradients. No gradient size is read from them (it was: bf16, taken
    for the gradients' by a calibration given dp = 8)."""
    path = shared_sample("wild/tl_b200_eager") / "eager_trace.json.gz"
    events = _events(path)
    size, _ = _kineto_reading([path], {"cpu_op"})
    kernels = sum(1 for e in events
                  if e.get("cat") == "kernel" and REDUCTION.search(str(e.get("name", ""))))
    assert (size, kernels) == (2, 73)  # bf16 reductions are recorded
    cpu_ops = [str(e.get("name", "")) for e in events if e.get("cat") == "cpu_op"]
    assert sum(n.startswith("aten::") for n in cpu_ops) >= 50
    assert not [n for n in cpu_ops if re.search(r"Backward|autograd::engine|backward", n)]
    profile = pk.load(path, cache=False, progress=False)
    assert reduced_gradient_bytes(profile) is None
    assert pk.infer_job(profile).reduced_gradient is None


def test_ascend_db_reads_hccl_data_type_and_count():
    """torch_npu's DB export: each HCCL collective's ``dataType`` and ``count``."""
    root = shared_sample(PT_DB_LEVEL1)
    moved, count = hccl_reductions(root)
    top = max(moved, key=moved.get)
    got = reduced_gradient_bytes(pk.load(root, cache=False, progress=False))
    assert got is not None
    assert (got.dtype, got.element_bytes, got.collectives) == (top, SIZES[top.lower()],
                                                               count[top])
    assert got.moved_bytes == pytest.approx(moved[top])


def test_none_when_no_reduction_is_recorded():
    """The MI300 DDP trace holds no collective at all: nothing to read."""
    path = shared_sample("wild/tl_ddp_resnet18_mi300") / "train_resnet18.json.gz"
    assert not any(REDUCTION.search(str(e.get("name", ""))) and "Input type" in
                   (e.get("args") or {}) and e.get("cat") != "python_function"
                   for e in _events(path))
    assert reduced_gradient_bytes(pk.load(path, cache=False, progress=False)) is None


def test_calibration_reduces_gradients_at_the_profiles_size():
    """Under the ZeRO scheme a bf16 run's gradients are guessed at 2 bytes; the HTA
    training job's reductions move fp32 (read from the raw files), so the calibrated
    data-parallel communication is the one at 4 bytes, and the terms and the Planner say
    so."""
    from perfkit.widgets.prediction import gradient_sentence

    root = shared_sample(HTA)
    size, _ = _kineto_reading(sorted(root.glob("*.json.gz")), {"user_annotation", "cpu_op"})
    profile = pk.load(root, cache=False, progress=False)
    model = pk.ModelSpec(num_layers=4, hidden_size=1024, num_attention_heads=16,
                         seq_length=1024, vocab_size=32000, mlp="gated")
    args = (profile, model, pk.ParallelConfig(dp=8), pk.Hardware.preset("h100"))
    cal = plan.calibrate(*args, static_scheme="zero", dtype="bf16")
    guess = scheme_gradient_bytes("zero", "bf16")
    assert guess != size  # the scheme alone would get it wrong
    assert cal.rates.gradient_bytes == size
    given = plan.calibrate(*args, static_scheme="zero", dtype="bf16",
                           rates=Rates(gradient_bytes=float(size)))
    guessed = plan.calibrate(*args, static_scheme="zero", dtype="bf16",
                             rates=Rates(gradient_bytes=float(guess)))
    assert cal.parts["dp_comm"] == pytest.approx(given.parts["dp_comm"])
    assert cal.parts["dp_comm"] > guessed.parts["dp_comm"]
    how = dict((t, h) for t, _, h in cal.terms)["gradient_bytes"]
    assert "float" in how
    assert f"at {size} bytes per element, as the profile records it" in gradient_sentence(cal)


@pytest.mark.shared_samples
def test_calibration_keeps_the_schemes_size_where_other_parallelism_all_reduces():
    """With tensor parallelism the activations' all-reduces are in the profile too (the
    B200 trace's own bf16 ones are tensor-parallel): the recorded type is not taken as the
    gradients', and the scheme's size stays."""
    path = shared_sample("wild/tl_b200_eager") / "eager_trace.json.gz"
    size, _ = _kineto_reading([path], {"cpu_op"})
    profile = pk.load(path, cache=False, progress=False)
    model = pk.ModelSpec(num_layers=4, hidden_size=1024, num_attention_heads=16,
                         seq_length=1024, vocab_size=32000, mlp="gated")
    cal = plan.calibrate(profile, model, pk.ParallelConfig(dp=4, tp=2),
                         pk.Hardware.preset("b200"), static_scheme="megatron")
    assert scheme_gradient_bytes("megatron", cal.job.dtype) != size
    assert cal.rates.gradient_bytes is None
    assert "gradient_bytes" not in {t for t, _, _ in cal.terms}
    # the page says why the recorded type was not taken: not that there is none
    from perfkit.widgets.prediction import gradient_sentence

    words = gradient_sentence(cal)
    guess = scheme_gradient_bytes("megatron", cal.job.dtype)
    assert f"reduced at {guess:g} bytes per element, the Megatron-LM scheme's default" \
        in words
    assert "does not record" not in words and "tensor, context or expert parallelism" in words
