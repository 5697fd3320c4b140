"""A content fingerprint of a profile: the same files give the same fingerprint, wherever
they lie.

The tuning journal (:mod:`perfkit.journal`) recognises a profile it already holds by this
fingerprint, not by its path: a profile copied to another folder, disk or machine (or
renamed) is the same run; a profile re-exported or re-recorded is another.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..errors import ProfileError

__all__ = ["fingerprint", "FINGERPRINT_PREFIX", "CHUNK_BYTES"]

#: Prefix naming the hash function, so that a later perfkit can change it knowingly.
FINGERPRINT_PREFIX = "sha256:"
#: Bytes read at a time.
CHUNK_BYTES = 1 << 20


def _skipped(name: str) -> bool:
    """Hidden files and folders (``.DS_Store``, ``.ipynb_checkpoints``) and Python caches
    are not part of a profile."""
    return name.startswith(".") or name == "__pycache__"


def _files(root: Path) -> list[tuple[str, Path]]:
    """(path relative to ``root`` in POSIX form, path) of every regular file, sorted."""
    out = []
    for folder, dirs, names in os.walk(root, onerror=_raise):
        dirs[:] = sorted(d for d in dirs if not _skipped(d))
        for name in names:
            if _skipped(name):
                continue
            path = Path(folder) / name
            if path.is_file():
                out.append((path.relative_to(root).as_posix(), path))
    return sorted(out)


def _raise(error: OSError) -> None:
    raise error


def _file_digest(path: Path) -> tuple[int, bytes]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            h.update(chunk)
            size += len(chunk)
    return size, h.digest()


def fingerprint(path: str | os.PathLike[str]) -> tuple[str, int]:
    """The content fingerprint of a profile file or folder, and the bytes it covers.

    Parameters
    ----------
    path : path
        A profile folder (one rank or many) or a single profile file (a Kineto trace, an
        Ascend ``.db``).

    Returns
    -------
    (str, int)
        ``"sha256:<64 hex digits>"`` and the number of bytes hashed.

    Notes
    -----
    SHA-256 over, for every regular file in name order, its path *relative to the
    profile* (so the folder's own name and location do not count), its size and the
    SHA-256 of its content; for a single file, its content only. Hidden files
    (``.name``) and ``__pycache__`` are left out. Every byte is read: about a second per
    GB, far less than loading the profile.

    Raises
    ------
    ProfileError
        The path is missing or a file cannot be read (the message names it).
    """
    root = Path(path).expanduser()
    try:
        if root.is_file():
            size, digest = _file_digest(root)
            return FINGERPRINT_PREFIX + hashlib.sha256(digest).hexdigest(), size
        if not root.is_dir():
            raise ProfileError(root, "not found: no profile file or folder to fingerprint")
        total = hashlib.sha256()
        count = 0
        files = _files(root)
        if not files:
            raise ProfileError(root, "the folder holds no file to fingerprint")
        for rel, file in files:
            size, digest = _file_digest(file)
            count += size
            total.update(rel.encode("utf-8") + b"\0" + str(size).encode() + b"\0" + digest)
        return FINGERPRINT_PREFIX + total.hexdigest(), count
    except OSError as exc:
        where = exc.filename or root
        raise ProfileError(where, f"cannot be read to fingerprint it: {exc.strerror or exc}"
                           ) from None
