"""Parquet cache of parsed profiles, kept outside the user's folders.

Location: ``$PERFKIT_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/perfkit`` (default
``~/.cache/perfkit``). ``PERFKIT_CACHE=0`` (or ``off``/``false``/``no``) disables it, as does
``load(..., cache=False)``. An entry is keyed by the source's format, its absolute path and
the size and modification time of every file it reads, so a changed file is re-parsed.
One entry is a folder: ``meta.json`` plus one ``<table>.parquet`` per canonical table,
written to a temporary folder ``.<key>.<random>`` next to it and renamed into place with one
``rename`` (atomic on a POSIX filesystem, NFS and Lustre included): a crashed writer leaves at
most a hidden temporary folder, never a half entry, and :func:`sweep` removes such leftovers.
An entry that is already complete is never overwritten, so several processes (local workers
or Dask tasks on other machines) may race to write the same rank safely.
The cache is never placed inside the profile folder being read.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import pandas as pd

from ..profile import Profile, ProfileMeta
from .schema import TABLE_NAMES, conform

__all__ = ["CACHE_VERSION", "cache_root", "cache_enabled", "entry_key", "entry_path", "read",
           "write", "read_entry", "write_entry", "usable_for", "clear", "sweep", "describe"]

CACHE_VERSION = "2"
"""Bumped when the canonical tables change shape, so old entries are ignored."""

_OFF = {"0", "off", "false", "no", "disable", "disabled"}


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


def entry_key(fmt: str, path: Path, files: list[Path], rank: int | None = None) -> str:
    """Hash of format, path, rank and (name, size, mtime) of each file read."""
    h = hashlib.sha256()
    h.update(f"{CACHE_VERSION}|{fmt}|{Path(path).resolve()}|{rank}".encode())
    for f in sorted(files):
        try:
            st = f.stat()
        except OSError:
            continue
        h.update(f"|{f.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:32]


def entry_path(key: str, root: Path | str | None = None) -> Path:
    """Folder of entry ``key`` under ``root`` (default :func:`cache_root`); may not exist."""
    return (cache_root() if root is None else Path(root)) / key


def _complete(entry: Path) -> bool:
    # meta.json is written last, and the folder only appears by rename: its presence
    # in a folder named by a key means every table file is there
    return (entry / "meta.json").is_file()


def usable_for(source_path: Path) -> bool:
    """True when caching is on and the cache folder is not inside ``source_path``."""
    if not cache_enabled():
        return False
    root = cache_root()
    base = source_path if source_path.is_dir() else source_path.parent
    return not _inside(root, base)


def read(key: str, root: Path | str | None = None) -> Profile | None:
    """A Profile whose tables are read lazily from the entry, or None on a miss.

    ``root`` is the cache folder (default :func:`cache_root`).
    """
    return read_entry(entry_path(key, root))


def read_entry(entry: Path, eager: bool = False) -> Profile | None:
    """A Profile from an entry folder (tables lazily, or all at once when ``eager``)."""
    meta_file = entry / "meta.json"
    if not meta_file.is_file():
        return None
    try:
        meta = ProfileMeta.from_dict(msgspec.json.decode(meta_file.read_bytes()))
    except (msgspec.DecodeError, OSError, TypeError):
        return None

    def provider(name: str) -> pd.DataFrame | None:
        f = entry / f"{name}.parquet"
        if not f.is_file():
            return None
        return pd.read_parquet(f)

    if eager:
        return Profile(meta, {name: provider(name) for name in TABLE_NAMES})
    return Profile(meta, provider)


def write_entry(folder: Path, meta: ProfileMeta, tables: dict[str, pd.DataFrame]) -> None:
    """Write ``meta.json`` and one Parquet file per table into an existing ``folder``."""
    for name in TABLE_NAMES:
        frame = conform(tables.get(name), name, meta.rank)
        frame.to_parquet(folder / f"{name}.parquet", index=False)
    (folder / "meta.json").write_bytes(msgspec.json.encode(meta.to_dict(), enc_hook=str))


def write(key: str, meta: ProfileMeta, tables: dict[str, pd.DataFrame],
          root: Path | str | None = None) -> bool:
    """Store one parsed profile; returns False (and stores nothing) if that fails.

    The entry is written into a hidden temporary folder next to it and renamed into place,
    so readers see either no entry or a complete one. When a complete entry with this key
    already exists (another process won the race; keys depend on the files' size and
    modification time, so both hold the same data) it is kept and True is returned.

    Parameters
    ----------
    key : str
        From :func:`entry_key`.
    meta, tables
        What :func:`perfkit.io.detect.parse_source` returned.
    root : path, optional
        Cache folder (default :func:`cache_root`); a Dask task receives the client's.
    """
    root = cache_root() if root is None else Path(root)
    final = root / key
    if _complete(final):
        return True
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
    except OSError:
        return False
    try:
        write_entry(tmp, meta, tables)
        if final.exists() and not _complete(final):
            shutil.rmtree(final, ignore_errors=True)  # debris, e.g. from an older perfkit
        try:
            os.replace(tmp, final)
        except OSError:
            # the target appeared meanwhile (rename cannot replace a non-empty folder)
            shutil.rmtree(tmp, ignore_errors=True)
            return _complete(final)
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
