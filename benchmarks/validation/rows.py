"""Read ``published_runs.csv`` and map each row to perfkit's inputs (PROTOCOL.md).

A row becomes a :class:`MappedRow`: the measured step time and everything ``calibrate`` and
``predict`` take (model, layout, hardware, dtype, activation model, static scheme,
selective layers), plus the fields the current model does not use yet (``framework``,
``overlap``, ``sharding``, ``precision``) so that a later model can pass them on. A row
the current API cannot express gives a :class:`Refusal` with the reason instead.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfkit import Hardware, ModelSpec, ParallelConfig
from perfkit.calc import ActivationModel
from perfkit.calc.rates import Rates

__all__ = ["DATA", "UNITS", "ATTN_IMPL", "UNFUSED_ATTENTION", "attention_of", "MappedRow",
           "Refusal", "read_rows", "measured_step_s", "map_row", "model_of", "parse_kv"]

DATA = Path(__file__).with_name("published_runs.csv")
#: Units a figure may have, and whether a step time follows without a FLOP convention.
UNITS = {"tokens/s/device": True, "s": True, "TFLOP/s/device": False, "MFU %": False,
         "tokens/s": True, "model TFLOP/s/device": False}

#: llm-foundry's ``attn_impl`` (a row's ``framework`` field) → perfkit's
#: ``attention_implementation`` (PROTOCOL.md, amendment 1): ``triton`` is FlashAttention in
#: Triton; ``flash`` is the ``flash-attn==1.0.9`` (FlashAttention 1) its ``[gpu]`` extra pinned.
ATTN_IMPL = {"triton": "flash-triton", "flash": "flash1"}

#: The commit of torchtitan's ``docs/performance.md`` whose runs used PyTorch of 2024-12-23.
TORCHTITAN_DEC_2024 = "d4c86e3758a8"

#: Sources whose runs computed attention apart (PROTOCOL.md, amendment 3): BigScience's
#: 2022 topology search ran Megatron-DeepSpeed's attention as ``torch.baddbmm`` (q·kᵀ),
#: ``FusedScaleMaskSoftmax`` and ``torch.bmm`` (``megatron/model/transformer.py`` at
#: ``cf2d23a5``, 2022-02-27; the chronicle itself names the "optimized fused softmax
#: kernel"), with Megatron-DeepSpeed's default dropout 0.1 (``megatron/arguments.py``;
#: ``tr11-176B-ml.slurm`` sets no dropout): a Megatron GPT layer, ``ActivationModel()``.
#: OneFlow's DLPerf ran Megatron-LM at ``8aa4619f2b2a`` (March 2021), whose attention is the
#: same three calls (``megatron/model/transformer.py``), dropout 0.1 (amendment 19).
UNFUSED_ATTENTION = ("bigscience-bloom-prequel", "oneflow-dlperf-megatron")

_INT = ("devices", "per_node", "dp", "tp", "pp", "vpp", "cp", "ep", "micro_batch",
        "num_micro", "global_batch", "seq_length")


@dataclass(frozen=True)
class Refusal:
    """A row the current model cannot take, and why."""

    row_id: str
    source_id: str
    reason: str


@dataclass(frozen=True)
class MappedRow:
    """One published run as perfkit's inputs."""

    row: dict[str, Any]
    step_s: float
    model: ModelSpec
    parallel: ParallelConfig
    hardware: Hardware
    dtype: str
    activation_model: ActivationModel
    static_scheme: str
    selective_layers: tuple[int, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    attention_implementation: str = "auto"

    @property
    def row_id(self) -> str:
        return self.row["row_id"]

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``calibrate`` and ``predict`` (each takes those its
        signature names: ``rates`` is calibrate's, ``overrides`` predict's)."""
        kw: dict[str, Any] = {"activation_model": self.activation_model,
                              "static_scheme": self.static_scheme, "dtype": self.dtype}
        if self.selective_layers is not None:
            kw["selective_layers"] = self.selective_layers
        fields: dict[str, Any] = {}
        if self.attention_implementation != "auto":  # PROTOCOL.md, amendments 1 and 2
            fields["attention_implementation"] = self.attention_implementation
        flags = self.extra.get("overlap", {})
        if flags.get("fsdp_float8_all_gather") == "1":  # amendment 6
            fields["param_gather_bytes"] = 1.0
        if flags.get("float8_linear") == "1" and self.parallel.tp > 1 \
                and self.parallel.sequence_parallel:  # amendment 8
            fields["tp_gather_bytes"] = 1.0
        if self.row["source_id"] in KEEPS_GATHERED_INPUT and self.parallel.tp > 1 \
                and self.parallel.sequence_parallel:  # amendment 12
            fields["sp_ag_redo"] = False
        if flags.get("torch_compile") == "1":  # amendment 9
            fields["elementwise_kernels"] = "compiled"
        elif self.row["source_id"] in EAGER_SOURCES:  # amendment 11
            fields["elementwise_kernels"] = "eager"
        if fields:
            kw["rates"] = Rates(**fields)
            kw["overrides"] = fields
        return kw


#: Sources whose runs are PyTorch running the model's own code (no fused norm or rotary
#: kernels of a library): torchtitan's Llama, llm-foundry's MPT under Composer
#: (PROTOCOL.md, amendment 11).
EAGER_SOURCES = ("torchtitan-performance", "mosaic-llm-foundry")


#: Sources whose sequence parallelism all-gathers a block's input once and keeps the
#: gathered tensor for the backward, instead of gathering it again there (Megatron-LM's
#: way, ``Rates.sp_ag_redo``'s default): torchtitan's ``PrepareModuleInput`` redistributes
#: the norm's sequence shard to a replicated tensor that the column-parallel linears save
#: (PROTOCOL.md, amendment 12).
KEEPS_GATHERED_INPUT = ("torchtitan-performance",)


def read_rows(path: Path = DATA) -> list[dict[str, Any]]:
    """The rows of the data file, integers converted, in file order."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        for k in _INT:
            r[k] = int(r[k]) if r[k] != "" else None
        for k in ("figure", "figure2"):
            r[k] = float(r[k]) if r[k] != "" else None
    return rows


def parse_kv(text: str) -> dict[str, str]:
    """``"a=1;b=x"`` → ``{"a": "1", "b": "x"}`` (the ``model_fields`` and ``overlap`` form)."""
    out = {}
    for part in filter(None, (p.strip() for p in (text or "").split(";"))):
        key, _, value = part.partition("=")
        out[key.strip()] = value.strip()
    return out


def measured_step_s(row: dict[str, Any]) -> float | None:
    """Step time from the printed figure: ``B·s / (devices·figure)`` for tokens/s/device.

    None where the unit needs a FLOP convention (TFLOP/s, MFU).
    """
    unit, fig = row["unit"], row["figure"]
    if unit == "s":
        return fig
    if unit == "tokens/s/device":
        return row["global_batch"] * row["seq_length"] / (row["devices"] * fig)
    return None


def model_of(row: dict[str, Any]) -> ModelSpec:
    """The row's model: its preset or its ``model_fields``, at its sequence length."""
    fields = parse_kv(row["model_fields"])
    if fields:
        kw: dict[str, Any] = {k: (int(v) if v.isdigit() else
                                  {"true": True, "false": False}.get(v, v))
                              for k, v in fields.items()}
        return ModelSpec(seq_length=row["seq_length"], name=row["model"], **kw)
    return ModelSpec.preset(row["model"]).replace(seq_length=row["seq_length"])


def _recompute(row: dict[str, Any],
               model: ModelSpec) -> tuple[dict[str, Any], tuple[int, ...] | None]:
    rec = row["recompute"] or "none"
    pp = row["pp"]
    if rec in ("none", "full"):
        return {"recompute": rec}, None
    if rec == "selective-op":  # torchtitan's op policy (PROTOCOL.md, amendment 4)
        return {"recompute": "selective", "recompute_ops": "torchtitan-op-sac"}, None
    if rec == "selective-layer":  # every second layer fully recomputed
        per_stage = model.num_layers // pp
        return {"recompute": "full", "recompute_layers": tuple([per_stage // 2] * pp)}, None
    if rec.startswith("selective:"):
        layers = tuple(int(x) for x in rec.split(":", 1)[1].split(","))
        return {"recompute": "selective"}, layers
    raise ValueError(f"recompute {rec!r} is not one the mapping knows")


def map_row(row: dict[str, Any]) -> MappedRow | Refusal:
    """Map one row; a :class:`Refusal` where the current API cannot express it."""
    def refuse(why: str) -> Refusal:
        return Refusal(row["row_id"], row["source_id"], why)

    step = measured_step_s(row)
    if step is None:
        return refuse(f"unit {row['unit']!r} needs a FLOP convention")
    if not row["model_fields"] and row["model"] not in ModelSpec.presets():
        return refuse(f"model {row['model']!r}: no shape in the source, no perfkit preset")
    try:
        model = model_of(row)
        rec, selective = _recompute(row, model)
        dp = row["dp"]
        shard = row["sharding"]
        par = ParallelConfig(
            dp=dp, tp=row["tp"], pp=row["pp"], vpp=row["vpp"] or 1, cp=row["cp"] or 1,
            ep=row["ep"] or 1, micro_batch_size=row["micro_batch"],
            num_micro_batches=row["num_micro"],
            sequence_parallel=bool(int(row["sequence_parallel"] or 0)),
            optimizer_shard=dp if shard in ("fsdp-full", "optimizer-parallel", "zero1") else 1,
            zero_stage=3 if shard == "fsdp-full" else 0, **rec)
        # a layout the step model cannot take is refused by calibrate / predict with their
        # message (ParallelConfigError); pipeline stages that do not divide the layers are
        # split as the step model's default does (perfkit.calc.pipeline.split_layers)
        hw = Hardware.preset(row["hardware"])
        stated = {k: float(v) for k, v in parse_kv(row.get("hardware_fields", "")).items()}
        if stated:  # what the source states of its devices (amendment 10)
            hw = hw.replace(**stated)
    except Exception as exc:  # the current API's refusal, reported with its message
        return refuse(f"{type(exc).__name__}: {exc}")
    mindspore = row["source_id"].startswith("mindformers")
    am = (ActivationModel.mindformers() if mindspore
          else ActivationModel() if row["source_id"] in UNFUSED_ATTENTION
          else ActivationModel("tensors", flash_attention=True, dropout=False))
    extra = {"framework": row["framework"], "overlap": parse_kv(row["overlap"]),
             "sharding": shard, "precision": row["precision"], "per_node": row["per_node"]}
    return MappedRow(row, step, model, par, hw, row["precision"], am,
                     "mindspore" if mindspore else "megatron", selective, extra,
                     attention_of(row))


def attention_of(row: dict[str, Any]) -> str:
    """The attention kernel a row ran, where the row states it or its framework's code
    at the source's commit forces one (PROTOCOL.md, amendments 1 and 2); else ``"auto"``.

    * ``attn_impl=`` in ``framework`` (llm-foundry): :data:`ATTN_IMPL`.
    * torchtitan's December 2024 table (``docs/performance.md`` at ``d4c86e3758a8``,
      PyTorch ``1963fc8`` of 2024-12-23): ``"flash2"``. With context parallelism its
      ``get_train_context`` (``torchtitan/utils.py`` at ``9dec370ad26b``, the version the
      table names) enters ``sdpa_kernel([SDPBackend.FLASH_ATTENTION,
      SDPBackend.EFFICIENT_ATTENTION])`` ("TODO: support cuDNN backend"); without it, SDPA
      chose its flash backend on H100 in that month's PyTorch: cuDNN had been made opt-in
      after 2.5.0 (pytorch/pytorch#138522), and pytorch/pytorch#142132 (2.6.0.dev20241204,
      H100: "SDPA is not automatically choosing CUDNN impl", answered "This is expected")
      says so. The August 2024 rows keep ``"auto"``: their PyTorch is not named.
    """
    stated = parse_kv(row["framework"]).get("attn_impl")
    if stated:
        return ATTN_IMPL.get(stated, "auto")
    if "torchtitan" in row["framework"].lower() and TORCHTITAN_DEC_2024 in row["reference"]:
        return "flash2"
    return "auto"
