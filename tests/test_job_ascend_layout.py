"""The job of real Ascend profiles whose attention inputs are sequence-first (SBH).

``FlashAttentionScore`` takes its ``input_layout`` as an argument and kernel_details.csv
does not record it. Each truth here is read from the raw files with ``csv`` / ``json``, not
through perfkit: the embedding lookup's token ids ``(B, S)`` or the kernel's softmax
statistics ``(B, N, S, 8)`` give the batch and the sequence, which the query ``(S, B, H)``
holds the other way round. The bundled simulated profiles (BSH, with nothing in them that
tells the layout) must keep their values, said to be assumed.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from shared_samples import PT_GPT3_OLD, sample, shared_param

import perfkit as pk
from perfkit.widgets.headline import throughput_figure

DATA = Path(__file__).resolve().parents[1] / "data"
MSPROF_TESTS = "ascend/msprof-analyze-tests"


def _dims(text: str) -> list[tuple[int, ...]]:
    """``"8192,2,640;;1,1,8192,8192"`` as shapes (an empty entry is ``()``)."""
    return [tuple(int(d) for d in part.split(",") if d.strip()) if part.strip() else ()
            for part in text.strip().strip('"').split(";")]


def _kernels(folder: Path, kind: str) -> list[dict[str, str]]:
    """The rows of type ``kind``; a row with fewer fields than the header (gpt3-old's
    fourth FlashAttentionScore lacks its duration, so its cells are shifted) is left out."""
    rows = []
    for f in sorted(folder.rglob("kernel_details.csv")):
        with open(f, newline="", encoding="utf-8") as fh:
            rows += [r for r in csv.DictReader(fh) if (r.get("Type") or "").strip() == kind
                     and None not in r.values()]
    return rows


def _job(folder: Path) -> pk.Job:
    return pk.infer_job(pk.load(folder, cache=False, progress=False))


@pytest.mark.shared_samples
def test_gpt3_old_batch_and_sequence_come_from_its_token_ids() -> None:
    folder = sample(PT_GPT3_OLD)
    embed = _kernels(folder, "GatherV2")
    assert embed, "the sample's GatherV2 (rank 1) is the truth"
    (b, s), = {_dims(r["Input Shapes"])[1] for r in embed}  # token ids (B, S)
    assert {_dims(r["Output Shapes"])[0][:2] for r in embed} == {(b, s)}
    attention = _kernels(folder, "FlashAttentionScore")
    queries = {_dims(r["Input Shapes"])[0] for r in attention}
    assert {q[:2] for q in queries} == {(s, b)} and b != s  # sequence first: SBH
    job = _job(folder)
    assert (job.value("micro_batch_size"), job.value("seq_length")) == (b, s) == (2, 8192)
    assert job.source("seq_length") == "profile"
    assert "read as SBH" in job.detail("seq_length")
    assert "token ids (2, 8192)" in job.detail("seq_length")


@pytest.mark.shared_samples
def test_gpt3_old_dtype_is_read_from_its_attention_inputs() -> None:
    folder = sample(PT_GPT3_OLD)
    assert not [r for f in ("MatMul", "MatMulV2", "MatMulV3", "BatchMatMul")
                for r in _kernels(folder, f)]  # the fixture keeps no matrix product
    types = {t for r in _kernels(folder, "FlashAttentionScore")
             for t in r["Input Data Types"].split(";")[:3]}
    types |= {r["Input Data Types"].split(";")[0] for r in _kernels(folder, "GatherV2")}
    assert types == {"DT_BF16"}
    job = _job(folder)
    assert job.dtype == "bf16" and job.source("dtype") == "profile"
    assert "attention kernels take bf16 queries" in job.detail("dtype")


def _matrix_group_sizes(folder: Path) -> dict[str, int]:
    """Each group of communication_matrix.json: the highest local rank a link names + 1."""
    sizes: dict[str, int] = {}
    for f in sorted(folder.rglob("communication_matrix.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        for step in doc.values():
            for ops in step.values():
                for op, links in ops.items():
                    if "@" not in op:
                        continue
                    group = op.split("@", 1)[1]
                    top = max(int(x) for key in links for x in key.split("-"))
                    sizes[group] = max(sizes.get(group, 0), top + 1)
    return sizes


@pytest.mark.shared_samples
def test_gpt3_old_layout_is_said_to_be_assumed() -> None:
    """The groups are numbered, not named: groups of 2 and 8 ranks may be tp or pp groups
    (a send from rank 0 to rank 8 is in the matrix), so tp = pp = 1 and the world of 10
    (the highest local rank a link names, + 1) are assumed, not measured."""
    folder = sample(PT_GPT3_OLD)
    assert not list(folder.rglob("profiler_metadata.json"))  # no parallel_group_info
    sizes = _matrix_group_sizes(folder)
    world = max(sizes.values())
    middle = sorted({n for n in sizes.values() if 1 < n < world})
    assert (world, middle) == (10, [2, 8])
    job = _job(folder)
    assert job.world_size == world
    for name in ("world_size", "dp", "tp", "pp"):
        assert job.source(name) == "default", name
        assert "assumed" in job.detail(name), name
    for name in ("tp", "pp"):
        assert "unnamed groups of 2 or 8 ranks" in job.detail(name)
    # its one step's device tasks were recorded only in part (21 tasks of a 221.8 ms step:
    # tests/io/test_ascend_partial.py), so its micro-batches per step are not counted and
    # the global batch is unknown; the Overview says so instead of a throughput
    assert job.global_batch_size is None
    assert "micro-batches per step" in job.detail("global_batch_size")
    note = throughput_figure(job, 0.3).note
    assert note.startswith("not computed: the global batch is not known")


@pytest.mark.shared_samples
def test_msprof_fixture_batch_sequence_and_heads_from_the_softmax_statistics() -> None:
    # the fixture's excerpt with the attention kernels (its folder holds 3 unrelated ones)
    folder = sample(MSPROF_TESTS) / "compute_advice_v2"
    fwd = _kernels(folder, "FlashAttentionScore")
    stats = {_dims(r["Output Shapes"])[0] for r in fwd}
    queries = {_dims(r["Input Shapes"])[0] for r in fwd}
    (b, n, s, eight), = {st for st in stats if st[1] == 4}  # one kernel of the fixture has 3
    (h,) = {q[2] for q in queries if q[2] % n == 0}
    assert eight == 8 and {q[:2] for q in queries} == {(s, b)}
    job = _job(folder)
    assert (job.value("micro_batch_size"), job.value("seq_length")) == (b, s) == (2, 4096)
    assert "read as SBH" in job.detail("micro_batch_size")
    assert job.value("num_attention_heads") == n * job.parallel.tp
    assert job.value("head_dim") == h // n == 128


@pytest.mark.parametrize("name", sorted(p.name for p in (DATA / "simulated").iterdir()
                                        if p.is_dir()))
def test_simulated_batch_first_values_are_kept_and_said_to_be_assumed(name: str) -> None:
    folder = DATA / "simulated" / name
    key = json.loads(next(folder.glob("*/profiler_metadata.json")).read_text())
    truth = key["perfkit_simulation"]
    attention = _kernels(folder, "FlashAttentionScore")
    assert attention
    for r in attention:  # nothing in them tells BSH from SBH: 3-D q, k, v, no mask, no stats
        assert [len(d) for d in _dims(r["Input Shapes"])] == [3, 3, 3]
        assert [len(d) for d in _dims(r["Output Shapes"])] == [3]
    job = pk.infer_job(pk.load(f"sample:{name}", progress=False))
    assert job.value("micro_batch_size") == truth["parallel"]["micro_batch_size"]
    assert job.value("seq_length") == truth["model"]["seq_length"]
    assert "read as BSH" in job.detail("seq_length") and "assumed" in job.detail("seq_length")


@pytest.mark.parametrize("path", [shared_param("ascend/msinsight-pt-level1"),
                                  shared_param("ascend/msinsight-pt-db-level1")])
def test_profiles_without_fused_attention_are_unchanged(path: object) -> None:
    # CNNs without FlashAttentionScore: no batch or sequence is read (msa_kernel_details'
    # BatchMatMul, ScaledMaskedSoftmax, BatchMatMul attention is read where its softmax's
    # view, tokens and embeddings agree: tests/analysis/test_bmm_attention_sequence.py)
    folder = sample(str(path))
    job = _job(folder)
    assert job.value("seq_length") is None
    assert "no attention kernel" in job.detail("seq_length")
