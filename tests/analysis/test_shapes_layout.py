"""The layout of Ascend attention inputs, which kernel_details does not record.

``FlashAttentionScore`` takes ``input_layout`` (BSH, SBH, BSND, BNSD, TND) as an argument: a
3-D query ``(x, y, w)`` is (batch, sequence, width) in BSH and (sequence, batch, width) in
SBH. Each profile below is a few hand-written kernels whose truth is known by
construction; the reader must settle the layout from the softmax statistics
``(B, N, S, 8)``, the attention mask ``(…, S, S)`` or the embedding's token ids ``(B, S)``,
and keep BSH, saying it was assumed, when nothing tells or the cues disagree.
"""

from __future__ import annotations

import pandas as pd
import pytest

from perfkit.analysis.shapes import read_model
from perfkit.profile import Profile, ProfileMeta

B, S, N, D = 2, 4096, 4, 128
H = N * D
SBH = f"{S},{B},{H}"
BSH = f"{B},{S},{H}"
BF16 = "DT_BF16;DT_BF16;DT_BF16"


def _profile(rows: list[tuple[str, str, str, str]]) -> Profile:
    """One rank, one step: (type, input shapes, input types, output shapes) per kernel."""
    recs = [{"name": typ, "type": typ, "category": "compute", "core": "AI_CORE", "stream": 1,
             "step": 1, "start_us": 10.0 * i, "dur_us": 5.0, "input_shapes": shapes,
             "input_dtypes": types, "output_shapes": out}
            for i, (typ, shapes, types, out) in enumerate(rows)]
    return Profile(ProfileMeta("test", framework="pytorch", rank=0, device_type="npu"),
                   {"kernels": pd.DataFrame(recs)})


def _fa(q: str, extra: str = "", out: str = "") -> tuple[str, str, str, str]:
    """A forward FlashAttentionScore: q, k, v of shape ``q``, then ``extra`` inputs."""
    return ("FlashAttentionScore", f"{q};{q};{q}" + (f";{extra}" if extra else ""), BF16,
            out or q)


def _embedding(ids: str, table: str = f"32000,{H}") -> tuple[str, str, str, str]:
    return ("GatherV2", f"{table};{ids};1", "DT_BF16;INT32;INT64", f"{ids},{H}")


def _batch(profile: Profile) -> tuple[int, int, str]:
    r = read_model(profile)
    assert r.details["micro_batch_size"] == r.details["seq_length"]
    return r.get("micro_batch_size"), r.get("seq_length"), r.details["seq_length"]


@pytest.mark.parametrize("rows, cue", [
    # torch_npu 2.x: the softmax statistics are outputs of the forward kernel
    ([_fa(SBH, out=f"{B},{N},{S},8;{B},{N},{S},8;;{SBH}")], "softmax statistics"),
    # the causal mask as (S, S) or (1, 1, S, S)
    ([_fa(SBH, f";;;{S},{S}")], "attention mask"),
    ([_fa(SBH, f";;;1,1,{S},{S}")], "attention mask"),
    # the embedding on the first stage: token ids (B, S)
    ([_embedding(f"{B},{S}"), _fa(SBH)], "token ids"),
    # the backward kernel takes the statistics as inputs (the forward has none)
    ([_fa(SBH), ("FlashAttentionScoreGrad", f"{SBH};{SBH};{SBH};{SBH};{S},{S};{B},{N},{S},8;"
                 f"{B},{N},{S},8;;{SBH}", BF16, f"{SBH};{SBH};{SBH}")], "softmax statistics"),
])
def test_a_sequence_first_query_is_read_as_sbh_when_a_cue_says_so(rows: list, cue: str
                                                                   ) -> None:
    b, s, text = _batch(_profile(rows))
    assert (b, s) == (B, S)
    assert "read as SBH" in text and cue in text and "assumed" not in text


def test_a_batch_first_query_with_a_cue_stays_bsh_without_assuming() -> None:
    rows = [_embedding(f"{B},{S}"), _fa(BSH, f";;;{S},{S}", f"{B},{N},{S},8;{B},{N},{S},8;;{BSH}")]
    b, s, text = _batch(_profile(rows))
    assert (b, s) == (B, S)
    assert "read as BSH" in text and "assumed" not in text
    assert all(c in text for c in ("softmax statistics", "attention mask", "token ids"))


@pytest.mark.parametrize("rows", [
    [_fa(SBH)],                                    # nothing else in the profile
    [_fa(SBH, ";;;2048,2048")],                    # a compressed causal mask: no S in it
    [_embedding("8,1024"), _fa(SBH)],              # token ids of another shape say nothing
])
def test_without_a_cue_bsh_is_kept_and_said_to_be_assumed(rows: list) -> None:
    b, s, text = _batch(_profile(rows))
    assert (b, s) == (S, B)  # the reading perfkit always made, now said to be assumed
    assert "read as BSH" in text and "assumed" in text and "does not record" in text


def test_cues_that_disagree_keep_bsh_and_name_both() -> None:
    # the mask says S = 4096 (SBH); token ids (4096, 2) say B = 4096 (BSH)
    rows = [_embedding(f"{S},{B}"), _fa(SBH, f";;;{S},{S}")]
    b, s, text = _batch(_profile(rows))
    assert (b, s) == (S, B)
    assert "assumed" in text and "disagree" in text
    assert "fits SBH" in text and "fits BSH" in text


def test_a_square_query_needs_no_layout() -> None:
    # (s, b) = (b, s): both readings give the same batch and sequence, nothing is said
    b, s, text = _batch(_profile([_fa(f"{S},{S},{H}")]))
    assert (b, s) == (S, S) and "read as" not in text


def test_the_statistics_give_the_heads_of_a_3d_query() -> None:
    gqa_k = f"{S},{B},{2 * D}"  # 2 key/value heads
    rows = [("FlashAttentionScore", f"{SBH};{gqa_k};{gqa_k}", BF16,
             f"{B},{N},{S},8;{B},{N},{S},8;;{SBH}")]
    r = read_model(_profile(rows), tp=2)
    assert (r.get("num_attention_heads"), r.get("head_dim"), r.get("num_kv_heads")) == \
        (N * 2, D, 2 * 2)
    assert "softmax statistics" in r.details["num_attention_heads"]


def test_a_4d_query_in_bsnd_is_told_from_bnsd_by_its_statistics() -> None:
    q = f"{B},{S},{N},{D}"  # BSND
    r = read_model(_profile([_fa(q, out=f"{B},{N},{S},8;{B},{N},{S},8;;{q}")]))
    assert (r.get("micro_batch_size"), r.get("seq_length")) == (B, S)
    assert (r.get("num_attention_heads"), r.get("head_dim")) == (N, D)
    assert "read as BSND" in r.details["seq_length"]


def test_a_4d_query_without_a_cue_stays_bnsd_said_to_be_assumed() -> None:
    q = f"{B},{N},{S},{D}"
    r = read_model(_profile([_fa(q)]))
    assert (r.get("micro_batch_size"), r.get("seq_length"), r.get("num_attention_heads")) \
        == (B, S, N)
    assert "read as BNSD" in r.details["seq_length"] and "assumed" in r.details["seq_length"]


def test_packed_sequences_give_heads_but_no_batch() -> None:
    t = B * S  # TND: (tokens, heads, head size), statistics (T, N, 8)
    q = f"{t},{N},{D}"
    r = read_model(_profile([_fa(q, out=f"{t},{N},8;{t},{N},8;;{q}")]))
    assert r.get("micro_batch_size") is None and r.get("seq_length") is None
    assert "packed sequences" in r.details["seq_length"] and "TND" in r.details["seq_length"]
    assert (r.get("num_attention_heads"), r.get("head_dim")) == (N, D)


def test_the_attention_kernels_give_the_dtype_when_no_matrix_product_has_one() -> None:
    r = read_model(_profile([_fa(SBH, f";;;{S},{S}")]))
    assert r.get("dtype") == "bf16"
    assert "attention kernels take bf16 queries" in r.details["dtype"]
    # without attention either: the embedding table's type
    rows = [("GatherV2", f"32000,{H};{B},{S};1", "FLOAT16;INT32;INT64", f"{B},{S},{H}")]
    r = read_model(_profile(rows))
    assert r.get("dtype") == "fp16" and "embedding lookups" in r.details["dtype"]
    # matrix products, when they carry a type, still decide
    rows = [("MatMulV2", f"{B * S},{H};{H},{H}", "FLOAT;FLOAT", f"{B * S},{H}"), _fa(SBH)]
    assert read_model(_profile(rows)).get("dtype") == "fp32"
