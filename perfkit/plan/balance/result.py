"""The balancer's answer (:class:`BalancePlan`) and its MindFormers configuration.

A plan holds the layers and recompute types per (chunk, stage), the work and memory of each
stage and the pipeline time; :meth:`BalancePlan.to_yaml` writes MindFormers' ``offset`` and
``recompute_config`` lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["BalancePlan"]


_YAML_KEYS = {"selective": "select_recompute", "comm": "select_comm_recompute",
              "both": "both_comm_select_recompute", "full": "recompute"}


@dataclass(frozen=True)
class BalancePlan:
    """Result of :func:`~perfkit.plan.balance.balance_pipeline`.

    Attributes
    ----------
    pp, vpp, num_micro_batches : int
    assignment : DataFrame
        One row per (stage, chunk, layer type, recompute type) with ``layers > 0``.
    layers : ndarray, shape (vpp, pp)
        Body layers per chunk and stage.
    recompute : dict of str to ndarray (vpp, pp)
        Per recompute type (not "none"), layers with that type per chunk and stage.
    offset : list
        MindFormers ``offset``: layers minus the even share ``L/(pp·vpp)``, a list per
        stage (``vpp = 1``) or a list of lists per chunk.
    stage_time : ndarray (pp,)
        Forward + backward work of one micro-batch on each stage.
    stage_memory : ndarray (pp,)
        Peak memory of each stage.
    chunk_time : ndarray (vpp, pp)
        Forward + backward work of one micro-batch on each chunk.
    pipeline_time : float
        The objective: ``m·max stage time + (p − 1)·max chunk time``.
    ideal_time : float
        The same for a perfectly balanced split without recompute, for comparison.
    solve_seconds : float
    """

    pp: int
    vpp: int
    num_micro_batches: int
    assignment: pd.DataFrame
    layers: np.ndarray
    recompute: dict[str, np.ndarray]
    offset: list
    stage_time: np.ndarray
    chunk_time: np.ndarray
    stage_memory: np.ndarray
    pipeline_time: float
    ideal_time: float
    solve_seconds: float

    def recompute_config(self) -> dict[str, Any]:
        """MindFormers ``recompute_config`` entries: per-stage counts (per chunk if vpp>1)."""
        out: dict[str, Any] = {}
        for rtype, counts in self.recompute.items():
            key = _YAML_KEYS[rtype]
            out[key] = _per_stage_list(counts)
        return out

    def to_yaml(self) -> str:
        """The MindFormers YAML snippet: ``offset`` and the recompute lists per stage."""
        import yaml

        doc = {"parallel_config": {"pipeline_stage": self.pp,
                                   "micro_batch_num": self.num_micro_batches},
               "model": {"model_config": {"offset": self.offset}},
               "recompute_config": self.recompute_config()}
        if self.vpp > 1:
            doc["parallel_config"]["virtual_pipeline_model_parallel_size"] = self.vpp
        return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)


def _per_stage_list(per_chunk: np.ndarray) -> list:
    rows = [[int(x) for x in row] for row in per_chunk]
    return rows[0] if len(rows) == 1 else rows
