"""Answers a program can read: every ``perfkit ... --json`` output and every tool of
``perfkit mcp`` is one of these plain dicts, described by the JSON Schema shipped with the
package (``perfkit/answers/schema.json``; :func:`schema`), one ``$defs`` entry per kind.

Every answer starts with ``kind`` (:data:`KINDS`), ``schema_version``
(:data:`SCHEMA_VERSION`) and ``perfkit_version``; units are in the field names (``_ms``,
``_pct``, ``_bytes``); a figure that is not known is ``null``, never NaN. See docs/json.md.
"""

from __future__ import annotations

from .advise import advise_answer, finding_dict
from .check import check_answer, check_items
from .common import KINDS, SCHEMA_VERSION, dumps, envelope, finding_id, plain, schema
from .error import ERROR_CODES, error_answer
from .info import info_answer
from .job import job_answer, runs_answer
from .lab_grade import lab_grade_answer
from .predict import predict_answer

__all__ = ["KINDS", "SCHEMA_VERSION", "ERROR_CODES", "advise_answer", "check_answer",
           "check_items", "dumps", "envelope", "error_answer", "finding_dict", "finding_id",
           "info_answer", "job_answer", "lab_grade_answer", "plain", "predict_answer",
           "runs_answer", "schema"]
