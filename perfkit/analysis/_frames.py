"""How an analysis consumes tables that may be lazy (a Cluster from ``load(engine="dask")``).

A lazy cluster (:class:`perfkit.io.engines.dask.DaskCluster`, ``cluster.lazy is True``) has
``dask.dataframe`` tables with one partition per rank. An analysis must never pull a whole
table into one process; it turns a lazy table into a *small* pandas frame first, in one
of two ways:

- **aggregate**: a groupby-aggregation that Dask runs per partition and combines
  (:func:`aggregate`), or a column selection/filter that leaves few rows (:func:`collect`);
- **per rank**: a pandas function that only ever looks at one rank at a time, run on every
  rank where its data lies (:func:`per_rank`), its small results concatenated.

Everything else (sorting, z-scores across ranks, joins of small results) then happens in
pandas exactly as for an eager Profile or Cluster. Nothing here imports Dask: a lazy frame
is recognised by its type's module, so eager use costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["is_lazy", "is_lazy_frame", "collect", "aggregate", "per_rank", "OUT_OF_SCOPE",
           "table_columns",
           "any_values", "row_count", "distinct", "transform", "with_position",
           "compute_all"]


def is_lazy_frame(frame: Any) -> bool:
    """True for a ``dask.dataframe`` DataFrame or Series (not yet computed)."""
    return type(frame).__module__.split(".")[0] == "dask"


def is_lazy(obj: Any) -> bool:
    """True for a Profile/Cluster with lazy tables, or for a lazy frame itself."""
    return bool(getattr(obj, "lazy", False)) or is_lazy_frame(obj)


def table_columns(obj: Any, name: str) -> list[str]:
    """Columns of table ``name`` of ``obj`` without reading its rows (lazy or not)."""
    try:
        return list(getattr(obj, name).columns)
    except Exception:  # noqa: BLE001 - a broken table has no columns
        return []


def collect(frame: Any, columns: Sequence[str] | None = None,
            where: Callable[[Any], Any] | None = None) -> pd.DataFrame:
    """A pandas frame from a (possibly lazy) frame: select, filter, then compute.

    Parameters
    ----------
    frame : pandas or dask DataFrame
    columns : sequence of str, optional
        Keep only these columns (those present); Dask then reads only those (and the ones
        ``where`` uses).
    where : callable, optional
        ``where(frame) -> boolean mask`` on the full frame; applied to either kind of frame
        before computing, so that only the matching rows leave the workers.

    Returns
    -------
    DataFrame
        With a fresh 0..n-1 index (partitions of a lazy frame each start at 0).
    """
    if not is_lazy_frame(frame):  # the mask on the full frame, the rows of the columns kept
        mask = where(frame) if where is not None else None
        if columns is not None:
            frame = frame[[c for c in columns if c in frame.columns]]
        return frame if mask is None else frame[mask]
    if where is not None:
        frame = frame[where(frame)]
    if columns is not None:
        frame = frame[[c for c in columns if c in frame.columns]]
    return frame.compute().reset_index(drop=True)


def aggregate(frame: Any, by: Sequence[str], spec: Mapping[str, Sequence[str]],
              dropna: bool = True) -> pd.DataFrame:
    """Group ``frame`` by ``by`` and aggregate, on pandas or Dask, into a flat pandas frame.

    Parameters
    ----------
    frame : pandas or dask DataFrame
    by : sequence of str
        Group keys.
    spec : mapping
        ``{column: [function, ...]}`` with functions Dask can combine exactly across
        partitions: ``"sum"``, ``"count"``, ``"size"``, ``"min"``, ``"max"``, ``"first"``
        (first non-missing value in row order; partitions are in rank order). Compute
        means and ratios from sums and counts afterwards.
    dropna : bool
        Drop groups whose key is NA (pandas' default).

    Returns
    -------
    DataFrame
        Keys as columns, then ``<column>_<function>`` columns, sorted by the keys.

    Notes
    -----
    For a lazy cluster whose keys include ``rank``, each group lies in one partition, so
    sums are the same floating-point numbers pandas gives on the whole table.
    """
    by = list(by)
    cols = [*by, *[c for c in spec if c not in by]]
    g = frame[cols].groupby(by, dropna=dropna)
    agg = {c: list(fns) for c, fns in spec.items()}
    out = g.agg(agg, split_out=1) if is_lazy_frame(frame) else g.agg(agg)
    if is_lazy_frame(out):
        out = out.compute()
    out.columns = [f"{c}_{fn}" for c, fn in out.columns]
    return out.sort_index(kind="mergesort").reset_index()


#: The key of ``DataFrame.attrs`` by which a rank's result tells :func:`per_rank` that the
#: rank is no part of the cluster's figures (every task of it left out, as the eager
#: analysis of the whole cluster leaves them out): its notes are not the cluster's.
OUT_OF_SCOPE = "perfkit_out_of_scope"


def per_rank(obj: Any, func: Callable[..., pd.DataFrame], *args: Any,
             **kwargs: Any) -> pd.DataFrame:
    """Run a rank-separable pandas analysis on an eager or lazy Profile/Cluster.

    ``func(profile_like, *args, **kwargs) -> DataFrame`` must give, for a cluster, the
    concatenation in rank order of what it gives for each rank alone (true of anything
    computed per ``(rank, ...)`` group). An eager object is passed to ``func`` as it is; for
    a lazy cluster ``func`` runs on every rank as a Dask task
    (:meth:`~perfkit.io.engines.dask.DaskCluster.map_ranks`: a pandas Profile of that rank,
    on the cluster's clock) and the small results are concatenated here.

    Returns
    -------
    DataFrame
        Index reset; ``attrs["notes"]`` is the union of the ranks' notes, less those of a
        rank whose result is marked :data:`OUT_OF_SCOPE` where some rank's is not.
    """
    if not getattr(obj, "lazy", False):
        return func(obj, *args, **kwargs)
    results = obj.map_ranks(func, *args, **kwargs)
    # a rank out of scope says nothing of the cluster, unless no rank is in scope
    said = [r for r in results if not r.attrs.get(OUT_OF_SCOPE)] or results
    notes: list[str] = []
    for r in said:
        for n in r.attrs.get("notes", []):
            if n not in notes:
                notes.append(n)
    frames = [r for r in results if len(r)] or results[:1]
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    out.attrs.pop(OUT_OF_SCOPE, None)
    out.attrs["notes"] = notes
    return out


def compute_all(*values: Any) -> tuple[Any, ...]:
    """Compute any lazy values among ``values`` in one Dask pass; others pass through."""
    lazy = [i for i, v in enumerate(values) if is_lazy_frame(v)]
    if not lazy:
        return values
    import dask

    done = dask.compute(*[values[i] for i in lazy])
    out = list(values)
    for i, v in zip(lazy, done, strict=True):
        out[i] = v
    return tuple(out)


def any_values(frame: Any, column: str) -> bool:
    """Whether ``column`` exists and holds a non-missing value (pandas or lazy frame).

    The lazy counterpart of :func:`perfkit.analysis._util.has_values`: one small Dask
    reduction instead of reading the column.
    """
    if frame is None or column not in frame.columns:
        return False
    (hit,) = compute_all(frame[column].notnull().any())
    return bool(hit)


def row_count(frame: Any) -> int:
    """Number of rows of a pandas or lazy frame (a lazy frame counts per partition)."""
    if not is_lazy_frame(frame):
        return len(frame)
    return int(frame.map_partitions(len).compute().sum())


def distinct(frame: Any, columns: Sequence[str]) -> pd.DataFrame:
    """Distinct rows of ``columns`` (NA counts as a value), as a small pandas frame.

    For a lazy frame each partition is deduplicated where it lies, then the (few) rows
    are deduplicated again here; the first occurrence in row order is kept.
    """
    sub = frame[list(columns)]
    if is_lazy_frame(sub):
        sub = sub.map_partitions(pd.DataFrame.drop_duplicates).compute()
    return sub.drop_duplicates().reset_index(drop=True)


def transform(frame: Any, func: Callable[[pd.DataFrame], pd.DataFrame]) -> Any:
    """Apply a row-wise pandas ``func`` (frame -> frame) to a pandas or lazy frame.

    ``func`` must treat every row on its own (or by distinct values, as the name
    classifiers do), so that running it per partition equals running it on the whole.
    """
    if not is_lazy_frame(frame):
        return func(frame)
    return frame.map_partitions(func, meta=func(frame._meta))


def _positions(frame: pd.DataFrame, partition_info: Mapping[str, Any] | None = None
               ) -> pd.DataFrame:
    part = int(partition_info["number"]) if partition_info else 0
    pos = np.arange(len(frame), dtype="float64") + float(part) * 2.0**40
    return frame.assign(_pos=pos)


def with_position(frame: Any) -> Any:
    """Add ``_pos``: a number that orders the rows as the concatenated eager table does.

    Partition ``i`` (rank ``ranks[i]``) gets ``i * 2**40 + row``; a pandas frame gets its
    row number. The minimum of ``_pos`` per group gives the order in which
    ``groupby(..., sort=False)`` meets the groups, so lazy and eager results can be put in
    the same order.
    """
    if not is_lazy_frame(frame):
        return _positions(frame)
    return frame.map_partitions(_positions, meta=_positions(frame._meta))
