"""How often the layer's pattern repeats: layers per stage, micro-batches, recompute.

Backward attention kernels per step and micro-batch count the layers of a stage; embedding
lookups (or loss calls, :func:`_loss_calls`) count the micro-batches; forward attention
kernels beyond the layers count the layers recomputed in full.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...format import counted, listed, plural
from .fields import ShapeReading
from .operators import _Attn, _mode, _per_step, _typical
from .records import _GATED_ACT, _LOG_SOFTMAX, _LOSS, _NLL, _PLAIN_ACT

__all__: list[str] = []  # private to read_model


def _outermost(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows not run inside another of ``rows`` on their lane.

    A host operator runs the operators it calls inside its own span on the same thread:
    ``aten::cross_entropy_loss`` runs ``aten::_log_softmax``, and both are one loss call.
    Rows without a lane or an end (GPU kernels of a table without durations) are all kept.
    """
    if rows.empty or "end_us" not in rows.columns:
        return rows
    rank = rows["rank"].astype("Int64").fillna(-1).to_numpy(np.int64)
    lane = rows["lane"].astype(TEXT).fillna("").to_numpy(object)
    start = rows["start_us"].to_numpy(np.float64)
    end = rows["end_us"].astype("Float64").to_numpy(np.float64, na_value=np.nan)
    known = np.flatnonzero((lane != "") & ~np.isnan(end) & ~np.isnan(start))
    keep = np.ones(len(rows), dtype=bool)
    reach: dict[tuple[int, str], float] = {}
    # by lane, then start, the longer first: a call and its first inner call may start at
    # the same microsecond
    for i in sorted(known, key=lambda i: (rank[i], lane[i], start[i], -end[i])):
        key = (int(rank[i]), str(lane[i]))
        if start[i] < reach.get(key, -np.inf):
            keep[i] = False
        reach[key] = max(reach.get(key, -np.inf), end[i])
    return rows[keep]


def _loss_calls(recs: pd.DataFrame, label: pd.Series) -> pd.DataFrame:
    """The forward loss calls: one per micro-batch on the last stage.

    A loss operator (:data:`~.records._LOSS`) counts once with the parts it runs inside
    itself (:func:`_outermost`). A log-softmax is a loss only as a cross entropy's first half:
    inside a loss call (which counts already) or followed right away by a negative
    log-likelihood (:data:`~.records._NLL`) on its lane (``F.nll_loss(F.log_softmax(x),
    y)``, or a cross entropy's two kernels). Alone it is a model's output head, a
    classifier's prediction or a metric, and no micro-batch.
    """
    forward = ~recs["backward"].to_numpy(bool)
    lsm = label.str.contains(_LOG_SOFTMAX).to_numpy(bool) & forward
    loss = label.str.contains(_LOSS).to_numpy(bool) & forward & ~lsm
    if lsm.any():
        nll = label.str.contains(_NLL).to_numpy(bool) & forward
        loss |= _followed_by(recs, lsm, nll)
    return _outermost(recs[loss])


def _followed_by(recs: pd.DataFrame, first: np.ndarray, then: np.ndarray) -> np.ndarray:
    """Which rows of ``first`` have, as the next row on their rank, lane and step that is
    not run inside them (the outermost one when several start together), a row of
    ``then``.

    "Next" is the earliest start at or after the row's end (after its start, for a row
    without duration), the longest first among rows that start together, and the first in
    the table among equal ones: each row of ``first`` is one binary search in its lane's
    rows sorted that way."""
    rank = recs["rank"].astype("Int64").fillna(-1).to_numpy(np.int64)
    lane = recs["lane"].astype(TEXT).fillna("").to_numpy(object)
    step = recs["step"].astype("Float64").fillna(-1.0).to_numpy(np.float64)
    start = recs["start_us"].to_numpy(np.float64)
    end = recs["end_us"].astype("Float64").to_numpy(np.float64, na_value=np.nan) \
        if "end_us" in recs.columns else np.full(len(recs), np.nan)
    end = np.where(np.isnan(end), start, end)
    out = np.zeros(len(recs), dtype=bool)
    asked = np.flatnonzero(first)
    if not asked.size:
        return out
    group = np.zeros(len(recs), dtype=np.int64)
    for values in (rank, lane, step):  # one int per (rank, lane, step)
        codes, uniq = pd.factorize(values)
        group = group * (len(uniq) + 1) + codes + 1
    timed = np.flatnonzero(~np.isnan(start))  # a row without start follows nothing
    order = timed[np.lexsort((-end[timed], start[timed], group[timed]))]
    groups, starts = group[order], start[order]
    for i in asked:
        if np.isnan(start[i]):
            continue
        lo = np.searchsorted(groups, group[i], "left")
        hi = np.searchsorted(groups, group[i], "right")
        if end[i] > start[i]:
            j = lo + np.searchsorted(starts[lo:hi], end[i], "left")
        else:
            j = lo + np.searchsorted(starts[lo:hi], start[i], "right")
        if j < hi:
            out[i] = bool(then[order[j]])
    return out


def _lookups_per_table(emb: pd.DataFrame) -> tuple[int | None, int]:
    """The embedding lookups per step of one table, and how many tables were looked up.

    A model looks each of its tables up once per micro-batch (the tokens' table, a learned
    positions' table, a token-type table), so the lookups per step of one table count the
    micro-batches, not those of all the tables together. The tables are told apart by
    their shapes (lookups whose table is not recorded are one more); the count is the most
    common per-step count of each rank's most looked-up table.
    """
    key = emb["table"].map(lambda t: ",".join(map(str, t)) if t else "")
    per_rank: dict[int, int] = {}
    for _, part in emb.groupby(key.to_numpy(), sort=False):
        for rank, n in _typical(_per_step(part)).items():
            per_rank[rank] = max(per_rank.get(rank, 0), n)
    return _mode(list(per_rank.values())), int(key.nunique())


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
        m, tables = _lookups_per_table(e)
        each = f" of each of {tables} embedding tables" if tables > 1 else ""
        out.put("num_micro_batches", m, f"{where}: {counted(m, 'embedding lookup')}{each} "
                                         "per step on the first pipeline stage (one per "
                                         "micro-batch)")
    else:
        loss = _loss_calls(recs, label)
        if not loss.empty:
            m = _mode(list(_typical(_per_step(loss)).values()))
            what = "loss call" if out.source == "ops" else "loss kernel"
            out.put("num_micro_batches", m, f"{where}: {counted(m, what)} per step on the "
                                             "last stage (one per micro-batch)")
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
    if all(a.chain for a in att) and recs["backward"].any() and \
            not any(a.backward for a in att):
        # a backward pass whose bmm attentions are not found (copies or products of
        # other shapes among them): the forward kernels alone would count recomputed
        # layers twice, and say nothing of recompute
        why = (f"{where}: {att[0].what}: the profile has a backward pass, but no backward "
               "of its attentions run as batched products was found, so its layers are not "
               "counted")
        for name in ("num_layers", "layers_per_stage", "recompute_layers", "recompute"):
            out.put(name, None, why)
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
