"""The tuning journal: every run measured, and what changed between any two.

The guides' method is a cycle — measure, change one thing, measure again. A
:class:`Journal` remembers the cycle in one SQLite file: each :meth:`Journal.add` records a
run's job (:func:`perfkit.infer_job`, or the job given), its measured metrics (step time,
tokens/s per device, the seed's tokens/s/p, MFU / HFU checked by :mod:`perfkit.guards`,
the step breakdown, peak memory), the advisor's findings, its operator time per category
and per name, the profile's path and content fingerprint, and the time; :meth:`Journal.runs`
lists them and :meth:`Journal.compare` says what changed between two, field by field, with
one sentence (:func:`change_sentence`). See docs/journal.md.

Modules: :mod:`~perfkit.journal.store` (the :class:`Journal`), with
:mod:`~perfkit.journal.connection` (opening and checking the file) and
:mod:`~perfkit.journal.profiles` (the runs' profile paths), :mod:`~perfkit.journal.schema`
(the file's format), :mod:`~perfkit.journal.tables` (a run's rows, and the frames read
back), :mod:`~perfkit.journal.locations` (the default and the bundled journals),
:mod:`~perfkit.journal.run` (a run and the errors), :mod:`~perfkit.journal.record` (what is
measured), :mod:`~perfkit.journal.compare` (the diff and the sentence),
:mod:`~perfkit.journal.text` (terminal and HTML tables), :mod:`~perfkit.journal.fingerprint`.
"""

from .compare import RunComparison, change_sentence, compare_records
from .fingerprint import fingerprint
from .record import RunRecord, measure_run, run_metrics
from .store import (
    APPLICATION_ID,
    DEFAULT_JOURNAL_NAME,
    JOURNAL_ENV,
    RUNS_COLUMNS,
    SCHEMA_VERSION,
    DuplicateRunError,
    Journal,
    JournalError,
    Run,
    bundled_journal_path,
    bundled_journals,
    default_journal_path,
)
from .text import comparison_html, comparison_page, comparison_text, runs_html, runs_text

__all__ = ["Journal", "Run", "RunRecord", "RunComparison", "JournalError",
           "DuplicateRunError", "measure_run", "run_metrics", "compare_records",
           "change_sentence", "fingerprint", "default_journal_path", "bundled_journal_path",
           "bundled_journals", "runs_text", "runs_html", "comparison_text", "comparison_html",
           "comparison_page", "SCHEMA_VERSION", "APPLICATION_ID", "JOURNAL_ENV",
           "DEFAULT_JOURNAL_NAME", "RUNS_COLUMNS"]
