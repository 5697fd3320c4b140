"""The all-reduces of activations in a forward pass: :func:`activation_reductions`.

Tensor parallelism (Megatron's row-parallel layers, vLLM's ``RowParallelLinear``, its
fused MoE and vocab-parallel embedding) leaves each rank a partial sum of the layer's
output: the attention's output projection, the MLP's down projection and the embedding
lookup each end in an all-reduce of that output over the tp group. Those all-reduces take
the activations, ``(tokens, width)``: as many rows as the forward matrix products around
them take. A data-parallel gradient reduction takes flat buckets of parameters' gradients
instead, and only in the backward pass.

:func:`activation_reductions` finds them among the host operators a PyTorch trace records
with their input shapes (``vllm::all_reduce`` ``(888, 2880)``, ``c10d::allreduce_``,
``nccl:all_reduce``): the outermost all-reduce of each call (the implementation a call
runs inside itself, ``symm_mem::multimem_all_reduce_`` on the flattened tensor, is the
same reduction) whose input has two or more dimensions and whose leading dimensions
multiply to the rows most forward matrix products take (the tokens). Deciding what they
mean for the layout is :mod:`perfkit.job.tp_reductions`'s.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._frames import collect, is_lazy, table_columns
from .._util import table
from ..collectives import comm_op_type
from .counts import _outermost
from .operators import _gemms
from .records import parse_shapes, shape_records

__all__ = ["ActivationReductions", "activation_reductions"]


@dataclass(frozen=True)
class ActivationReductions:
    """The all-reduces of activations a profile's forward pass records.

    Attributes
    ----------
    count : int
        Outermost all-reduce calls whose input is ``(tokens, width)`` (or more dimensions
        whose leading ones multiply to the tokens).
    all_reduces : int
        Outermost all-reduce calls with a recorded input shape, of any kind.
    between : int
        How many of the ``count`` start after a forward matrix product and before another
        on their rank (inside the forward pass, between the layers' products).
    tokens : int
        The rows most forward matrix products take.
    shapes : tuple of tuple of int
        The distinct input shapes of the ``count`` all-reduces, most frequent first.
    ranks : tuple of int
        The ranks they were read on.
    groups : tuple of str
        The process groups the all-reduce kernels record (``comm_ops``' ``group``);
        empty where they record none (``symm_mem`` kernels, older traces).
    """

    count: int
    all_reduces: int
    between: int
    tokens: int
    shapes: tuple[tuple[int, ...], ...]
    ranks: tuple[int, ...]
    groups: tuple[str, ...]


def activation_reductions(profile: Any) -> ActivationReductions | None:
    """The all-reduces of activations among the profile's host operators.

    Parameters
    ----------
    profile : Profile or Cluster
        A PyTorch trace recorded with ``record_shapes=True`` (its ``ops`` table carries
        ``input_shapes``).

    Returns
    -------
    ActivationReductions or None
        None for a lazy cluster, a profile without host operator shapes, without forward
        matrix products, or without any all-reduce of activations.
    """
    if is_lazy(profile) or not {"name", "input_shapes", "start_us", "rank"} <= set(
            table_columns(profile, "ops")):
        return None
    recs, _ = shape_records(profile, tables=("ops",))
    if recs.empty:
        return None
    shapes = [parse_shapes(t) for t in recs["input_shapes"].astype(TEXT).fillna("")]
    products = [g for g in _gemms(recs, recs["label"].astype(str), shapes) if not g.backward]
    rows = Counter(m for g in products for m in {c[0] for c in g.cands})
    if not rows:
        return None
    tokens = rows.most_common(1)[0][0]
    reduces = _all_reduces(profile)
    if reduces.empty:
        return None
    dims = [next((s for s in parse_shapes(t) if s), ()) for t in reduces["input_shapes"]]
    act = np.array([len(s) >= 2 and int(np.prod(s[:-1], dtype=np.int64)) == tokens
                    for s in dims], dtype=bool)
    if not act.any():
        return None
    found = reduces[act]
    seen = Counter(tuple(s) for s, a in zip(dims, act, strict=True) if a)
    between = _between(found, products)
    return ActivationReductions(
        count=int(act.sum()), all_reduces=len(reduces), between=between, tokens=int(tokens),
        shapes=tuple(s for s, _ in seen.most_common()),
        ranks=tuple(sorted(int(r) for r in found["rank"].dropna().unique())),
        groups=_kernel_groups(profile))


def _all_reduces(profile: Any) -> pd.DataFrame:
    """The outermost all-reduce host operators with an input shape: ``rank``, ``lane``
    (the thread), ``start_us``, ``end_us``, ``input_shapes``."""
    cols = [c for c in ("rank", "thread", "start_us", "dur_us", "name", "input_shapes")
            if c in table_columns(profile, "ops")]
    ops = collect(table(profile, "ops"), cols, where=lambda f: f["name"].astype(TEXT)
                  .str.contains("reduce", case=False, regex=False).fillna(False))
    ops = ops[ops["input_shapes"].notna().to_numpy(bool)]
    if ops.empty:
        return ops
    ops = ops[(comm_op_type(ops["name"]) == "allreduce").to_numpy(bool)]
    lane = ops["thread"].astype(TEXT) if "thread" in ops.columns else \
        pd.Series(pd.NA, index=ops.index, dtype=TEXT)
    end = (ops["start_us"] + ops["dur_us"]).astype("Float64") if "dur_us" in ops.columns \
        else pd.Series(pd.NA, index=ops.index, dtype="Float64")
    frame = pd.DataFrame({"rank": ops["rank"].to_numpy(), "lane": lane.to_numpy(),
                          "start_us": ops["start_us"].to_numpy(np.float64),
                          "end_us": end.to_numpy(), "input_shapes": ops["input_shapes"]
                          .astype(TEXT).to_numpy()})
    return _outermost(frame).reset_index(drop=True)


def _between(found: pd.DataFrame, products: list[Any]) -> int:
    """How many of ``found`` have a forward matrix product before and after them on their
    rank (the products of :func:`~.operators._gemms`, by start)."""
    by_rank: dict[int, list[float]] = {}
    for g in products:
        by_rank.setdefault(int(g.rank), []).append(float(g.start))
    starts = {r: np.sort(np.asarray(v, dtype=np.float64)) for r, v in by_rank.items()}
    n = 0
    for rank, start in zip(found["rank"].to_numpy(), found["start_us"].to_numpy(np.float64),
                           strict=True):
        mine = starts.get(int(rank))
        if mine is None or not len(mine):
            continue
        n += int(mine[0] < start < mine[-1])
    return n


def _kernel_groups(profile: Any) -> tuple[str, ...]:
    """The process groups the profile's all-reduce kernels record, if any."""
    if not {"name", "group"} <= set(table_columns(profile, "comm_ops")):
        return ()
    ops = collect(table(profile, "comm_ops"), ["name", "group"])
    ops = ops[(comm_op_type(ops["name"]) == "allreduce").to_numpy(bool)]
    return tuple(sorted({str(g) for g in ops["group"].dropna()}))
