"""The tuning journal's store: :class:`Journal`, one SQLite file of runs.

A :class:`Journal` adds, changes, reads and compares runs. Opening and checking the file,
its connections and transactions are :mod:`~perfkit.journal.connection`; where the runs'
profiles are, :mod:`~perfkit.journal.profiles` (both bases of :class:`Journal`). The
file's format — why SQLite, its tables, the marks it carries — is
:mod:`~perfkit.journal.schema`; a run's rows and the frames read back are
:mod:`~perfkit.journal.tables`; where journals are, :mod:`~perfkit.journal.locations`;
:class:`Run` and the errors, :mod:`~perfkit.journal.run`. See docs/journal.md.
"""

from __future__ import annotations

import atexit
import json
import numbers
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from ..bundled_samples import SAMPLE_PREFIX, is_sample_spec, resolve_sample
from ..errors import InvalidArgumentError, PerfkitError, check_choice
from .compare import RunComparison, compare_records
from .connection import DEFAULT_TIMEOUT_S, _now
from .fingerprint import fingerprint as content_fingerprint
from .locations import (
    BUNDLED_FOLDER,
    DEFAULT_JOURNAL_NAME,
    JOURNAL_ENV,
    bundled_journal_path,
    bundled_journals,
    default_journal_path,
)
from .profiles import _JournalProfiles
from .record import RunRecord, measure_run
from .run import DuplicateRunError, JournalError, Run
from .schema import APPLICATION_ID, SCHEMA_VERSION
from .tables import RUNS_COLUMNS, insert_details, read_record, runs_frame

__all__ = ["Journal", "Run", "JournalError", "DuplicateRunError", "SCHEMA_VERSION",
           "APPLICATION_ID", "JOURNAL_ENV", "DEFAULT_JOURNAL_NAME", "RUNS_COLUMNS",
           "default_journal_path", "bundled_journal_path", "bundled_journals",
           "BUNDLED_FOLDER"]


class Journal(_JournalProfiles):
    """A tuning journal: every run measured, and what changed between any two.

    Parameters
    ----------
    path : str or path
        The journal file (created when missing, unless ``create=False`` or
        ``readonly=True``; its folder must exist). See :func:`default_journal_path`.
    create : bool
        Create the file when missing (default). With False a missing file is an error.
    readonly : bool
        Open for reading only (``add`` and the other writes refuse).
    timeout_s : float
        Seconds a write waits while another process writes.

    Raises
    ------
    JournalError
        The path is a folder, its folder is missing, the file is not an SQLite database,
        is another program's database, is damaged, or was written by a newer perfkit
        (schema version above :data:`SCHEMA_VERSION`); the message names the file.

    Examples
    --------
    >>> journal = pk.Journal("perfkit-journal.sqlite")          # doctest: +SKIP
    >>> journal.add("sample:llama2-13b-baseline-dp16", label="baseline")  # doctest: +SKIP
    >>> journal.add("profiles/after", label="pp2", note="pipeline, 2 stages")  # doctest: +SKIP
    >>> journal.runs()                                          # doctest: +SKIP
    >>> journal.compare("baseline", "pp2").sentence()           # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 readonly: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgumentError("path", "must be the path of a journal file",
                                       type(path).__name__)
        self.path = Path(os.path.abspath(Path(path).expanduser()))
        self.readonly = bool(readonly)
        self.timeout_s = float(timeout_s)
        self._immutable = False
        self._open(create and not readonly)

    # ---- opening ----------------------------------------------------------------------
    @classmethod
    def bundled(cls, name: str = "llama2-13b-case") -> Journal:
        """A journal that ships with perfkit, read-only (``copy_to`` gives a writable copy).

        ``llama2-13b-case``: the seed's Llama2-13B case in three runs (baseline, pipelined,
        tuned), see ``data/journals/README.md``.
        """
        journal = cls.__new__(cls)
        journal.path = bundled_journal_path(name)
        journal.readonly = True
        journal.timeout_s = DEFAULT_TIMEOUT_S
        journal._immutable = True
        journal._open(False)
        return journal

    @classmethod
    def temporary(cls) -> Journal:
        """A new, empty journal in a temporary folder, removed when Python exits (for
        trying things out; give a path to keep one)."""
        folder = Path(tempfile.mkdtemp(prefix="perfkit-journal-"))
        atexit.register(shutil.rmtree, folder, True)
        journal = cls(folder / DEFAULT_JOURNAL_NAME)
        journal._temporary = True
        return journal

    # ---- adding -----------------------------------------------------------------------
    def add(self, profile_or_path: Any, job: Any = None, label: str | None = None,
            note: str | None = None, *, config: Any = None, if_exists: str = "error"
            ) -> Run:
        """Measure a run and record it (one transaction: all of it, or nothing).

        Parameters
        ----------
        profile_or_path : Profile, Cluster, path, ``"sample:NAME"`` or RunRecord
            The profile (or a run already measured with
            :func:`perfkit.journal.measure_run`).
        job : perfkit.Job, optional
            The job that ran; default :func:`perfkit.infer_job` of the profile.
        label : str, optional
            Its name in the journal (unique); default the profile folder's name (with
            ``#2``, ``#3`` ... when taken).
        note : str, optional
            What was changed, why, anything.
        config : path, dict or list, optional
            A config that wins over the profile when the job is inferred (as for
            :func:`perfkit.infer_job`).
        if_exists : {"error", "return"}
            What to do when the profile is already in the journal (same content
            fingerprint, wherever it lies now): raise :class:`DuplicateRunError` naming
            the run (default), or return that run with ``existing=True``.

        Returns
        -------
        Run

        Raises
        ------
        DuplicateRunError
            The profile is already recorded (``if_exists="error"``).
        JournalError
            The label is taken, the journal is read-only or cannot be written.
        perfkit.PerfkitError
            The profile cannot be read (the message names the file).
        """
        if getattr(self, "_made", False) and not self.path.exists():
            self._open(True)  # removed by a failed first add: made afresh
        try:
            return self._add(profile_or_path, job, label, note, config, if_exists)
        except BaseException:
            self._remove_if_unused()  # a journal made for this add, still empty
            raise

    def _add(self, profile_or_path: Any, job: Any, label: str | None, note: str | None,
             config: Any, if_exists: str) -> Run:
        """:meth:`add` itself."""
        check_choice("if_exists", if_exists, ("error", "return"))
        if self.readonly:
            raise JournalError(self.path, "is open read-only (a bundled journal: "
                                          "journal.copy_to(PATH) gives a copy you can add to)")
        for name, value in (("label", label), ("note", note)):
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentError(name, "must be text", value)
        if label is not None and not label.strip():
            raise InvalidArgumentError("label", "must not be empty", label)
        if isinstance(profile_or_path, RunRecord):
            record = profile_or_path.replace(
                label=label if label is not None else profile_or_path.label,
                note=note if note is not None else profile_or_path.note)
            what = record.path or record.label or "the run"
        else:
            what, where = self._where(profile_or_path)
            digest = content_fingerprint(where)
            found = self._by_fingerprint(digest[0])
            if found is not None:
                return self._duplicate(found, what, if_exists)
            record = measure_run(profile_or_path, job, config=config, label=label, note=note,
                                 fingerprint=digest)
        with self._transaction("cannot add the run") as c:
            row = c.execute("SELECT id FROM runs WHERE fingerprint = ?",
                            (record.fingerprint,)).fetchone()
            if row is None:
                run_id = self._insert_run(c, record)
                self._insert_details(c, run_id, record)
        if row is not None:  # another process added it meanwhile
            return self._duplicate(self.run(int(row[0])), what, if_exists)
        return self.run(run_id)

    @staticmethod
    def _where(profile_or_path: Any) -> tuple[str, Any]:
        if isinstance(profile_or_path, (str, os.PathLike)):
            spec = str(profile_or_path)
            # absolute: the run's path then names the profile from any folder
            return spec, Path(os.path.abspath(Path(resolve_sample(profile_or_path)).expanduser()))
        meta = getattr(profile_or_path, "meta", None)
        if meta is None or not meta.path:
            raise InvalidArgumentError("profile_or_path", "must be a path, 'sample:NAME', a "
                                       "profile from perfkit.load or a RunRecord",
                                       type(profile_or_path).__name__)
        return str(meta.path), meta.path

    def _duplicate(self, run: Run, what: str, if_exists: str) -> Run:
        if if_exists == "return":
            return Run(**{**run.__dict__, "existing": True})
        raise DuplicateRunError(self.path, f"{what} is already in the journal as run {run.id} "
                                           f"{run.label!r} (added {run.added_utc}; same "
                                           "content, fingerprint "
                                           f"{run.fingerprint[:19]}…); pass "
                                           "if_exists='return' (perfkit journal add "
                                           "--if-exists return) to get that run", run)

    def _by_fingerprint(self, digest: str) -> Run | None:
        with self._reading() as c:
            row = c.execute(f"SELECT {_RUN_FIELDS} FROM runs WHERE fingerprint = ?",
                            (digest,)).fetchone()
        return None if row is None else Run(*row)

    def _label(self, conn: sqlite3.Connection, record: RunRecord) -> str:
        taken = {r[0] for r in conn.execute("SELECT label FROM runs")}
        if record.label is not None:
            label = record.label.strip()
            if label in taken:
                run_id = conn.execute("SELECT id FROM runs WHERE label = ?",
                                      (label,)).fetchone()[0]
                raise JournalError(self.path, f"the label {label!r} is taken by run {run_id}; "
                                              "choose another")
            return label
        base = _default_label(record.path)
        label, n = base, 1
        while label in taken:
            n += 1
            label = f"{base} #{n}"
        return label

    def _insert_run(self, conn: sqlite3.Connection, record: RunRecord) -> int:
        cur = conn.execute(
            "INSERT INTO runs (label, note, added_utc, profiled_utc, path, fingerprint, "
            "profile_bytes, source_format, framework, ranks, job_line, job_problems, "
            "operator_names_total, provenance, perfkit_version) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (self._label(conn, record), record.note, record.added_utc or _now(),
             record.profiled_utc, self._stored_path(record.path), record.fingerprint,
             int(record.profile_bytes), record.source_format, record.framework, record.ranks,
             record.job_line, json.dumps(list(record.job_problems)),
             int(record.operator_names_total), record.provenance, record.perfkit_version))
        return int(cur.lastrowid)


    def _insert_details(self, conn: sqlite3.Connection, run_id: int,
                        record: RunRecord) -> None:
        """The run's tables (in the same transaction as its row): :func:`insert_details`."""
        insert_details(conn, run_id, record)

    # ---- changing ---------------------------------------------------------------------
    def annotate(self, run: int | str | Run, label: str | None = None,
                 note: str | None = None, provenance: str | None = None) -> Run:
        """Change a run's label, note or provenance (None keeps the current one)."""
        r = self.run(run)
        with self._transaction("cannot change the run") as c:
            if label is not None and label != r.label:
                if not isinstance(label, str) or not label.strip():
                    raise InvalidArgumentError("label", "must be non-empty text", label)
                if c.execute("SELECT 1 FROM runs WHERE label = ?", (label,)).fetchone():
                    raise JournalError(self.path, f"the label {label!r} is taken; choose "
                                                  "another")
                c.execute("UPDATE runs SET label = ? WHERE id = ?", (label, r.id))
            if note is not None:
                c.execute("UPDATE runs SET note = ? WHERE id = ?", (note, r.id))
            if provenance is not None:
                c.execute("UPDATE runs SET provenance = ? WHERE id = ?", (provenance, r.id))
        return self.run(r.id)

    def remove(self, run: int | str | Run) -> None:
        """Delete a run and everything recorded with it."""
        r = self.run(run)
        with self._transaction("cannot remove the run") as c:
            c.execute("DELETE FROM runs WHERE id = ?", (r.id,))

    # ---- reading ----------------------------------------------------------------------
    def run(self, ref: int | str | Run) -> Run:
        """One run, by id (``2``, or any integer type: the ``id`` column of :meth:`runs`
        holds numpy integers), label (``"pp2"``) or a :class:`Run`.

        Raises
        ------
        JournalError
            No such run (the message lists the runs there are).
        """
        if isinstance(ref, Run):
            ref = ref.id
        if isinstance(ref, numbers.Integral) and not isinstance(ref, bool):
            ref = int(ref)  # any integer type: numpy's int64 from runs() as Python's int
        if isinstance(ref, bool) or not isinstance(ref, (int, str)):
            raise InvalidArgumentError("run", "must be a run id, a label or a Run", ref)
        with self._reading() as c:
            row = None
            if isinstance(ref, str):
                row = c.execute(f"SELECT {_RUN_FIELDS} FROM runs WHERE label = ?",
                                (ref,)).fetchone()
                if row is None and ref.strip().isdigit():
                    ref = int(ref)
            if row is None and isinstance(ref, int):
                row = c.execute(f"SELECT {_RUN_FIELDS} FROM runs WHERE id = ?",
                                (ref,)).fetchone()
            if row is None:
                known = [f"{i} {lab!r}" for i, lab in
                         c.execute("SELECT id, label FROM runs ORDER BY id")]
        if row is None:
            raise JournalError(self.path, f"no run {ref!r}; the runs are: "
                                          f"{', '.join(known) or 'none yet'}")
        return Run(*row)

    def record(self, ref: int | str | Run) -> RunRecord:
        """Everything stored for a run, as a :class:`~perfkit.journal.record.RunRecord`
        (``label``, ``path`` as stored)."""
        r = self.run(ref)
        with self._reading() as c:
            return read_record(c, r)

    def runs(self) -> pd.DataFrame:
        """Every run, one row each, in the order added.

        Returns
        -------
        pandas.DataFrame
            Columns :data:`RUNS_COLUMNS`: identity (``id``, ``label``, ``added_utc``,
            ``profiled_utc``, ``note``, ``path`` as stored, ``fingerprint``, ``job`` — the
            job in one line), the layout (``world_size``, ``dp``, ``tp``, ``pp``,
            ``vpp``, ``num_micro_batches``, ``recompute``, ``recompute_layers``), the
            metrics (``step_time_s``, ``tokens_per_s_per_device``, ``tokens_per_s_per_p``;
            ``mfu`` and ``hfu`` as fractions, NaN when not computed or when a guard flags
            them — ``mfu_text`` / ``hfu_text`` then say "⚠ not plausible"; ``peak_memory_gib``),
            the step breakdown shares (``computing_share``, ``comm_not_overlapped_share``,
            ``free_share``, ``preparing_share`` — the wait before the first device task —
            adding up to 1, and ``bubble_share``, all of the job's step as
            ``step_time_s`` counts it; :mod:`perfkit.journal.record.basis`), ``n_findings`` and
            ``top_finding`` (the advisor's first title), and ``provenance``. Empty (with
            these columns) when the journal has no run.
        """
        with self._reading() as c:
            return runs_frame(c)

    def compare(self, a: int | str | Run, b: int | str | Run, *, operators: str = "stored",
                by: str = "category", n: int | None = None) -> RunComparison:
        """What changed from run ``a`` to run ``b``.

        Parameters
        ----------
        a, b : int, str or Run
            The base run and the new one (id or label).
        operators : {"stored", "profiles", "auto"}
            Where the operator diff comes from: the operator tables stored with each run
            (default: no profile needed; they are :func:`perfkit.analysis.compare.
            operator_totals`, the two sides :func:`perfkit.analysis.compare_profiles`
            diffs, so the result is the same), ``"profiles"`` (load both profiles and run
            :func:`~perfkit.analysis.compare_profiles`; an error when one is not at hand
            or has changed), or ``"auto"`` (the profiles when both are at hand and
            unchanged, else the stored tables, with a note saying which).
        by : {"category", "name"}
            Operator grouping.
        n : int, optional
            Keep the ``n`` operator rows that moved most.

        Returns
        -------
        RunComparison
            ``job`` (field by field), ``metrics``, ``breakdown``, ``operators``,
            ``findings`` (appeared, disappeared, kept) and :meth:`~RunComparison.sentence`.
        """
        check_choice("operators", operators, ("stored", "profiles", "auto"))
        check_choice("by", by, ("category", "name"))
        base, new = self.record(a), self.record(b)
        profiles = None
        note = None
        if operators != "stored":
            try:
                profiles = (self.load_profile(a), self.load_profile(b))
            except PerfkitError as exc:
                if operators == "profiles":
                    raise
                note = f"the profiles are not at hand ({exc}); stored tables used"
        out = compare_records(base, new, profiles=profiles, by=by, n=n)
        if note:
            out.operators.attrs.setdefault("notes", []).append(note)
        return out


_RUN_FIELDS = ("id, label, note, added_utc, profiled_utc, path, fingerprint, job_line, "
               "provenance")


def _default_label(path: str | None) -> str:
    if path is None:
        return "run"
    if is_sample_spec(path):
        return path[len(SAMPLE_PREFIX):].strip()
    name = Path(path).name
    for suffix in (".json.gz", ".json", ".gz", ".db"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)]
    return name or "run"

