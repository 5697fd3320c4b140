"""Where a journal's runs keep their profiles: paths stored relative to the journal's
folder (or as sample names), the profile found and loaded again with its fingerprint
checked, stored paths rewritten (:meth:`relocate`) and the journal copied with its
relative paths kept pointing at the same profiles (:meth:`copy_to`).

:class:`_JournalProfiles` is a base of :class:`~perfkit.journal.store.Journal`.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from .. import _sqlite
from ..bundled_samples import is_sample_spec, resolve_sample
from ..errors import PerfkitError
from .connection import _JournalFile
from .fingerprint import fingerprint as content_fingerprint
from .run import JournalError, Run

__all__: list[str] = []

#: The journal's own class: :meth:`copy_to` returns one like ``self`` (a :class:`Journal`).
_J = TypeVar("_J", bound="_JournalProfiles")


class _JournalProfiles(_JournalFile):
    """A journal's profile paths: stored, resolved, loaded, relocated, copied (a run is read
    with :meth:`Journal.run <perfkit.journal.store.Journal.run>`)."""

    # ---- paths ------------------------------------------------------------------------
    def _stored_path(self, spec: str | None) -> str | None:
        """A profile path as stored: a sample name as it is, a path inside the journal's
        folder relative to it (POSIX form), any other path absolute."""
        if spec is None or is_sample_spec(spec):
            return spec
        path = Path(spec)
        try:
            return PurePosixPath(*path.relative_to(self.path.parent).parts).as_posix() or "."
        except ValueError:
            return str(path)

    def profile_path(self, run: int | str | Run) -> Path | None:
        """Where the run's profile is expected: a bundled sample's folder, a relative path
        resolved from the journal's folder, or the absolute path stored; None when the
        journal keeps no path for it (see the run's ``provenance``). It may be missing."""
        stored = self.run(run).path
        if stored is None:
            return None
        if is_sample_spec(stored):
            try:
                return Path(resolve_sample(stored))
            except PerfkitError:
                return None
        path = Path(stored)
        return path if path.is_absolute() else self.path.parent / path

    def load_profile(self, run: int | str | Run, check: bool = True) -> Any:
        """Load the run's profile (:func:`perfkit.load`).

        Parameters
        ----------
        check : bool
            Check that its content still has the fingerprint recorded.

        Raises
        ------
        JournalError
            No path is stored, the profile is not there (``relocate`` rewrites stored
            paths), or its content changed since it was recorded.
        """
        from ..io.engines.local import load

        r = self.run(run)
        path = self.profile_path(r)
        if path is None or not path.exists():
            where = "no path is stored" if path is None else f"it is not at {path}"
            how = f"; {r.provenance}" if r.provenance else (
                "; journal.relocate(OLD_PREFIX, NEW_PREFIX) rewrites stored paths")
            raise JournalError(self.path, f"run {r.id} {r.label!r}: the profile cannot be "
                                          f"opened: {where}{how}")
        if check and content_fingerprint(path)[0] != r.fingerprint:
            raise JournalError(self.path, f"run {r.id} {r.label!r}: the profile at {path} has "
                                          "changed since it was recorded (another fingerprint)")
        return load(path)

    def relocate(self, old_prefix: str | os.PathLike[str],
                 new_prefix: str | os.PathLike[str]) -> int:
        """Rewrite stored absolute profile paths that start with ``old_prefix``.

        For a journal received from a colleague whose profiles now lie elsewhere:
        ``journal.relocate("/home/ana/runs", "/data/ana-runs")``. Paths are matched by
        whole components (``/a/b`` does not match ``/a/bc``); a new path inside the
        journal's folder is stored relative to it. Sample names and relative paths are
        left alone (they move with the journal).

        Returns
        -------
        int
            How many runs were rewritten.
        """
        old = str(old_prefix).rstrip("/\\") or str(old_prefix)
        new = Path(new_prefix).expanduser()
        changed = 0
        with self._transaction("cannot rewrite paths") as c:
            for run_id, stored in c.execute("SELECT id, path FROM runs").fetchall():
                if stored is None or is_sample_spec(stored) or not Path(stored).is_absolute():
                    continue
                if stored != old and not stored.startswith(old + os.sep) and \
                        not stored.startswith(old + "/"):
                    continue
                rest = stored[len(old):].lstrip("/\\")
                target = new / rest if rest else new
                c.execute("UPDATE runs SET path = ? WHERE id = ?",
                          (self._stored_path(os.path.abspath(target)), run_id))
                changed += 1
        return changed

    def copy_to(self: _J, path: str | os.PathLike[str]) -> _J:
        """Copy the journal into a new file (SQLite's backup: a consistent copy even while
        others write) and return it, writable. Relative profile paths are rewritten for
        the copy's folder, so they still point at the same profiles.

        Raises
        ------
        JournalError
            The target exists or its folder is missing.
        """
        target = Path(os.path.abspath(Path(path).expanduser()))
        if target.exists():
            raise JournalError(target, "exists already; copy_to writes a new file")
        if not target.parent.is_dir():
            raise JournalError(target, f"cannot create the copy: the folder {target.parent} "
                                       "does not exist")
        with self._reading() as src:
            try:
                dst = sqlite3.connect(target, isolation_level=None)
                try:
                    src.backup(dst)
                finally:
                    dst.close()
            except (sqlite3.Error, OSError) as exc:
                raise JournalError(target, "cannot write the copy: "
                                           f"{_sqlite.reason(exc)}") from None
        copy = type(self)(target, create=False)
        with copy._transaction("cannot rewrite paths") as c:
            for run_id, stored in c.execute("SELECT id, path FROM runs").fetchall():
                if stored is None or is_sample_spec(stored) or Path(stored).is_absolute():
                    continue
                absolute = os.path.normpath(self.path.parent / stored)
                c.execute("UPDATE runs SET path = ? WHERE id = ?",
                          (copy._stored_path(absolute), run_id))
        return copy
