"""Parquet cache of parsed profiles, kept outside the user's folders; it checks itself.

Location: ``$PERFKIT_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/perfkit`` (default
``~/.cache/perfkit``). ``PERFKIT_CACHE=0`` (or ``off``/``false``/``no``) disables it, as does
``load(..., cache=False)``.

**Key.** An entry is keyed by the source's format, its absolute path, its rank, the
fingerprint of the parsing code (:func:`code_fingerprint`: a changed loader, after an
upgrade or an edit, never serves tables an older loader made) and, for every file it reads,
the file's path, size, modification time, inode number and status-change time (``ctime``).
``touch -d`` and ``os.utime`` can put a modification time back, but not the ctime, and a
file replaced through a rename has a new inode: an edited profile is re-parsed.

**Entry.** One folder: one ``<table>.parquet`` per canonical table and ``meta.json``
(``{"cache_version", "meta", "tables": {name: {"bytes", "rows"}}}``), written to a temporary
folder ``.<key>.<random>`` next to it and renamed into place with one ``rename`` (atomic on a
POSIX filesystem, NFS and Lustre included): a crashed writer leaves at most a hidden
temporary folder, never a half entry, and :func:`sweep` removes such leftovers. An entry that
is already complete and valid is never overwritten, so several processes (local workers or
Dask tasks on other machines) may race to write the same rank safely.

**Self-check.** An entry is validated when it is read (:func:`check_entry`): ``meta.json``
decodes and is well-formed, and every table file is present, has the size recorded and a
readable Parquet footer with the row count recorded. A bad entry is a miss: it is removed,
and the caller parses the profile again and writes a fresh entry. Every data page carries a
CRC32 checksum (``write_page_checksum``), verified when the table is read: a table whose
pages turn out damaged then is handled the same way when the caller gave a way to re-parse
(``reparse``); otherwise it raises a :class:`~perfkit.errors.ProfileError` naming the file.

The cache is never placed inside the profile folder being read.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from ..._hugepages import with_small_pages
from ...errors import ProfileError
from ...profile import Profile, ProfileMeta
from ..canonical.schema import TABLE_NAMES, conform
from .parquet_text import read_frame

__all__ = ["CACHE_VERSION", "cache_root", "cache_enabled", "entry_key", "entry_path", "read",
           "write", "read_entry", "write_entry", "check_entry", "remove_entry", "usable_for",
           "clear", "sweep", "describe", "code_fingerprint", "read_table_file"]

CACHE_VERSION = "2"
"""Bumped when the canonical tables or the entry layout change, so old entries are ignored."""

_OFF = {"0", "off", "false", "no", "disable", "disabled"}

_PARSING_CODE = ("io", "profile.py", "errors.py", "_values.py")
"""What decides the tables an entry holds: the loaders, the canonical schema, their errors."""


@functools.cache
def code_fingerprint() -> str:
    """Hash of the source of perfkit's parsing code (the loaders and the canonical tables).

    Part of every entry key, so upgrading or editing a loader invalidates what it parsed,
    even when :data:`CACHE_VERSION` was not bumped. Read once per process (~0.3 MB).
    """
    return source_hash(_PARSING_CODE)


def source_hash(parts: tuple[str, ...]) -> str:
    """Hash (16 hex digits) of the source of ``parts`` of the perfkit package: module
    files or folders (every ``.py`` below), relative to the package (``"."``: all of it)."""
    root = Path(__file__).resolve().parents[2]  # perfkit/ (this file: perfkit/io/cache/)
    h = hashlib.sha256()
    for name in parts:
        target = root / name
        files = sorted(target.rglob("*.py")) if target.is_dir() else [target]
        for f in files:
            try:
                h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
            except OSError:  # an installed tree without sources: the version alone decides
                h.update(f.name.encode())
    return h.hexdigest()[:16]


Reparse = Callable[[], "tuple[ProfileMeta, dict[str, pd.DataFrame]]"]


def cache_enabled() -> bool:
    """False when the ``PERFKIT_CACHE`` environment variable switches the cache off."""
    return os.environ.get("PERFKIT_CACHE", "1").strip().lower() not in _OFF


def cache_root() -> Path:
    """Folder holding the cache entries (not created here)."""
    env = os.environ.get("PERFKIT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perfkit"


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.resolve().relative_to(parent.resolve())
        return True
    except ValueError:
        return False


def _resolved(path: Path) -> str:
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError):  # a loop of links, a folder that cannot be searched
        return os.path.abspath(path)


def entry_key(fmt: str, path: Path, files: list[Path], rank: int | None = None) -> str:
    """Hash of format, path, rank, :func:`code_fingerprint` and (name, size, mtime, inode,
    ctime) of each file read.

    A file that cannot be examined (permission denied, ...) enters the key as missing;
    parsing the rank then reports it.
    """
    h = hashlib.sha256()
    h.update(f"{CACHE_VERSION}|{code_fingerprint()}|{fmt}|{_resolved(path)}|{rank}".encode())
    for f in sorted(files):
        try:
            st = f.stat()
        except OSError:
            h.update(f"|{f}|missing".encode())
            continue
        h.update(f"|{_resolved(f)}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|"
                 f"{st.st_ctime_ns}".encode())
    return h.hexdigest()[:32]


def entry_path(key: str, root: Path | str | None = None) -> Path:
    """Folder of entry ``key`` under ``root`` (default :func:`cache_root`); may not exist."""
    return (cache_root() if root is None else Path(root)) / key


def usable_for(source_path: Path) -> bool:
    """True when caching is on and the cache folder is not inside ``source_path``."""
    if not cache_enabled():
        return False
    root = cache_root()
    base = source_path if source_path.is_dir() else source_path.parent
    return not _inside(root, base)


_META_TYPES: dict[str, tuple[type, ...]] = {
    "source_format": (str,), "framework": (str, type(None)), "rank": (int, type(None)),
    "world_size": (int, type(None)), "device_type": (str, type(None)),
    "profiler_level": (str, type(None)), "groups": (dict,), "origin_ns": (int, type(None)),
    "path": (str,), "notes": (list,), "extra": (dict,),
}


def _meta_problem(meta: Any) -> str | None:
    if not isinstance(meta, dict):
        return "meta is not an object"
    if "source_format" not in meta:
        return "meta lacks source_format"
    for key, types in _META_TYPES.items():
        if key in meta and (not isinstance(meta[key], types) or isinstance(meta[key], bool)):
            return f"meta.{key} has the wrong type"
    if not all(isinstance(n, str) for n in meta.get("notes", [])):
        return "meta.notes holds a non-string"
    return None


def check_entry(entry: Path) -> tuple[ProfileMeta | None, str]:
    """Validate a cache entry folder: ``(meta, "")`` when it is good, ``(None, why)`` if not.

    Checks that ``meta.json`` decodes and is well-formed (version, meta field types, one
    record per table) and that every table file is present, has the recorded size and a
    readable Parquet footer with the recorded number of rows. Only the footers are read.
    """
    import pyarrow.parquet as pq

    meta_file = entry / "meta.json"
    try:
        # the standard library's parser: a few kB, and msgspec's import (about 10 ms)
        # stays off a cached reopen
        doc = json.loads(meta_file.read_bytes())
    except FileNotFoundError:
        return None, "no meta.json"
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError
        return None, f"meta.json unreadable ({type(exc).__name__})"
    if not isinstance(doc, dict) or doc.get("cache_version") != CACHE_VERSION:
        return None, "meta.json of another cache version or malformed"
    problem = _meta_problem(doc.get("meta"))
    if problem:
        return None, problem
    tables = doc.get("tables")
    if not isinstance(tables, dict) or set(tables) != set(TABLE_NAMES):
        return None, "meta.json does not list every table"
    for name in TABLE_NAMES:
        rec = tables[name]
        f = entry / f"{name}.parquet"
        if not isinstance(rec, dict) or not isinstance(rec.get("bytes"), int) \
                or not isinstance(rec.get("rows"), int):
            return None, f"meta.json record of {name} is malformed"
        try:
            if f.stat().st_size != rec["bytes"]:
                return None, f"{f.name} has another size than recorded"
            rows = pq.read_metadata(f).num_rows
        except Exception as exc:  # noqa: BLE001 - any failure means a damaged entry
            return None, f"{f.name} unreadable ({type(exc).__name__})"
        if rows != rec["rows"]:
            return None, f"{f.name} has another row count than recorded"
    try:
        meta = ProfileMeta.from_dict(doc["meta"])
    except TypeError as exc:
        return None, f"meta does not fit ProfileMeta ({exc})"
    return meta, ""


def remove_entry(entry: Path) -> None:
    """Remove an entry folder (a damaged one); never fails."""
    shutil.rmtree(entry, ignore_errors=True)


def read(key: str, root: Path | str | None = None, *, reparse: Reparse | None = None
         ) -> Profile | None:
    """A Profile whose tables are read lazily from the entry, or None on a miss.

    A damaged entry (see :func:`check_entry`) is removed and reported as a miss.

    Parameters
    ----------
    key : str
        From :func:`entry_key`.
    root : path, optional
        The cache folder (default :func:`cache_root`).
    reparse : callable, optional
        ``() -> (meta, tables)``: parses the profile again. Given, a table found damaged
        only when it is read is served from a fresh parse (and the entry rewritten) instead
        of raising.
    """
    entry = entry_path(key, root)
    if not entry.exists():
        return None
    prof = read_entry(entry, reparse=reparse, key=key, root=root)
    if prof is None:
        remove_entry(entry)
    return prof


def read_entry(entry: Path, eager: bool = False, *, reparse: Reparse | None = None,
               key: str | None = None, root: Path | str | None = None) -> Profile | None:
    """A Profile from an entry folder (tables lazily, or all at once when ``eager``).

    None when the entry is missing or fails :func:`check_entry`. ``reparse``, ``key`` and
    ``root`` are what :func:`read` passes to heal a table damaged past its footer.
    """
    meta, _ = check_entry(entry)
    if meta is None:
        return None
    fresh: dict[str, Any] = {}

    def provider(name: str) -> pd.DataFrame | None:
        if "tables" in fresh:
            return fresh["tables"].get(name)
        f = entry / f"{name}.parquet"
        try:
            return read_table_file(f)
        except Exception as exc:  # noqa: BLE001 - a damaged entry must heal, not crash
            remove_entry(entry)
            if reparse is None:
                raise ProfileError(f, "perfkit cache entry is damaged "
                                   f"({type(exc).__name__}); it was removed, load the "
                                   "profile again") from exc
            new_meta, tables = reparse()
            fresh["tables"] = tables
            if key is not None:
                write(key, new_meta, tables, root=root)
            return tables.get(name)

    if eager:
        tables = {}
        for name in TABLE_NAMES:
            try:
                tables[name] = provider(name)
            except ProfileError:
                return None
        return Profile(meta, tables)
    return Profile(meta, provider)


@with_small_pages
def read_table_file(f: Path) -> pd.DataFrame:
    """One table of an entry, its page checksums verified.

    Every column keeps its own block (``split_blocks``): no copy of the numbers into one
    2-D array, which for a wide table (48 columns of an Ascend rank) halves the read. The
    analyses that code a text column read its Parquet dictionary indices as row ids the
    first time they ask (:mod:`perfkit.io.cache.parquet_text`).
    """
    return read_frame(f)


def write_entry(folder: Path, meta: ProfileMeta, tables: dict[str, pd.DataFrame]) -> None:
    """Write one Parquet file per table and then ``meta.json`` into an existing ``folder``."""
    records: dict[str, dict[str, int]] = {}
    for name in TABLE_NAMES:
        frame = conform(tables.get(name), name, meta.rank)
        f = folder / f"{name}.parquet"
        frame.to_parquet(f, index=False, write_page_checksum=True)
        records[name] = {"bytes": f.stat().st_size, "rows": len(frame)}
    doc = {"cache_version": CACHE_VERSION, "meta": meta.to_dict(), "tables": records}
    import msgspec

    (folder / "meta.json").write_bytes(msgspec.json.encode(doc, enc_hook=str))


def write(key: str, meta: ProfileMeta, tables: dict[str, pd.DataFrame],
          root: Path | str | None = None) -> bool:
    """Store one parsed profile; returns False (and stores nothing) if that fails.

    The entry is written into a hidden temporary folder next to it and renamed into place,
    so readers see either no entry or a complete one. When a valid entry with this key
    already exists (another process won the race; keys depend on the files' size, times and
    inode, so both hold the same data) it is kept and True is returned; a damaged one is
    replaced.

    Parameters
    ----------
    key : str
        From :func:`entry_key`.
    meta, tables
        What :func:`perfkit.io.detect.sources.parse_source` returned.
    root : path, optional
        Cache folder (default :func:`cache_root`); a Dask task receives the client's.
    """
    root = cache_root() if root is None else Path(root)
    final = root / key
    if final.exists() and check_entry(final)[0] is not None:
        return True
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
    except OSError:
        return False
    try:
        write_entry(tmp, meta, tables)
        if final.exists() and check_entry(final)[0] is None:
            remove_entry(final)  # damaged, or debris of an older perfkit
        try:
            os.replace(tmp, final)
        except OSError:
            # the target appeared meanwhile (rename cannot replace a non-empty folder)
            shutil.rmtree(tmp, ignore_errors=True)
            return check_entry(final)[0] is not None
        return True
    except Exception:  # noqa: BLE001 - a cache failure must never break a load
        shutil.rmtree(tmp, ignore_errors=True)
        return False


def clear() -> int:
    """Delete every cache entry; returns how many were removed."""
    root = cache_root()
    if not root.is_dir():
        return 0
    n = 0
    for child in root.iterdir():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
            n += 1
    return n


def sweep(older_than_s: float = 3600.0, root: Path | str | None = None) -> int:
    """Remove temporary folders left by writers that crashed; returns how many.

    Only hidden ``.<key>.<random>`` folders older than ``older_than_s`` seconds are removed,
    so a write still in progress elsewhere (another machine on a shared filesystem) is left
    alone. Complete entries are never touched.
    """
    root = cache_root() if root is None else Path(root)
    if not root.is_dir():
        return 0
    now = time.time()
    n = 0
    for child in root.iterdir():
        if not (child.name.startswith(".") and child.is_dir()):
            continue
        try:
            age = now - child.stat().st_mtime
        except OSError:
            continue
        if age >= older_than_s:
            shutil.rmtree(child, ignore_errors=True)
            n += 1
    return n


def describe() -> dict[str, Any]:
    """Where the cache is and whether it is on."""
    return {"root": str(cache_root()), "enabled": cache_enabled()}
