"""Forward against backward attention tasks: the evidence of recompute.

:func:`recompute_evidence` counts, per rank, the attention passes of each direction: the
fused attention tasks (``FlashAttentionScore`` against ``FlashAttentionScoreGrad``, ...)
and the attention chains run as batched products (the ``q·kᵀ`` bmm, softmax, ``·v`` bmm
chains against their backward, :mod:`perfkit.analysis.shapes.bmm_attention`); their ratio
is about 1 without recompute and about 2 with full recompute. Only the steps whose device
tasks were recorded in full are counted (:func:`perfkit.analysis.recorded.
recorded_tasks`): a task list cut short can hold a step's forward without its backward.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._cluster_steps import per_rank_in_steps
from .._frames import compute_all, is_lazy
from .._shared import shared_factorize
from .._util import add_note, empty_frame, step_rows, table, take_rows, typed
from ..backward_pass import forward_only_operators
from ..compare import class_codes
from ..recorded import RECORDED, recorded_steps_text, recorded_tasks
from ..shapes.bmm_attention import has_qk_product, record_triples
from ..shapes.records import parse_shapes, shape_records
from .scope import _LANES, _scope

__all__ = ["recompute_evidence", "no_backward_reason"]


_BACKWARD = r"(?i)grad|bwd|backward"
#: Kernels that prepare or finish a fused attention pass rather than run one: FlashAttention
#: 2's backward ``flash_bwd_dot_do_o`` / ``flash_bwd_convert_dq`` / ``flash_bwd_clear_dkvaccum``
#: and its split-KV forward's ``combine``, FlashAttention 3's ``FlashAttnBwdPreprocess`` /
#: ``FlashAttnBwdPostprocessConvertdQ``: counted, each backward pass would count three.
_PASS_HELPER = r"(?i)preprocess|postprocess|convert_?dq|dot_do_o|clear_dkvaccum|combine"


def recompute_evidence(profile: Any, full_ratio: float = 1.8) -> pd.DataFrame:
    """Does the profile recompute the forward pass? Count forward vs backward attention.

    Every layer runs its attention forward once per micro-batch and its attention backward
    once; full recompute runs the forward a second time before the backward. The ratio of
    forward to backward attention passes is therefore about 1 without recompute and about
    2 with full recompute of every layer. A pass is a fused attention task
    (``FlashAttentionScore`` vs ``FlashAttentionScoreGrad``, ``flash_fwd`` vs
    ``flash_bwd``, ...) or an attention run as batched products
    (:func:`~perfkit.analysis.shapes.bmm_attention.record_triples`: a ``q·kᵀ`` bmm,
    softmax, ``·v`` bmm chain forward; the ``·v`` product's gradients,
    ``_softmax_backward_data`` and the ``q·kᵀ`` product's gradients backward), read from
    the device tasks' launching operators, else from the host operators (a CPU trace).
    A chain's direction is that of its members' shapes, not of the thread it runs on: a
    forward chain re-run in the backward pass is a forward pass.

    Returns
    -------
    DataFrame
        Per ``rank``: ``forward``, ``backward`` (task counts), ``ratio`` (forward /
        backward), ``recompute`` (``"full"`` when ratio >= ``full_ratio``, ``"partial"``
        when above 1.2, else ``"none"``) and ``recompute_share``: the share of the
        computation spent recomputing, ``(ratio - 1) / (ratio + 2)`` (a forward pass is
        about one third of forward + backward). Empty when no attention task is found
        in both directions, its note saying why: a profile of a forward pass only
        (:func:`~perfkit.analysis.backward_pass.forward_only_operators`: PyTorch host
        operators and none of autograd's backward ones) says so, whether or not it runs
        attention (fused kernels, or the batched-matmul chains of
        :mod:`perfkit.analysis.shapes.bmm_attention`). Only the tasks of the steps
        whose device tasks were recorded in full are counted, as the operator rules count them
        (:func:`~perfkit.analysis.recorded.recorded_tasks`): the fragment of a step
        cut short (``ascend/msinsight-pt-gpt3-old`` keeps 4 forward attention tasks of
        rank 0's step and no backward) would count passes the step did not finish; a
        note then names the steps counted.
    """
    cols = {"rank": "Int64", "forward": "int64", "backward": "int64", "ratio": "float64",
            "recompute": TEXT, "recompute_share": "float64"}
    if is_lazy(profile):  # counted per rank on that rank's worker
        out = per_rank_in_steps(profile, recompute_evidence, full_ratio)
        return _lazy_notes(typed(out, cols).reset_index(drop=True), out.attrs.get("notes", []),
                           profile)
    steps = table(profile, "steps")
    kernels, cut = recorded_tasks(table(profile, "kernels"), steps)
    k = _scope(kernels, include_communication=False, columns=_LANES)
    chains, chains_cut = _bmm_passes(profile, steps)
    cut = cut or chains_cut
    counted = None if cut is None else f"{_COUNTED}{recorded_steps_text(steps)}"
    if k.empty and chains.empty:
        return empty_frame(cols, counted or "the profile has no device tasks (kernels table)")
    n_forward_only = forward_only_operators(profile)
    if n_forward_only:  # attention or not, there is no backward pass to compare with
        return _with_note(empty_frame(cols, no_backward_reason(n_forward_only)), counted)
    passes = pd.concat([_fused_passes(k), chains], ignore_index=True)
    if passes.empty:
        return _with_note(empty_frame(cols, "no attention task to count forward and "
                                            "backward passes"), counted)
    g = passes.groupby("rank", dropna=False).agg(
        forward=("forward", "sum"), backward=("backward", "sum")).reset_index()
    if not ((g["forward"] > 0) & (g["backward"] > 0)).any():
        return _with_note(empty_frame(cols, (
            f"attention passes of only one direction ({int(g['forward'].sum()):,} forward, "
            f"{int(g['backward'].sum()):,} backward): there is no pair to compare")), counted)
    g = g[(g["forward"] > 0) & (g["backward"] > 0)]
    g["ratio"] = g["forward"] / g["backward"]
    g["recompute"] = np.where(g["ratio"] >= full_ratio, "full",
                              np.where(g["ratio"] > 1.2, "partial", "none"))
    g["recompute_share"] = ((g["ratio"] - 1.0) / (g["ratio"] + 2.0)).clip(lower=0.0)
    return _with_note(typed(g, cols).reset_index(drop=True), counted)


def _fused_passes(k: pd.DataFrame) -> pd.DataFrame:
    """One row per fused attention task of ``k`` that runs a pass (those that prepare or
    finish one, :data:`_PASS_HELPER`, left out): ``rank``, ``forward`` and ``backward``
    (1 or 0, by whether its type or name says it is a gradient)."""
    if k.empty:
        return pd.DataFrame({"rank": pd.Series(dtype="Int64"),
                             "forward": pd.Series(dtype="int64"),
                             "backward": pd.Series(dtype="int64")})
    labels, cls = class_codes(k["name"], k.get("type"), k.get("category"))
    att = take_rows(k, np.isin(cls, np.flatnonzero(labels == "attention")))
    label = att["type"].astype(TEXT).fillna("") + " " + att["name"].astype(TEXT)
    helper = att["name"].astype(TEXT).str.contains(_PASS_HELPER, regex=True)
    keep = ~helper.fillna(False).to_numpy(bool)
    att, label = att[keep], label[keep]
    bwd = label.str.contains(_BACKWARD, regex=True).fillna(False).to_numpy(bool)
    return pd.DataFrame({"rank": att["rank"].astype("Int64").to_numpy(),
                         "forward": (~bwd).astype(np.int64), "backward": bwd.astype(np.int64)})


def _bmm_passes(profile: Any, steps: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """One row per attention chain run as batched products (``rank``, ``forward``,
    ``backward``: 1 or 0, by the chain's kind), over the steps recorded in full, and the
    note of :func:`~perfkit.analysis.recorded.recorded_tasks` when some were left out."""
    empty = pd.DataFrame({"rank": pd.Series(dtype="Int64"), "forward": pd.Series(dtype="int64"),
                          "backward": pd.Series(dtype="int64")})
    if not _any_softmax(profile):  # no chain without one: the shapes are not read at all
        return empty, None
    recs, _ = shape_records(profile)
    if recs.empty or not has_qk_product(recs["label"], recs["input_shapes"]):
        return empty, None
    texts = recs["input_shapes"].astype(TEXT).fillna("")
    parsed = {t: parse_shapes(t) for t in texts.unique()}
    found = record_triples(recs, [parsed[t] for t in texts])
    if not found:
        return empty, None
    at = [t.qk for t in found]
    bwd = np.array([t.backward for t in found], dtype=bool)
    chains = pd.DataFrame({"rank": recs["rank"].astype("Int64").to_numpy()[at],
                           "step": recs["step"].to_numpy()[at],
                           "forward": (~bwd).astype(np.int64),
                           "backward": bwd.astype(np.int64)})
    chains, cut = recorded_tasks(chains, steps)
    # a chain of no step (an operator run before the first step) is left out where others
    # have one, as the device tasks of no step are (in_steps)
    stepped = step_rows(chains)
    if stepped is not None:
        chains = chains[stepped]
    return chains[["rank", "forward", "backward"]].reset_index(drop=True), cut


#: A softmax or its backward under any profiler's name (``aten::softmax``,
#: ``cunn_SoftMaxForward``, ``ScaledMaskedSoftmax``, ``_softmax_backward_data``), not a
#: log-softmax (a loss's, ``LogSoftmaxV2``, ``aten::_log_softmax``).
_ANY_SOFTMAX = re.compile(r"(?i)(?<!log)(?<!log_)soft_?max")


def _any_softmax(profile: Any) -> bool:
    """Whether any device task's name or type, or host operator's name, is a softmax: the
    middle of every attention run as batched products. Read from the distinct names
    (coded once per ``advise`` call), so that a profile without one (a CNN's million
    tasks) does not pay for reading its shapes."""
    for name, cols in (("kernels", ("name", "type")), ("ops", ("name",))):
        frame = table(profile, name)
        for col in cols:
            if is_lazy(frame):
                return True  # not read here: the shapes decide, as before
            if frame.empty or col not in frame.columns:
                continue
            _codes, uniq = shared_factorize(frame[col].astype(TEXT),
                                            use_na_sentinel=False)
            # the few distinct names, searched by Python's re: Arrow's RE2 (pandas 2's
            # search of Arrow text) has no look-behind
            if any(isinstance(v, str) and _ANY_SOFTMAX.search(v) for v in uniq):
                return True
    return False


def no_backward_reason(n_operators: int) -> str:
    """Why recompute cannot be seen in a profile of a forward pass only, in words (the
    shapes' reading says the same, :func:`perfkit.analysis.shapes.read_model`)."""
    return (f"no backward kernels: recompute cannot be seen, since none of the profile's "
            f"{n_operators:,} PyTorch operators is an autograd or *Backward one: it runs a "
            "forward pass only")


#: How the note of the steps counted begins (the steps in words follow).
_COUNTED = "attention passes counted over the steps whose device tasks were recorded in full: "


def _lazy_notes(out: pd.DataFrame, notes: list[str], profile: Any) -> pd.DataFrame:
    """``out``, a lazy cluster's :func:`recompute_evidence` put together from its ranks',
    with the notes the eager cluster's gives.

    A rank's note of the steps counted names that rank's steps only (``"no step of 1"``
    where rank 0's step was recorded in full and rank 1's was not): where some rank left
    tasks out, it gives way to the note of the cluster's steps, which is kept beside a
    result as the eager one keeps it. The ranks' other notes say why nothing was found, so
    they are kept only where nothing was.
    """
    cut = any(str(n).startswith(_COUNTED) for n in notes)
    kept = [n for n in notes if not str(n).startswith(_COUNTED)] if out.empty else []
    if cut:
        (steps,) = compute_all(table(profile, "steps")[["rank", "step", RECORDED]])
        kept.append(f"{_COUNTED}{recorded_steps_text(steps)}")
    out.attrs["notes"] = kept
    return out


def _with_note(frame: pd.DataFrame, note: str | None) -> pd.DataFrame:
    """``frame`` with ``note`` added to its notes (when there is one)."""
    if note:
        add_note(frame, note)
    return frame
