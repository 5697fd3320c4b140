"""Rules of the operators: kernels that could be fused, GEMMs below their roofline, AI CPU.

What a fix would win back is priced from each kernel's shapes against the device's
roofline (:func:`perfkit.analysis.operator_efficiency`), under the conventions of
:data:`~perfkit.advisor.context.ASSUMPTIONS`; a saving counted by one rule (the known
fusion patterns) is not counted again by another (element-wise chains). Every figure per
step is over the steps' own device tasks: a task of no step (launched before the trace
began) is left out, as the Operators tab leaves it out, and the evidence says how many.
The rules read only the steps whose device tasks were recorded in full
(:attr:`~perfkit.advisor.context.Context.tasks`): a chain, a pattern or a sum found in a
kernel list cut short is not the step's. When no step's tasks were recorded in full
(``ascend/msinsight-pt-gpt3-old``), they find nothing, and :func:`cut_task_lists` says so.
"""

from __future__ import annotations

from typing import Any

from .._text_dtype import TEXT
from ..analysis import efficiency as _eff
from ..analysis import operators as _ops
from ..analysis._frames import collect
from ..analysis._util import in_steps, no_step_note, table, text_matches
from ..analysis.recorded import recorded_steps_text
from ..format import counted, plural
from .context import Context
from .finding import Finding, unmeasured
from .finding import measured as _any_measured
from .registry import rule
from .words import clipped, fmt_time, pct, rocm_terms, say
from .workload import axis_of

__all__ = ["cut_task_lists", "unfused", "attention", "gemm", "elementwise", "ai_cpu",
           "deterministic"]


#: What each known pattern of :func:`perfkit.analysis.unfused_patterns` fuses.
_UNFUSED_TITLES = {
    "rmsnorm_decomposed": "RMSNorm",
    "rotary_small_ops": "rotary position embedding",
    "silu_mul_not_swiglu": "SwiGLU (SiLU then Mul)",
    "softmax_dropout_matmul": "attention (matmul, softmax, matmul)",
}
#: The fused kernel of each pattern, per framework.
_FUSED = {
    "mindspore": {"rmsnorm_decomposed": "RmsNorm (mindspore.ops.rms_norm)",
                  "rotary_small_ops": "RotaryPositionEmbedding "
                                      "(mindspore.ops.rotary_position_embedding)",
                  "silu_mul_not_swiglu": "SwiGLU (MindFormers use_fused_swiglu / ops.swiglu)",
                  "softmax_dropout_matmul": "FlashAttention (MindFormers use_flash_attention)"},
    "torch_npu": {"rmsnorm_decomposed": "torch_npu.npu_rms_norm",
                  "rotary_small_ops": "torch_npu.npu_rotary_mul",
                  "silu_mul_not_swiglu": "torch_npu.npu_swiglu",
                  "softmax_dropout_matmul": "torch_npu.npu_fusion_attention"},
    "pytorch_gpu": {"rmsnorm_decomposed": "torch.nn.functional.rms_norm or a fused RMSNorm "
                                          "(Apex / Transformer Engine)",
                    "rotary_small_ops": "a fused rotary kernel (flash_attn.layers.rotary, "
                                        "Transformer Engine)",
                    "silu_mul_not_swiglu": "a fused SwiGLU (torch.compile, Transformer Engine)",
                    "softmax_dropout_matmul": "F.scaled_dot_product_attention (flash)"},
}
_FUSED["pytorch_rocm"] = _FUSED["pytorch_gpu"]  # the same PyTorch names on ROCm


def measured(ctx: Context, *args: Any, **kwargs: Any) -> Finding:
    """:func:`~perfkit.advisor.finding.measured` with the share of the mean step over the
    steps whose device tasks were recorded in full
    (:meth:`~perfkit.advisor.context.Context.recorded_basis`), which the time at stake,
    per step over those steps (:meth:`~perfkit.advisor.context.Context.
    per_recorded_step`), is measured in: a time and its step over the same steps."""
    step_us, words = ctx.recorded_basis()
    return _any_measured(ctx, *args, step_us=step_us, step_basis=words, **kwargs)


def _no_step(ctx: Context) -> str:
    """The device tasks the operator analyses left out of their sums, as the end of an
    evidence: those of no step (:func:`~perfkit.analysis._util.no_step_note`: launched
    before the trace began) and those of the steps whose tasks were recorded only in part
    (:attr:`~perfkit.advisor.context.Context.tasks`); else ``""``."""
    note = ctx.get("no_step_note", lambda: no_step_note(table(ctx.tasks, "kernels")))
    which = recorded_steps_text(ctx.steps)
    part = f"; counted over the steps whose device tasks were recorded in full: {which}" \
        if which else ""
    return (f"; {note}" if note else "") + part


@rule("operators", order=85, needs=("kernels",))
def cut_task_lists(ctx: Context) -> list[Finding]:
    """No step's device tasks were recorded in full: the operator rules find nothing.

    Chains of kernels, fusion patterns and times per step need a step's whole task list;
    those of a list cut short (``ascend/msinsight-pt-gpt3-old`` keeps 21 tasks of a
    221.8 ms step, covering 16.8 % of its busy time) are a fragment's, so the other
    operator rules leave every such step out (:attr:`Context.tasks`) and, here, find
    nothing. This finding says why the operators have none.
    """
    if not ctx.fragments_only:
        return []
    return [unmeasured(
        "cut_task_lists", "operators",
        "No operator finding: every step's device tasks were recorded only in part",
        f"device tasks recorded in full for {recorded_steps_text(ctx.steps)}: the "
        "profile's kernel lists cover only part of each step's busy time (the profile's "
        "notes give the figures); chains of kernels, fusion patterns and times per step "
        "found in such a fragment would not be the step's, so none is reported",
        "Export the profile again with every device task of at least one step (a complete "
        "kernel list) to get the operator findings.", severity="info")]


@rule("operators", order=90, needs=("kernels",))
def unfused(ctx: Context) -> list[Finding]:
    """Known chains of small kernels that one fused kernel replaces; copies; cast chains."""
    uf = ctx.get("unfused", lambda: _ops.unfused_patterns(ctx.tasks))
    if uf.empty:
        return []
    g = uf.groupby("pattern", sort=False).agg(occurrences=("occurrences", "sum"),
                                             saving_us=("saving_us", "sum"),
                                             total_us=("total_us", "sum"))
    fw = ctx.fw if ctx.fw in _FUSED else "torch_npu"
    out = []
    fusion = g[g.index.isin(["rmsnorm_decomposed", "rotary_small_ops",
                             "silu_mul_not_swiglu"])].sort_values("saving_us", ascending=False)
    if not fusion.empty:
        saving = ctx.per_recorded_step(float(fusion["saving_us"].sum()))
        ctx.count("unfused_saving", saving)
        out.append(measured(
            ctx, "unfused_operators", "operators", saving,
            "Operators run as chains of small kernels where one fused kernel exists: "
            + ", ".join(_UNFUSED_TITLES[str(n)] for n in fusion.index),
            "; ".join(f"{_UNFUSED_TITLES[str(n)]}: {counted(r['occurrences'], 'chain')} "
                      f"{ctx.over_ranks_and_steps}, "
                      f"{fmt_time(ctx.per_recorded_step(r['total_us']))} per "
                      f"step, about {fmt_time(ctx.per_recorded_step(r['saving_us']))} avoidable"
                      for n, r in fusion.iterrows()) + _no_step(ctx),
            "Use the fused kernels: " + "; ".join(_FUSED[fw][str(n)] for n in fusion.index)
            + ". The saving assumes the fused kernel costs as much as the chain's slowest "
            "member.", details="patterns " + ", ".join(map(str, fusion.index))))
    copies_label = ("copy kernels (contiguous / clone)" if ctx.fw.startswith("pytorch_")
                    else "TensorMove copies")
    if "copies" in g.index:
        r = g.loc["copies"]
        out.append(measured(
            ctx, "redundant_copies", "operators", ctx.per_recorded_step(float(r["saving_us"])),
            f"Time in {copies_label}",
            f"{counted(r['occurrences'], 'copy task')} {ctx.over_ranks_and_steps}, "
            f"{fmt_time(ctx.per_recorded_step(float(r['total_us'])))} per step (the copies "
            "themselves; the Operators tab's 'copy' kind also holds concatenations, "
            "transposes, fills and memory copies)" + _no_step(ctx),
            "Use in-place operators, drop .contiguous() where the next operator accepts "
            "strided input, and avoid needless tensor copies."))
    keep_dtype = say(ctx.fw, {"mindspore": "Keep one dtype across neighbouring operators "
                                           "(amp_level / custom_mixed_precision lists).",
                              "any": "Keep one dtype across neighbouring operators (autocast "
                                     "lists) and remove casts that only undo the previous "
                                     "one."})
    if "cast_chain" in g.index:
        # checked on the tasks' dtypes and shapes (analysis.operators.unfused)
        r = g.loc["cast_chain"]
        out.append(measured(
            ctx, "cast_chains", "operators", ctx.per_recorded_step(float(r["saving_us"])),
            "Consecutive dtype conversions (casts) that undo each other",
            f"{counted(r['occurrences'], 'chain')} of casts that convert a tensor back to a "
            "dtype it had (each cast takes the dtype and shape the previous one gave), "
            f"{fmt_time(ctx.per_recorded_step(float(r['total_us'])))} per step" + _no_step(ctx),
            keep_dtype))
    if "cast_run" in g.index:
        r = g.loc["cast_run"]
        out.append(measured(
            ctx, "cast_runs", "operators", ctx.per_recorded_step(float(r["saving_us"])),
            "Consecutive dtype conversions (casts) that may undo each other",
            f"{counted(r['occurrences'], 'run')} of consecutive casts, "
            f"{fmt_time(ctx.per_recorded_step(float(r['total_us'])))} per step; the profile does "
            "not record their dtypes or shapes, so whether they undo each other is not "
            "known: the time at stake assumes they do, and that one cast per run would do"
            + _no_step(ctx),
            "Check these casts' dtypes (a profile with operator shapes and dtypes shows "
            "them). " + keep_dtype))
    return out


@rule("operators", order=100, needs=("kernels",))
def attention(ctx: Context) -> list[Finding]:
    """Attention as matmul-softmax-matmul: what a fused (flash) kernel would save.

    The chains are :func:`perfkit.analysis.attention_chains`: the kernel pattern of
    :func:`perfkit.analysis.unfused_patterns`, and 3-D bmm, softmax, bmm of matching
    shapes, which copies between the members leave to the pattern unmatched.
    """
    uf = ctx.get("unfused", lambda: _ops.unfused_patterns(ctx.tasks))
    by_pattern = not uf.empty and "softmax_dropout_matmul" in set(uf["pattern"].astype(str))
    if not by_pattern and not _eff.may_hold_bmm_attention(ctx.tasks):
        return []  # neither search can find a chain: not worth ordering the tasks
    eff = ctx.assume["kernel_efficiency"]
    chains = ctx.get("att_chains", lambda: _eff.attention_chains(
        ctx.tasks, ctx.hardware, kernel_efficiency=eff))
    chains = chains[chains["saving_us"].notna().to_numpy(bool)]  # priced on the roofline
    if chains.empty:
        return []
    saving = ctx.per_recorded_step(float(chains["saving_us"].sum()))
    fw = ctx.fw if ctx.fw in _FUSED else "torch_npu"
    return [measured(
        ctx, "attention_not_fused", "operators", saving,
        "Attention runs as separate matmul and softmax kernels instead of one fused kernel",
        f"{counted(len(chains), 'attention chain')} {ctx.over_ranks_and_steps}, "
        f"{fmt_time(ctx.per_recorded_step(float(chains['total_us'].sum())))} per step; a fused "
        f"kernel at {pct(eff)} of the roofline would take "
        f"{fmt_time(ctx.per_recorded_step(float(chains['fused_us'].sum())))}" + _no_step(ctx),
        f"Use {_FUSED[fw]['softmax_dropout_matmul']}: it never writes the score matrix to "
        "memory.", details=f"kernel_efficiency {eff}")]


#: How to pad a GEMM's dimensions, for an NPU (False) or a GPU (True): the cube unit works
#: on 16 × 16 fractals and prefers 128-aligned sizes; tensor cores want multiples of 8
#: (fp16 / bf16) to 16 and are fastest on 64-aligned tiles.
_GEMM_ADVICE_START = {
    False: "Pad the GEMM dimensions (hidden, FFN and vocabulary sizes, a CNN's channels) to "
           "multiples of 128 on the cube unit (16 at least), ",
    True: "Pad the GEMM dimensions (hidden, FFN and vocabulary sizes, a CNN's channels) to "
          "multiples of 64 for the tensor cores (8 at least for fp16 / bf16), ",
}


def _gemm_advice_start(ctx: Context) -> str:
    """How to pad: for the cube unit or the tensor cores; fp32 GEMMs on a GPU use no tensor
    cores, so mixed precision comes first (the ``fp32_matrix_work`` finding prices it)."""
    gpu = ctx.fw.startswith(("pytorch_gpu", "pytorch_rocm"))
    if gpu and axis_of(ctx, "precision")[0] == "fp32":
        text = ("These GEMMs run in fp32, which the tensor cores do not take: use mixed "
                "precision (torch.autocast) first, then pad the dimensions to multiples of "
                "8 (64 is fastest), ")
    else:
        text = _GEMM_ADVICE_START[gpu]
    return rocm_terms(text) if ctx.fw == "pytorch_rocm" else text


@rule("operators", order=110, needs=("kernels|ops",), inputs=("hardware",),
      after=("attention",), ahead=("efficiency",))
def gemm(ctx: Context) -> list[Finding]:
    """GEMMs far below their roofline: what a kernel at ``kernel_efficiency`` would save.

    The GEMM calls of the unfused attention chains that the ``attention_not_fused``
    finding counts (:func:`perfkit.analysis.efficiency.attention_chain_gemms`) are left
    out: a fused attention kernel replaces them, and their time is that finding's. Each
    group is judged on its other calls: ``efficiency = count · ideal_us / total_us``.
    """
    eff = ctx.efficiency()
    if eff.empty:
        return []
    a = ctx.assume
    g = eff[(eff["kind"] == "gemm") & eff["ideal_us"].notna()]
    g, left_out = _without_attention(ctx, g)
    g = g[g["efficiency"] < a["far_below"]]
    if g.empty:
        return []
    good = g["count"] * g["ideal_us"] / a["kernel_efficiency"]
    saving_total = (g["total_us"] - good).clip(lower=0)
    saving = ctx.per_recorded_step(float(saving_total.sum()))
    if saving <= 0:
        return []
    worst = g.assign(_s=saving_total).sort_values("_s", ascending=False).head(3)
    causes = []
    for r in worst.itertuples():
        dims = [d for s in _eff.parse_shapes(r.input_shapes) if s for d in s]
        odd = sorted({d for d in dims if d % 16} if dims else set())
        why = []
        if odd:
            why.append(f"dimensions {', '.join(map(str, odd[:4]))} are not multiples of 16")
        if r.ideal_us < 10:
            why.append("too small to fill the device (ideal time "
                       f"{fmt_time(r.ideal_us)})")
        if r.bound == "memory":
            why.append("memory-bound: a dimension is too small for data reuse")
        causes.append(f"{r.key} [{r.input_shapes}] x{int(r.count)}: {pct(r.efficiency)} of "
                      f"its roofline" + (f" ({'; '.join(why)})" if why else ""))
    return [measured(
        ctx, "gemm_below_roofline", "operators", saving,
        "Matrix multiplications run far below what the hardware allows for their shapes",
        f"{counted(len(g), 'GEMM shape')} under {pct(a['far_below'])} of "
        f"{plural(len(g), 'its', 'their')} roofline "
        f"({ctx.hardware.name}); worst: " + "; ".join(causes) + left_out + _no_step(ctx),
        _gemm_advice_start(ctx) + "batch tiny GEMMs together (grouped / batched matmul, "
        "larger micro-batch), and keep the operands in the kernel's preferred layout.",
        details=f"kernel_efficiency {a['kernel_efficiency']}; far_below {a['far_below']}; "
                f"roofline of {ctx.hardware.name} ({ctx.hardware_why})")]


def _without_attention(ctx: Context, g: Any) -> tuple[Any, str]:
    """The GEMM groups ``g`` of the efficiency table less the calls of the attention
    chains the ``attention_not_fused`` finding counts, and a sentence saying what was
    left out ("" when nothing was)."""
    if not any(f.rule == "attention_not_fused" and f.measured
               for f in ctx.findings("attention")):
        return g, ""
    att = ctx.get("att_gemms", lambda: _eff.attention_chain_gemms(ctx.tasks))
    if att.empty:
        return g, ""
    keys = ["key", "input_shapes", "input_dtypes"]
    att = att.groupby(keys, sort=False).agg(_n=("count", "sum"), _t=("total_us", "sum"))
    g = g.astype({k: TEXT for k in keys}).fillna({k: "" for k in keys}) \
        .join(att, on=keys)
    n, t = g["_n"].fillna(0), g["_t"].fillna(0.0)
    g = g.assign(count=g["count"] - n, total_us=g["total_us"] - t)
    g = g[g["count"] > 0].drop(columns=["_n", "_t"])
    g = g.assign(efficiency=g["count"] * g["ideal_us"] / g["total_us"])
    calls, us = int(n.sum()), ctx.per_recorded_step(float(t.sum()))
    return g, (f"; leaves out {counted(calls, 'GEMM call')} ({fmt_time(us)} per step) of "
               "the unfused attention chains, which the attention finding counts")


@rule("operators", order=120, needs=("kernels|ops",), inputs=("hardware",),
      after=("unfused", "attention"), ahead=("chains",))
def elementwise(ctx: Context) -> list[Finding]:
    """Chains of memory-bound element-wise kernels (beyond the known fusion patterns).

    Where the ``attention_not_fused`` finding counts unfused attention chains, their
    kernels (a scale, mask or dropout between the products) are in no run here
    (:func:`perfkit.analysis.elementwise_chains` ``without_attention``): that finding
    counts their time. The copy kernels are in no run either
    (:func:`perfkit.analysis.elementwise_chains` ``without_copies``): the
    ``redundant_copies`` finding counts their whole time.
    """
    a = ctx.assume
    if any(f.rule == "attention_not_fused" and f.measured for f in ctx.findings("attention")):
        # the steps recorded in full (ctx.tasks), as ctx.chains() and the time per step
        ch = ctx.get("chains_without_attention", lambda: _eff.elementwise_chains(
            ctx.tasks, ctx.hardware, min_chain=int(a["min_chain"]),
            kernel_efficiency=a["kernel_efficiency"], without_attention=True,
            without_copies=True))
    else:
        ch = ctx.chains()
    if ch.empty:
        return []
    total = ctx.per_recorded_step(float(ch["saving_us"].sum()))
    # the known patterns (RMSNorm, rotary, SwiGLU) are such chains: not counted twice
    saving = max(0.0, total - ctx.counted("unfused_saving"))
    if saving <= 0:
        return []
    top = ch.groupby("names", sort=False)["saving_us"].sum().sort_values(ascending=False)
    copies = any(f.rule == "redundant_copies" for f in ctx.findings("unfused"))
    return [measured(
        ctx, "elementwise_chains", "operators", saving,
        "Chains of memory-bound element-wise kernels move the same data several times",
        f"{counted(len(ch), 'chain')} of {int(a['min_chain'])} or more kernels "
        f"{ctx.over_ranks_and_steps}, "
        f"{fmt_time(ctx.per_recorded_step(float(ch['total_us'].sum())))} per step; the chain "
        f"with the largest saving: {clipped(str(top.index[0]), noun='kernel')}"
        + ("; copy kernels end a chain and are in none (the copies finding counts their "
           "time)" if copies else "") + _no_step(ctx),
        say(ctx.fw, {"mindspore": "Fuse them: graph mode with graph-kernel fusion "
                                  "(enable_graph_kernel / jit_level O1), or the fused "
                                  "operators of MindFormers.",
                     "torch_npu": "Fuse them: torch.compile / TorchAir, or the torch_npu "
                                  "fused operators" + (
                                      " (npu_add_rms_norm, npu_swiglu, ...)." if
                                      axis_of(ctx, "arch")[0] != "other" else "."),
                     "pytorch_gpu": "Fuse them: torch.compile, or fused kernels (Apex, "
                                    "Transformer Engine, Liger).",
                     "pytorch_cpu": "Fuse them: torch.compile (its C++ / OpenMP code "
                                    "generation fuses element-wise loops)."})
        + f" Saving assumes one fused kernel at {pct(a['kernel_efficiency'])} of the memory "
        "roofline moving the largest member's data.",
        details=f"kernel_efficiency {a['kernel_efficiency']}; min_chain {a['min_chain']}; "
                "minus the unfused-operators saving")]


@rule("operators", order=130, needs=("kernels",),
      frameworks=("mindspore", "torch_npu", "ascend"))
def ai_cpu(ctx: Context) -> list[Finding]:
    """Operators that fell back to the AI CPU (Ascend only)."""
    ai = ctx.get("aicpu", lambda: _ops.ai_cpu_operators(ctx.tasks))
    if ai.empty:
        return []
    total = float(ai["total_us"].sum())
    names = ", ".join(str(t) for t in ai["key"].head(3))
    return [measured(
        ctx, "ai_cpu", "operators", ctx.per_recorded_step(total),
        "Operators run on the AI CPU instead of the AI Core",
        f"{counted(ai['count'].sum(), 'AI CPU task')}, "
        f"{fmt_time(ctx.per_recorded_step(total))} per step: {names}{_no_step(ctx)}",
        "Find why each fell back to the AI CPU (an int64 / double dtype, a dynamic shape, "
        "an unsupported attribute); cast the input or use an AI Core operator.")]


def _deterministic_tasks(k: Any) -> Any:
    """Mask of the tasks with "deterministic" in their name."""
    return text_matches(k["name"], r"(?i)determin")


@rule("operators", order=140, needs=("kernels",))
def deterministic(ctx: Context) -> list[Finding]:
    """Deterministic kernel variants in use (their slow-down is not measurable)."""
    k = in_steps(table(ctx.tasks, "kernels"))  # per step: the steps' own tasks
    if "name" not in k.columns or "dur_us" not in k.columns:
        return []
    det = collect(k, ["dur_us"], where=_deterministic_tasks)
    if det.empty:
        return []
    us = ctx.per_recorded_step(float(det["dur_us"].sum()))
    return [unmeasured(
        "deterministic", "operators", "Deterministic kernels are in use",
        f"{counted(len(det), 'task')} with 'deterministic' in the name, {fmt_time(us)} per "
        f"step{_no_step(ctx)}; "
        f"deterministic variants are typically about {pct(ctx.assume['deterministic'])} "
        "slower (not measurable from this profile)",
        say(ctx.fw, {"mindspore": "Turn deterministic computation off for production "
                                  "runs (deterministic='OFF', HCCL_DETERMINISTIC=false).",
                     "torch_npu": "Turn it off for production runs "
                                  "(torch.use_deterministic_algorithms(False), "
                                  "HCCL_DETERMINISTIC=false).",
                     "pytorch_gpu": "Turn it off for production runs "
                                    "(torch.use_deterministic_algorithms(False), "
                                    "cudnn.deterministic=False)."}))]
