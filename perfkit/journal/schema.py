"""The journal's file format: one SQLite file, its tables and the marks it carries.

Why SQLite (the standard library's :mod:`sqlite3`): a journal is one ordinary file that
can be copied, e-mailed and opened anywhere (Python, the ``sqlite3`` shell, DB Browser)
without a server or another dependency; every write is an ACID transaction, so a run is
either completely in the journal or not at all, also when the process is killed half way
(the rollback journal is replayed on the next open); and SQLite's file locks let several
processes add runs at once, one transaction after the other, without losing any.

The journal uses SQLite's default *rollback-journal* mode (``journal_mode=DELETE``), not
WAL: between writes the journal is exactly one file (WAL keeps a ``-wal`` and a ``-shm``
file beside it, and a copy of the main file alone can miss the last runs). While a write is
in progress a ``-journal`` file exists next to it for a moment. Like every SQLite
database, it must not live on a network file system whose locks do not work (some NFS
set-ups); a local disk or a shared disk with working locks is fine.

The file carries its format: ``PRAGMA application_id`` = :data:`APPLICATION_ID` marks a
perfkit journal, ``PRAGMA user_version`` = :data:`SCHEMA_VERSION` its schema, and the
``meta`` table repeats both in words. See docs/journal.md.
"""

from __future__ import annotations

__all__ = ["SCHEMA_VERSION", "APPLICATION_ID"]

#: Version of the journal's tables; a file with a newer one is refused (upgrade perfkit).
SCHEMA_VERSION = 1
#: ``PRAGMA application_id`` of a perfkit journal ("PKJ1" in ASCII).
APPLICATION_ID = 0x504B4A31


_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    label TEXT NOT NULL UNIQUE,
    note TEXT,
    added_utc TEXT NOT NULL,
    profiled_utc TEXT,
    path TEXT,
    fingerprint TEXT NOT NULL UNIQUE,
    profile_bytes INTEGER,
    source_format TEXT,
    framework TEXT,
    ranks INTEGER,
    job_line TEXT NOT NULL,
    job_problems TEXT NOT NULL,
    operator_names_total INTEGER NOT NULL,
    provenance TEXT,
    perfkit_version TEXT NOT NULL
);
CREATE TABLE job (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    field TEXT NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL, source TEXT, detail TEXT,
    PRIMARY KEY (run_id, field)
);
CREATE TABLE metrics (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    position INTEGER NOT NULL, key TEXT NOT NULL, metric TEXT NOT NULL, value REAL,
    unit TEXT, text TEXT, warning TEXT, note TEXT,
    PRIMARY KEY (run_id, key)
);
CREATE TABLE breakdown (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    position INTEGER NOT NULL, part TEXT NOT NULL, us REAL, share REAL,
    PRIMARY KEY (run_id, part)
);
CREATE TABLE findings (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    position INTEGER NOT NULL, rule TEXT, severity TEXT, area TEXT, title TEXT,
    ms_per_step REAL, measured INTEGER, score REAL, evidence TEXT, recommendation TEXT,
    PRIMARY KEY (run_id, position)
);
CREATE TABLE operators (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    grouping TEXT NOT NULL, key TEXT NOT NULL, count REAL, us REAL,
    PRIMARY KEY (run_id, grouping, key)
);
"""
_TABLES = ("meta", "runs", "job", "metrics", "breakdown", "findings", "operators")
