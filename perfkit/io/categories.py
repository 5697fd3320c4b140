"""Device task categories shared by the Ascend readers and the trace-derived tables.

``compute`` / ``communication`` / ``memory`` / ``other`` from the task type (the
``Accelerator Core`` / ``Task Type`` column), the operator type and the task name, all
vectorised with pyarrow compute.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["category"]


def category(core: pd.Series, typ: pd.Series, name: pd.Series) -> pd.Series:
    """compute / communication / memory / other from task type, op type and name."""

    def arr(s: pd.Series) -> pa.Array:
        return pc.fill_null(pa.array(s.astype(object), type=pa.string(), from_pandas=True), "")

    core_u = pc.utf8_upper(arr(core))
    text = pc.utf8_lower(pc.binary_join_element_wise(arr(typ), arr(name), " "))
    compute = pc.match_substring_regex(core_u,
                                       r"AI_CORE|AI_VECTOR|AI_CPU|MIX_AI|CUBE|VECTOR|AIC|AIV")
    comm_core = pc.is_in(core_u, pa.array(["HCCL", "COMMUNICATION"]))
    comm_text = pc.match_substring_regex(
        text, r"(?:^|\s)hcom|allreduce|allgather|reducescatter|alltoall|nccl|send|receive")
    comm = pc.or_(comm_core, pc.and_(pc.invert(compute), comm_text))
    mem_text = pc.or_(pc.match_substring_regex(text, r"memcpy|memset|memory_copy"),
                      pc.is_in(core_u, pa.array(["MEMCPY_ASYNC", "SDMA", "DSA_SQE"])))
    mem = pc.and_(pc.invert(compute), mem_text)
    out = pc.if_else(comm, "communication", pc.if_else(
        mem, "memory", pc.if_else(compute, "compute", "other")))
    return pd.Series(out.to_numpy(zero_copy_only=False), index=core.index, dtype="string")
