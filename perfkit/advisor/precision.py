"""The precision rule: fp32 matrix work on a device with a faster reduced-precision path.

Before any kernel is tuned, a job whose GEMMs and convolutions take fp32 operands on a
device whose matrix units run fp16 / bf16 several times faster should move to mixed
precision: that is the largest change available, and the advice on padding for tensor
cores or on fused kernels assumes it (fp32 does not use the V100's tensor cores at all).
"""

from __future__ import annotations

from ..format import ratio_text
from ..specs.hardware_presets import unpublished_peak
from .context import Context
from .finding import Finding, unmeasured
from .operators import measured
from .registry import rule
from .words import fmt_time, pct, say
from .workload import fp32_matrix_us

__all__ = ["precision", "REDUCED", "reduced_peak"]

#: The reduced-precision matrix dtypes a device may offer, the preferred first (bf16 keeps
#: fp32's exponent range, so no loss scaling is needed).
REDUCED = ("bf16", "fp16")

_ADVICE = {
    "mindspore": "Train in mixed precision first: amp_level O2 (or MindFormers' compute_dtype "
                 "bfloat16 / float16 with layernorm and softmax in float32), loss scaling "
                 "for fp16; then revisit the operator findings.",
    "torch_npu": "Train in mixed precision first: torch.autocast('npu', dtype=torch.bfloat16) "
                 "(or torch_npu's amp with a GradScaler for fp16); then revisit the operator "
                 "findings.",
    "pytorch_gpu": "Use automatic mixed precision first: torch.autocast('cuda', "
                   "dtype=torch.float16) with torch.cuda.amp.GradScaler (bf16 where the GPU "
                   "has it, no scaler needed); then revisit the operator findings.",
}


def reduced_peak(hardware: object) -> str | None:
    """The first dtype of :data:`REDUCED` that ``hardware`` lists a peak for (None: none)."""
    peaks = getattr(hardware, "peak_flops", {})
    return next((d for d in REDUCED if d in peaks), None)


@rule("operators", order=105, needs=("kernels|ops",), inputs=("hardware",),
      precisions=("fp32",), ahead=("efficiency",))
def precision(ctx: Context) -> list[Finding]:
    """fp32 matrix work where the device has a faster reduced-precision matrix path.

    Time at stake, per step::

        saving = t_fp32 · (1 − P_fp32 / P_reduced)

    where ``t_fp32`` is the time per step of the matrix operators (GEMMs, convolutions,
    attention: :func:`perfkit.advisor.workload.matrix_rows`) whose operands are fp32, and
    ``P_fp32``, ``P_reduced`` are the device's dense peaks (:attr:`perfkit.Hardware.
    peak_flops`; the presets' sources are the vendors' datasheets, e.g. the V100 SXM2's
    15.7 fp32 and 125 fp16 tensor TFLOP/s, NVIDIA Tesla V100 datasheet). It assumes the
    operators reach the same share of the faster peak as they reach of the fp32 one: an
    upper bound where they are memory-bound (those gain at most the 2x of halved bytes).
    Where the device lists no fp32 peak (Ascend NPUs: Huawei publishes none) the finding
    says how much fp32 matrix work there is without a figure at stake.
    """
    hw = ctx.hardware
    low = reduced_peak(hw)
    t32 = ctx.per_recorded_step(fp32_matrix_us(ctx))
    if low is None or not t32 > 0:
        return []
    rec = say(ctx.fw, {**_ADVICE, "any": _ADVICE["pytorch_gpu"]})
    seen = (f"{fmt_time(t32)} per step of matrix work (GEMMs, convolutions) takes fp32 "
            f"operands on {hw.name}")
    if "fp32" not in hw.peak_flops:
        return [unmeasured(
            "fp32_matrix_work", "operators",
            "Matrix work runs in fp32 where the device's matrix unit is built for "
            f"{low}", seen + f"; no fp32 peak is published for {hw.name}"
            + (f" ({why.split(':')[0]})" if (why := unpublished_peak(hw.name, "fp32")) else "")
            + ", so the time at stake cannot be priced", rec,
            details=f"{low} peak {hw.peak(low) / 1e12:.4g} TFLOP/s; no fp32 peak")]
    ratio = hw.peak("fp32") / hw.peak(low)
    if ratio >= 1:
        return []
    saving = t32 * (1 - ratio)
    return [measured(
        ctx, "fp32_matrix_work", "operators", saving,
        f"Matrix work runs in fp32 on a device {ratio_text(1 / ratio)} as fast in {low}",
        seen + f"; its {low} peak is {ratio_text(1 / ratio)} the fp32 one "
        f"({hw.peak(low) / 1e12:.4g} vs {hw.peak('fp32') / 1e12:.4g} TFLOP/s), so at the "
        f"same share of the peak it would take {pct(ratio)} of the time",
        rec, details=f"saving = t_fp32 x (1 - P_fp32 / P_{low}); an upper bound for "
                     "memory-bound operators")]
