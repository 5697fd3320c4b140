"""Helpers shared by the analyses: safe table access, notes, typed results, row selection,
group codes and robust scores.

Nothing here knows a file format; everything works on the canonical tables of
:mod:`perfkit.io.canonical.schema`. Results shared within a block are in
:mod:`perfkit.analysis._shared`,
interval unions in :mod:`perfkit.analysis._intervals`, the device tasks in scope in
:mod:`perfkit.analysis._tasks`.

One module a job, every name re-exported here: :mod:`~perfkit.analysis._util.rows` (typed
results, rows taken by position, text matches), :mod:`~perfkit.analysis._util.access` (table
access, notes, :func:`has_values`), :mod:`~perfkit.analysis._util.groups` (group codes,
:func:`robust_z`) and :mod:`~perfkit.analysis._util.steps` (the tasks in a step and the note
on those of no step).
"""

from __future__ import annotations

from .access import (  # noqa: F401 - private names are imported from here too
    _HEAD_ROWS,
    _empty_of,
    add_note,
    empty_frame,
    has_values,
    notes_of,
    table,
)
from .groups import (  # noqa: F401 - private names are imported from here too
    MAD_TO_SIGMA,
    _sorted_codes,
    count_distinct,
    distinct_rows,
    group_changes,
    group_codes,
    one_value,
    robust_z,
    value_changes,
)
from .rows import (  # noqa: F401 - private names are imported from here too
    _COPY_ON_WRITE,
    _carried,
    _dtype,
    _frame_of,
    _take_by_chunk,
    distinct_values,
    nan_as_zero,
    take_array,
    take_rows,
    text_matches,
    typed,
    with_columns,
)
from .steps import (  # noqa: F401 - private names are imported from here too
    _ANYWHERE,
    _NO_STEP,
    STEPS_ELSEWHERE,
    _has_missing,
    _no_step_by_rank,
    _partition_no_step,
    _stepped_part,
    in_steps,
    n_step_pairs,
    no_step_note,
    noted_no_step,
    ranks_noted_no_step,
    step_rows,
    steps_anywhere,
    with_steps_elsewhere,
    without_no_step_note,
)

__all__ = ["table", "in_steps", "step_rows", "no_step_note", "noted_no_step", "steps_anywhere",
           "with_steps_elsewhere", "STEPS_ELSEWHERE", "ranks_noted_no_step",
           "without_no_step_note", "empty_frame", "add_note", "notes_of", "has_values", "robust_z",
           "MAD_TO_SIGMA", "n_step_pairs", "one_value", "count_distinct", "value_changes",
           "group_changes", "group_codes", "distinct_rows", "nan_as_zero", "take_rows",
           "with_columns", "typed", "take_array",
           "text_matches", "distinct_values"]
