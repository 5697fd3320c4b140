"""What the tuning journal keeps of one run: measured once, from the profile and its job.

:func:`measure_run` loads a profile (or takes a loaded one), reads its job
(:func:`perfkit.infer_job`, or the job given), and keeps everything a later comparison
needs without the profile: the job field by field with its sources, the measured metrics
(step time, throughput, MFU / HFU through :mod:`perfkit.guards`, peak memory), the step
breakdown, the advisor's findings and the operator time per category and per name. The
result, a :class:`RunRecord`, is plain data: :class:`perfkit.journal.Journal` writes it
in one transaction.

One module a job, every name re-exported here: :mod:`~perfkit.journal.record.fields` (the
tables' keys and columns), :mod:`~perfkit.journal.record.job_fields` (:func:`job_rows`),
:mod:`~perfkit.journal.record.metrics` (:func:`run_metrics`),
:mod:`~perfkit.journal.record.parts` (breakdown, findings, operators) and
:mod:`~perfkit.journal.record.measure` (:class:`RunRecord`, :func:`measure_run`).
"""

from __future__ import annotations

from .fields import (
    BREAKDOWN_COLUMNS,
    BREAKDOWN_PARTS,
    FINDING_COLUMNS,
    GIB,
    GROUPINGS,
    JOB_COLUMNS,
    MAX_OPERATOR_NAMES,
    MEASURED_FIELDS,
    METRIC_COLUMNS,
    METRIC_KEYS,
    OPERATOR_COLUMNS,
)
from .job_fields import (  # noqa: F401 - private names are imported from here too
    _kind,
    _plain,
    job_rows,
    perfkit_version,
)
from .measure import (  # noqa: F401 - private names are imported from here too
    RunRecord,
    _check_record,
    _text_or_none,
    _utc,
    measure_run,
    profile_spec,
)
from .metrics import (  # noqa: F401 - private names are imported from here too
    _flops_rows,
    _metric,
    _missing,
    _seconds,
    _selective_clause,
    _utilisation_rows,
    flops_text,
    run_metrics,
)
from .parts import run_breakdown, run_findings, run_operators

__all__ = ["RunRecord", "measure_run", "run_metrics", "run_breakdown", "run_findings",
           "run_operators", "job_rows", "profile_spec", "METRIC_KEYS", "METRIC_COLUMNS",
           "BREAKDOWN_PARTS", "BREAKDOWN_COLUMNS", "FINDING_COLUMNS", "OPERATOR_COLUMNS",
           "JOB_COLUMNS", "MEASURED_FIELDS", "perfkit_version", "flops_text", "MAX_OPERATOR_NAMES",
           "GROUPINGS", "GIB"]
