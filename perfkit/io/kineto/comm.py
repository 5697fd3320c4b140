"""The ``comm_ops`` table of a Kineto trace: communication kernels or host collectives.

:func:`_kernel_comm_ops` makes one row per communication kernel, with the process group,
collective and message size its args record (PyTorch >= 2.1); :func:`_host_comm_ops` one
row per collective run on the host (a CPU-only run, or gloo with CUDA tensors).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._common.distinct import numeric, text
from ..canonical.categories import host_comm_family
from ..chrome.tables import rel, step_index
from .hostlink import _host_collectives
from .nesting import _outermost

__all__: list[str] = []  # private to the Kineto reader


_DTYPE_BYTES = {"float": 4, "float32": 4, "float64": 8, "double": 8, "half": 2, "float16": 2,
                "bfloat16": 2, "c10::bfloat16": 2, "c10::half": 2, "int": 4, "int32": 4,
                "int64": 8, "long": 8, "long int": 8, "int8": 1, "uint8": 1,
                "unsigned char": 1, "signed char": 1, "char": 1, "bool": 1, "int16": 2,
                "short": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "c10::float8_e4m3fn": 1,
                "c10::float8_e5m2": 1}
"""Bytes per element of the ``dtype`` names a collective's args use (lower-cased)."""


def _kernel_comm_ops(dev: pd.DataFrame, kernels: pd.DataFrame, runtime: pd.DataFrame,
                     cpu: pd.DataFrame, library: str = "nccl") -> pd.DataFrame:
    """One row per communication kernel, named and sized by its collective's host events.

    ``name`` is the host's name of the collective when the host records one
    (:func:`~perfkit.io.kineto.hostlink._host_collectives`: the ``nccl:*`` annotation, else
    ``<library>:<Collective name>`` of ``record_param_comms``, else the ``c10d::*``
    operator), the kernel's name otherwise; ``kernel`` is always the kernel's name,
    ``named_by`` says which (``host`` or ``kernel``) and ``linked_by`` how the host events
    were found (``launch``, ``time``, NA). ``size_bytes`` follows nccl-tests'
    convention (the larger of the input and output buffers: all-gather's output,
    reduce-scatter's input, the one buffer of the others) = nelems × bytes per element of
    ``dtype``; ``group_size`` is the ``Group size`` arg, else the count of ``Process Group
    Ranks``.
    """
    comm = (kernels["category"] == "communication").to_numpy(bool)
    k = kernels[comm]
    d = dev[comm]
    host = _host_collectives(d, runtime, cpu)
    kernel_name = text(k["name"])
    coll = pd.Series(host["collective"].to_numpy(dtype=object), dtype=TEXT)
    host_name = host["host_name"].astype(TEXT)
    by_args = (library + ":" + coll.str.lstrip("_")).where(coll.notna())
    name = host_name.where(host_name.notna(), by_args)
    named = name.notna().to_numpy(bool)
    out = pd.DataFrame({
        "step": k["step"].to_numpy(),
        "name": pd.array(np.where(named, name.to_numpy(dtype=object),
                                  kernel_name.to_numpy(dtype=object)), dtype=TEXT),
        "kernel": kernel_name.array,
        "named_by": pd.array(np.where(named, "host", "kernel"), dtype=TEXT),
        # how the host events were found: the kernel's launch, else its start (time)
        "linked_by": host["linked_by"].astype(TEXT).array,
        "start_us": k["start_us"].to_numpy(), "elapse_us": k["dur_us"].to_numpy(),
        "family": k["family"].array,
    })
    if host["pg_name"].notna().any():
        out["group"] = pd.array([None if pd.isna(v) else str(v) for v in host["pg_name"]],
                                dtype=TEXT)
    if coll.notna().any():
        out["collective"] = coll.array
    sizes = _sizes(host)
    for col, v in sizes.items():
        out[col] = v
    return out


def _sizes(host: pd.DataFrame) -> dict[str, object]:
    """``in_msg_bytes``, ``out_msg_bytes``, ``size_bytes``, ``dtype`` and ``group_size``
    of each collective from its args (absent where no collective records them)."""
    out: dict[str, object] = {}
    nel_in = pd.to_numeric(host["in_nelems"], errors="coerce").to_numpy(np.float64)
    nel_out = pd.to_numeric(host["out_nelems"], errors="coerce").to_numpy(np.float64)
    if np.isfinite(nel_in).any() or np.isfinite(nel_out).any():
        dt = pd.Series(host["msg_dtype"].to_numpy(dtype=object), dtype=TEXT)
        per = dt.str.lower().map(_DTYPE_BYTES.get).astype("Float64").astype("float64") \
            .to_numpy()
        out["in_msg_bytes"] = nel_in * per
        out["out_msg_bytes"] = nel_out * per
        out["size_bytes"] = np.fmax(nel_in * per, nel_out * per)
        out["dtype"] = dt.array
    size = pd.to_numeric(host["group_size"], errors="coerce").to_numpy(np.float64)
    ranks = np.array([_count_ranks(v) for v in host["pg_ranks"]], dtype=np.float64)
    size = np.where(np.isfinite(size), size, ranks)
    if np.isfinite(size).any():
        out["group_size"] = pd.array(np.where(np.isfinite(size), size, np.nan)).astype("Int64")
    return out


def _count_ranks(value: object) -> float:
    """How many ranks a ``Process Group Ranks`` arg (``"[0, 1, 2, 3]"``) lists; NaN if none."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return np.nan
    inner = str(value).strip().strip("[]").strip()
    return float(len([p for p in inner.split(",") if p.strip()])) if inner else np.nan


def _host_comm_ops(cpu: pd.DataFrame, spans: pd.DataFrame, origin: int | None
                   ) -> pd.DataFrame:
    """The collectives of a CPU-only run, one row each, from the host events.

    Each collective is recorded at several levels: the ``c10d::allreduce_`` operator the
    training code called (returning early when the work is async), ``record_param_comms``
    inside it, and the backend's span where the data moves (``gloo:all_reduce`` on one of
    gloo's threads). The backend's spans are taken when the trace has them, else the
    outermost c10d operators (``record_param_comms`` where it stands alone).
    """
    fam = host_comm_family(cpu["name"])
    for family in ("gloo", "c10d", "nccl"):
        sel = fam.eq(family).fillna(False).to_numpy(bool)
        if sel.any():
            break
    else:
        return pd.DataFrame({"step": [], "name": [], "start_us": [], "elapse_us": [],
                             "family": pd.array([], dtype=TEXT),
                             "thread": pd.array([], dtype="Int64")})
    c = cpu[sel]
    if family == "c10d":
        c = c[_outermost(c)]
    ts = c["ts_ns"].to_numpy()
    return pd.DataFrame({
        "step": step_index(ts, spans),
        "name": text(c["name"]).array,
        "start_us": rel(ts, origin),
        "elapse_us": c["dur_us"].to_numpy(np.float64),
        "family": pd.array([family] * len(c), dtype=TEXT),
        "thread": pd.array(numeric(c["tid"]).astype(np.float64), dtype="Float64"
                           ).astype("Int64"),
    })


def named_note(comm_ops: pd.DataFrame) -> str:
    """The clause of the ``comm_ops`` note on how many kernels their host events name
    (ending in "; ", empty when none is)."""
    if "named_by" not in comm_ops.columns or not len(comm_ops):
        return ""
    n = int(comm_ops["named_by"].eq("host").sum())
    if not n:  # each is named by its kernel, as a trace without host collectives says
        return ""
    sized = int(comm_ops["size_bytes"].notna().sum()) if "size_bytes" in comm_ops else 0
    return (f"{n} of {len(comm_ops)} kernels named by the host collective their launch ran "
            "in (nccl:* / c10d::* / record_param_comms; without a launch in the trace, the "
            "one open when the kernel started), the rest by the kernel's name"
            + (f"; {sized} sized from the collective's args (size_bytes, group_size)"
               if sized else "") + "; ")
