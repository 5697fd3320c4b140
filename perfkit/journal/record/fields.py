"""What a run record holds: the keys and columns of its tables (job, metrics, breakdown,
findings, operators) and how many operator names it keeps.
"""

from __future__ import annotations

__all__ = ["METRIC_KEYS", "METRIC_COLUMNS", "BREAKDOWN_PARTS", "BREAKDOWN_COLUMNS",
           "FINDING_COLUMNS", "OPERATOR_COLUMNS", "JOB_COLUMNS", "MEASURED_FIELDS",
           "MAX_OPERATOR_NAMES", "GROUPINGS", "GIB"]


GIB = 2**30
#: The metrics of a run, in display order (:func:`run_metrics`).
METRIC_KEYS = ("step_time_s", "devices", "global_batch_size", "seq_length",
               "tokens_per_s_per_device", "tokens_per_s_per_p", "mfu", "hfu",
               "model_flops_per_step", "recompute_flops_per_step", "peak_memory_bytes")
#: Columns of :func:`run_metrics`.
METRIC_COLUMNS = ("key", "metric", "value", "unit", "text", "warning", "note")
#: Parts of the step breakdown kept (:func:`perfkit.analysis.compare_steps`'s parts).
BREAKDOWN_PARTS = ("step_us", "computing_us", "comm_not_overlapped_us", "overlapped_us",
                   "free_us", "bubble_us", "preparing_us")
#: Columns of :func:`run_breakdown`.
BREAKDOWN_COLUMNS = ("part", "us", "share")
#: Columns of :func:`run_findings`.
FINDING_COLUMNS = ("position", "rule", "severity", "area", "title", "ms_per_step",
                   "measured", "score", "evidence", "recommendation")
#: Columns of :func:`run_operators` (one table per grouping).
OPERATOR_COLUMNS = ("grouping", "key", "count", "us")
#: Operator tables kept: by shared category and by task name.
GROUPINGS = ("category", "name")
#: Columns of :func:`job_rows`.
JOB_COLUMNS = ("field", "kind", "value", "source", "detail")
#: Job fields that are measurements, not settings (compared as metrics, not as config).
MEASURED_FIELDS = ("step_time_s", "peak_memory_bytes")
#: Most task names kept per run (the longest first); the rest is counted, not named.
MAX_OPERATOR_NAMES = 500
