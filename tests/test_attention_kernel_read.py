"""The fused attention kernel a profile ran, read from its kernel names, and used by
``plan.calibrate`` in place of the hardware's guess.

Each real trace is also read here on its own (gzip + json) to show that the kernels the
reading names are in it.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from shared_samples import sample, shared_param

import perfkit as pk
from perfkit.analysis.operators.attention_kernel import KERNEL_RULES, read_attention_kernel
from perfkit.calc.rates import Rates

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "tests" / "data" / "kineto_llama_h100"


def _kernel_names(path: Path) -> set[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    return {e["name"] for e in events if e.get("cat") == "kernel"}


@pytest.mark.parametrize("folder, trace, expected, fragment", [
    shared_param(sample("wild/tl_qwen_h100"), "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
                 "flash2", "pytorch_flash::flash_fwd_kernel<"),
    shared_param(sample("wild/ds_train"), "train.json", "flash3", "flash::FlashAttnBwd<"),
    (H100, "rank0.pt.trace.json.gz", "cudnn", "cudnn_generated_fort_native_sdpa_sm90_flash_"),
])
def test_real_traces_read_as_the_library_their_kernels_come_from(folder, trace, expected,
                                                                  fragment):
    assert any(fragment in n for n in _kernel_names(folder / trace))
    implementation, why = read_attention_kernel(pk.load(folder, progress=False))
    assert implementation == expected, why
    assert pk.infer_job(pk.load(folder, progress=False)).attention_implementation == expected


def test_ascend_and_unknown_kernels_read_as_none():
    implementation, why = read_attention_kernel(pk.load("sample:llama2-7b-tp2",
                                                        progress=False))
    assert implementation is None and "no kernel of a known" in why


@pytest.mark.parametrize("name, expected", [
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128>>(Flash_fwd_params)",
     "flash2"),
    ("void fmha_bwd_dq_dk_dv_loop_kernel<FMHA_kernel_traits<128, 64>, false, true>"
     "(FMHA_dgrad_params)", "flash1"),
    ("void cutlass::device_kernel<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90"
     "<2, cute::tuple<>>>>(x)", "flash3"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", None),  # xformers: no curve of its own
    ("triton_poi_fused_add_0", None),
])
def test_each_rule_on_a_kernel_name(name, expected):
    import re
    found = next((impl for impl, pattern, _ in KERNEL_RULES if re.search(pattern, name)),
                 None)
    assert found == expected


def _as_flash2(src: Path, dst: Path) -> Path:
    """The H100 Llama pair with its cuDNN attention kernels renamed as SDPA's
    FlashAttention-2 ones (same times, same shapes)."""
    dst.mkdir()
    for trace in sorted(src.glob("*.json.gz")):
        with gzip.open(trace, "rt", encoding="utf-8") as fh:
            doc = json.load(fh)
        for e in doc["traceEvents"]:
            name = e.get("name", "")
            if e.get("cat") == "kernel" and "native_sdpa" in name:
                e["name"] = ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits>"
                             "(Flash_fwd_params)" if "fprop" in name else
                             "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_"
                             "kernel<Flash_bwd_kernel_traits>(Flash_bwd_params)")
        with gzip.open(dst / trace.name, "wt", encoding="utf-8") as fh:
            json.dump(doc, fh)
    return dst


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_calibrate_prices_attention_with_the_kernel_the_profile_ran(tmp_path):
    flash = pk.load(_as_flash2(H100, tmp_path / "flash2"), progress=False)
    cal = pk.plan.calibrate(flash)
    assert cal.rates.attention_implementation == "flash2"
    assert any("attention priced as 'flash2'" in n for n in cal.notes)
    term = next(t for t in cal.terms if t[0] == "attention_efficiency")
    assert "flash2 curve" in term[2]
    # what the user asks for wins over the reading
    told = pk.plan.calibrate(flash, rates=Rates(attention_implementation="cudnn"))
    assert told.rates.attention_implementation == "cudnn"
    # the same kernel times against the two curves: the fitted factors differ by the
    # curves' ratio at this run's calls (cuDNN's curve is the faster one on H100)
    assert told.rates.attention_efficiency < cal.rates.attention_efficiency


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_the_planners_assumptions_say_the_kernel_came_from_the_profile(tmp_path):
    from perfkit.plan.assumed import assumptions

    cal = pk.plan.calibrate(pk.load(_as_flash2(H100, tmp_path / "flash2"), progress=False))
    row = assumptions(cal).table.set_index("name").loc["attention_implementation"]
    assert (row["value"], row["origin"]) == ("flash2", "profile")
    assert row["source"].startswith("the profile's kernel names: FlashAttention-2 kernels")


def test_perfkit_info_prints_the_attention_kernel_read():
    from perfkit.cli.profile_text import profile_info_text

    text = profile_info_text(pk.load(H100, progress=False))
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("attention "))
    assert "cudnn: cuDNN fused attention kernels" in line and line.endswith("[profile]")


def test_the_json_answer_carries_the_attention_kernel():
    from perfkit.answers.info import job_dict

    got = job_dict(pk.infer_job(pk.load(H100, progress=False)))["attention_kernel"]
    assert got["implementation"] == "cudnn" and got["detail"].startswith("cuDNN")
    ascend = job_dict(pk.infer_job(pk.load("sample:llama2-7b-tp2", progress=False)))
    assert ascend["attention_kernel"] == {"implementation": None, "detail": ""}


@pytest.mark.shared_samples
def test_a_trace_without_shapes_keeps_no_scores_where_its_kernels_are_fused() -> None:
    """A walk: the DeepSeek trace (no operator shapes; FlashAttention-3 kernels, read here
    in the raw trace) was priced as flash3 while its activations were counted by
    Korthikanti's table, the s × s scores kept, as if no attention kernel ran. The names
    now count: its activations keep no scores."""
    trace = sample("wild/ds_train") / "train.json"
    assert any("flash::FlashAttn" in n for n in _kernel_names(trace))
    job = pk.infer_job(pk.load(trace, progress=False))
    assert job.attention_implementation == "flash3"
    assert job.activation_model.flash_attention
    assert "Korthikanti" not in job.activation_detail

