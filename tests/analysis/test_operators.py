"""Operator analyses: top-N, bound, AI CPU, tiny-kernel storms, unfused patterns."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from raw_kineto import raw_events
from shared_samples import PT_LEVEL1, sample, shared_sample

from perfkit.analysis import (
    ai_cpu_operators,
    operator_bound,
    tiny_kernels,
    top_operators,
    unfused_patterns,
)
from perfkit.analysis.operators import TOP_COLUMNS, UNFUSED_COLUMNS
from perfkit.io.engines.local import load
from perfkit.profile import Profile, ProfileMeta


def _profile(kernels: pd.DataFrame, rank: int = 0) -> Profile:
    return Profile(ProfileMeta("test", rank=rank), {"kernels": kernels})


def _seq(types: list[str], durs: list[float], stream: int = 1, start: float = 0.0,
         gap: float = 1.0, step: int = 1, core: str = "AI_VECTOR_CORE") -> pd.DataFrame:
    """Back-to-back tasks of the given types on one stream."""
    starts, t = [], start
    for d in durs:
        starts.append(t)
        t += d + gap
    return pd.DataFrame({"step": step, "name": [f"{x}_{i}" for i, x in enumerate(types)],
                         "type": types, "category": "compute", "core": core,
                         "stream": stream, "start_us": starts, "dur_us": durs})


def test_top_by_type_counts_totals_shares() -> None:
    k = _seq(["MatMul", "Add", "MatMul", "Add", "Add"], [100.0, 5.0, 300.0, 7.0, 9.0])
    out = top_operators(_profile(k), by="type")
    assert list(out.columns) == list(TOP_COLUMNS)
    mm = out.set_index("key").loc["MatMul"]
    add = out.set_index("key").loc["Add"]
    total = 100 + 5 + 300 + 7 + 9
    assert out["key"].iloc[0] == "MatMul"
    assert (mm["count"], mm["total_us"], mm["mean_us"], mm["max_us"]) == (2, 400.0, 200.0, 300.0)
    assert add["count"] == 3 and add["total_us"] == pytest.approx(21.0)
    assert mm["share"] == pytest.approx(400 / total)
    assert top_operators(_profile(k), by="type", n=1).shape[0] == 1


def test_per_step_figures_share_one_basis() -> None:
    """Time and calls per rank and step: 2 ranks x 2 steps = 4 pairs, so MatMul's 8 calls
    of 50 µs are 2 calls and 100 µs per rank and step (never 8 calls beside 100 µs)."""
    frames = [_seq(["MatMul", "MatMul", "Add"], [50.0, 50.0, 4.0], step=s).assign(rank=r)
              for r in (0, 1) for s in (1, 2)]
    from perfkit.profile import Cluster, ProfileMeta

    cluster = Cluster([_profile(pd.concat([f for f in frames if f["rank"].iloc[0] == r]),
                                rank=r) for r in (0, 1)], ProfileMeta("test"))
    mm = top_operators(cluster, by="type").set_index("key").loc["MatMul"]
    assert (mm["count"], mm["total_us"]) == (8, 400.0)  # summed over ranks and steps
    assert (mm["calls_per_step"], mm["per_step_us"], mm["mean_us"]) == (2.0, 100.0, 50.0)
    assert mm["calls_per_step"] * mm["mean_us"] == mm["per_step_us"]


def test_top_by_name_and_shapes() -> None:
    k = _seq(["MatMul"] * 3, [10.0, 20.0, 40.0]).assign(
        name="mm", input_shapes=["1,2;2,3", "1,2;2,3", "4,4;4,4"])
    out = top_operators(_profile(k), by="name_shapes")
    got = dict(zip(out["input_shapes"], out["total_us"], strict=True))
    assert got == {"4,4;4,4": 40.0, "1,2;2,3": 30.0}


def test_communication_excluded_by_default() -> None:
    k = pd.concat([_seq(["MatMul"], [10.0]),
                   _seq(["hcom_allReduce_"], [90.0], stream=2).assign(category="communication")])
    assert set(top_operators(_profile(k))["key"]) == {"MatMul"}
    both = top_operators(_profile(k), include_communication=True)
    assert both["share"].sum() == pytest.approx(1.0)


def test_ai_cpu_flagged() -> None:
    k = pd.concat([_seq(["MatMul"], [50.0], core="AI_CORE"),
                   _seq(["NonZero"], [25.0], core="AI_CPU", start=100.0)])
    out = ai_cpu_operators(_profile(k))
    assert list(out["key"]) == ["NonZero"]
    assert out["total_us"].iloc[0] == 25.0
    assert bool(top_operators(_profile(k)).set_index("key").loc["NonZero", "ai_cpu"])


def test_ai_cpu_rows_describe_the_ai_cpu_tasks_only() -> None:
    """A type with tasks on both cores (Cast: 6 on the AI Core, 2 on the AI CPU, over two
    steps): the AI CPU row counts, times and names the AI CPU tasks alone; its share,
    time and calls per step keep the denominators of the whole table."""
    vec = pd.concat([_seq(["Cast"] * 3, [1.0, 2.0, 3.0], step=s, start=1000.0 * s)
                     for s in (1, 2)], ignore_index=True).assign(
        name="Cast66", input_shapes="4,1025")
    cpu = pd.concat([_seq(["Cast"], [40.0 * s], step=s, core="AI_CPU", stream=2,
                          start=1000.0 * s) for s in (1, 2)], ignore_index=True).assign(
        name="trans_Cast_5", input_shapes="")
    mm = _seq(["MatMul"], [100.0], core="AI_CORE", stream=3)
    k = pd.concat([vec, cpu, mm], ignore_index=True)
    row = ai_cpu_operators(_profile(k)).set_index("key").loc["Cast"]
    assert row["count"] == 2 and row["calls_per_step"] == pytest.approx(2 / 2)
    assert row["total_us"] == pytest.approx(120.0) and row["per_step_us"] == pytest.approx(60.0)
    assert (row["mean_us"], row["max_us"], row["min_us"]) == pytest.approx((60.0, 80.0, 40.0))
    assert row["share"] == pytest.approx(120.0 / (12.0 + 120.0 + 100.0))
    assert row["name"] == "trans_Cast_5" and row["core"] == "AI_CPU"
    assert pd.isna(row["input_shapes"])  # recorded as empty: not recorded
    # the type's row of the whole table is all its tasks
    top = top_operators(_profile(k)).set_index("key").loc["Cast"]
    assert top["count"] == 8 and top["calls_per_step"] == pytest.approx(4.0)


def test_bound_from_pmu_ratios() -> None:
    k = _seq(["MatMul", "Add"], [100.0, 50.0]).assign(
        aic_mac_ratio=[0.8, 0.0], aiv_vec_ratio=[0.0, 0.1],
        aic_mte2_ratio=[0.3, 0.0], aiv_mte2_ratio=[0.0, 0.9])
    out = operator_bound(_profile(k)).set_index("type")
    assert out.loc["MatMul", "bound"] == "compute"
    assert out.loc["Add", "bound"] == "memory"
    assert out.loc["Add", "memory_ratio"] == pytest.approx(0.9)


def test_top_operators_and_operator_bound_share_one_verdict() -> None:
    """A walk: on a real rank, top_operators said Conv2D was compute-bound (short
    compute-labelled tasks carried more time than a long memory-labelled one) where
    operator_bound said memory (its weighted ratios). Both now weigh the ratios: here
    4 × 30 µs labelled compute (0.6 / 0.5) carry more time than 1 × 100 µs labelled memory
    (0.1 / 0.9), but the weighted ratios are compute (120·0.6 + 100·0.1)/220 = 0.373
    against memory (120·0.5 + 100·0.9)/220 = 0.682: memory."""
    k = _seq(["Conv2D"] * 5, [30.0] * 4 + [100.0]).assign(
        aic_mac_ratio=[0.6] * 4 + [0.1], aic_mte2_ratio=[0.5] * 4 + [0.9])
    bound = operator_bound(_profile(k)).set_index("type").loc["Conv2D"]
    assert bound["compute_ratio"] == pytest.approx((120 * 0.6 + 100 * 0.1) / 220)
    assert bound["memory_ratio"] == pytest.approx((120 * 0.5 + 100 * 0.9) / 220)
    assert bound["bound"] == "memory"
    top = top_operators(_profile(k)).set_index("type")
    assert top.loc["Conv2D", "bound"] == "memory"


def test_bound_absent_without_pmu() -> None:
    out = operator_bound(_profile(_seq(["MatMul"], [1.0])))
    assert out.empty and out.attrs["notes"]


def test_tiny_kernel_storm() -> None:
    tiny = _seq(["Mul"] * 60, [2.0] * 60, gap=3.0)          # 60 tiny tasks back to back
    big = _seq(["MatMul"], [500.0], start=1000.0)
    out = tiny_kernels(_profile(pd.concat([tiny, big])), threshold_us=10.0, min_run=50)
    row = out.iloc[0]
    assert row["kernels"] == 61 and row["tiny_kernels"] == 60
    assert row["longest_run"] == 60
    assert row["run_gap_us"] == pytest.approx(59 * 3.0)     # 59 gaps of 3 µs
    assert row["tiny_time_share"] == pytest.approx(120.0 / 620.0)
    assert bool(row["storm"])


def _one_pattern(k: pd.DataFrame, name: str) -> pd.Series:
    out = unfused_patterns(_profile(k))
    assert list(out.columns) == list(UNFUSED_COLUMNS)
    hit = out[out["pattern"] == name]
    assert len(hit) == 1, out
    return hit.iloc[0]


def test_rmsnorm_decomposed_found_with_saving() -> None:
    durs = [4.0, 9.0, 2.0, 3.0, 6.0, 5.0]
    k = _seq(["Pow", "ReduceMean", "Add", "Sqrt", "RealDiv", "Mul"], durs)
    row = _one_pattern(k, "rmsnorm_decomposed")
    assert row["occurrences"] == 1 and row["kernels"] == 6
    assert row["total_us"] == pytest.approx(sum(durs))
    assert row["saving_us"] == pytest.approx(sum(durs) - max(durs))
    assert row["saving_share"] == pytest.approx((sum(durs) - max(durs)) / sum(durs))
    det = unfused_patterns(_profile(k), detail=True).iloc[0]
    assert det["names"] == " > ".join(k["name"])
    assert (det["first_row"], det["kernels"]) == (0, 6)


def test_rotary_swiglu_attention_casts_copies() -> None:
    rot = _seq(["StridedSlice", "StridedSlice", "Neg", "ConcatD", "Mul", "Mul", "Add"],
               [1, 1, 2, 3, 4, 4, 2], stream=1)
    swi = _seq(["Swish", "Mul"], [10.0, 8.0], stream=2)
    att = _seq(["BatchMatMul", "SoftmaxV2", "DropOutDoMask", "BatchMatMul"],
               [30.0, 12.0, 6.0, 25.0], stream=3)
    casts = _seq(["Cast", "Cast", "Cast"], [2.0, 3.0, 4.0], stream=4)
    copies = _seq(["TensorMove", "MatMul", "TensorMove"], [7.0, 50.0, 5.0], stream=5)
    k = pd.concat([rot, swi, att, casts, copies], ignore_index=True)
    assert _one_pattern(k, "rotary_small_ops")["saving_us"] == pytest.approx(17 - 4)
    assert _one_pattern(k, "silu_mul_not_swiglu")["saving_us"] == pytest.approx(8.0)
    assert _one_pattern(k, "softmax_dropout_matmul")["saving_us"] == pytest.approx(73 - 30)
    # no dtypes recorded: the casts follow one another, whether they undo each other is
    # not known (a run, not a chain)
    assert _one_pattern(k, "cast_run")["saving_us"] == pytest.approx(9 - 4)
    assert "cast_chain" not in set(unfused_patterns(_profile(k))["pattern"])
    cp = _one_pattern(k, "copies")
    assert cp["occurrences"] == 2 and cp["saving_us"] == pytest.approx(12.0)


def _casts(dtypes: list[tuple[str, str]], shapes: list[str], stream: int = 1,
           start: float = 0.0) -> pd.DataFrame:
    """Back-to-back Casts, ``(input dtype, output dtype)`` and one shape each."""
    k = _seq(["Cast"] * len(dtypes), [float(i + 2) for i in range(len(dtypes))],
             stream=stream, start=start)
    return k.assign(input_dtypes=[a for a, _ in dtypes], output_dtypes=[b for _, b in dtypes],
                    input_shapes=shapes, output_shapes=shapes)


def test_a_cast_chain_is_casts_that_undo_each_other() -> None:
    # FLOAT16 -> FLOAT -> FLOAT16 on one tensor: undone (2 + 3 µs, the longer one kept)
    back = _casts([("FLOAT16", "FLOAT"), ("FLOAT", "FLOAT16")], ["4,8", "4,8"])
    row = _one_pattern(back, "cast_chain")
    assert (row["occurrences"], row["kernels"]) == (1, 2)
    assert row["total_us"] == pytest.approx(5.0) and row["saving_us"] == pytest.approx(2.0)
    # through a third dtype: FLOAT16 -> FLOAT -> BF16 -> FLOAT16, one chain of three
    row = _one_pattern(_casts([("FLOAT16", "FLOAT"), ("FLOAT", "BF16"), ("BF16", "FLOAT16")],
                              ["8"] * 3), "cast_chain")
    assert row["kernels"] == 3 and row["total_us"] == pytest.approx(9.0)
    # the checked dtypes spelled as other profilers do (DT_ prefix, FLOAT32 for FLOAT)
    row = _one_pattern(_casts([("DT_FLOAT16", "FLOAT32"), ("FLOAT", "float16")],
                              ['"4,8"', "4, 8"]), "cast_chain")
    assert row["kernels"] == 2
    # what msprof's kernel_details shows: FLOAT16 -> FLOAT on one tensor after another
    # (different shapes), and two casts that go the same way on one shape: none undoes
    # another
    none = [_casts([("FLOAT16", "FLOAT")] * 3, ["78643200", "12582912", "56623104"]),
            _casts([("FLOAT16", "FLOAT")] * 2, ["12288", "12288"], stream=2),
            # the second does not take the first's output (FLOAT16 in, not FLOAT)
            _casts([("FLOAT", "FLOAT16"), ("BF16", "FLOAT")], ["6", "6"], stream=3),
            # back to FLOAT16, but on another shape: another tensor
            _casts([("FLOAT16", "FLOAT"), ("FLOAT", "FLOAT16")], ["6", "7"], stream=4),
            # a conversion onwards, never back
            _casts([("INT64", "INT32"), ("INT32", "FLOAT")], ["4"] * 2, stream=5)]
    out = unfused_patterns(_profile(pd.concat(none, ignore_index=True)))
    assert not out["pattern"].isin(["cast_chain", "cast_run"]).any(), out
    # a chain undone in the middle of a longer run: only its casts are counted
    run = _casts([("INT32", "FLOAT"), ("FLOAT16", "FLOAT"), ("FLOAT", "FLOAT16"),
                  ("FLOAT16", "INT8")], ["3"] * 4)
    det = unfused_patterns(_profile(run), detail=True)
    det = det[det["pattern"] == "cast_chain"]
    assert list(zip(det["first_row"], det["kernels"], strict=True)) == [(1, 2)]
    assert det["names"].iloc[0] == "Cast_1 > Cast_2"


def test_casts_without_dtypes_are_a_run_not_a_chain() -> None:
    """Where a cast of the run records no dtype or shape, whether the casts undo each
    other cannot be told: the run is reported as ``cast_run``, never as a chain."""
    k = _casts([("FLOAT16", "FLOAT"), ("FLOAT", "FLOAT16")], ["4,8", ""])  # shape unknown
    out = unfused_patterns(_profile(k)).set_index("pattern")
    assert "cast_chain" not in out.index and out.loc["cast_run", "kernels"] == 2


def test_flash_attention_suppresses_attention_pattern() -> None:
    att = _seq(["BatchMatMul", "SoftmaxV2", "BatchMatMul"], [30.0, 12.0, 25.0], stream=3)
    fa = _seq(["FlashAttentionScore"], [40.0], stream=4)
    out = unfused_patterns(_profile(pd.concat([att, fa])))
    assert "softmax_dropout_matmul" not in set(out["pattern"])


def test_vllm_attention_suppresses_attention_pattern() -> None:
    # vLLM's Triton attention kernel (vllm/attention/ops/triton_unified_attention.py) and
    # its operator compute attention fused, as a FlashAttentionScore does
    att = _seq(["BatchMatMul", "SoftmaxV2", "BatchMatMul"], [30.0, 12.0, 25.0], stream=3)
    assert "softmax_dropout_matmul" in set(unfused_patterns(_profile(att))["pattern"])
    for name in ("kernel_unified_attention_2d", "vllm::unified_attention_with_output"):
        fused = pd.DataFrame({"step": 1, "name": [name], "type": "kernel",
                              "category": "compute", "stream": 4, "start_us": [0.0],
                              "dur_us": [40.0]})
        out = unfused_patterns(_profile(pd.concat([att, fused])))
        assert "softmax_dropout_matmul" not in set(out["pattern"])


def test_pattern_never_spans_two_streams() -> None:
    a = _seq(["Pow", "ReduceMean", "Add"], [1.0, 1.0, 1.0], stream=1)
    b = _seq(["Sqrt", "RealDiv", "Mul"], [1.0, 1.0, 1.0], stream=2)
    out = unfused_patterns(_profile(pd.concat([a, b])))
    assert "rmsnorm_decomposed" not in set(out["pattern"])


def test_gpu_kernel_names_are_tokenised() -> None:
    names = ["void at::native::vectorized_elementwise_kernel<4, silu_kernel>(...)",
             "void at::native::vectorized_elementwise_kernel<4, MulFunctor<float>>(...)"]
    k = pd.DataFrame({"step": 1, "name": names, "type": "kernel", "category": "compute",
                      "stream": 7, "start_us": [0.0, 20.0], "dur_us": [12.0, 10.0]})
    assert _one_pattern(k, "silu_mul_not_swiglu")["saving_us"] == pytest.approx(10.0)
    # GPU tasks have the generic type "kernel": they are grouped by shared category
    assert set(top_operators(_profile(k))["key"]) == {"activation", "elementwise"}


def test_empty_kernels() -> None:
    prof = Profile(ProfileMeta("test", rank=0), {})
    for fn in (top_operators, unfused_patterns, tiny_kernels):
        out = fn(prof)
        assert out.empty and out.attrs["notes"]


@pytest.mark.shared_samples
def test_real_ascend_sample() -> None:
    prof = load(sample(PT_LEVEL1), cache=False)
    k = prof.kernels
    compute = k[k["category"] != "communication"]
    top = top_operators(prof, n=None)
    assert top["total_us"].sum() == pytest.approx(compute["dur_us"].sum())
    assert top["count"].sum() == len(compute)
    # every TensorMove task is a copy that in-place operators avoid
    moves = compute[compute["type"] == "TensorMove"]
    cp = unfused_patterns(prof)
    cp = cp[cp["pattern"] == "copies"]
    assert cp["occurrences"].sum() == len(moves)
    assert cp["saving_us"].sum() == pytest.approx(moves["dur_us"].sum())
    # PipeUtilization PMU columns are present in this sample
    assert not operator_bound(prof).empty


def test_recompute_evidence_counts_attention_passes() -> None:
    from perfkit.analysis.operators import recompute_evidence
    full = _seq(["FlashAttentionScore", "FlashAttentionScore", "FlashAttentionScoreGrad"] * 4,
                [10.0, 10.0, 20.0] * 4)
    none = _seq(["flash_fwd_kernel", "flash_bwd_dq_dk_dv_loop_kernel"] * 4, [10.0, 20.0] * 4)
    a = recompute_evidence(_profile(full)).iloc[0]
    assert (a["forward"], a["backward"], a["recompute"]) == (8, 4, "full")
    assert a["recompute_share"] == pytest.approx((2 - 1) / (2 + 2))
    b = recompute_evidence(_profile(none.assign(type="kernel"))).iloc[0]
    assert (b["ratio"], b["recompute"], b["recompute_share"]) == (1.0, "none", 0.0)
    assert recompute_evidence(_profile(_seq(["MatMul"], [1.0]))).empty


def test_unfused_summary_equals_the_occurrences_grouped_by_rank_and_pattern() -> None:
    """The summary, summed per pattern with numpy, against pandas' groupby of the detail:
    the simulated two-rank job, and three ranks (listed out of order) where rank 0 also
    runs a flash-attention task, which suppresses the attention pattern there only."""
    from perfkit.profile import Cluster

    rms = ["Pow", "ReduceMean", "Add", "Sqrt", "RealDiv", "Mul"]
    attn = ["BatchMatMul", "SoftmaxV2", "DropOutDoMask", "BatchMatMul"]
    members = []
    for rank in (2, 0, 1):
        types = (rms + attn) * 3 + (["FlashAttentionScore"] if rank == 0 else [])
        durs = [float(1 + (rank * 7 + j) % 5) for j in range(len(types))]
        members.append(_profile(_seq(types, durs, stream=rank).assign(rank=rank), rank=rank))
    simulated = load(Path(__file__).resolve().parents[2] / "data" / "simulated" /
                     "llama2-7b-tp2", progress=False)
    for prof in (Cluster(members, ProfileMeta("test")), simulated):
        out = unfused_patterns(prof)
        det = unfused_patterns(prof, detail=True)
        want = det.groupby(["rank", "pattern"], sort=False, dropna=False).agg(
            occurrences=("kernels", "size"), kernels=("kernels", "sum"),
            total_us=("total_us", "sum"), saving_us=("saving_us", "sum")).reset_index()
        assert len(want) >= 2
        key = ["rank", "pattern"]
        got = out[key + ["occurrences", "kernels", "total_us", "saving_us"]]
        pd.testing.assert_frame_equal(
            got.sort_values(key).reset_index(drop=True),
            want.astype(got.dtypes.to_dict()).sort_values(key).reset_index(drop=True))
    summary = unfused_patterns(Cluster(members, ProfileMeta("test")))
    ranks = summary[summary["pattern"] == "softmax_dropout_matmul"]["rank"].tolist()
    assert sorted(ranks) == [1, 2]  # not rank 0, which has a flash-attention task


def test_unfused_on_interleaved_streams_equals_unfused_on_rows_sorted_by_stream() -> None:
    """Two streams whose tasks alternate in the table (written in time order): the search
    puts them in stream order itself; the same tasks handed over already sorted by
    (stream, start) must give the same occurrences, names and times."""
    rms = ["Pow", "ReduceMean", "Add", "Sqrt", "RealDiv", "Mul"]
    attn = ["BatchMatMul", "SoftmaxV2", "DropOutDoMask", "BatchMatMul"]
    a = _seq((rms + attn) * 2, [float(1 + j % 4) for j in range(20)], stream=7, gap=0.5)
    b = _seq((attn + rms) * 2, [float(2 + j % 3) for j in range(20)], stream=3, gap=0.7)
    interleaved = pd.concat([a, b], ignore_index=True).sort_values(
        "start_us", kind="mergesort", ignore_index=True)
    assert interleaved["stream"].diff().ne(0).sum() > 10  # the streams alternate
    by_stream = interleaved.sort_values(["stream", "start_us"], kind="mergesort",
                                        ignore_index=True)
    for detail in (False, True):
        got = unfused_patterns(_profile(interleaved), detail=detail)
        want = unfused_patterns(_profile(by_stream), detail=detail)
        assert len(got) >= 2
        pd.testing.assert_frame_equal(got, want)


@pytest.mark.shared_samples
def test_tasks_of_no_step_are_not_a_step_of_their_own() -> None:
    """The Qwen H100 trace has one ProfilerStep and 509 kernels launched before the trace
    began (no runtime call with their correlation). They are no step: the Operators table
    is per step over ProfilerStep#6's own tasks, whole calls per step, its time the sum of
    those tasks' durations read from the raw JSON (before: 2 steps, 0.5 calls per step)."""
    from raw_kineto import raw_outside, raw_windows

    import perfkit as pk
    from perfkit.analysis import top_operators

    path = next(shared_sample("wild/tl_qwen_h100").glob("*.json.gz"))
    windows, _spans, _ = raw_windows(path)
    assert list(windows) == [6]
    outside = raw_outside(path)
    events = [e for e in raw_events(path) if e.get("ph") == "X"
              and str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "gpu_memset")]
    in_step = len(events) - len(outside)
    in_step_us = sum(float(e["dur"]) for e in events) - sum(float(b - a) for a, b in outside)
    top = top_operators(pk.load(path, cache=False, progress=False))
    assert int(top["count"].sum()) == in_step
    assert (top["calls_per_step"] == top["count"]).all()  # one step
    assert top["per_step_us"].sum() == pytest.approx(in_step_us, rel=1e-9)
    assert any("509 device tasks of no step" in n for n in top.attrs["notes"])


def _stream_runs(rows: list[dict[str, str]]) -> list[list[dict[str, str]]]:
    """Runs of consecutive Cast tasks on each stream (start order), communication tasks
    left out, from rows of the raw kernel_details.csv."""
    lanes: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        if r["Accelerator Core"] != "HCCL":
            lanes.setdefault(r["Stream ID"], []).append(r)
    runs = []
    for lane in lanes.values():
        lane.sort(key=lambda r: float(r["Start Time(us)"]))
        run: list[dict[str, str]] = []
        for r in [*lane, None]:
            if r is not None and r["Type"] == "Cast":
                run.append(r)
                continue
            if len(run) > 1:
                runs.append(run)
            run = []
    return runs


@pytest.mark.shared_samples
def test_msprof_consecutive_float16_casts_are_not_a_cast_chain() -> None:
    """msprof-analyze's kernel_details.csv has long runs of consecutive casts (Cast47 >
    Cast48 > ...), every one FLOAT16 -> FLOAT on a tensor of its own (read here from the
    raw CSV): none gives back a dtype an earlier one took, so no cast chain "that undoes
    itself" is reported, and no finding says so."""
    import csv

    from shared_samples import shared_sample

    import perfkit as pk

    folder = shared_sample("wild/msa_kernel_details")
    with (folder / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    runs = _stream_runs(rows)
    names = [[r["Name"] for r in run] for run in runs]
    assert ["Cast47", "Cast48", "Cast49"] == names[0][:3] and len(names[0]) == 28
    linked = 0
    for run in runs:
        # every cast records its dtypes and shapes ...
        assert all(r[c].strip('"') for r in run for c in ("Input Data Types",
                                                          "Output Data Types",
                                                          "Input Shapes", "Output Shapes"))
        # ... and none takes the dtype and shape the previous one gave: no cast converts
        # the previous one's output again, let alone back
        linked += sum(b["Input Data Types"] == a["Output Data Types"]
                      and b["Input Shapes"] == a["Output Shapes"]
                      for a, b in zip(run[:-1], run[1:], strict=True))
    assert linked == 0
    assert {(r["Input Data Types"], r["Output Data Types"]) for r in runs[0]} == {
        ("FLOAT16", "FLOAT")}
    profile = load(folder, cache=False)
    out = unfused_patterns(profile)
    assert not out["pattern"].isin(["cast_chain", "cast_run"]).any(), out
    assert not [f for f in pk.advise(profile) if f.rule in ("cast_chains", "cast_runs")]


@pytest.mark.shared_samples
def test_msprof_ai_cpu_tasks_are_the_ai_cpu_row() -> None:
    """msprof-analyze's kernel_details.csv: 75 Cast tasks, 7 of them on the AI CPU
    (trans_Cast_5, trans_Cast_18, no shapes), one step (read here from the raw CSV). The
    AI CPU row counts, times and names those 7, never Cast66 (an AI_VECTOR_CORE task) nor
    the 75 casts per step."""
    import csv

    from shared_samples import shared_sample

    folder = shared_sample("wild/msa_kernel_details")
    with (folder / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    cpu = [r for r in rows if r["Accelerator Core"] == "AI_CPU"]
    durs = [float(r["Duration(us)"]) for r in cpu]
    steps = {r["Step Id"] for r in rows}
    assert len(cpu) == 7 and {r["Type"] for r in cpu} == {"Cast"} and steps == {"1"}
    assert sum(r["Type"] == "Cast" for r in rows) == 75
    assert {r["Name"] for r in cpu} == {"trans_Cast_5", "trans_Cast_18"}
    assert {r["Input Shapes"] for r in cpu} == {'""'}  # recorded as empty
    out = ai_cpu_operators(load(folder, cache=False))
    assert list(out["key"]) == ["Cast"]
    row = out.iloc[0]
    assert row["count"] == len(cpu)
    assert row["calls_per_step"] == pytest.approx(len(cpu) / len(steps))
    assert row["total_us"] == pytest.approx(sum(durs))
    assert row["per_step_us"] == pytest.approx(sum(durs) / len(steps))
    assert (row["max_us"], row["min_us"]) == pytest.approx((max(durs), min(durs)))
    assert row["name"] == cpu[0]["Name"] == "trans_Cast_5"
    assert pd.isna(row["input_shapes"])  # not Cast66's "4,1025"
    assert row["core"] == "AI_CPU"
