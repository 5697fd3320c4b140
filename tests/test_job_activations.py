"""The job's activation accounting, read from the attention kernel the profile ran.

Checked against the raw files read here (``gzip`` + ``json``, ``csv``): a fused attention
operator in them means no ``s × s`` scores are kept (tensor-by-tensor accounting), and
against the answer key the simulator writes into every simulated rank's metadata (the
``ActivationModel`` its memory files were made with).
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from pathlib import Path

import pytest
from shared_samples import PT_GPT3_OLD, sample, shared_param

import perfkit as pk
from perfkit.calc import ActivationModel

DATA = Path(__file__).resolve().parents[1] / "data"
FUSED = re.compile(r"(?i)flash|fusion_attention|efficient_attention")


def _trace_names(folder: Path) -> set[str]:
    names: set[str] = set()
    for f in folder.rglob("*.json*"):
        opener = gzip.open if f.suffix == ".gz" else open
        with opener(f, "rt") as fh:
            doc = json.load(fh)
        events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
        names |= {str(e.get("name", "")) for e in events if isinstance(e, dict)}
    return names


def _kernel_names(folder: Path) -> set[str]:
    names: set[str] = set()
    for f in folder.rglob("kernel_details.csv"):
        with open(f, newline="") as fh:
            names |= {row.get("Name", "") for row in csv.DictReader(fh)}
    return names


@pytest.mark.parametrize("path", [
    DATA / "kineto-tiny-llama",
    DATA / "mindspore-cpu-tiny-llama",
    shared_param("wild/tl_qwen_h100"),
    shared_param(PT_GPT3_OLD),
])
def test_fused_attention_in_the_raw_file_means_no_scores_kept(path: object) -> None:
    folder = path if isinstance(path, Path) else sample(str(path))
    names = _trace_names(folder) | _kernel_names(folder)
    fused = any(FUSED.search(n) and "backward" not in n.lower() and "grad" not in n.lower()
                for n in names)
    dropout = any("dropout" in n.lower() for n in names)
    job = pk.infer_job(pk.load(folder, cache=False, progress=False))
    model = job.activation_model
    assert model.flash_attention is fused
    if fused:
        assert model.accounting == "tensors" and model.dropout is dropout
        assert "fused attention" in job.activation_detail or "flash" in job.activation_detail
    else:
        assert model == ActivationModel()  # the seed's table: the scores kept


@pytest.mark.parametrize("name", sorted(p.name for p in (DATA / "simulated").iterdir()
                                        if p.is_dir()))
def test_simulated_jobs_are_read_with_the_accounting_they_were_made_with(name: str) -> None:
    folder = DATA / "simulated" / name
    meta = json.loads(next(folder.glob("*/profiler_metadata.json")).read_text())
    key = meta["perfkit_simulation"]["settings"]["activation_model"]
    job = pk.infer_job(pk.load(f"sample:{name}", progress=False))
    model = job.activation_model
    assert (model.accounting, model.flash_attention, model.dropout, model.norm_bytes,
            list(model.selective)) == (key["accounting"], key["flash_attention"],
                                       key["dropout"], key["norm_bytes"], key["selective"])


def test_the_memory_theory_of_a_fused_attention_job_is_not_flagged() -> None:
    """data-stall: 4 layers of a 4k-sequence Llama on dp 2 × pp 2. Counted with the scores
    (the seed's table) the theory was 2.1× the peak the profile records and flagged; with
    the job's own accounting it is within a few percent of that peak, read from
    memory_record.csv (the framework allocator, PTA)."""
    folder = DATA / "simulated" / "data-stall"
    peak_mb = 0.0
    for f in folder.glob("*/ASCEND_PROFILER_OUTPUT/memory_record.csv"):
        with open(f, newline="") as fh:
            for row in csv.DictReader(fh):
                if row["Component"] == "PTA" and row["Total Allocated(MB)"]:
                    peak_mb = max(peak_mb, float(row["Total Allocated(MB)"]))
    job = pk.infer_job(pk.load("sample:data-stall", progress=False))
    figures = pk.widgets.job_summary(job).set_index("key")
    theory_gib = figures.loc["memory_gib", "value"]
    assert theory_gib * 1024 == pytest.approx(peak_mb, rel=0.05)
    assert not figures.loc["memory_gib", "warning"]
    seed = pk.static_memory(job.model, job.parallel).total_bytes + \
        pk.activation_memory(job.model, job.parallel).total_bytes
    assert seed / 2**20 > 2 * peak_mb  # what the seed's table gave


def _matmul_input_types(folder: Path) -> set[str]:
    """The input types of the matrix multiplications in the raw files: Kineto's cpu_op
    ``Input type``, Ascend's kernel_details ``Input Data Types`` of MatMul tasks."""
    types: set[str] = set()
    for f in folder.rglob("*.json*"):
        opener = gzip.open if f.suffix == ".gz" else open
        with opener(f, "rt") as fh:
            doc = json.load(fh)
        for e in doc.get("traceEvents", []) if isinstance(doc, dict) else doc:
            if isinstance(e, dict) and e.get("cat") == "cpu_op" and e.get("name") in (
                    "aten::mm", "aten::addmm", "aten::bmm"):
                types |= set(e.get("args", {}).get("Input type", [])[:2])
    for f in folder.rglob("kernel_details.csv"):
        with open(f, newline="") as fh:
            for row in csv.DictReader(fh):
                if "matmul" in row.get("Type", "").lower():
                    types |= set(row.get("Input Data Types", "").split(";")[:2])
    return types - {""}


def _cpu_ops(folder: Path) -> set[tuple[str, str]]:
    """(name, ``Input Dims`` text) of every Kineto cpu_op in the raw files."""
    ops: set[tuple[str, str]] = set()
    for f in folder.rglob("*.json*"):
        opener = gzip.open if f.suffix == ".gz" else open
        with opener(f, "rt") as fh:
            doc = json.load(fh)
        for e in doc.get("traceEvents", []) if isinstance(doc, dict) else doc:
            if isinstance(e, dict) and e.get("cat") == "cpu_op":
                ops.add((str(e.get("name")), str(e.get("args", {}).get("Input Dims"))))
    return ops


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize("path", [DATA / "kineto-tiny-llama",
                                  DATA / "simulated" / "llama2-13b-baseline-dp16"])
def test_an_fp32_run_keeps_its_activations_at_4_bytes(path: Path) -> None:
    # the seed's table counts 16-bit tensors; a run whose matrix multiplications take
    # fp32 inputs (the raw file's types) keeps every tensor at 4 bytes per element
    types = _matmul_input_types(path)
    fp32 = types == {"float"}
    assert fp32 or types == {"DT_BF16"}, types
    job = pk.infer_job(pk.load(path, cache=False, progress=False))
    model = job.activation_model
    assert model.element_bytes == (4.0 if fp32 else 2.0)
    if fp32:
        assert model.accounting == "tensors" and model.norm_bytes == 4.0
        assert "fp32 run" in job.activation_detail
        # the model code (tools/make_kineto_llama.py) writes its RMSNorm as
        # x·rsqrt(mean x²)·w and its rotary embedding with a rotate-half cat: the raw
        # file's operators show both, which keep x·rsqrt(…) per norm and new Q and K
        raw = _cpu_ops(path)
        assert "aten::rsqrt" in {n for n, _ in raw} and "aten::rms_norm" not in \
            {n for n, _ in raw}
        assert ("aten::cat", "[[[4, 4, 64, 8], [4, 4, 64, 8]], []]") in raw  # d/2 = 8
        # a layer of the tiny Llama (s 64, h 64, f 256 gated, no dropout) at b = 1: inputs
        # 4+4, norm inputs 4+4, Q K V and projection input 4·4, gate, up, SiLU and product
        # outputs 4·4·4, softmax statistics 4·a/h (flash), the unfused norms' x·rsqrt
        # 4+4, the rotated Q and K 4+4, all × s·b·h
        m = job.model
        s, h, a, f = m.seq_length, m.hidden_size, m.num_attention_heads, m.ffn_hidden_size
        assert (s, h, f, m.num_kv_heads) == (64, 64, 256, a)
        want = s * h * (16 + 16 + 16 * f / h + 4 * a / h + 8 + 8)
        got, _ = pk.activation_per_layer(m, 1, activation_model=model)
        assert got == pytest.approx(want)
