"""The element size of a profile's gradient reduction, read from its own collectives.

Data parallelism reduces the gradients with all-reduces (or reduce-scatters under a
distributed optimizer). How many bytes each gradient element takes there depends on the
framework: Megatron-LM reduces bf16 gradients in fp32 (4 bytes), a model cast to bf16 under
plain PyTorch DDP reduces them in bf16 (2 bytes). The step model can only guess it from the
scheme (:func:`perfkit.calc.memory.scheme_gradient_bytes`), but a profile often records
what the collectives moved:

* a Kineto trace recorded with ``record_shapes=True`` gives the backend's span of each
  collective (``nccl:all_reduce``, ``gloo:all_reduce``, ``vllm::all_reduce``) its input's
  shape and type (``Input Dims`` ``[[19618307]]``, ``Input type`` ``["float"]``): the
  ``input_shapes`` and ``input_dtypes`` of the ``ops`` table;
* an Ascend DB export gives each HCCL collective (``COMMUNICATION_OP``) its element count and
  data type (``FP32``, ``BFP16``): the ``input_shapes`` and ``input_dtypes`` of its
  ``kernels`` rows.

:func:`reduced_gradient_bytes` takes the all-reduces and reduce-scatters that record both,
adds up the bytes each data type moved, and returns the element size of the type that
moved the most (the gradient reduction is the largest reduction of a training step), or
None when no reduction records its type. All-gathers, broadcasts and all-to-alls are never
counted (they gather parameters or route tokens, and reduce nothing). A profile that
records no backward pass (:func:`perfkit.analysis.backward_pass.forward_only_operators`:
an inference or evaluation step) reduces no gradient: its all-reduces are activations'
(tensor parallelism, ``wild/tl_b200_eager``'s 73 bf16 ones of vLLM) or metrics', so
nothing is read from it.

A reduction of fewer than :data:`METRIC_ELEMENTS` elements is a metric's, not gradients',
and is left out (:func:`is_metric`): a training step all-reduces its loss, its gradient
norm and other statistics beside its gradients, a handful of elements each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._text_dtype import TEXT
from ..format import counted, part_share_text
from ._frames import collect, is_lazy_frame
from .backward_pass import forward_only_operators
from .collectives import comm_op_type

__all__ = ["ReducedGradient", "reduced_gradient_bytes", "reductions_are_gradients",
           "ELEMENT_BYTES", "METRIC_ELEMENTS", "is_metric"]

#: Bytes per element of the data-type names collectives record (lower-cased): PyTorch's
#: ``Input type`` (``float``, ``c10::BFloat16``) and HCCL's ``FP32`` / ``BFP16``.
ELEMENT_BYTES = {
    "float": 4, "float32": 4, "fp32": 4, "double": 8, "float64": 8, "fp64": 8,
    "half": 2, "float16": 2, "fp16": 2, "c10::half": 2,
    "bfloat16": 2, "c10::bfloat16": 2, "bf16": 2, "bfp16": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1,
}

#: A reduction of fewer elements than this is a metric's (a loss, a gradient norm, a count
#: per expert), not a gradient reduction: :func:`is_metric`.
METRIC_ELEMENTS = 1024

#: Names that :func:`~perfkit.analysis.collectives.comm_op_type` may call an all-reduce or a
#: reduce-scatter (a superset: the kind is decided on the rows computed).
_MAY_REDUCE = r"reduce|^stream_\d+_parallel_\d+$"

_KIND_WORDS = {"allreduce": "all-reduce", "reducescatter": "reduce-scatter"}


@dataclass(frozen=True)
class ReducedGradient:
    """What a profile records about the data type its gradient reduction moves.

    Attributes
    ----------
    element_bytes : int
        Bytes per element of the data type that moved the most bytes.
    dtype : str
        That type as the profile names it (``float``, ``FP32``, ``c10::BFloat16``).
    collectives : int
        How many records of all-reduces / reduce-scatters of that type the profile holds
        (a host collective may be recorded at two levels, each counted).
    moved_bytes : float
        The bytes they moved in all (elements times element size, over every step and rank
        the profile holds).
    share : float
        Their share of the bytes of every reduction that records its type (1.0 when all of
        them use one type).
    source : str
        Where it was read: ``"host collectives"`` (the ``ops`` table) or ``"communication
        kernels"`` (the ``kernels`` table).
    metrics : int
        The records of that table left out as metrics' (fewer than
        :data:`METRIC_ELEMENTS` elements, of any type: :func:`is_metric`).
    """

    element_bytes: int
    dtype: str
    collectives: int
    moved_bytes: float
    share: float
    source: str
    metrics: int = 0

    @property
    def evidence(self) -> str:
        """A plain sentence saying what the profile records."""
        said = (f"{self.collectives} all-reduce or reduce-scatter records among the "
                f"profile's {self.source} move {self.dtype} data, {self.element_bytes} bytes "
                f"per element ({part_share_text(self.share)} of the bytes its reductions record)")
        if self.metrics:
            said += (f"; {counted(self.metrics, 'record')} of fewer than "
                     f"{METRIC_ELEMENTS:,} elements left out, as a metric's (a loss or a "
                     "gradient norm), not gradients")
        return said


def is_metric(elements: np.ndarray) -> np.ndarray:
    """Whether each reduction of ``elements`` elements is a metric's: fewer than
    :data:`METRIC_ELEMENTS` (1,024).

    A training step all-reduces a few statistics beside its gradients, a handful of
    elements each: Megatron-LM's ``average_losses_across_data_parallel_group`` one element
    per loss, its ``clip_grad_norm_fp32`` the one total norm, a mixture of experts its
    tokens per expert (one per expert: 8 in Mixtral 8x7B, 256 routed in DeepSeek-V3). A
    gradient reduction takes a bucket of many parameters' gradients: PyTorch DDP's first
    bucket holds up to 1 MiB (``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``, 262,144
    fp32 elements) and the others up to ``bucket_cap_mb`` (25 MiB), and Megatron-LM fills
    its buckets to ``bucket_size``, max(40,000,000, 1,000,000 × dp) elements by default
    (``DistributedDataParallelConfig``); the smallest the shared samples record hold
    2,469,696 (the torch_npu DB export) and 5,716,654 elements (HolisticTraceAnalysis's
    128-rank job). Gradients of fewer than 1,024 elements in all are a toy model's, not
    an LLM's. Counted
    with the gradients, a metric's all-reduce adds a record of its type, and where the
    gradients' reductions record no type it alone would give the element size.
    """
    return np.asarray(elements, dtype=np.float64) < METRIC_ELEMENTS


def reductions_are_gradients(parallel: Any) -> bool:
    """Whether every all-reduce / reduce-scatter of a job of this layout reduces gradients,
    so that :func:`reduced_gradient_bytes` reads the gradients' element size.

    True for data parallelism (``dp > 1``) without tensor, context or expert parallelism:
    those all-reduce activations too (16-bit under Megatron-LM, whose bf16 run reduces fp32
    gradients), and the profile does not say which collective is whose; without data
    parallelism there is no gradient reduction at all (a loss or metric all-reduce is not
    one). :func:`perfkit.plan.calibrate` (the step model's traffic) and
    :attr:`perfkit.Job.gradient_bytes` (static memory on every page) apply the same test.
    """
    return parallel.dp > 1 and parallel.tp == parallel.cp == parallel.ep == 1


def _first(text: pd.Series) -> pd.Series:
    """The first input of ``;``-separated per-input text (``"888,2880;"`` -> ``"888,2880"``)."""
    return text.astype(TEXT).str.split(";").str[0].str.strip()


def _elements(shapes: pd.Series) -> np.ndarray:
    """Elements of each first-input shape (``"888,2880"`` -> 2557440); NaN where unreadable."""
    out = np.full(len(shapes), np.nan)
    for i, s in enumerate(shapes.astype(object)):
        if not isinstance(s, str) or not s:
            continue
        dims = s.strip("[]() ").replace(" ", "").split(",")
        if dims and all(d.isdigit() for d in dims):
            out[i] = float(np.prod([int(d) for d in dims], dtype=np.float64))
    return out


def _records(table: pd.DataFrame, source: str) -> pd.DataFrame:
    """The reductions of one table that record their input's type and shape."""
    empty = pd.DataFrame({"dtype": [], "bytes": [], "source": [], "metric": []})
    if table is None or table.empty or not {"name", "input_shapes", "input_dtypes"} \
            <= set(table.columns):
        return empty
    kind = comm_op_type(table["name"])
    t = table[kind.isin(list(_KIND_WORDS)).to_numpy(bool)]
    if t.empty:
        return empty
    dtype = _first(t["input_dtypes"])
    size = dtype.str.lower().map(ELEMENT_BYTES).astype("Float64").to_numpy(np.float64,
                                                                          na_value=np.nan)
    elements = _elements(_first(t["input_shapes"]))
    moved = elements * size
    keep = np.isfinite(moved) & (moved > 0)
    return pd.DataFrame({"dtype": dtype.to_numpy(object)[keep], "bytes": moved[keep],
                         "size": size[keep], "source": source,
                         "metric": is_metric(elements[keep])})


def _reductions(table: Any) -> pd.DataFrame | None:
    """The rows of ``table`` that may be reductions, with the columns :func:`_records`
    reads: all of an eager table; of a lazy (Dask) one only the rows whose name may be one
    (:data:`_MAY_REDUCE`: the rows :func:`~perfkit.analysis.collectives.comm_op_type` can
    call an all-reduce or a reduce-scatter), computed on the workers, so that the eager and the
    lazy cluster read the same records without pulling a whole table into one process."""
    if table is None or not is_lazy_frame(table):
        return table
    columns = list(table.columns)
    if not {"name", "input_shapes", "input_dtypes"} <= set(columns):
        return None
    return collect(table, ["name", "input_shapes", "input_dtypes"],
                   where=lambda t: t["name"].astype(str).str.contains(
                       _MAY_REDUCE, case=False, regex=True))


def reduced_gradient_bytes(profile: Any) -> ReducedGradient | None:
    """The element size of the gradient reduction, as the profile's collectives record it.

    Parameters
    ----------
    profile : Profile or Cluster
        A loaded profile, eager or lazy (a Dask cluster: only its rows named ``reduce``
        leave the workers). Its ``kernels`` (communication rows) and ``ops`` (host
        collectives) are read where they carry ``input_shapes`` and ``input_dtypes``.

    Returns
    -------
    ReducedGradient or None
        The data type of the all-reduces / reduce-scatters that move the most bytes (the
        communication kernels' when they record it, else the host collectives'), or None
        when no reduction in the profile records both its type and its size, or when the
        profile records no backward pass (its host operators hold no autograd operator:
        :func:`~perfkit.analysis.backward_pass.forward_only_operators`), whose reductions
        are not gradients.

    Notes
    -----
    Every all-reduce counts, so a tensor-parallel all-reduce of activations is weighed
    with the gradients': the type returned is the one that moves the most bytes, which in a
    data-parallel training step is the gradients'.
    """
    if forward_only_operators(profile):
        return None
    for table, source in (("kernels", "communication kernels"), ("ops", "host collectives")):
        rec = _records(_reductions(getattr(profile, table, None)), source)
        metric = rec["metric"].to_numpy(bool)
        rec = rec[~metric]
        if rec.empty:
            continue
        by = rec.groupby("dtype", sort=True).agg(bytes=("bytes", "sum"), n=("bytes", "size"),
                                                 size=("size", "first"))
        top = by["bytes"].idxmax()
        return ReducedGradient(int(by.at[top, "size"]), str(top), int(by.at[top, "n"]),
                               float(by.at[top, "bytes"]),
                               float(by.at[top, "bytes"] / by["bytes"].sum()), source,
                               int(metric.sum()))
    return None
