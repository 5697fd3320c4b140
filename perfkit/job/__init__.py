"""Know the job: the model, parallel layout and hardware of the run a profile recorded.

Every number that mixes theory with measurement (MFU, memory theory, the planner, the
recompute trade-off) needs the job that ran. :func:`infer_job` reads it from the profile —
communication groups for the layout (:mod:`perfkit.analysis.layout`), operator input
shapes for the model and the micro-batching (:mod:`perfkit.analysis.shapes`), the device
type for the hardware, the step table for the measured step — and lets a description the
user gives win, field by field: a MindFormers YAML, a Hugging Face ``config.json``, a
MindFormers training log, or explicit values. The :class:`Job` it returns keeps, for every
field, the value used, where it came from (``profile``, ``config``, ``user`` or
``default``) and what was read or why nothing could be (``Job.evidence``). A field that
cannot be read stays None with the reason; a model whose shape is not pinned down is None
(``Job.model``), and a view without a model says so instead of computing with a default.
See docs/job.md.

One module per job: :mod:`~perfkit.job.fields` (the fields, their sources, a value and its
evidence), :mod:`~perfkit.job.core` (the :class:`Job` and building it from values),
:mod:`~perfkit.job.build` (the ModelSpec and ParallelConfig the values describe), the
profile's readers — :mod:`~perfkit.job.infer` (:func:`infer_job`, the order of reading, the
model from the shapes), :mod:`~perfkit.job.layout`, :mod:`~perfkit.job.device`,
:mod:`~perfkit.job.measured` —, :mod:`~perfkit.job.recorded_steps` (the counts per step
over the steps whose device tasks were recorded in full), :mod:`~perfkit.job.config`
(configs and the user's values),
:mod:`~perfkit.job.problems` (where a job disagrees with its profile) and
:mod:`~perfkit.job.unknowns` (what could not be read, why, and how to give it).
"""

from .config import read_job_config
from .core import Job
from .fields import (
    EVIDENCE_COLUMNS,
    JOB_FIELDS,
    MODEL_FIELDS,
    PARALLEL_FIELDS,
    RUN_FIELDS,
    SOURCES,
)
from .infer import infer_job
from .unknowns import PANEL_TITLE, Unknown, how_to_set, unknowns

__all__ = ["Job", "infer_job", "read_job_config", "SOURCES", "MODEL_FIELDS",
           "PARALLEL_FIELDS", "RUN_FIELDS", "JOB_FIELDS", "EVIDENCE_COLUMNS", "Unknown",
           "unknowns", "how_to_set", "PANEL_TITLE"]
