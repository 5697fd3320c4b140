"""A vLLM inference step under tensor parallelism 8 reads as tp 8, with its model's widths.

``wild/tl_b200_eager`` (TraceLens' B200 test trace, see its PROVENANCE) is one rank of a
vLLM gpt-oss run, tensor parallel over 8 B200 GPUs. Its ``pg_config`` names every group
``undefined``, so no group says tp. What the trace shows instead, read here with ``gzip``
and ``json`` alone:

* no backward operator: an inference step, which reduces no gradients;
* its all-reduces (``vllm::all_reduce``, each running ``symm_mem::multimem_all_reduce_`` on
  the flattened tensor inside itself) take ``(tokens, width)`` activations, the tokens being
  the rows of its ``aten::linear`` products;
* every process group of more than one rank holds 8 ranks, and the one collective kernel
  that records its group (the logits' all-gather) says ``Group size`` 8;
* vLLM's attention operator ``vllm::unified_attention_with_output`` takes the query as
  (tokens, heads per rank, head size) and key and value as (tokens, key/value heads per
  rank, head size), once per layer;
* the embedding table holds one rank's rows of the vocabulary, and the all-gather of the
  logits turns that many columns into the whole vocabulary (``In msg nelems`` ×
  ``Group size`` = ``Out msg nelems``).

Before, perfkit read dp 8 × tp 1 (no tp group named), the vocabulary as one rank's
25,136 rows, and no attention at all (no heads, no layers).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from math import prod
from typing import Any

import pytest
from shared_samples import sample

import perfkit as pk

pytestmark = pytest.mark.shared_samples

B200 = "wild/tl_b200_eager"


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    """The trace as ``json`` reads it."""
    with gzip.open(sample(B200) / "eager_trace.json.gz", "rt", encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def job() -> pk.Job:
    return pk.infer_job(pk.load(sample(B200), progress=False))


def _ops(raw: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [e for e in raw["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == name]


def _outermost_all_reduces(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The host all-reduce calls not run inside another one on their thread."""
    calls = [e for e in raw["traceEvents"] if e.get("cat") == "cpu_op"
             and "all_reduce" in e["name"]]
    return [e for e in calls if not any(
        o is not e and o["tid"] == e["tid"] and o["ts"] <= e["ts"]
        and e["ts"] + e["dur"] <= o["ts"] + o["dur"] and o["dur"] > e["dur"] for o in calls)]


def test_the_tensor_parallel_all_reduces_read_tp_8_not_dp_8(raw: dict, job: pk.Job) -> None:
    names = [e["name"] for e in raw["traceEvents"] if e.get("cat") == "cpu_op"]
    assert not any("Backward" in n or "autograd::engine" in n for n in names)
    world = raw["distributedInfo"]["world_size"]
    sizes = {g["pg_size"] for g in raw["distributedInfo"]["pg_config"] if g["pg_size"] > 1}
    assert all(g["pg_desc"] in ("default_pg", "undefined")
               for g in raw["distributedInfo"]["pg_config"])  # no group says tp
    gathers = [e["args"] for e in raw["traceEvents"] if e.get("cat") == "kernel"
               and "Group size" in e.get("args", {})]
    (group,) = sizes | {a["Group size"] for a in gathers}
    calls = _outermost_all_reduces(raw)
    assert {e["name"] for e in calls} == {"vllm::all_reduce"}
    shapes = Counter(tuple(e["args"]["Input Dims"][0]) for e in calls)
    tokens = Counter(prod(e["args"]["Input Dims"][0][:-1]) for e in _ops(raw, "aten::linear"))
    rows = tokens.most_common(1)[0][0]
    assert {s[0] for s in shapes} == {rows}  # (tokens, width): activations
    assert (world, group, len(calls), rows) == (8, 8, 73, 888)

    assert (job.parallel.tp, job.parallel.dp, job.parallel.pp) == (group, world // group, 1)
    assert job.source("tp") == job.source("dp") == "profile"
    said = job.detail("tp")
    assert f"{len(calls)} of the {len(calls)} all-reduces on rank 0" in said
    for shape in shapes:
        assert "(" + ", ".join(map(str, shape)) + ")" in said
    assert f"{rows} rows" in said and "no backward pass" in said
    assert f"holds {group} ranks" in said and said.endswith(f"tp {group}")
    assert job.detail("dp").startswith(f"world {world} / (tp {group} × pp 1) = 1")
    # gpt-oss: 64 query heads, 8 key/value heads (its public config.json), per rank × tp
    assert (job.value("num_attention_heads"), job.value("num_kv_heads")) == (64, 8)


def test_the_vocabulary_is_one_ranks_rows_times_tp(raw: dict, job: pk.Job) -> None:
    (emb,) = _ops(raw, "aten::embedding")
    rows, hidden = emb["args"]["Input Dims"][0]
    (gather,) = [e["args"] for e in raw["traceEvents"] if e.get("cat") == "kernel"
                 and e["args"].get("Collective name") == "_allgather_base"]
    # the logits of one rank's rows, gathered over the group: the whole vocabulary
    assert gather["In msg nelems"] == rows
    assert gather["Out msg nelems"] == rows * gather["Group size"]
    assert (rows, hidden) == (25136, 2880)
    assert job.value("vocab_size") == 25136 * 8 == 201088 == gather["Out msg nelems"]
    assert job.value("hidden_size") == hidden
    assert f"{rows} × tp 8 = {rows * 8}" in job.detail("vocab_size")


def test_vllm_attention_gives_heads_and_layers(raw: dict, job: pk.Job) -> None:
    calls = _ops(raw, "vllm::unified_attention_with_output")
    dims = Counter(tuple(map(tuple, e["args"]["Input Dims"][:2])) for e in calls)
    ((q, k),) = dims  # one shape for every layer's call
    tokens, heads, d = q
    assert k[0] == tokens and k[2] == d
    assert (len(calls), heads, k[1], d) == (36, 8, 1, 64)
    assert job.value("num_layers") == len(calls)  # one call per layer, one micro-batch
    tp = job.parallel.tp  # the heads per rank × the tp read
    assert job.value("num_attention_heads") == heads * tp
    assert job.value("num_kv_heads") == k[1] * tp
    assert job.value("head_dim") == d
    assert "1 key/value head per rank" in job.detail("num_kv_heads")
    # packed sequences: the tokens are known, their split into sequences is not; the
    # batch is one row of the step's tokens (tests/test_inference_tokens_basis.py)
    assert job.value("seq_length") == tokens
    assert "not a sequence length" in job.detail("seq_length")
    assert f"({tokens}, {heads}, {d})" in job.detail("seq_length")
