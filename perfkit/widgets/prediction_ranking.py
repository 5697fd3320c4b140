"""The Planner's ranking of layouts: every layout of the job predicted by the fit's model
(:func:`ranked_layouts`), the fastest that fit beside the profiled one (:func:`best_layouts`)
and the sentence that compares them (:func:`ranking_sentence`); re-exported from
:mod:`perfkit.widgets.prediction`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..calc.rates import Rates
from ..format import (
    band_range_text,
    bytes_text,
    count_text,
    counted,
    plural,
    share_text,
    time_text,
)
from ..job import Job
from ..job.inference_mfu import packed_step
from ..plan import search, to_parallel_config
from ..specs import ParallelConfig
from .planner_words import layout_changes, stages_text
from .prediction_fit import PlannerFit

__all__ = ["ranked_layouts", "best_layouts", "BEST_COLUMNS", "ranking_sentence", "band_text",
           "memory_text", "batch_text", "packed_step_tokens"]


def packed_step_tokens(job: Job | None) -> int | None:
    """The tokens of one batch row where ``job``'s step packs its tokens (vLLM: the trace
    shows the step's tokens, not their sequences; :func:`perfkit.job.inference_mfu.
    packed_step`), None where its batch counts sequences."""
    if job is None or not packed_step(job) or not job.seq_length:
        return None
    return int(job.seq_length)


def batch_text(batch: int, packed_tokens: int | None = None) -> str:
    """A global batch in the words of its basis: ``counted(batch, "sequence")``, or, for a
    packed step (``packed_tokens`` tokens a row, :func:`packed_step_tokens`), its batch
    rows and their tokens ("1 batch row of 888 packed tokens"), since the trace shows no
    sequences."""
    if packed_tokens is None:
        return counted(batch, "sequence")
    return f"{counted(batch, 'batch row')} of {packed_tokens:,} packed tokens"


def ranked_layouts(job: Job, fit: PlannerFit, num_devices: int | None = None,
                   global_batch_size: int | None = None) -> pd.DataFrame:
    """Every layout of the job ranked by :func:`perfkit.plan.search` with the model of
    :func:`predict_layout`: each row's step time and memory are what ``predict_layout``
    gives for its layout.

    Parameters
    ----------
    job : perfkit.Job
        Complete; its model and hardware, and by default its devices and global batch.
    fit : PlannerFit
        From :func:`fit_job`: its calibration, or none: the step model at perfkit's
        default rates (``search(..., rates=Rates(gradient_bytes=job.gradient_bytes))``)
        with the job's activation accounting, static-memory scheme and type, as
        :func:`predict_layout` predicts uncalibrated.
    num_devices, global_batch_size : int, optional

    Returns
    -------
    pandas.DataFrame
        :func:`perfkit.plan.search` with ``include_rejected=True``, with ``low_s`` and
        ``high_s``, the band of :func:`perfkit.plan.predict` (uncalibrated, its default
        uncertainty only).
    """
    devices = int(num_devices or job.world_size)
    batch = int(global_batch_size or job.global_batch_size)
    cal = fit.calibration
    kwargs: dict[str, Any] = {"include_rejected": True}
    if cal is not None:
        kwargs.update(calibration=cal, static_scheme=cal.job.static_scheme,
                      dtype=cal.job.dtype)
    else:  # predict_layout's uncalibrated model: default rates, the job's conventions
        kwargs.update(rates=Rates(gradient_bytes=job.gradient_bytes),
                      static_scheme=job.static_scheme, dtype=job.dtype,
                      activation_model=job.activation_model)
    return search(job.model, job.hardware, devices, batch, **kwargs)


#: Columns of :func:`best_layouts`.
BEST_COLUMNS = ("rank", "changes", "step_s", "low_s", "high_s", "step_band",
                "tokens_per_second_per_device", "mfu", "memory_bytes", "memory_limit_bytes",
                "memory_fit", "fits", "profiled")

#: The fields of a search row that make its layout (:func:`perfkit.plan.to_parallel_config`).
_LAYOUT_FIELDS = ("dp", "tp", "pp", "cp", "vpp", "micro_batch_size", "num_micro_batches")


def _other_layouts(ranked: pd.DataFrame, parallel: ParallelConfig) -> pd.DataFrame:
    """The layouts of the search that fit, in its order (fastest first), without the
    profiled layout itself when the search holds it (the prediction stands for it)."""
    fits = ranked[ranked["fits"].astype(bool)].sort_values("rank", kind="stable")
    near = np.ones(len(fits), dtype=bool)
    for name in _LAYOUT_FIELDS:
        near &= fits[name].to_numpy() == getattr(parallel, name)
    same = [i for i, row in fits[near].iterrows()
            if layout_changes(parallel, to_parallel_config(row)) == "the profiled layout"]
    return fits.drop(index=same)


def _same_job(ranked: pd.DataFrame, parallel: ParallelConfig) -> bool:
    """Whether the search splits the profiled job's global batch over its devices (only
    then do its step times compare with the profiled layout's)."""
    if ranked.empty:
        return True
    devices = ranked["dp"] * ranked["tp"] * ranked["pp"] * ranked["cp"]
    batch = ranked["dp"] * ranked["micro_batch_size"] * ranked["num_micro_batches"]
    return bool((devices == parallel.world_size).all()
                and (batch == parallel.global_batch_size).all())


def best_layouts(ranked: pd.DataFrame, fit: PlannerFit, parallel: ParallelConfig,
                 n: int = 8) -> pd.DataFrame:
    """The ``n`` fastest layouts that fit and the profiled layout, in one ranking by
    predicted step.

    The profiled layout is the fit's prediction (:attr:`PlannerFit.prediction`); where
    the search holds it too, that row is left out, so it shows once. It takes its place
    among the layouts that fit: its rank is 1 + the others predicted faster (ties go to
    it), and those it passes move one place down. It is in the table wherever it ranks,
    after the first ``n`` when it ranks below them. A search over another device count or
    global batch (its step times do not compare) ranks its own layouts only, and the
    profiled layout comes last without a rank.

    Parameters
    ----------
    ranked : pandas.DataFrame
        :func:`ranked_layouts` (or :func:`perfkit.plan.search` with ``include_rejected``).
    fit : PlannerFit
        Its prediction of the profiled layout makes the profiled row.
    parallel : ParallelConfig
        The profiled layout (what ``changes`` is counted from).
    n : int
        How many other layouts to show.

    Returns
    -------
    pandas.DataFrame
        :data:`BEST_COLUMNS`, in the order of ``rank`` (nullable integer; missing on the
        profiled row when the search is of another job size): the search's figures,
        ``changes`` (:func:`layout_changes`; ``"the profiled layout"`` on the profiled
        row), ``step_band`` (``"1.21 s (1.15 s – 1.27 s)"``; the step alone without a
        calibration), ``memory_fit`` (``"2.3 GiB of 57.6 GiB (4 %)"``), ``profiled``; and
        ``parallel``, each row's :class:`~perfkit.ParallelConfig` (the profiled layout's on
        its row), from which the Planner predicts a row the user picks.
    """
    others = _other_layouts(ranked, parallel)
    pred = fit.prediction
    same = _same_job(ranked, parallel)
    faster = int((others["step_s"] < pred.step_s).sum()) if same else len(others)
    hidden = () if fit.calibrated else ("low_s", "high_s")  # a band only when calibrated
    rows = [{**{c: np.nan if c in hidden else row.get(c, np.nan) for c in BEST_COLUMNS},
             "changes": layout_changes(parallel, to_parallel_config(row))
             + stages_text(row.get("stage_layers")), "profiled": False,
             "rank": i + 1 + (i >= faster), "parallel": to_parallel_config(row)}
            for i, (_, row) in enumerate(others.head(n).iterrows())]
    own = {"changes": "the profiled layout", "step_s": pred.step_s,
           "low_s": pred.low_s if fit.calibrated else np.nan,
           "high_s": pred.high_s if fit.calibrated else np.nan,
           "tokens_per_second_per_device": pred.tokens_per_second_per_device,
           "mfu": pred.mfu, "memory_bytes": pred.memory_bytes,
           "memory_limit_bytes": pred.memory_limit_bytes, "fits": pred.fits,
           "profiled": True, "rank": faster + 1 if same else pd.NA,  # apart: not ranked
           "parallel": pred.parallel}
    rows.insert(min(faster, len(rows)), own)
    out = pd.DataFrame(rows, columns=[*BEST_COLUMNS, "parallel"])
    out["rank"] = pd.array(out["rank"].tolist(), dtype="Int64")
    out["profiled"] = out["profiled"].astype(bool)
    out["step_band"] = [band_text(r) for _, r in out.iterrows()]
    out["memory_fit"] = [memory_text(r) for _, r in out.iterrows()]
    return out


def ranking_sentence(ranked: pd.DataFrame, fit: PlannerFit, parallel: ParallelConfig,
                     packed_tokens: int | None = None) -> str:
    """Whether any layout that fits is predicted faster than the profiled one, in one
    sentence: how many, and the fastest's gain (or the closest's loss) per step.

    Parameters
    ----------
    ranked : pandas.DataFrame
        :func:`ranked_layouts` (or :func:`perfkit.plan.search` with ``include_rejected``).
    fit : PlannerFit
        Its prediction of the profiled layout is what the layouts are compared with.
    parallel : ParallelConfig
        The profiled layout.
    packed_tokens : int, optional
        Tokens a batch row where the step packs its tokens (:func:`packed_step_tokens`):
        the batch is then said in batch rows of those tokens (:func:`batch_text`).

    Returns
    -------
    str
        A search over another device count or global batch says that its step times do
        not compare with the profiled layout's.
    """
    others = _other_layouts(ranked, parallel)
    own = fit.prediction.step_s
    if not _same_job(ranked, parallel):
        first = ranked.iloc[0]
        devices = int(first["dp"] * first["tp"] * first["pp"] * first["cp"])
        batch = int(first["dp"] * first["micro_batch_size"] * first["num_micro_batches"])
        return (f"These layouts run {batch_text(batch, packed_tokens)} per step on "
                f"{counted(devices, 'device')}, the profiled job "
                f"{batch_text(parallel.global_batch_size, packed_tokens)} on "
                f"{counted(parallel.world_size, 'device')}: their step times do not compare "
                "with the profiled layout's, shown last without a rank. Compare the tokens "
                "per second per device instead.")
    if others.empty:
        return (f"No other layout of {batch_text(parallel.global_batch_size, packed_tokens)} on "
                f"{counted(parallel.world_size, 'device')} fits in memory, by the model's "
                "estimate.")
    reference = f"the profiled layout (predicted {time_text(own * 1e6)})"
    faster = int((others["step_s"] < own).sum())
    best = others.iloc[0]
    step = float(best["step_s"])
    change = layout_changes(parallel, to_parallel_config(best))
    gap = abs(own - step)
    by = f"{time_text(gap * 1e6)} ({share_text(gap / own)})"
    if faster == 0:
        head = (f"None of the {count_text(len(others))} other layouts that fit is predicted "
                f"faster than {reference}; the closest" if len(others) > 1 else
                f"The only other layout that fits is not predicted faster than {reference};"
                " it")
        tail = f"{by} slower" if gap > 0 else "as fast"
        return f"{head} ({change}) is predicted at {time_text(step * 1e6)}, {tail}."
    if len(others) == 1:
        head = f"The only other layout that fits is predicted faster than {reference}"
    elif faster == len(others):
        head = (f"All {count_text(faster)} other layouts that fit are predicted faster than "
                f"{reference}")
    else:
        head = (f"{count_text(faster)} of the {count_text(len(others))} other layouts that "
                f"fit {plural(faster, 'is', 'are')} predicted faster than {reference}")
    return (f"{head}; the fastest (rank 1: {change}) is predicted at "
            f"{time_text(step * 1e6)}, {by} faster.")


def band_text(row: Any) -> str:
    """``"1.21 s (1.15 s – 1.27 s)"`` of a ranked row (no band without a calibration);
    ``"2.33 s (up to 11.0 s)"`` where the band reaches 0: the model's uncertainty is larger
    than the step, so it bounds it from above only."""
    step = time_text(float(row["step_s"]) * 1e6)
    if "low_s" not in row or pd.isna(row["low_s"]):
        return step
    return f"{step} ({band_range_text(float(row['low_s']) * 1e6, float(row['high_s']) * 1e6)})"


def memory_text(row: Any) -> str:
    """``"23.1 GiB of 57.6 GiB (40 %)"`` of a ranked row: memory per device of the usable."""
    used, limit = float(row["memory_bytes"]), float(row["memory_limit_bytes"])
    return f"{bytes_text(used)} of {bytes_text(limit)} ({share_text(used / limit, 0)})"
