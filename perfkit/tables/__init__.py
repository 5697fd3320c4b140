"""Tables for people: one unit per column, stated in the header; ranks aggregated.

perfkit's frames carry their units in their column names (``total_us``, ``peak_bytes``,
``computing_share``, ``bandwidth_gbps``; see ``docs/schema.md``). :func:`table` reads those
names and writes every cell with :mod:`perfkit.format`: a time column in the one unit that
fits it (``"total (ms)"``), shares as percentages, bytes in KiB/MiB/GiB, and no number in
scientific notation. Long text (GPU kernel names) is shortened in the cell and kept whole in
the cell's tooltip (``title`` attribute). What a figure is per (per rank, per step, summed
over ranks) goes into the header through ``scope``.

:func:`over_ranks` is the default view of a per-rank frame: one row per key with the
median, the smallest and the largest value over the ranks and the rank that has the largest
(the worst rank), instead of the same row repeated once per rank.

Nothing here computes a metric; the functions rename, aggregate and format frames that
:mod:`perfkit.analysis` computed.

The package is split by job: :mod:`~perfkit.tables.columns` (a column's kind, unit and
header), :mod:`~perfkit.tables.cells` (a cell's text), :mod:`~perfkit.tables.markup` (the
:class:`Table` and its HTML), :mod:`~perfkit.tables.build` (:func:`table`) and
:mod:`~perfkit.tables.ranks` (:func:`over_ranks`, :func:`with_values`).
"""

from __future__ import annotations

from .build import table
from .columns import Column, column_format, shorten
from .markup import TABLE_CSS, Table, table_html
from .parts import STEP_PART_LABELS, step_parts
from .ranks import SPREAD_STATS, over_ranks, with_values

__all__ = ["Column", "Table", "column_format", "table", "table_html", "over_ranks",
           "shorten", "with_values", "TABLE_CSS", "SPREAD_STATS", "STEP_PART_LABELS",
           "step_parts"]
