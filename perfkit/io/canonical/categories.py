"""Which tasks and host events are communication, computation or memory: one place for all.

- :func:`category`: ``compute`` / ``communication`` / ``memory`` / ``other`` of Ascend
  tasks from the task type (the ``Accelerator Core`` / ``Task Type`` column), the operator
  type and the task name, vectorised with pyarrow compute.
- :func:`comm_family`: the communication library of a GPU kernel from its name
  (:data:`COMM_KERNEL_FAMILIES`: NCCL, RCCL, MSCCL, DeepEP, NVSHMEM, symmetric-memory and
  custom all-reduce kernels, HCCL, LCCL); NA for a kernel that is not communication.
- :data:`HOST_COMM_PATTERN` / :func:`host_comm_family`: host events that are
  communication (gloo and NCCL annotations, c10d operators, ``record_param_comms``, HCCL).
- :func:`kineto_kind`: the PyTorch profiler's event categories of every schema since
  PyTorch 1.8 (``Kernel``, ``Operator``, ``Runtime`` ... and ``kernel``, ``cpu_op``,
  ``cuda_runtime`` ...) as one set of kinds.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..._text_dtype import TEXT
from .._common.distinct import per_distinct

__all__ = ["category", "comm_family", "host_comm_family", "kineto_kind",
           "COMM_KERNEL_FAMILIES", "HOST_COMM_FAMILIES", "HOST_COMM_PATTERN", "KINETO_KINDS",
           "DEVICE_KINDS", "TOTAL_OP_INFO", "is_total_op"]

COMM_KERNEL_FAMILIES: tuple[tuple[str, str], ...] = (
    # MSCCL / MSCCL++ (also shipped inside RCCL) before NCCL: their kernels say "msccl"
    ("msccl", r"msccl"),
    # NCCL; RCCL, its ROCm port, names its kernels the same (see comm_family's vendor)
    ("nccl", r"(?:^|[^a-z])(?:nccl|rccl)"),
    # DeepEP expert-parallel dispatch/combine (and DeepSeek's internal dpsk::ep), over
    # NVLink and NVSHMEM; the layout kernel (get_dispatch_layout) only computes, locally
    ("deepep", r"(?:deep_ep|dpsk::ep)::(?:intranode|internode|internode_ll)::"),
    ("nvshmem", r"nvshmem"),
    # PyTorch symmetric memory (torch.distributed._symmetric_memory) collectives
    ("symm_mem", r"multimem_all_?reduce|multimem_all_?gather|one_shot_all_?reduce|"
                 r"two_shot_all_?reduce|symm_?mem"),
    # in-framework all-reduce kernels (vLLM, TensorRT-LLM, SGLang custom all-reduce)
    ("custom_allreduce", r"cross_device_reduce|custom_?all_?reduce|allreduce_fusion|"
                         r"all_?reduce_?kernel|lamport"),
    ("hccl", r"(?:^|[^a-z])(?:hcom|hccl)"),
    ("lccl", r"lccl"),
)
"""``(family, regular expression)`` of device kernels that are communication, tried in
order on the lower-cased kernel name (the first match names the family)."""

_COMM_KERNEL_RE = [(f, re.compile(rx)) for f, rx in COMM_KERNEL_FAMILIES]
_ANY_COMM_KERNEL = "|".join(f"(?:{rx})" for _, rx in COMM_KERNEL_FAMILIES)

HOST_COMM_PATTERN = r"(?i)^(?:c10d::|gloo:|nccl:|record_param_comms|hcom_)"
"""Host events that are communication (PyTorch c10d ops, gloo/NCCL annotations, HCCL)."""

HOST_COMM_FAMILIES: tuple[tuple[str, str], ...] = (
    ("gloo", r"^gloo:"), ("nccl", r"^nccl:"), ("c10d", r"^c10d::"),
    ("c10d", r"^record_param_comms"), ("hccl", r"^hcom_"))
"""``(family, regular expression)`` of host communication events (lower-cased names):
``gloo:all_reduce`` runs on gloo's own threads, ``nccl:*`` annotates the launch of an
NCCL collective, ``c10d::allreduce_`` is the operator the training code called."""

KINETO_KINDS: dict[str, str] = {
    # PyTorch >= 1.10 (Kineto ActivityType names)
    "cpu_op": "cpu_op", "user_annotation": "user_annotation",
    "gpu_user_annotation": "gpu_user_annotation", "kernel": "kernel",
    "gpu_memcpy": "gpu_memcpy", "gpu_memset": "gpu_memset", "cuda_runtime": "runtime",
    "cuda_driver": "runtime", "xpu_runtime": "runtime", "mtia_runtime": "runtime",
    "privateuse1_runtime": "runtime", "privateuse1_driver": "runtime",
    "glow_runtime": "runtime", "hip_runtime": "runtime", "python_function": "python_function",
    "cpu_instant_event": "instant", "trace": "trace", "overhead": "overhead",
    # PyTorch 1.8 - 1.9
    "operator": "cpu_op", "runtime": "runtime", "memcpy": "gpu_memcpy",
    "memset": "gpu_memset", "python": "python_function", "user annotation": "user_annotation",
}
"""Kineto event category (lower-cased) -> kind. Runtime and driver calls of every vendor
(CUDA, HIP: ROCm traces keep the ``cuda_runtime`` category with ``hip*`` names) are one
``runtime`` kind: the host side of a device launch, linked to its task by ``correlation``."""

DEVICE_KINDS = ("kernel", "gpu_memcpy", "gpu_memset")
"""Kinds of :data:`KINETO_KINDS` that are device tasks."""


def category(core: pd.Series, typ: pd.Series, name: pd.Series) -> pd.Series:
    """compute / communication / memory / other from task type, op type and name.

    Worked out once per distinct (task type, op type, name): a profile repeats the same
    few thousand tasks over millions of rows.
    """
    keys = [_codes(s) for s in (core, typ, name)]
    if len(core) and _fits(keys):
        key = keys[0][0]
        for codes, values in keys[1:]:
            key = key * np.int64(len(values)) + codes
        inverse, distinct = pd.factorize(key)
        first = np.empty(len(distinct), dtype=np.int64)  # a row holding each distinct key
        first[inverse] = np.arange(len(key))
        parts = [pd.Series(values[codes[first]], dtype=TEXT) for codes, values in keys]
        out = pa.array(_category(*parts), pa.string()).take(pa.array(inverse))
    else:
        out = pa.array(_category(core, typ, name), pa.string())
    return pd.Series(pd.arrays.ArrowStringArray(out.cast(pa.large_string())),
                     index=core.index, dtype=TEXT)


def _codes(s: pd.Series) -> tuple[np.ndarray, pd.api.extensions.ExtensionArray]:
    """(code per row, distinct values); code 0 is the missing value."""
    codes, uniq = pd.factorize(s.astype(TEXT), use_na_sentinel=True)
    return codes.astype(np.int64) + 1, pd.array([pd.NA, *uniq], dtype=TEXT)


def _fits(keys: list[tuple[np.ndarray, object]]) -> bool:
    """The combined key of the three columns stays within int64."""
    total = 1.0
    for _, values in keys:
        total *= len(values)  # type: ignore[arg-type]
    return total < 2.0**62


def _category(core: pd.Series, typ: pd.Series, name: pd.Series) -> np.ndarray:
    def arr(s: pd.Series) -> pa.Array:
        return pc.fill_null(pa.array(s.astype(object), type=pa.string(), from_pandas=True), "")

    core_u = pc.utf8_upper(arr(core))
    text = pc.utf8_lower(pc.binary_join_element_wise(arr(typ), arr(name), " "))
    compute = pc.match_substring_regex(core_u,
                                       r"AI_CORE|AI_VECTOR|AI_CPU|MIX_AI|CUBE|VECTOR|AIC|AIV")
    comm_core = pc.is_in(core_u, pa.array(["HCCL", "COMMUNICATION"]))
    comm_text = pc.match_substring_regex(
        text, r"(?:^|\s)hcom|allreduce|allgather|reducescatter|alltoall|nccl|hccl|lccl|send|"
        r"receive")
    comm = pc.or_(comm_core, pc.and_(pc.invert(compute), comm_text))
    mem_text = pc.or_(pc.match_substring_regex(text, r"memcpy|memset|memory_copy"),
                      pc.is_in(core_u, pa.array(["MEMCPY_ASYNC", "SDMA", "DSA_SQE"])))
    mem = pc.and_(pc.invert(compute), mem_text)
    out = pc.if_else(comm, "communication", pc.if_else(
        mem, "memory", pc.if_else(compute, "compute", "other")))
    return out.to_numpy(zero_copy_only=False)


def kineto_kind(cats: pd.Series) -> pd.Series:
    """The kind (:data:`KINETO_KINDS`) of each Kineto event category; ``other`` if unknown.

    Worked out once per distinct category; NA stays NA.
    """
    def of(u: pd.Series) -> pd.Series:
        low = u.astype(TEXT).str.strip().str.lower()
        return low.map(lambda c: KINETO_KINDS.get(c, "other") if isinstance(c, str)
                       else pd.NA).astype(TEXT)
    return per_distinct(cats, of)


def comm_family(names: pd.Series, vendor: str | None = None) -> pd.Series:
    """Communication library of each kernel name (:data:`COMM_KERNEL_FAMILIES`), else NA.

    ``vendor="amd"`` names the NCCL family ``rccl`` (ROCm's RCCL keeps NCCL's kernel
    names). Worked out once per distinct name.
    """
    nccl = "rccl" if vendor == "amd" else "nccl"

    def of(u: pd.Series) -> pd.Series:
        low = u.astype(TEXT).fillna("").str.lower()
        out = pd.Series(pd.NA, index=u.index, dtype=TEXT)
        # one vectorised pass finds the few communication names; only they are named
        hit = low.str.contains(_ANY_COMM_KERNEL, regex=True).fillna(False).to_numpy(bool)
        for i in np.flatnonzero(hit):
            fam = next(f for f, rx in _COMM_KERNEL_RE if rx.search(low.iat[i]))
            out.iat[i] = nccl if fam == "nccl" else fam
        return out
    return per_distinct(names, of)


def host_comm_family(names: pd.Series) -> pd.Series:
    """Family of each host communication event (:data:`HOST_COMM_FAMILIES`), else NA."""
    def of(u: pd.Series) -> pd.Series:
        out = pd.Series(pd.NA, index=u.index, dtype=TEXT)
        hit = u.str.contains(HOST_COMM_PATTERN, regex=True).fillna(False).to_numpy(bool)
        if not hit.any():
            return out
        low = u[hit].str.lower()
        fam = pd.Series(pd.NA, index=low.index, dtype=TEXT)
        for name, rx in reversed(HOST_COMM_FAMILIES):  # the first listed wins
            fam[low.str.contains(rx, regex=True).fillna(False).to_numpy(bool)] = name
        out[hit] = fam.to_numpy(dtype=object)
        return out
    return per_distinct(names, of)


#: The key of the summary entry of a step in the HCCL JSON files (the sum of its operations,
#: links or bandwidths; msprof-analyze's cluster files have it too).
TOTAL_OP_INFO = "Total Op Info"


def is_total_op(key: object) -> bool:
    """Whether an HCCL JSON key (or an operation name of the DB export) is a step's
    ``Total Op Info`` summary rather than one operation: read as an operation, it would count
    every link and every millisecond a second time."""
    return str(key).strip().startswith(TOTAL_OP_INFO)
