"""Whether a profile records a backward pass, read from its PyTorch host operators.

A PyTorch trace whose host operators (``aten::...``, at least :data:`MIN_OPERATORS`)
include none of autograd's backward operators (:data:`BACKWARD_PATTERN`) runs a forward
pass only: an inference or evaluation step. What counts a training step (the memory
theory, the predicted step; MFU counts its forward pass instead, :mod:`perfkit.calc.
inference`) or compares forward with backward passes (recompute) cannot be read from it.
The job's reading (:func:`perfkit.job.measured.read_training_step`) uses the same rule.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .._text_dtype import TEXT
from ._frames import is_lazy
from ._util import table
from .recorded import recorded_tasks

__all__ = ["BACKWARD_PATTERN", "MIN_OPERATORS", "forward_only_operators"]

#: Host operators of a backward pass: PyTorch autograd's (``autograd::engine::
#: evaluate_function: MmBackward0``, ``MulBackward0``), torch_npu's the same.
BACKWARD_PATTERN = r"Backward|autograd::engine|backward"
#: Fewer PyTorch operators than this tell nothing about a missing backward pass.
MIN_OPERATORS = 50


def forward_only_operators(profile: Any) -> int:
    """The number of PyTorch host operators of a profile that records no backward pass.

    Parameters
    ----------
    profile : Profile
        A loaded profile (a lazy cluster is not read: 0).

    Returns
    -------
    int
        The ``aten::`` operators counted when there are at least :data:`MIN_OPERATORS` and
        none of the host operators is a backward one; 0 when some are, or when the profile
        has too few PyTorch operators to tell (an Ascend export without host operators,
        MindSpore's graph mode). Where the ``steps`` table marks steps whose device tasks
        were not recorded in full, a backward operator in any step counts, but the
        ``aten::`` operators are counted over the other steps only
        (:func:`~perfkit.analysis.recorded.recorded_tasks`): a fragment of a training step
        may stop before its backward pass, and where no step is left there are too few.
    """
    if is_lazy(profile):
        return 0
    ops = table(profile, "ops")
    if ops.empty or "name" not in ops.columns:
        return 0
    counts = ops["name"].astype(TEXT).value_counts()  # each distinct name once
    names = pd.Series(counts.index, dtype=TEXT)
    if names.str.contains(BACKWARD_PATTERN, regex=True).fillna(False).to_numpy(bool).any():
        return 0
    # the operators of the steps recorded in full: a fragment of a training step may stop
    # before its backward pass (none left: too few to tell)
    ops = recorded_tasks(ops, table(profile, "steps"))[0]
    counts = ops["name"].astype(TEXT).value_counts()
    names = pd.Series(counts.index, dtype=TEXT)
    n_aten = int(counts[names.str.startswith("aten::").fillna(False).to_numpy(bool)].sum())
    return n_aten if n_aten >= MIN_OPERATORS else 0
