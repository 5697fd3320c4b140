"""What the operators' input shapes say about the model that ran.

With ``record_shapes=True`` (torch_npu, Kineto) or always (Ascend ``kernel_details.csv``
from Level0 on, MindSpore's CPU ``cpu_framework`` file) every operator's input shapes are
in the profile. A transformer leaves a recognisable pattern in them:

* the **attention** kernels (``FlashAttentionScore`` in BSH layout
  ``b,s,a·d;b,s,g·d;b,s,g·d``, ``scaled_dot_product_attention`` and batched ``q·kᵀ``
  MatMuls in ``(b, a, s, d)`` layout) give the micro-batch size ``b``, the sequence
  length ``s`` and, with the rotary kernels' ``(b, s, heads, d)`` inputs, the heads
  ``a`` and key/value heads ``g`` held by one rank and the head size ``d``;
* the **projection GEMMs** whose rows are the micro-batch's ``n = b·s`` tokens map one
  width to another: the hidden size ``h`` is on one side of every one of them, the query
  / key-value / fused QKV widths, the FFN width ``f`` and the logits width ``V`` (once
  per micro-batch, before the loss) on the other;
* the **number of layers** is how often the layer's pattern repeats: one backward
  attention kernel per layer and micro-batch (one forward kernel more for each layer
  that is recomputed in full), so ``layers per stage = backward attention kernels per
  step / micro-batches``;
* the **micro-batches per step** are the embedding lookups per step on the first stage;
* a **gated MLP** has two up-projections ``h → f`` before its down-projection
  ``f → h`` in each forward pass, a plain MLP one.

Widths read on one rank are the tensor-parallel shards: the caller multiplies them by
``tp`` (Megatron / MindSpore split the heads, the FFN and the vocabulary over ``tp``).
:func:`read_model` does the reading and returns every value with the sentence that says
where it came from, or the reason it could not be read. It never looks at anything but the
canonical tables.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..format import counted, listed, plural
from ._frames import collect, table_columns
from ._util import table

__all__ = ["ShapeReading", "shape_records", "parse_shapes", "read_model", "DTYPE_NAMES",
           "ATTENTION_PATTERNS"]

#: Input data types as the profilers write them -> the calculators' dtype names.
DTYPE_NAMES = {
    "dt_bf16": "bf16", "bf16": "bf16", "bfloat16": "bf16", "c10::bfloat16": "bf16",
    "dt_float16": "fp16", "float16": "fp16", "fp16": "fp16", "c10::half": "fp16",
    "half": "fp16", "float": "fp32", "dt_float": "fp32", "float32": "fp32", "fp32": "fp32",
    "dt_float32": "fp32", "double": "fp64", "float64": "fp64",
    "float8_e4m3fn": "fp8", "c10::float8_e4m3fn": "fp8", "dt_float8_e4m3fn": "fp8",
}

_GEMM = re.compile(r"(?i)^(?:(?:batch)?mat_?mul\w*|aten::(?:mm|addmm|bmm|baddbmm|linear))$"
                   r"|aclnn(?:Mm|Addmm|Matmul|BatchMatMul|Bmm)_")
#: Names of attention operators: forward and backward, per profiler.
ATTENTION_PATTERNS = {
    "fwd": r"(?i)^(?:FlashAttentionScore|PromptFlashAttention\w*|FusedInferAttentionScore\w*"
           r"|aten::scaled_dot_product_attention|npu::npu_fusion_attention"
           # what a GPU kernel's launching operator is called (q, k, v as b, heads, s, d)
           r"|aten::_scaled_dot_product_(?:flash|efficient|cudnn)_attention"
           r"|aten::_cudnn_attention_forward"
           # the kernels' own launchers, q, k, v as (b, s, heads, d): _BSND
           r"|aten::_(?:flash|efficient)_attention_forward)$",
    "bwd": r"(?i)^(?:FlashAttentionScoreGrad|npu::npu_fusion_attention_grad"
           r"|aten::_scaled_dot_product_\w+_backward|aten::_(?:flash|efficient|cudnn)"
           r"_attention_backward)$",
}
#: Attention operators whose q, k, v are (batch, sequence, heads, head size), where the
#: others of :data:`ATTENTION_PATTERNS` take (batch, heads, sequence, head size): PyTorch's
#: ``_flash_attention_forward`` / ``_efficient_attention_forward`` (and their backward),
#: which ``_scaled_dot_product_*_attention`` calls after transposing.
_BSND = re.compile(r"(?i)^aten::_(?:flash|efficient)_attention_(?:forward|backward)$")
_EMBED = re.compile(r"(?i)^(?:GatherV2|Gather|aten::embedding|EmbeddingLookup)$")
_LOSS = re.compile(r"(?i)^(?:SoftmaxCrossEntropyWithLogits|SparseSoftmaxCrossEntropyWithLogits"
                   r"|aten::cross_entropy_loss|aten::_log_softmax|CrossEntropyLoss)$")
_ROTARY = re.compile(r"(?i)rotary|RotaryMul|rope")
_LAYERNORM = re.compile(r"(?i)layer_?norm")
_RMSNORM = re.compile(r"(?i)rms_?norm|^aten::rsqrt$|^Rsqrt$")
_GATED_ACT = re.compile(r"(?i)^(?:Swish|Silu|SiLU|SwiGlu|aten::silu|aten::silu_)$")
_PLAIN_ACT = re.compile(r"(?i)^(?:Gelu\w*|FastGelu\w*|aten::gelu|Relu|aten::relu)$")
_MOE = re.compile(r"(?i)GroupedMatmul|MoeGating|MoeInitRouting|MoeFinalizeRouting|moe_")
_GRAD = re.compile(r"(?i)grad|backward|^Gradients/")
_BATCH_MATMUL = re.compile(r"(?i)^batch_?mat_?mul\w*$")


def _label(frame: pd.DataFrame) -> pd.Series:
    """The operator kind of each row: the operator that launched it (``op_name``, GPU
    kernels: their names, ``nvjet_sm90_...``, do not say what they compute), else its
    ``type`` when the profile has one, else the name without a MindSpore scope
    (``Default/MatMul-op3`` -> ``MatMul``)."""
    name = frame["name"].astype("string").fillna("")
    label = name.str.rsplit("/", n=1).str[-1].str.replace(r"-op\d+$", "", regex=True)
    if "type" in frame.columns:
        typ = frame["type"].astype("string")
        label = typ.where(typ.notna() & (typ != ""), label)
    if "op_name" in frame.columns:
        op = frame["op_name"].astype("string")
        label = op.where(op.notna() & (op != ""), label)
    return label.fillna("")


def parse_shapes(text: Any) -> list[tuple[int, ...]]:
    """Input shapes text (``"2,128,1024;1024,512;"``, quotes allowed) as tuples; an
    empty entry (a scalar, ``NoShape``) is ``()``."""
    if text is None or (isinstance(text, float) and np.isnan(text)) or text is pd.NA:
        return []
    out = []
    for part in str(text).strip().strip('"').split(";"):
        dims = [d.strip() for d in part.strip().strip('"').split(",") if d.strip()]
        try:
            out.append(tuple(int(d) for d in dims))
        except ValueError:
            out.append(())
    return out


def shape_records(profile: Any, ranks: list[int] | None = None,
                  tables: tuple[str, ...] | None = None) -> tuple[pd.DataFrame, str]:
    """The operators whose shapes matter to the model, from ``kernels`` or ``ops``.

    Parameters
    ----------
    profile : Profile or Cluster
    ranks : list of int, optional
        Only these ranks (a big cluster needs one rank per pipeline stage).
    tables : tuple of str, optional
        The tables to try, in order (default ``("kernels", "ops")``: the first with shapes).

    Returns
    -------
    (DataFrame, str)
        Rows ``rank``, ``step``, ``start_us``, ``name``, ``label`` (type, or the name
        without scope), ``input_shapes``, ``input_dtypes``, ``backward`` (the name says it
        is a gradient), sorted by rank and start; and the table they came from
        (``"kernels"`` or ``"ops"``, ``""`` when neither has shapes).
    """
    for name in (tables or ("kernels", "ops")):
        rows = _records_of(profile, name, ranks)
        if rows is not None:
            return rows, name
    return pd.DataFrame(columns=["rank", "step", "start_us", "name", "label",
                                 "input_shapes", "input_dtypes", "backward"]), ""


def _records_of(profile: Any, name: str, ranks: list[int] | None) -> pd.DataFrame | None:
    """:func:`shape_records` of one table (None when it has no shapes)."""
    present = table_columns(profile, name)
    if "input_shapes" not in present:
        return None
    frame = table(profile, name)
    cols = [c for c in ("rank", "step", "start_us", "name", "type", "op_name",
                        "input_shapes", "input_dtypes", "op_id", "thread")
            if c in present]

    def wanted(f: Any, ranks: list[int] | None = ranks) -> Any:
        ok = ~f["input_shapes"].isna()
        if ranks is not None:
            ok &= f["rank"].isin(ranks)
        return ok

    rows = collect(frame, cols, where=wanted)
    if rows.empty:
        return None
    rows = rows.copy()
    rows["label"] = _label(rows).to_numpy()
    labels = rows["label"].astype(str)
    keep = rows["name"].astype(str).str.contains(_GEMM).to_numpy(bool).copy()
    for rx in (_GEMM, _EMBED, _LOSS, _ROTARY, _LAYERNORM, _RMSNORM, _GATED_ACT,
               _PLAIN_ACT, _MOE, *ATTENTION_PATTERNS.values(), _BATCH_MATMUL):
        keep |= labels.str.contains(rx).to_numpy(bool)
    rows = rows[keep]
    if "input_dtypes" not in rows.columns:
        rows["input_dtypes"] = pd.Series(pd.NA, index=rows.index, dtype="string")
    rows["backward"] = rows["name"].astype("string").str.contains(_GRAD, regex=True)\
        .fillna(False).to_numpy(bool)
    rows = rows.sort_values(["rank", "start_us"], kind="mergesort").reset_index(drop=True)
    if "op_id" in rows.columns:
        # GPU kernels: one row per launching operator (a cuDNN attention or a split-K
        # product launches several kernels, all with the operator's shapes)
        call = rows[["rank", "op_id"]]
        rows = rows[call["op_id"].isna().to_numpy(bool)
                    | ~call.duplicated().to_numpy(bool)].reset_index(drop=True)
    _mark_after_gradients(rows)
    _mark_autograd_launches(rows, profile, name)
    return rows.drop(columns=[c for c in ("op_id", "thread") if c in rows.columns])


def _mark_after_gradients(rows: pd.DataFrame) -> None:
    """MindSpore graphs: a kept operator at or after the step's first ``Gradients/``
    matrix product belongs to the backward pass. Expanded operators
    (``Expand/_MatMulExt/BatchMatMul-op3``) carry no scope of their own, but a graph runs
    its forward pass first. (Small ``Gradients/`` element-wise operators may be scheduled
    early, so only the products mark the start of the backward pass.)"""
    names = rows["name"].astype("string").fillna("")
    grads = rows[names.str.startswith("Gradients/").to_numpy(bool)
                 & rows["label"].astype(str).str.contains(_GEMM).to_numpy(bool)]
    if grads.empty:
        return
    first = grads.groupby(["rank", "step"])["start_us"].min()
    key = pd.MultiIndex.from_arrays([rows["rank"], rows["step"]])
    start = first.reindex(key).to_numpy(np.float64)
    later = ~np.isnan(start) & (rows["start_us"].to_numpy(np.float64) >= start)
    rows["backward"] = rows["backward"].to_numpy(bool) | later


_AUTOGRAD = "autograd::engine::evaluate_function"


def _mark_autograd_launches(rows: pd.DataFrame, profile: Any, source: str) -> None:
    """PyTorch: an operator run by the autograd engine belongs to the backward pass.

    The engine wraps each backward function in an ``autograd::engine::evaluate_function:
    MmBackward0`` host event, and the products it runs inside are plain ``aten::mm``: the
    names alone cannot tell them from the forward ones. A row is marked when its host
    operator (the operator itself for host rows, the launching operator ``op_id`` for GPU
    kernels) starts inside such an event on its thread.
    """
    if not {"name", "thread", "start_us", "dur_us"} <= set(table_columns(profile, "ops")):
        return
    ops = table(profile, "ops")
    engine = collect(ops, ["rank", "thread", "start_us", "dur_us"], where=lambda f: f[
        "name"].astype("string").str.startswith(_AUTOGRAD).fillna(False))
    if engine.empty:
        return
    if source == "kernels" and "op_id" in rows.columns and \
            "external_id" in table_columns(profile, "ops"):
        ids = rows["op_id"].dropna().unique().tolist()
        launch = collect(ops, ["rank", "external_id", "thread", "start_us"],
                         where=lambda f: f["external_id"].isin(ids))
        launch = launch.dropna().drop_duplicates(["rank", "external_id"])
        at = rows[["rank", "op_id"]].merge(
            launch, how="left", left_on=["rank", "op_id"], right_on=["rank", "external_id"])
    elif source == "ops" and "thread" in rows.columns:
        at = rows[["rank", "thread", "start_us"]]
    else:
        return
    inside = np.zeros(len(rows), dtype=bool)
    point_rank = at["rank"].to_numpy(np.float64, na_value=np.nan)
    point_thread = at["thread"].to_numpy(np.float64, na_value=np.nan)
    point = at["start_us"].to_numpy(np.float64, na_value=np.nan)
    for (rank, thread), ev in engine.groupby(["rank", "thread"]):
        ev = ev.sort_values("start_us", kind="mergesort")
        begin = ev["start_us"].to_numpy(np.float64)
        reach = np.maximum.accumulate((ev["start_us"] + ev["dur_us"]).to_numpy(np.float64))
        mine = np.flatnonzero((point_rank == rank) & (point_thread == thread))
        last = np.searchsorted(begin, point[mine], side="right") - 1  # last event begun
        inside[mine] = (last >= 0) & (point[mine] < reach[np.maximum(last, 0)])
    rows["backward"] = rows["backward"].to_numpy(bool) | inside


@dataclass
class ShapeReading:
    """What the shapes say: each value with its evidence, or the reason it is missing.

    Attributes
    ----------
    values : dict
        Field name -> value (local widths are already multiplied by ``tp``).
    details : dict
        Field name -> the sentence saying what was read, or why nothing could be.
    source : str
        The table the shapes came from.
    """

    values: dict[str, Any] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def put(self, name: str, value: Any, detail: str) -> None:
        """Record ``value`` (None: unknown) and its evidence or reason."""
        self.values[name] = value
        self.details[name] = detail

    def get(self, name: str) -> Any:
        """The value of ``name`` (None when unknown or never read)."""
        return self.values.get(name)


# ----------------------------------------------------------------------------- records

@dataclass
class _Gemm:
    rank: int
    step: Any
    start: float
    cands: list[tuple[int, int, int]]
    bias: bool
    linear: bool
    batched: tuple[int, ...]
    backward: bool
    m: int = 0
    k: int = 0
    n: int = 0

    def over(self, tokens: int) -> _Gemm | None:
        """This product as a projection of ``tokens`` rows (None when it is not one)."""
        for m, k, n in self.cands:
            if m == tokens and (not self.batched or self.linear):
                return _Gemm(self.rank, self.step, self.start, self.cands, self.bias,
                             self.linear, self.batched, self.backward, m, k, n)
        return None


def _gemm_dims(shapes: list[tuple[int, ...]], label: str
               ) -> tuple[list[tuple[int, int, int]], bool, tuple[int, ...]]:
    """Candidate ``(M, K, N)`` of a matrix product, whether it has a bias, batch dims.

    2-D products may have either operand transposed; every orientation whose inner
    dimensions agree is a candidate. ``aten::linear`` is ``x (.., in) · Wᵀ`` with
    ``W (out, in)``; ``aten::addmm`` puts the bias first.
    """
    low = label.lower()
    ins = [s for s in shapes if s]
    if low == "aten::addmm" and len(ins) >= 3:
        bias, a, b = True, ins[1], ins[2]
    elif len(ins) < 2:
        return [], False, ()
    else:
        a, b = ins[0], ins[1]
        bias = len(ins) >= 3 and len(ins[2]) == 1
    if low == "aten::linear":
        if len(b) != 2 or a[-1] != b[1]:
            return [], False, ()
        rows = int(np.prod(a[:-1]))
        has_bias = len(shapes) >= 3 and len(shapes[2]) == 1
        return [(rows, b[1], b[0])], has_bias, tuple(a[:-1])
    if len(a) > 2 or len(b) > 2:
        if len(a) != len(b) or a[:-2] != b[:-2]:
            return [], False, ()
        batch = tuple(a[:-2])
        a2, b2 = a[-2:], b[-2:]
    else:
        batch, a2, b2 = (), a, b
    if len(a2) != 2 or len(b2) != 2:
        return [], False, ()
    cands = []
    for ma, ka in ((a2[0], a2[1]), (a2[1], a2[0])):
        for kb, nb in ((b2[0], b2[1]), (b2[1], b2[0])):
            if ka == kb and (ma, ka, nb) not in cands:
                cands.append((ma, ka, nb))
    return cands, bias, batch


_Shapes = list[list[tuple[int, ...]]]
"""Parsed input shapes of each record, in record order."""


class _Rows:
    """Plain per-row access to the columns the readers loop over (``iloc`` is slow)."""

    def __init__(self, recs: pd.DataFrame) -> None:
        self.rank = recs["rank"].astype("Int64").fillna(-1).to_numpy(np.int64)
        self.step = recs["step"].to_numpy(object)
        self.start = recs["start_us"].to_numpy(np.float64)
        self.backward = recs["backward"].to_numpy(bool)

    def __call__(self, i: int) -> dict[str, Any]:
        return {"rank": int(self.rank[i]), "step": self.step[i], "start_us": self.start[i],
                "backward": bool(self.backward[i])}


def _one_step(recs: pd.DataFrame) -> pd.DataFrame:
    """The records of one step per rank (every step of a job runs the same operators):
    the last of the steps with the most records. Profiles without step numbers keep all."""
    if recs.empty or not recs["step"].notna().any():
        return recs
    counts = recs.dropna(subset=["step"]).groupby(["rank", "step"]).size()
    keep = []
    for rank, part in counts.groupby(level=0):
        top = part[part == part.max()]
        keep.append((rank, top.index[-1][1]))
    pick = pd.MultiIndex.from_tuples(keep, names=["rank", "step"])
    key = pd.MultiIndex.from_arrays([recs["rank"], recs["step"]])
    return recs[key.isin(pick)].reset_index(drop=True)


def _mode(values: list[Any]) -> Any:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return Counter(values).most_common(1)[0][0]


def _per_step(rows: pd.DataFrame) -> pd.Series:
    """Rows per (rank, step), steps without a number counted as one step."""
    if rows.empty:
        return pd.Series(dtype="float64")
    if rows["step"].notna().any():
        rows = rows[rows["step"].notna()]
    step = rows["step"].astype("Float64").fillna(-1.0)
    return rows.groupby([rows["rank"].to_numpy(), step.to_numpy()]).size()


def _typical(counts: pd.Series, ranks: list[int] | None = None) -> dict[int, int]:
    """Most common per-step count of each rank."""
    out = {}
    if counts.empty:
        return out
    for rank, part in counts.groupby(level=0):
        if ranks is not None and rank not in ranks:
            continue
        out[int(rank)] = int(part.mode().iloc[0])
    return out


def _where(source: str, fmt: str) -> str:
    """The file the shapes were read from, for the evidence sentences."""
    if fmt == "kineto":  # GPU kernels carry the Input Dims of the operator that launched them
        return "the trace's cpu_op Input Dims"
    if source == "kernels":
        return {"ascend_db": "the COMPUTE_TASK_INFO table of the .db export"}.get(
            fmt, "kernel_details.csv (Input Shapes)")
    return "FRAMEWORK/cpu_framework_*.txt (operator input shapes)"


# ----------------------------------------------------------------------------- reading

def read_model(profile: Any, tp: int = 1, stage_of: dict[int, int] | None = None,
               pp: int = 1) -> ShapeReading:
    """Read the model shape, micro-batching and recompute from the operator shapes.

    Parameters
    ----------
    profile : Profile or Cluster
    tp : int
        Tensor-parallel size: local widths (heads, FFN, vocabulary) are multiplied by it.
    stage_of : dict, optional
        Pipeline stage of each rank (:func:`~perfkit.analysis.layout.stage_of_ranks`);
        without it every rank counts as stage 0 of a one-stage pipeline.
    pp : int
        Pipeline stages (to know whether every stage was loaded).

    Returns
    -------
    ShapeReading
        Values (None when unknown, with the reason in ``details``) for ``micro_batch_size``,
        ``seq_length``, ``hidden_size``, ``num_attention_heads``, ``num_kv_heads``,
        ``head_dim``, ``ffn_hidden_size``, ``vocab_size``, ``mlp``, ``num_layers``,
        ``layers_per_stage`` (tuple), ``num_micro_batches``, ``recompute``,
        ``recompute_layers``, ``norm``, ``position_embedding``, ``bias``, ``dtype``,
        ``moe``.
    """
    stage_of = dict(stage_of or {})
    wanted_ranks = None
    loaded = list(getattr(profile, "ranks", None) or [profile.meta.rank])
    if stage_of and len(loaded) > 2 * pp:
        # one rank per stage is enough (and keeps a big cluster cheap)
        pick: dict[int, int] = {}
        for r in sorted(loaded):
            st = stage_of.get(r)
            if st is not None and st not in pick:
                pick[st] = r
        wanted_ranks = sorted(pick.values()) or None
    recs, source = shape_records(profile, wanted_ranks)
    out = _read(profile, recs, source, tp, stage_of, pp)
    if source == "kernels" and any(out.get(f) is None for f in _SHAPE):
        # a GPU kernel has shapes only when the trace kept its launch: kernels launched
        # before the trace began (an embedding, the first attention calls) leave gaps that
        # the operators, which all carry their shapes, may fill
        ops, _ = shape_records(profile, wanted_ranks, tables=("ops",))
        if not ops.empty:
            _fill(out, _read(profile, ops, "ops", tp, stage_of, pp))
    return out


#: The model's shape: when the kernels leave one of these unknown, the operators are read
#: too (not for fields that are often unknown on any profile, such as recompute_layers or
#: position_embedding, which would read every GPU profile twice).
_SHAPE = ("micro_batch_size", "seq_length", "hidden_size", "num_attention_heads",
          "ffn_hidden_size", "vocab_size", "num_layers", "num_micro_batches")
#: Fields a reading of the operators may fill when the kernels left them unknown.
_FILLABLE = ("micro_batch_size", "seq_length", "hidden_size", "num_attention_heads",
             "num_kv_heads", "head_dim", "ffn_hidden_size", "vocab_size", "mlp", "num_layers",
             "layers_per_stage", "num_micro_batches", "recompute", "recompute_layers", "norm",
             "position_embedding", "bias")
#: Fields both readings must agree on before one fills the other.
_AGREE = ("micro_batch_size", "seq_length", "hidden_size", "num_attention_heads",
          "head_dim", "ffn_hidden_size")


def _fill(out: ShapeReading, other: ShapeReading) -> None:
    """Fill ``out``'s unknown fields from ``other`` when no field both know disagrees."""
    for name in _AGREE:
        mine, theirs = out.get(name), other.get(name)
        if mine is not None and theirs is not None and mine != theirs:
            return
    for name in _FILLABLE:
        if out.get(name) is not None or name not in other.details:
            continue
        if other.get(name) is not None:
            out.put(name, other.get(name), other.details[name] + " (the kernels' shapes "
                    "left it unknown; read from the host operators)")
        else:  # unknown both ways: the fuller reading's reason
            out.put(name, None, other.details[name])


def _read(profile: Any, recs: pd.DataFrame, source: str, tp: int,
          stage_of: dict[int, int], pp: int) -> ShapeReading:
    """:func:`read_model` on the shape records of one table."""
    stage_of = dict(stage_of)
    recs = _one_step(recs)
    out = ShapeReading(source=source)
    fmt = str(profile.meta.source_format)
    where = _where(source, fmt)
    if recs.empty:
        why = ("no operator input shapes in this profile (record_shapes=False, or a "
               "profiler level / export without shapes)")
        for name in _FIELDS:
            out.put(name, None, why)
        return out
    ranks = sorted(int(r) for r in recs["rank"].dropna().unique())
    for r in ranks:
        stage_of.setdefault(r, 0)
    label = recs["label"].astype(str)
    texts = recs["input_shapes"].astype("string").fillna("")
    parsed = {t: parse_shapes(t) for t in texts.unique()}
    shapes = [parsed[t] for t in texts]

    _read_dtype(out, recs, label, where)
    moe = label.str.contains(_MOE).any()
    out.put("moe", bool(moe), f"{where}: " + ("MoE routing / grouped-matmul operators "
                                                 "seen" if moe else "no MoE routing operator"))
    att = _attention(recs, label, shapes)
    gemms = _gemms(recs, label, shapes)
    emb = _embeddings(recs, label, shapes)
    _read_batch(out, att, gemms, emb, where)
    n_tok = None
    if out.get("micro_batch_size") and out.get("seq_length"):
        n_tok = out.get("micro_batch_size") * out.get("seq_length")
    act = [a for a in (g.over(n_tok) for g in gemms) if a is not None] if n_tok else []
    _read_hidden(out, act, emb, where)
    _read_heads(out, recs, label, shapes, att, act, tp, where)
    _read_widths(out, recs, label, shapes, act, emb, tp, where)
    _read_counts(out, recs, label, att, emb, stage_of, pp, ranks, where)
    _read_mlp(out, recs, label, att, act, where)
    _read_norm_position(out, recs, label, emb, where)
    _read_bias(out, act, where)
    return out


_FIELDS = ("micro_batch_size", "seq_length", "hidden_size", "num_attention_heads",
           "num_kv_heads", "head_dim", "ffn_hidden_size", "vocab_size", "mlp", "num_layers",
           "layers_per_stage", "num_micro_batches", "recompute", "recompute_layers", "norm",
           "position_embedding", "bias", "dtype", "moe")


def _read_dtype(out: ShapeReading, recs: pd.DataFrame, label: pd.Series, where: str) -> None:
    gemm = recs[label.str.contains(_GEMM).to_numpy(bool)]
    types = gemm["input_dtypes"].dropna().astype(str)
    names = [DTYPE_NAMES.get(t.split(";")[0].strip().lower()) for t in types]
    names = [n for n in names if n]
    if not names:
        out.put("dtype", None, f"{where}: the matrix multiplications carry no data type "
                               "(MindSpore's CPU profile records none)" if len(gemm)
                else "no matrix multiplication with shapes in the profile")
        return
    counts = Counter(names)
    name, k = counts.most_common(1)[0]
    out.put("dtype", name, f"{where}: {k} of {len(names)} matrix multiplications take "
                           f"{name} inputs ({dict(counts)})")


@dataclass
class _Attn:
    rank: int
    step: Any
    start: float
    backward: bool
    b: int | None
    s: int | None
    heads: int | None
    kv_heads: int | None
    d: int | None
    q_width: int | None
    kv_width: int | None
    what: str


def _attention(recs: pd.DataFrame, label: pd.Series, shapes: _Shapes) -> list[_Attn]:
    """Attention kernels (forward and backward) with the sizes their shapes give."""
    rows = _Rows(recs)
    lab = label.tolist()
    out: list[_Attn] = []
    fwd = label.str.contains(re.compile(ATTENTION_PATTERNS["fwd"])).to_numpy(bool).copy()
    bwd = label.str.contains(re.compile(ATTENTION_PATTERNS["bwd"])).to_numpy(bool).copy()
    # Kineto records nested attention ops; count only the outermost name of each kind
    for mask in (fwd, bwd):
        names = label[mask]
        if names.nunique() > 1:
            first = names.value_counts().index
            top = [n for n in first if "scaled_dot_product_attention" in n.lower()
                   or "FlashAttentionScore" in n]
            keep = top[0] if top else first[-1]
            mask &= (label == keep).to_numpy(bool)
    for i in np.nonzero(fwd | bwd)[0]:
        sh = [s for s in shapes[i] if s]
        if len(sh) < 2:
            continue
        q, k = sh[0], sh[1]
        row = rows(i)
        common = dict(rank=int(row["rank"]), step=row["step"], start=float(row["start_us"]),
                      backward=bool(bwd[i]), what=str(lab[i]))
        if len(q) == 4 and len(k) == 4 and _BSND.match(str(lab[i])):  # BSND
            if q[0] == k[0] and q[3] == k[3]:
                out.append(_Attn(b=q[0], s=q[1], heads=q[2], kv_heads=k[2], d=q[3],
                                 q_width=q[2] * q[3], kv_width=k[2] * k[3], **common))
        elif len(q) == 3 and len(k) == 3 and q[:2] == k[:2]:  # BSH
            out.append(_Attn(b=q[0], s=q[1], heads=None, kv_heads=None, d=None,
                             q_width=q[2], kv_width=k[2], **common))
        elif len(q) == 4 and len(k) == 4 and q[0] == k[0] and q[3] == k[3]:  # BNSD
            out.append(_Attn(b=q[0], s=q[2], heads=q[1], kv_heads=k[1], d=q[3],
                             q_width=q[1] * q[3], kv_width=k[1] * k[3], **common))
    # unfused attention (MindSpore graphs): the batched q·kᵀ product (b, a, s, d)x(b, a, d, s)
    bmm = label.str.contains(_BATCH_MATMUL).to_numpy(bool) & ~(fwd | bwd)
    for i in np.nonzero(bmm)[0]:
        sh = [s for s in shapes[i] if s]
        if len(sh) < 2 or len(sh[0]) != 4 or len(sh[1]) != 4:
            continue
        q, k = sh[0], sh[1]
        if q[:2] == k[:2] and q[3] == k[2] and q[2] == k[3] and q[2] != q[3]:
            row = rows(i)
            out.append(_Attn(rank=int(row["rank"]), step=row["step"],
                             start=float(row["start_us"]), backward=bool(row["backward"]),
                             b=q[0], s=q[2], heads=q[1], kv_heads=None, d=q[3],
                             q_width=q[1] * q[3], kv_width=None,
                             what="batched q·kᵀ MatMul " + ("(backward)" if row["backward"]
                                                            else "(forward)")))
    return out


def _gemms(recs: pd.DataFrame, label: pd.Series, shapes: _Shapes) -> list[_Gemm]:
    """Matrix products with one orientation each (the activation one when it is clear)."""
    rows = _Rows(recs)
    lab = label.tolist()
    mask = label.str.contains(_GEMM).to_numpy(bool) | recs["name"].astype(str)\
        .str.contains(_GEMM.pattern, regex=True).to_numpy(bool)
    linear = label.str.lower().eq("aten::linear").to_numpy(bool)
    if (mask & linear).any():  # forward GEMMs with explicit (b, s, in) -> out
        mask &= linear
    out = []
    for i in np.nonzero(mask)[0]:
        cands, bias, batch = _gemm_dims(shapes[i], lab[i])
        if not cands:
            continue
        row = rows(i)
        out.append(_Gemm(int(row["rank"]), row["step"], float(row["start_us"]), cands, bias,
                         bool(linear[i]), batch, bool(row["backward"])))
    return out


def _embeddings(recs: pd.DataFrame, label: pd.Series, shapes: _Shapes) -> list[dict]:
    """Embedding lookups: table ``(V, h)`` when the input is there, indices ``(b, s)``."""
    rows = _Rows(recs)
    out = []
    mask = label.str.contains(_EMBED).to_numpy(bool) & ~recs["backward"].to_numpy(bool)
    for i in np.nonzero(mask)[0]:
        sh = shapes[i]
        row = rows(i)
        e = {"rank": int(row["rank"]), "step": row["step"], "table": None, "bs": None,
             "tokens_h": None}
        ins = [s for s in sh if s]
        if len(ins) >= 2 and len(ins[0]) == 2:
            e["table"] = ins[0]
            if len(ins[1]) == 2:
                e["bs"] = ins[1]
        elif len(ins) == 1 and len(ins[0]) == 2:  # torch_npu GatherV2 as the simulator
            e["tokens_h"] = ins[0]                  # writes it: (tokens, h)
        out.append(e)
    return out


def _read_batch(out: ShapeReading, att: list[_Attn], gemms: list[_Gemm], emb: list[dict],
                where: str) -> None:
    fwd = [a for a in att if not a.backward and a.b and a.s]
    if fwd:
        b, s = _mode([(a.b, a.s) for a in fwd])
        ex = next(a for a in fwd if (a.b, a.s) == (b, s))
        text = (f"{where}: {ex.what} inputs give batch {b}, sequence {s} "
                f"({counted(len(fwd), 'kernel')})")
        out.put("micro_batch_size", b, text)
        out.put("seq_length", s, text)
        return
    why = ("no attention kernel (FlashAttentionScore, scaled_dot_product_attention, batched "
           "q·kᵀ MatMul) with shapes: the batch and sequence cannot be read (not a "
           "transformer, or an attention the reader does not know)")
    out.put("micro_batch_size", None, why)
    out.put("seq_length", None, why)


def _read_hidden(out: ShapeReading, act: list[_Gemm], emb: list[dict], where: str) -> None:
    tables = [tuple(e["table"]) for e in emb if e["table"]]
    if tables:
        v, h = _mode(tables)
        out.put("hidden_size", h, f"{where}: embedding table ({v}, {h})")
        out.values["_embedding_vocab"] = v
        return
    toks = [tuple(e["tokens_h"]) for e in emb if e["tokens_h"]]
    if toks:
        h = _mode([t[1] for t in toks])
        out.put("hidden_size", h, f"{where}: embedding lookup output (tokens, {h})")
        return
    if not act:
        out.put("hidden_size", None, "no projection GEMM over the micro-batch's tokens")
        return
    sides = Counter()
    for g in act:
        sides.update({g.k, g.n})  # a square projection (h → h) counts once
    h, k = sides.most_common(1)[0]
    out.put("hidden_size", h, f"{where}: the width on one side of {k} of the {len(act)} "
                              "projection GEMMs (every projection reads or writes the "
                              "hidden state)")


def _read_heads(out: ShapeReading, recs: pd.DataFrame, label: pd.Series, shapes: _Shapes,
                att: list[_Attn], act: list[_Gemm], tp: int, where: str) -> None:
    fwd = [a for a in att if not a.backward]
    h = out.get("hidden_size")
    d = _mode([a.d for a in fwd if a.d])
    heads = _mode([a.heads for a in fwd if a.heads])
    kv = _mode([a.kv_heads for a in fwd if a.kv_heads and a.kv_width])
    q_width = _mode([a.q_width for a in fwd if a.q_width])
    kv_width = _mode([a.kv_width for a in fwd if a.kv_width])
    # the widths alone already tell the projections apart, even when the heads are not
    # known (BSH attention without rotary kernels)
    if q_width:
        out.values["_q_width"] = q_width
    if kv_width:
        out.values["_kv_width"] = kv_width
    how = fwd[0].what if fwd else ""
    rot = label.str.contains(_ROTARY).to_numpy(bool) & ~recs["backward"].to_numpy(bool)
    b, s = out.get("micro_batch_size"), out.get("seq_length")
    rot_heads = []
    for i in np.nonzero(rot)[0]:
        for sh in shapes[i]:
            if len(sh) == 4 and b and s and sh[0] == b and sh[1] == s:
                rot_heads.append((sh[2], sh[3]))
            elif len(sh) == 4 and b and s and sh[0] == b and sh[2] == s:
                rot_heads.append((sh[1], sh[3]))
    if rot_heads and d is None:
        widths = sorted({hd for hd, _ in rot_heads})
        d = _mode([dd for _, dd in rot_heads])
        if q_width and d and q_width % d == 0:
            heads = q_width // d
        else:
            heads = widths[-1]
        if kv_width and d and kv_width % d == 0:
            kv = kv_width // d
        elif len(widths) > 1:
            kv = widths[0]
        how = f"{how} and rotary kernels ({', '.join(f'{w}×{d}' for w in widths)})"
    if not fwd:
        why = "no forward attention kernel with shapes"
        for name in ("num_attention_heads", "num_kv_heads", "head_dim"):
            out.put(name, None, why)
        return
    if d is None or heads is None:
        why = (f"{where}: {how} shows query width {q_width} but not how it splits into "
               "heads (BSH layout without rotary kernels)")
        for name in ("num_attention_heads", "num_kv_heads", "head_dim"):
            out.put(name, None, why)
        return
    out.put("head_dim", d, f"{where}: {how}: head size {d}")
    out.put("num_attention_heads", heads * tp,
            f"{where}: {how}: {heads} query heads per rank" + (f" × tp {tp}" if tp > 1
                                                               else ""))
    out.values["_q_width"] = heads * d
    # key/value heads: a fused attention kernel takes keys and values unrepeated; SDPA and
    # an unfused q·kᵀ often get them already repeated to every query head, and then the
    # projections (separate k/v, or a fused QKV output) show the real count
    native = any(("flash" in a.what.lower() or "fusion" in a.what.lower()) for a in fwd)
    how_kv = ""
    if kv is not None and (native or kv < heads):
        how_kv = f"{how}: {kv} key/value heads"
    else:
        outs = Counter(g.n for g in act if g.k == h) if h else Counter()
        qw = heads * d
        other = {_loss_width(recs, label, shapes), out.values.get("_embedding_vocab")}
        fused = [w for w in outs if qw < w <= 3 * qw and (w - qw) % (2 * d) == 0
                 and heads % ((w - qw) // (2 * d)) == 0 and w not in other]
        narrow = [w for w in outs if w < qw and w % d == 0 and heads % (w // d) == 0]
        if narrow:
            w = max(narrow, key=lambda x: outs[x])
            kv = w // d
            how_kv = f"key/value projections {h} → {w} = {kv}·{d}"
        elif fused:
            w = max(fused, key=lambda x: outs[x])
            kv = (w - qw) // (2 * d)
            how_kv = f"fused QKV projection {h} → {w} = ({heads} + 2·{kv})·{d}"
        elif kv is not None:
            how_kv = f"{how}: {kv} key/value heads"
        elif qw in outs:
            kv = heads
            how_kv = f"query, key and value projections all {h} → {qw}"
    if kv is None:
        out.put("num_kv_heads", None, f"{where}: neither the attention inputs nor the "
                                      "projections show the key/value width")
        return
    out.put("num_kv_heads", kv * tp, f"{where}: {how_kv}" + (
        f" per rank × tp {tp}" if tp > 1 else ""))
    out.values["_kv_width"] = kv * d


def _read_widths(out: ShapeReading, recs: pd.DataFrame, label: pd.Series, shapes: _Shapes,
                 act: list[_Gemm], emb: list[dict], tp: int, where: str) -> None:
    h = out.get("hidden_size")
    if not h or not act:
        why = "the hidden size or the projection GEMMs are unknown"
        out.put("ffn_hidden_size", None, why)
        out.put("vocab_size", None, why)
        return
    qw, kvw = out.values.get("_q_width"), out.values.get("_kv_width")
    attn_widths = {w for w in (qw, kvw) if w}
    if qw and kvw:
        attn_widths |= {qw + 2 * kvw, qw + kvw, 2 * kvw}
    ups = Counter(g.n for g in act if g.k == h and g.n not in attn_widths and g.n != h)
    downs = Counter(g.k for g in act if g.n == h and g.k not in attn_widths and g.k != h)
    # the logits: the loss's input width, or the embedding table (vocab-parallel over tp)
    lmask = label.str.contains(_LOSS).to_numpy(bool) & ~recs["backward"].to_numpy(bool)
    vocab_local = _loss_width(recs, label, shapes)
    table_v = out.values.get("_embedding_vocab")
    if vocab_local and vocab_local in ups:
        out.put("vocab_size", vocab_local * tp,
                f"{where}: the logits GEMM {h} → {vocab_local} feeds the loss "
                f"({_mode([label.iat[i] for i in np.nonzero(lmask)[0]])})"
                + (f"; vocabulary split over tp {tp}" if tp > 1 else ""))
    elif table_v:
        out.put("vocab_size", table_v, f"{where}: embedding table ({table_v}, {h})")
        vocab_local = table_v // tp if table_v % tp == 0 else None
    else:
        once = [w for w in ups if w not in downs]
        if len(once) == 1:
            vocab_local = once[0]
            out.put("vocab_size", vocab_local * tp,
                    f"{where}: the only projection {h} → {vocab_local} with no way back "
                    "(the logits)" + (f"; vocabulary split over tp {tp}" if tp > 1 else ""))
        else:
            out.put("vocab_size", None, "no loss kernel, embedding table or single logits "
                                        "GEMM on the loaded ranks (the last pipeline stage "
                                        "holds the logits)")
    forward_only = all(g.linear for g in act)
    # with forward GEMMs only, the logits have no way back; with backward ones their
    # input-gradient GEMM is a down-projection too, so the vocabulary width is set aside
    ffn = [w for w in ups if w in downs and (forward_only or w != vocab_local)]
    if len(ffn) == 1:
        f = ffn[0]
        out.put("ffn_hidden_size", f * tp, f"{where}: projections {h} → {f} and {f} → {h} "
                                            "(the MLP)" + (f" per rank × tp {tp}" if tp > 1
                                                           else ""))
        out.values["_f_width"] = f
    elif not ffn:
        out.put("ffn_hidden_size", None, f"{where}: no width w with both {h} → w and "
                                         f"w → {h} projections besides attention's")
    else:
        out.put("ffn_hidden_size", None, f"{where}: several MLP-like widths {sorted(ffn)} "
                                         "(MoE or an unusual model): not read")


def _loss_width(recs: pd.DataFrame, label: pd.Series, shapes: _Shapes) -> int | None:
    """The last dimension of the loss kernel's logits input (the local vocabulary)."""
    widths = []
    lmask = label.str.contains(_LOSS).to_numpy(bool) & ~recs["backward"].to_numpy(bool)
    for i in np.nonzero(lmask)[0]:
        sh = [s for s in shapes[i] if s]
        if sh and len(sh[0]) >= 2:
            widths.append(sh[0][-1])
    return _mode(widths)


def _read_counts(out: ShapeReading, recs: pd.DataFrame, label: pd.Series, att: list[_Attn],
                 emb: list[dict], stage_of: dict[int, int], pp: int, ranks: list[int],
                 where: str) -> None:
    # micro-batches per step: embedding lookups per step on the first stage
    if emb:
        e = pd.DataFrame(emb)
        e = e[e["rank"].map(lambda r: stage_of.get(int(r), 0) == 0)]
    else:
        e = pd.DataFrame()
    if not e.empty:
        per = _typical(_per_step(e))
        m = _mode(list(per.values()))
        out.put("num_micro_batches", m, f"{where}: {counted(m, 'embedding lookup')} per "
                                         "step on the first pipeline stage (one per "
                                         "micro-batch)")
    else:
        lmask = label.str.contains(_LOSS).to_numpy(bool) & ~recs["backward"].to_numpy(bool)
        loss = recs[lmask]
        if not loss.empty:
            m = _mode(list(_typical(_per_step(loss)).values()))
            out.put("num_micro_batches", m, f"{where}: {counted(m, 'loss kernel')} per "
                                             "step on the last stage (one per micro-batch)")
        else:
            out.put("num_micro_batches", None, "no embedding lookup or loss kernel per step "
                                               "on the loaded ranks")
    m = out.get("num_micro_batches")
    if not att:
        why = "no attention kernel: the layers cannot be counted"
        for name in ("num_layers", "layers_per_stage", "recompute_layers"):
            out.put(name, None, why)
        out.put("recompute", None, why)
        return
    if not m:
        for name in ("num_layers", "layers_per_stage", "recompute_layers", "recompute"):
            out.put(name, None, "the micro-batches per step are unknown")
        return
    frame = pd.DataFrame([{"rank": a.rank, "step": a.step, "backward": a.backward}
                          for a in att])
    fwd = _typical(_per_step(frame[~frame["backward"]]))
    bwd = _typical(_per_step(frame[frame["backward"]]))
    layers: dict[int, int] = {}
    full: dict[int, int] = {}
    for r in ranks:
        st = stage_of.get(r, 0)
        if st in layers:
            continue
        f_count, b_count = fwd.get(r, 0), bwd.get(r, 0)
        if b_count:
            if b_count % m or f_count % m:
                continue
            layers[st] = b_count // m
            full[st] = max(f_count - b_count, 0) // m
        elif f_count and f_count % m == 0:
            layers[st] = f_count // m
    what = att[0].what
    missing = [s for s in range(pp) if s not in layers]
    if missing:
        why = (f"{plural(len(missing), 'stage')} {listed(missing)} of {pp} "
               f"{plural(len(missing), 'is', 'are')} not loaded or "
               f"{plural(len(missing), 'its', 'their')} attention kernels do not divide by "
               "the micro-batches")
        out.put("num_layers", None, why)
        out.put("layers_per_stage", None, why)
        out.put("recompute_layers", None, why)
        out.put("recompute", None, why)
        return
    per_stage = tuple(layers[s] for s in range(pp))
    total = sum(per_stage)
    backward_seen = any(bwd.values())
    basis = ("backward attention kernels" if backward_seen
             else "forward attention kernels (no backward in the profile)")
    out.put("num_layers", total,
            f"{where}: {basis} per step / {counted(m, 'micro-batch')} = {list(per_stage)} "
            f"{plural(2 if pp > 1 else per_stage[0], 'layer')} per stage ({what})")
    out.put("layers_per_stage", per_stage, out.details["num_layers"])
    recomputed = tuple(full.get(s, 0) for s in range(pp))
    # selective recompute: the activation function runs again for the other layers
    act_mask = (label.str.contains(_GATED_ACT) | label.str.contains(_PLAIN_ACT)).to_numpy(
        bool) & ~recs["backward"].to_numpy(bool)
    act = _typical(_per_step(recs[act_mask]))
    selective = False
    if act and backward_seen:
        extra = []
        for r in ranks:
            st = stage_of.get(r, 0)
            a = act.get(r)
            if a is None:
                continue
            extra.append(a - fwd.get(r, 0) == (layers[st] - full.get(st, 0)) * m
                         and layers[st] > full.get(st, 0))
        selective = bool(extra) and all(extra)
    if not backward_seen:
        out.put("recompute", None, "no backward kernels: recompute cannot be seen")
        out.put("recompute_layers", None, "no backward kernels: recompute cannot be seen")
        return
    detail = (f"{where}: forward minus backward attention kernels per step / {m} = "
              f"{list(recomputed)} fully recomputed "
              f"{plural(2 if pp > 1 else recomputed[0], 'layer')} per stage")
    if selective:
        detail += "; the activation function runs once more for every other layer " \
                  "(selective recompute)"
    if all(r == n for r, n in zip(recomputed, per_stage, strict=True)) and total:
        out.put("recompute", "full", detail)
        out.put("recompute_layers", None, detail + " (every layer)")
    else:
        out.put("recompute", "selective" if selective else "none", detail)
        out.put("recompute_layers", recomputed if any(recomputed) else None, detail)


def _read_mlp(out: ShapeReading, recs: pd.DataFrame, label: pd.Series, att: list[_Attn],
              act: list[_Gemm], where: str) -> None:
    h, f = out.get("hidden_size"), out.values.get("_f_width")
    if not h or not f:
        out.put("mlp", None, "the FFN width is unknown")
        return
    ups = []
    for rank in sorted({a.rank for a in att}):
        starts = np.sort([a.start for a in att if a.rank == rank])
        fwd_starts = [a.start for a in att if a.rank == rank and not a.backward]
        lst = sorted((g for g in act if g.rank == rank), key=lambda g: g.start)
        g_start = np.array([g.start for g in lst])
        for start in fwd_starts:
            j = int(np.searchsorted(starts, start, side="right"))
            end = starts[j] if j < len(starts) else np.inf
            lo = int(np.searchsorted(g_start, start, side="right"))
            hi = int(np.searchsorted(g_start, end, side="left"))
            count = 0
            for g in lst[lo:hi]:
                if g.k == f and g.n == h:  # the down projection closes the MLP
                    break
                if g.k == h and g.n == f:
                    count += 1
            if count:
                ups.append(count)
    if not ups:
        out.put("mlp", None, f"{where}: no up-projection {h} → {f} after a forward "
                             "attention kernel")
        return
    k = _mode(ups)
    kind = "gated" if k == 2 else "gpt" if k == 1 else None
    if kind is None:
        out.put("mlp", None, f"{where}: {k} up-projections {h} → {f} per layer: neither a "
                             "plain (1) nor a gated (2) MLP")
        return
    out.put("mlp", kind, f"{where}: {counted(k, 'up-projection')} {h} → {f} before the down-"
                         f"projection in each forward layer ({'gated' if k == 2 else 'plain'}"
                         " MLP)")


def _read_norm_position(out: ShapeReading, recs: pd.DataFrame, label: pd.Series,
                        emb: list[dict], where: str) -> None:
    if label.str.contains(_LAYERNORM).any():
        out.put("norm", "layernorm", f"{where}: LayerNorm kernels")
    elif label.str.contains(_RMSNORM).any():
        out.put("norm", "rmsnorm", f"{where}: RMSNorm kernels (or the rsqrt of an "
                                   "unfused RMSNorm) and no LayerNorm")
    else:
        out.put("norm", None, "no normalisation kernel seen")
    rot = label.str.contains(_ROTARY).any()
    tables = {tuple(e["table"]) for e in emb if e["table"]}
    if rot:
        out.put("position_embedding", "rope", f"{where}: rotary-embedding kernels")
    elif len(tables) > 1:
        out.put("position_embedding", "learned",
                f"{where}: a second embedding table {sorted(tables)[0]} (positions)")
    else:
        out.put("position_embedding", None, "no rotary kernel and no position table: the "
                                            "profile does not show how positions are "
                                            "encoded (an unfused rotary embedding is "
                                            "plain element-wise work)")


def _read_bias(out: ShapeReading, act: list[_Gemm], where: str) -> None:
    h = out.get("hidden_size")
    qw, kvw = out.values.get("_q_width"), out.values.get("_kv_width")
    if not h or not qw or not kvw:
        out.put("bias", None, "the projection widths are unknown")
        return
    qkv = {qw, kvw, qw + 2 * kvw}
    first = [g for g in act if g.k == h and g.n in qkv]
    rest = [g for g in act if not (g.k == h and g.n in qkv)]
    if not first:
        out.put("bias", None, "no QKV projection found")
        return
    qkv_b = any(g.bias for g in first)
    rest_b = any(g.bias for g in rest)
    kind = "all" if qkv_b and rest_b else "qkv" if qkv_b else "none"
    out.put("bias", kind, f"{where}: QKV projections {'with' if qkv_b else 'without'} a bias "
                          f"input, other projections {'with' if rest_b else 'without'}")
