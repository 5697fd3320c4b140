"""Device task categories shared by the Ascend readers and the trace-derived tables.

``compute`` / ``communication`` / ``memory`` / ``other`` from the task type (the
``Accelerator Core`` / ``Task Type`` column), the operator type and the task name, all
vectorised with pyarrow compute.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["category"]


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
        parts = [pd.Series(values[codes[first]], dtype="string") for codes, values in keys]
        out = pa.array(_category(*parts), pa.string()).take(pa.array(inverse))
    else:
        out = pa.array(_category(core, typ, name), pa.string())
    return pd.Series(pd.arrays.ArrowStringArray(out.cast(pa.large_string())),
                     index=core.index, dtype="string")


def _codes(s: pd.Series) -> tuple[np.ndarray, pd.api.extensions.ExtensionArray]:
    """(code per row, distinct values); code 0 is the missing value."""
    codes, uniq = pd.factorize(s.astype("string"), use_na_sentinel=True)
    return codes.astype(np.int64) + 1, pd.array([pd.NA, *uniq], dtype="string")


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
        text, r"(?:^|\s)hcom|allreduce|allgather|reducescatter|alltoall|nccl|send|receive")
    comm = pc.or_(comm_core, pc.and_(pc.invert(compute), comm_text))
    mem_text = pc.or_(pc.match_substring_regex(text, r"memcpy|memset|memory_copy"),
                      pc.is_in(core_u, pa.array(["MEMCPY_ASYNC", "SDMA", "DSA_SQE"])))
    mem = pc.and_(pc.invert(compute), mem_text)
    out = pc.if_else(comm, "communication", pc.if_else(
        mem, "memory", pc.if_else(compute, "compute", "other")))
    return out.to_numpy(zero_copy_only=False)
