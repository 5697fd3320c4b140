"""The search's uneven pipeline splits.

Where ``pp · vpp`` does not divide the layers (Llama 3 405B's 126 on 8 or 16 stages, the
layouts its paper and torchtitan run), the search splits the stages as
:func:`perfkit.plan.predict` does by default: torchtitan's automatic split
(:func:`perfkit.calc.pipeline.split_layers`, the embedding and the output head each
counted as one layer). Those candidates are priced on their own stage rows
(:func:`perfkit.calc.layout_rows.stage_rows`), the parameters of their most loaded stage
(:func:`perfkit.calc.layout_rows.stage_params`) and the activations of their first stage
(:func:`perfkit.calc.layout_memory.uneven_activation`) — the functions ``predict`` runs for
one layout, so a row reads the same step and memory in both
(tests/plan/test_search_step_model.py; the split by hand: tests/plan/test_search_uneven.py).
Each is computed once per distinct split and broadcast, so the search stays vectorised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..calc import ActivationModel
from ..calc.layout_memory import uneven_activation
from ..calc.layout_rows import stage_params, stage_rows
from ..calc.timing import uniform_stages
from ..specs import ModelSpec, ParallelConfig
from .candidates import REC_NAMES, split_of
from .search_parts import config, lookup

__all__ = ["uneven_rows", "search_stages", "uneven_params", "uneven_layers",
           "uneven_activation_bytes"]

_STAGE_KEYS = ("cand", "layers", "full", "selective", "comm", "first", "last")


def uneven_rows(model: ModelSpec, c: dict[str, np.ndarray]) -> np.ndarray:
    """Indices of the candidates whose stages are split unevenly."""
    return np.flatnonzero(model.num_layers % (c["pp"] * c["vpp"]) != 0)


#: The candidate columns a layout is made of (:func:`_parallel`).
_LAYOUT = ("dp", "tp", "pp", "cp", "ep", "expert_tp", "vpp", "micro_batch_size",
           "num_micro_batches", "sequence_parallel", "optimizer_shard", "zero_stage",
           "recompute", "full_layers_per_stage")


def _parallel(values: Mapping[str, Any]) -> ParallelConfig:
    """The layout of one candidate, from its :data:`_LAYOUT` values (recompute as its
    code)."""
    v = values
    rec = str(REC_NAMES[int(v["recompute"])])
    k = int(v["full_layers_per_stage"])
    return config(v["dp"], v["tp"], v["pp"], v["cp"], v["ep"], v["expert_tp"],
                  vpp=int(v["vpp"]), micro_batch_size=int(v["micro_batch_size"]),
                  num_micro_batches=int(v["num_micro_batches"]),
                  sequence_parallel=bool(v["sequence_parallel"]),
                  optimizer_shard=int(v["optimizer_shard"]), zero_stage=int(v["zero_stage"]),
                  recompute=rec, recompute_layers=k if rec == "selective" and k > 0 else None)


def search_stages(model: ModelSpec, c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Stage rows of every candidate: :func:`~perfkit.calc.timing.uniform_stages` for the
    even splits, every rank of :func:`~perfkit.calc.layout_rows.stage_rows` for the
    uneven ones."""
    rows = uniform_stages(c, model.num_layers)
    uneven = uneven_rows(model, c)
    if not len(uneven):
        return rows
    keep = ~np.isin(rows["cand"], uneven)
    parts = [{key: rows[key][keep] for key in _STAGE_KEYS}]
    keys = np.stack([c[name][uneven] for name in ("pp", "vpp", "recompute",
                                                  "full_layers_per_stage")], axis=1)
    distinct, group = np.unique(keys, axis=0, return_inverse=True)
    for g, (pp, vpp, _rec, _k) in enumerate(distinct):
        members = uneven[group.reshape(-1) == g]
        first = {name: c[name][members[0]] for name in _LAYOUT}
        one = stage_rows(model, _parallel(first), split_of(model.num_layers, int(pp), int(vpp)))
        count = len(one["layers"])
        part = {key: np.tile(one[key], len(members)) for key in _STAGE_KEYS[1:]}
        part["cand"] = np.repeat(members, count)
        parts.append(part)
    return {key: np.concatenate([p[key] for p in parts]) for key in _STAGE_KEYS}


def uneven_params(model: ModelSpec, c: dict[str, np.ndarray],
                  params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``params`` (:func:`~perfkit.plan.search_parts.max_stage_params`) with the uneven
    candidates' most loaded stage counted on their own split."""
    uneven = uneven_rows(model, c)
    if not len(uneven):
        return params
    sub = {name: c[name][uneven] for name in ("tp", "pp", "ep", "expert_tp", "vpp")}
    seen: dict[tuple, dict[str, np.ndarray]] = {}

    def most_loaded(t, p, e, x, v, part: str) -> float:
        split = split_of(model.num_layers, int(p), int(v))
        key = (t, p, e, x, split)  # the split, not vpp, places the layers on the ranks
        if key not in seen:
            seen[key] = stage_params(model, config(e * (x or t), t, p, 1, e, x,
                                                   num_micro_batches=int(p)), split)
        return float(seen[key][part][0])

    out = {}
    for part in ("dense", "experts"):
        out[part] = params[part].astype(float).copy()
        out[part][uneven] = lookup(sub, lambda *key, part=part: most_loaded(*key, part))
    return out


def uneven_layers(model: ModelSpec, c: dict[str, np.ndarray], n: np.ndarray,
                  k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Layers per stage ``n`` and fully recomputed layers ``k`` for the seed's activation
    formula (:func:`~perfkit.plan.search_parts.activation_bytes`), with the uneven
    candidates' as :func:`~perfkit.calc.layout_memory.uneven_activation` counts them: a
    first stage of ``n' = vpp · ⌈L / (pp·vpp)⌉`` layers, all of them fully recomputed under
    full recompute."""
    uneven = uneven_rows(model, c)
    if not len(uneven):
        return n, k
    pp, v = c["pp"][uneven], c["vpp"][uneven]
    n, k = n.astype(float).copy(), k.astype(float).copy()
    n[uneven] = v * -(-model.num_layers // (pp * v))
    k[uneven] = np.where(c["recompute"][uneven] == 2, n[uneven],
                         np.where(c["recompute"][uneven] == 1, k[uneven], 0.0))
    return n, k


def uneven_activation_bytes(model: ModelSpec, c: dict[str, np.ndarray],
                            activation: np.ndarray, activation_model: ActivationModel | None,
                            convention: str,
                            recompute_ops: tuple[str, ...] | None = None) -> np.ndarray:
    """``activation`` with the uneven candidates' counted under a convention other than
    the seed's (whose formula takes :func:`uneven_layers`), as :func:`perfkit.plan.predict`
    counts them (:func:`~perfkit.calc.layout_memory.uneven_activation`: the first stage
    holding ``⌈L / (pp·vpp)⌉`` layers per chunk; NaN, so the row does not fit, where that
    split is not valid). Once per distinct layout, so slower, as those conventions are."""
    uneven = uneven_rows(model, c)
    if convention == "seed" or not len(uneven):
        return activation
    sub = {name: c[name][uneven] for name in _LAYOUT}

    def one(*values: Any) -> float:
        parallel = _parallel(dict(zip(_LAYOUT, values, strict=True)))
        if parallel.recompute == "selective" and recompute_ops is not None:
            parallel = parallel.replace(recompute_ops=recompute_ops)
        return uneven_activation(model, parallel, activation_model, convention)

    out = activation.astype(float).copy()
    out[uneven] = lookup(sub, one)
    return out
