"""What kind of job a profile records, so that the rules give only advice that fits it.

A rule declares in :func:`perfkit.advisor.registry.rule` the workloads it applies to, on
three axes (:data:`AXES`), and the runner skips it on a job of another kind:

- ``phase``: ``"training"`` (the step runs a backward pass) or ``"inference"`` (no
  backward pass: inference or evaluation), read by the rule the Overview uses
  (:meth:`perfkit.advisor.context.Context.training_step`);
- ``arch``: ``"transformer"`` (attention among the operator and kernel names, or a
  softmax beside layer / RMS norms, or a model given, which is always a transformer in
  perfkit) or ``"other"`` (convolutions and no
  attention: a CNN);
- ``precision``: ``"fp32"`` when at least half of the matrix work (GEMMs, convolutions,
  attention: the operators the matrix units run) takes fp32 operands, else ``"reduced"``
  (fp16, bf16, fp8, ...).

An axis the profile cannot tell (no operator shapes, no backward marker) is ``None``, and a
rule restricted on that axis runs: an unknown job gets every rule, as before the axes
existed. :func:`workload_of` is computed once per ``advise`` call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._text_dtype import TEXT
from ..analysis._frames import is_lazy_frame
from ..analysis._util import table, text_matches
from ..analysis.efficiency import peak_key
from ..job.network import CONVOLUTION
from .context import Context

__all__ = ["Workload", "AXES", "PHASES", "ARCHS", "PRECISIONS", "workload_of",
           "matrix_rows", "row_dtype", "MATRIX_KEY", "axis_of",
           "fp32_matrix_us"]

PHASES = ("training", "inference")
ARCHS = ("transformer", "other")
PRECISIONS = ("fp32", "reduced")
#: The axes of a workload and the values each may take.
AXES: dict[str, tuple[str, ...]] = {"phase": PHASES, "arch": ARCHS, "precision": PRECISIONS}

#: Operators the matrix units run, by name (PyTorch ``aten::`` names, Ascend types, kernel
#: names), where the roofline model gives them no ``kind``: cuDNN convolutions of a 2021
#: trace, ``MatMulV2`` of an export without shapes.
MATRIX_KEY = re.compile(r"conv|gemm|matmul|\bmm\b|aten::mm|aten::bmm|addmm|baddbmm|linear|"
                        r"attention|flash|fmha|sdpa", re.IGNORECASE)
_ATTENTION = re.compile(r"(?i)attention|flash|fmha|sdpa|scaled_dot_product")
#: A softmax that is not a classifier's log-softmax, and a transformer's norms: together,
#: attention written as matmul, softmax, matmul (``wild/tl_timesformer_h100``).
_SOFTMAX = r"(?i)(?<!log)(?<!log_)softmax"
_NORM = r"(?i)layer_?norm|rms_?norm"


@dataclass(frozen=True)
class Workload:
    """The kind of job profiled: one value (or ``None``, unknown) per axis of :data:`AXES`,
    and what each was read from (``why``)."""

    phase: str | None = None
    arch: str | None = None
    precision: str | None = None
    why: dict[str, str] = field(default_factory=dict, compare=False)

    def fits(self, axis: str, allowed: tuple[str, ...]) -> bool:
        """Whether a rule allowed on ``allowed`` of ``axis`` applies (an unknown value does)."""
        value = getattr(self, axis)
        return value is None or value in allowed

    def words(self) -> str:
        """``"an inference step of a transformer in reduced precision"``: what is known."""
        phase = {"training": "a training step", "inference": "an inference step"}.get(
            self.phase or "", "a step")
        arch = {"transformer": " of a transformer", "other": " of a model without "
                "attention (a CNN)"}.get(self.arch or "", "")
        prec = {"fp32": " in fp32", "reduced": " in reduced precision"}.get(
            self.precision or "", "")
        return phase + arch + prec


def row_dtype(dtypes: Any) -> str | None:
    """The :attr:`perfkit.Hardware.peak_flops` key of a row's operands: its first input
    dtype that names a number type (``GenericList``, ``Scalar`` and the like skipped;
    ``"GenericList;float;float"`` -> ``"fp32"``, ``"FLOAT;FLOAT"`` -> ``"fp32"``)."""
    if not isinstance(dtypes, str):
        return None
    for part in dtypes.split(";"):
        key = peak_key(part)
        if key is not None and key != "int8":
            return key
    return None


def matrix_rows(eff: pd.DataFrame) -> pd.DataFrame:
    """The rows of an efficiency table (:func:`perfkit.analysis.operator_efficiency`) that
    the matrix units run: kind ``gemm``, ``conv`` or ``attention``, or an unpriced row
    whose operator or kernel name says so (:data:`MATRIX_KEY`); with ``_dtype``
    (:func:`row_dtype`)."""
    if eff.empty:
        return eff.assign(_dtype=pd.Series(dtype="object"))
    kind = eff["kind"].astype(TEXT)
    by_kind = kind.isin(["gemm", "conv", "attention"]).fillna(False).to_numpy(bool)
    names = eff["key"].astype(TEXT).fillna("") + " " + eff["name"].astype(TEXT).fillna("")
    by_name = kind.isna().to_numpy(bool) & names.str.contains(MATRIX_KEY).fillna(
        False).to_numpy(bool)
    rows = eff[by_kind | by_name]
    return rows.assign(_dtype=[row_dtype(d) for d in rows["input_dtypes"]])


def _names(ctx: Context) -> list[pd.Series]:
    """The operator and kernel name columns of the profile (not of a lazy cluster)."""
    out = []
    for name in ("kernels", "ops"):
        t = table(ctx.profile, name)
        if t is None or is_lazy_frame(t):
            continue
        out.extend(t[c] for c in ("name", "type") if c in t.columns and len(t))
    return out


def _arch(ctx: Context) -> tuple[str | None, str]:
    """Transformer where the names show attention (or a model is given), other where they
    show convolutions and no attention; read from the names only (no prices needed)."""
    if ctx.model is not None:
        return "transformer", "a model was given (perfkit's models are transformers)"
    names = _names(ctx)
    if any(bool(text_matches(n, _ATTENTION.pattern + "|attn").any()) for n in names):
        return "transformer", "attention operators among the profiled operators"
    if (any(bool(text_matches(n, _SOFTMAX).any()) for n in names)
            and any(bool(text_matches(n, _NORM).any()) for n in names)):
        return "transformer", "softmax and layer / RMS norm among the profiled operators"
    # a convolution as the job's network reading names one (not fbgemm's fb::convex_sum)
    if any(bool(text_matches(n, CONVOLUTION).any()) for n in names):
        return "other", "convolutions and no attention among the profiled operators"
    return None, ""


def _precision(rows: pd.DataFrame) -> tuple[str | None, str]:
    known = rows[rows["_dtype"].notna().to_numpy(bool)]
    total = float(known["per_step_us"].sum()) if not known.empty else 0.0
    if not total > 0:
        return None, ""
    fp32 = float(known.loc[(known["_dtype"] == "fp32").to_numpy(bool), "per_step_us"].sum())
    share = fp32 / total
    value = "fp32" if share >= 0.5 else "reduced"
    return value, f"fp32 operands in {100 * share:.3g} % of the matrix work's time"


def _efficiency(ctx: Context) -> pd.DataFrame:
    try:
        return ctx.efficiency()
    except Exception:  # noqa: BLE001 - no prices: the axes that need them stay unknown
        return pd.DataFrame()


def axis_of(ctx: Context, axis: str) -> tuple[str | None, str]:
    """One axis of :data:`AXES` for ``ctx``'s profile and what it was read from, computed
    once per ``advise`` call (``phase`` reads no operator prices; the others do)."""
    def compute() -> tuple[str | None, str]:
        if axis == "phase":
            trains, said = ctx.training_step()
            return (None, "") if trains is None else (
                "training" if trains else "inference", said)
        if axis == "arch":
            return _arch(ctx)
        eff = _efficiency(ctx)
        return _precision(matrix_rows(eff)) if not eff.empty else (None, "")
    if axis not in AXES:
        raise ValueError(f"unknown workload axis {axis!r} (one of {tuple(AXES)})")
    return ctx.get(f"workload_{axis}", compute)


def workload_of(ctx: Context) -> Workload:
    """The :class:`Workload` of ``ctx``'s profile (each axis by :func:`axis_of`)."""
    got = {axis: axis_of(ctx, axis) for axis in AXES}
    return Workload(**{a: v for a, (v, _) in got.items()},
                    why={a: w for a, (v, w) in got.items() if v is not None})


def fp32_matrix_us(ctx: Context) -> float:
    """Time of the fp32 matrix work (:func:`matrix_rows`) summed over the priced tasks'
    ranks and steps (``total_us``), µs; 0 when none."""
    eff = ctx.efficiency()
    if eff.empty:
        return 0.0
    rows = matrix_rows(eff)
    sel = (rows["_dtype"] == "fp32").to_numpy(bool)
    return float(np.nansum(rows.loc[sel, "total_us"].to_numpy(float)))
