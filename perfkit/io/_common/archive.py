"""Safe extraction of an uploaded, zipped profiler output.

The Voila dashboard lets a user upload a zipped profile folder; :func:`extract_profile_archive`
unpacks it into a fresh folder and returns the folder to hand to :func:`perfkit.load`.
The archive is untrusted, so every rule that needs no decompression is checked before
anything is written: sizes, number of entries, compression ratio (zip bombs), encryption,
paths that would land outside the destination (zip slip: absolute paths, drive letters,
``..``), links, device files and duplicate names. Bytes are counted again while they are
written, so declared sizes are not trusted. On any failure the files and folders written so
far are removed again.

Only ``.zip`` is accepted; a ``.tar.gz`` (or other format) is refused with a message saying
so. ``tarfile``'s ``filter="data"`` could be bypassed in the Python 3.11 releases before
3.11.13 (CVE-2025-4517), so tar support would not be as safe as this zip reader.
"""

from __future__ import annotations

import io
import os
import re
import stat
import struct
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from ...errors import (
    InvalidArgumentError,
    ProfileError,
    check_positive,
    check_positive_int,
    file_boundary,
)

__all__ = ["DEFAULT_MAX_UPLOAD_BYTES", "extract_profile_archive"]

DEFAULT_MAX_UPLOAD_BYTES = 200 * 2**20
"""Largest zip accepted by default (200 MB); also a sensible limit for the upload widget."""

_CHUNK = 2**20
_RATIO_FLOOR = 2**20  # members that unpack to less than this are not checked for their ratio
_TOC_BYTES_PER_ENTRY = 1024  # allowance per entry for the zip's table of contents
_JUNK_DIRS = {"__MACOSX"}
_JUNK_FILES = {".DS_Store"}
_DRIVE = re.compile(r"^[A-Za-z]:")
_OTHER_FORMATS = [  # (magic bytes, offset, what the file is)
    (b"\x1f\x8b", 0, "a gzip file (.gz or .tar.gz)"),
    (b"BZh", 0, "a bzip2 file (.bz2 or .tar.bz2)"),
    (b"\xfd7zXZ\x00", 0, "an xz file (.xz or .tar.xz)"),
    (b"7z\xbc\xaf\x27\x1c", 0, "a 7-Zip archive (.7z)"),
    (b"Rar!", 0, "a RAR archive (.rar)"),
    (b"ustar", 257, "a tar archive (.tar)"),
]
_ZIP_ONLY = "only .zip archives can be loaded: zip the profile folder and upload that"

Member = tuple[zipfile.ZipInfo, tuple[str, ...]]


def extract_profile_archive(
    data: bytes | bytearray | memoryview | os.PathLike[str] | str,
    dest: os.PathLike[str] | str,
    *,
    name: str | None = None,
    max_compressed_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
    max_uncompressed_bytes: int = 2 * 2**30,
    max_members: int = 20000,
    max_ratio: float = 200.0,
) -> Path:
    """Unpack a zipped profile safely and return the folder to pass to :func:`perfkit.load`.

    Parameters
    ----------
    data : bytes, bytearray, memoryview, str or path-like
        The zip file's content (e.g. from an ipywidgets ``FileUpload``) or its path.
    dest : str or path-like
        Folder to extract into. It must be empty or not exist yet (it is then created,
        with its missing parents).
    name : str, optional
        Name of the archive in error messages, e.g. the uploaded file's name. Default:
        ``"upload.zip"`` for bytes, the path for a file.
    max_compressed_bytes : int, default 200 MB
        Largest zip accepted.
    max_uncompressed_bytes : int, default 2 GB
        Largest total size once unpacked; checked against the sizes the zip declares and
        again against the bytes actually written.
    max_members : int, default 20000
        Most entries (files and folders) accepted.
    max_ratio : float, default 200
        Largest unpacked/stored size ratio of one member (members under 1 MB unpacked are
        exempt); a higher one is taken for a zip bomb.

    Returns
    -------
    pathlib.Path
        ``dest / top`` when everything in the archive lies in one top-level folder ``top``
        (macOS ``__MACOSX/`` and ``.DS_Store`` entries are ignored and not extracted),
        else ``dest``.

    Raises
    ------
    perfkit.errors.ProfileError
        The archive is not a zip, is damaged, or breaks one of the safety rules; the message
        names the archive and the rule. Nothing is left in ``dest`` then.
    perfkit.errors.InvalidArgumentError
        ``dest`` is a file or a non-empty folder, or a limit is not positive.
    """
    for param, value in [("max_compressed_bytes", max_compressed_bytes),
                         ("max_uncompressed_bytes", max_uncompressed_bytes),
                         ("max_members", max_members)]:
        check_positive_int(param, value)
    check_positive("max_ratio", max_ratio)
    in_memory = isinstance(data, (bytes, bytearray, memoryview))
    if name is None:
        name = "upload.zip" if in_memory else os.fspath(data)  # type: ignore[arg-type]
    with file_boundary(name, "a zip archive"):  # nothing but PerfkitErrors comes out
        return _extract_archive(data, Path(dest), name, max_compressed_bytes,
                                max_uncompressed_bytes, max_members, max_ratio)


def _extract_archive(data: bytes | bytearray | memoryview | os.PathLike[str] | str, dest: Path,
                     name: str, max_compressed_bytes: int, max_uncompressed_bytes: int,
                     max_members: int, max_ratio: float) -> Path:
    """The body of :func:`extract_profile_archive` (inside its exception boundary)."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InvalidArgumentError("dest", "must be an empty folder or not exist yet",
                                   str(dest))

    with _open_zip(data, name, max_compressed_bytes, max_members) as archive:
        members = _check_members(archive.infolist(), name, max_members=max_members,
                                 max_uncompressed_bytes=max_uncompressed_bytes,
                                 max_ratio=max_ratio)
        created: list[Path] = []
        try:
            _extract(archive, members, dest, name, max_uncompressed_bytes, created)
        except BaseException:
            _remove(created)
            raise

    tops = {parts[0] for _, parts in members}
    if len(tops) == 1 and any(len(parts) > 1 or info.is_dir() for info, parts in members):
        return dest / tops.pop()
    return dest


def _size(n: float) -> str:
    """``n`` bytes in words, e.g. ``"200 MB"``."""
    if n < 1024:
        return f"{n:,.0f} bytes"
    for unit in ("KB", "MB", "GB", "TB"):
        n /= 1024
        if n < 1024 or unit == "TB":
            break
    return f"{n:,.1f}".removesuffix(".0") + f" {unit}"


@contextmanager
def _open_zip(data: bytes | bytearray | memoryview | os.PathLike[str] | str, name: str,
              max_compressed_bytes: int, max_members: int) -> Iterator[zipfile.ZipFile]:
    """Open ``data`` as a zip once its size, format and table of contents pass."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        size = memoryview(data).nbytes
        source: BinaryIO = io.BytesIO(data)
    else:
        path = Path(data)
        if not path.is_file():
            problem = "is a folder, not a zip file" if path.is_dir() else "no such file"
            raise ProfileError(name, problem)
        size = path.stat().st_size
        source = open(path, "rb")  # noqa: SIM115 -- closed by the with below
    with source as fp:
        if size > max_compressed_bytes:
            raise ProfileError(name, f"is {_size(size)}, more than the upload limit of "
                                     f"{_size(max_compressed_bytes)}")
        head = fp.read(262)
        for magic, offset, what in _OTHER_FORMATS:
            if head[offset:offset + len(magic)] == magic:
                raise ProfileError(name, f"is {what}, not a zip file; {_ZIP_ONLY}")
        toc = _table_of_contents_bytes(fp)
        if toc > _TOC_BYTES_PER_ENTRY * max_members:
            raise ProfileError(name, f"has more entries than the limit of {max_members:,} "
                                     f"(its table of contents alone is {_size(toc)})")
        fp.seek(0)
        try:
            archive = zipfile.ZipFile(fp)
        except Exception as exc:  # any failure to parse untrusted bytes means "damaged"
            if head.startswith(b"PK"):
                detail = "" if str(exc) == "File is not a zip file" else f" ({exc})"
                raise ProfileError(name, "looks like a zip file but is damaged or incomplete"
                                         f"{detail}; was the upload cut short?") from exc
            raise ProfileError(name, f"is not a zip file; {_ZIP_ONLY}") from exc
        with archive:
            yield archive


def _table_of_contents_bytes(fp: BinaryIO) -> int:
    """Largest central-directory size any end record near the end of the zip declares.

    ``zipfile.ZipFile`` turns that many bytes into objects before the entries can be
    counted, so it is bounded first. Every candidate end record (and the zip64 record before
    it) is read, whichever one ``zipfile`` picks. 0 where there is none (``zipfile`` then says
    the file is not a zip).
    """
    end = fp.seek(0, os.SEEK_END)
    start = fp.seek(max(0, end - 22 - 2**16))  # end record (22 bytes) + longest comment
    tail = fp.read()
    size = 0
    at = tail.find(b"PK\x05\x06")
    while 0 <= at <= len(tail) - 16:
        size = max(size, struct.unpack_from("<I", tail, at + 12)[0])
        if start + at >= 76:  # a zip64 end record (56 bytes) and locator (20) may precede
            fp.seek(start + at - 76)
            rec = fp.read(76)
            if rec[:4] == b"PK\x06\x06" and rec[56:60] == b"PK\x06\x07":
                size = max(size, struct.unpack_from("<Q", rec, 40)[0])
        at = tail.find(b"PK\x05\x06", at + 1)
    return size


def _member(info: zipfile.ZipInfo) -> str:
    """``member 'name'`` for messages; a very long name is shortened in the middle."""
    shown = info.filename if len(info.filename) <= 160 else (
        f"{info.filename[:80]}...{info.filename[-60:]}")
    return f"member {shown!r}"


def _member_parts(info: zipfile.ZipInfo, name: str) -> tuple[str, ...]:
    """Path components of a member; refuse any name that could leave the destination."""
    path = info.filename.replace("\\", "/")
    member = _member(info)
    if path.startswith("/"):
        raise ProfileError(name, f"{member} has an absolute path; refused for safety")
    if _DRIVE.match(path):
        raise ProfileError(name, f"{member} starts with a drive letter; refused for safety")
    parts = tuple(p for p in PurePosixPath(path).parts if p not in ("", "."))
    if ".." in parts:
        raise ProfileError(name, f"{member} contains '..' and would be written outside the "
                                 "destination folder (zip slip); refused for safety")
    if not parts:
        raise ProfileError(name, f"{member} has an empty name")
    return parts


def _check_members(infos: list[zipfile.ZipInfo], name: str, *, max_members: int,
                   max_uncompressed_bytes: int, max_ratio: float) -> list[Member]:
    """Apply every rule that needs no decompression; return the members to extract."""
    if len(infos) > max_members:
        raise ProfileError(name, f"holds {len(infos):,} entries, more than the limit of "
                                 f"{max_members:,}")
    total = sum(info.file_size for info in infos)
    if total > max_uncompressed_bytes:
        raise ProfileError(name, f"would unpack to {_size(total)}, more than the limit of "
                                 f"{_size(max_uncompressed_bytes)}")
    keep: list[Member] = []
    files: set[tuple[str, ...]] = set()
    dirs: set[tuple[str, ...]] = set()
    for info in infos:
        parts = _member_parts(info, name)
        member = _member(info)
        if info.flag_bits & 0x1:
            raise ProfileError(name, f"{member} is encrypted (password-protected); upload a "
                                     "zip made without a password")
        kind = stat.S_IFMT(info.external_attr >> 16)
        if kind == stat.S_IFLNK:
            raise ProfileError(name, f"{member} is a symbolic link; links are refused for "
                                     "safety (zip the files themselves, not links to them)")
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise ProfileError(name, f"{member} is a device or other special file; only "
                                     "ordinary files and folders can be extracted")
        stored = max(info.compress_size, 1)
        if info.file_size >= _RATIO_FLOOR and info.file_size > max_ratio * stored:
            raise ProfileError(name, f"{member} unpacks {info.file_size / stored:,.0f} times "
                                     f"larger than it is stored (limit {max_ratio:g}); this "
                                     "looks like a zip bomb, so nothing was extracted")
        if parts[0] in _JUNK_DIRS or parts[-1] in _JUNK_FILES:
            continue
        dirs.update(parts[:k] for k in range(1, len(parts)))
        if info.is_dir():
            dirs.add(parts)
        elif parts in files:
            raise ProfileError(name, f"{member} appears twice (two entries would be written "
                                     "to the same file); refused")
        else:
            files.add(parts)
        keep.append((info, parts))
    if files & dirs:
        clash = "/".join(min(files & dirs))
        raise ProfileError(name, f"{clash!r} is both a file and a folder in the archive; "
                                 "refused")
    if not files:
        raise ProfileError(name, "contains no files")
    return keep


def _extract(archive: zipfile.ZipFile, members: list[Member], dest: Path, name: str,
             limit: int, created: list[Path]) -> None:
    """Write ``members`` under ``dest``, recording in ``created`` every path made."""
    _make_dirs(dest.absolute(), created)
    root = dest.resolve()
    written = 0
    for info, parts in members:
        member = _member(info)
        target = root.joinpath(*parts)
        if not Path(os.path.realpath(target)).is_relative_to(root):
            raise ProfileError(name, f"{member} would be written outside the destination "
                                     "folder; refused for safety")
        try:
            _make_dirs(target if info.is_dir() else target.parent, created)
            if info.is_dir():
                continue
            out = open(target, "xb")  # noqa: SIM115 -- never overwrite, never follow a link
        except (FileExistsError, NotADirectoryError, IsADirectoryError) as exc:
            raise ProfileError(name, f"{member} would overwrite another entry (names that "
                                     "differ only in upper/lower case?); refused") from exc
        except OSError as exc:  # name too long, disk full, permission denied, ...
            raise ProfileError(name, f"{member} cannot be written here "
                                     f"({exc.strerror or exc}); nothing was extracted") from exc
        created.append(target)
        with out:
            try:
                written = _copy(archive, info, out, written, name, limit)
            except OSError as exc:
                raise ProfileError(name, f"{member} cannot be written here "
                                         f"({exc.strerror or exc}); nothing was "
                                         "extracted") from exc


def _copy(archive: zipfile.ZipFile, info: zipfile.ZipInfo, out: BinaryIO, written: int,
          name: str, limit: int) -> int:
    """Stream one member into ``out``; return the total bytes written so far."""
    member = _member(info)
    try:
        src = archive.open(info)
    except NotImplementedError as exc:
        raise ProfileError(name, f"{member} uses a compression method that cannot be "
                                 f"unpacked here ({exc}); re-create the zip with ordinary "
                                 "(deflate) compression") from exc
    except Exception as exc:
        raise ProfileError(name, f"is damaged: {member} cannot be read ({exc})") from exc
    with src:
        while True:
            try:
                chunk = src.read(_CHUNK)
            except Exception as exc:  # CRC mismatch, truncated or corrupt data
                raise ProfileError(name, f"is damaged: {member} cannot be read ({exc})"
                                   ) from exc
            if not chunk:
                return written
            written += len(chunk)
            if written > limit:
                raise ProfileError(name, f"unpacks to more than the limit of {_size(limit)} "
                                         "(more than the sizes it declares); extraction "
                                         "stopped and the partial files were removed")
            out.write(chunk)


def _make_dirs(path: Path, created: list[Path]) -> None:
    """``mkdir -p path``, recording each folder it creates."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir()
        created.append(folder)


def _remove(created: list[Path]) -> None:
    """Remove what :func:`_extract` created, newest first; leave anything else alone."""
    for path in reversed(created):
        try:
            if path.is_dir() and not path.is_symlink():
                path.rmdir()  # fails, and is left, if something else was put inside
            else:
                path.unlink(missing_ok=True)
        except OSError:
            pass
