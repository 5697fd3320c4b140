"""The kind of a collective from its operator name (HCCL, NCCL, gloo, legacy MindSpore).

A module of its own so that every analysis that groups communication by kind (the
communication analyses, the per-rank summaries, the job inference) can use it without
importing one another.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .._text_dtype import TEXT

__all__ = ["comm_op_type", "OP_TYPES"]

#: ``(kind, regular expression)`` pairs, tried in order on the lower-cased name.
OP_TYPES = (
    # legacy MindSpore step trace: the all-reduce phase of a stream (stream_520_parallel_0),
    # what MindInsight's timeline draws as its AllReduce track (pid 10000)
    ("allreduce", r"^stream_\d+_parallel_\d+$"),
    ("allreduce", r"all_?reduce"), ("allgather", r"all_?gather"),
    ("reducescatter", r"reduce_?scatter"), ("alltoall", r"all_?to_?all"),
    # expert-parallel dispatch / combine (DeepEP, MoE token exchange) are all-to-alls
    ("alltoall", r"(?:^|[^a-z])(?:notify_)?(?:dispatch|combine)\b|dispatch<|combine<"),
    ("broadcast", r"broadcast"), ("sendrecv", r"sendrecv|send_?recv"),
    ("receive", r"receive|recv"), ("send", r"send"), ("reduce", r"reduce"),
    ("barrier", r"barrier"),
)

_OP_TYPE_RE = [(kind, re.compile(rx)) for kind, rx in OP_TYPES]


def comm_op_type(names: pd.Series) -> pd.Series:
    """Collective kind of each operator name (``allreduce``, ``send``, ...; else ``other``).

    Works on HCCL (``hcom_allReduce__586_0_1``), NCCL (``ncclKernel_AllReduce_RING_...``,
    ``ncclDevKernel_SendRecv``), gloo (``gloo:all_reduce``), DeepEP
    (``deep_ep::internode::dispatch<...>``: dispatch and combine are all-to-alls) and legacy
    MindSpore (``AllReduce-op4582``, and the step trace's all-reduce phases
    ``stream_520_parallel_0``) names.
    """
    # each distinct name (missing as "") matched once, the kinds spread back by code: a
    # profile has a few dozen distinct collective names
    codes, uniq = pd.factorize(names.astype(TEXT).fillna(""), use_na_sentinel=False)
    kinds = np.array([next((kind for kind, rx in _OP_TYPE_RE if rx.search(str(u).lower())),
                           "other") for u in uniq], dtype=object)
    return pd.Series(kinds[codes], index=names.index).astype(str)
