"""A file refused by its ends before it is read whole.

:func:`check_file` looks at its first and last bytes and at its sparse holes, whatever its
size; :func:`decode_text_bytes` drops a UTF-8 byte-order mark and converts UTF-16 text.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ...errors import ProfileError

__all__ = ["HEAD_BYTES", "check_file", "refuse_special", "loops_back", "decode_text_bytes",
           "check_nonempty"]

HEAD_BYTES = 1 << 16
"""Bytes looked at at each end of a file before it is read whole."""

_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def check_file(path: Path, what: str, *, text: bool = True, utf16: bool = False,
               holes: bool | None = None) -> bytes:
    """Refuse a file by its first and last bytes, before it is read whole; return the head.

    Checks, in O(1) whatever the size: the file exists, is a regular readable file and is
    not empty; and, for text (``text=True``), that it has no sparse hole (a region never
    written, read back as zeros) and no NUL byte in its first or last :data:`HEAD_BYTES`
    bytes (binary data, or a file zero-padded by a crashed writer or a pre-allocating copy).
    ``holes=True`` checks holes in a binary file too (gzip: compressed data has no runs of
    zeros).
    ``utf16=True`` lets a file starting with a UTF-16 byte-order mark through (its NULs are
    characters); otherwise such a file is refused with a message saying so.

    Raises
    ------
    ProfileError
        Naming the file and the problem (and the offset of the first bad byte).
    """
    try:
        refuse_special(path, what)
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                raise ProfileError(path, f"file is empty; expected {what}")
            head = fh.read(HEAD_BYTES)
            # a text file never holds a run of NUL bytes (nor does compressed data), so a hole
            # in it (even one a sparse-aware copy made) is damage; an SQLite file may hold one
            hole = _first_hole(fh.fileno(), size) if (text if holes is None else holes) \
                else None
            if hole is not None:
                raise ProfileError(path, f"has a hole (never-written bytes, read as zeros) "
                                   f"at offset {hole:,} of {size:,}: the file is damaged or "
                                   f"was not completely copied; expected {what}")
            if not text:
                if holes and size > len(head):  # compressed data does not end in zeros
                    fh.seek(max(len(head), size - HEAD_BYTES))
                    if not fh.read().strip(b"\x00"):
                        raise ProfileError(path, f"ends with {min(size - len(head), HEAD_BYTES):,}"
                                           "+ NUL bytes: the file is damaged or zero-padded; "
                                           f"expected {what}")
                return head
            if head[:2] in _UTF16_BOMS:
                if utf16:
                    return head
                raise ProfileError(path, f"is UTF-16 text; expected {what} as UTF-8 (save or "
                                   "convert it as UTF-8)", line=1)
            at = head.find(b"\x00")
            if at >= 0 and _utf16_without_bom(head):
                raise ProfileError(path, f"is UTF-16 text without a byte-order mark; expected "
                                   f"{what} as UTF-8 (or UTF-16 with its byte-order mark)",
                                   line=1)
            if at >= 0:
                raise ProfileError(path, f"binary data (NUL byte at offset {at:,}) where {what}"
                                   " (text) was expected: the file is damaged, zero-padded or "
                                   "of another kind", line=head.count(b"\n", 0, at) + 1)
            if size > len(head):
                start = max(len(head), size - HEAD_BYTES)
                fh.seek(start)
                tail = fh.read()
                at = tail.find(b"\x00")
                if at >= 0:
                    raise ProfileError(path, f"binary data (NUL bytes from offset "
                                       f"{start + at:,} of {size:,}): the file is damaged or "
                                       f"zero-padded; expected {what} (text)")
            return head
    except IsADirectoryError:
        raise ProfileError(path, f"is a folder; expected {what} (a file)") from None
    except OSError as exc:
        raise ProfileError(path, f"cannot read {what}: {exc.strerror or exc}") from None


#: What a path that is neither a file nor a folder is, by its mode.
_SPECIAL = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def refuse_special(path: Path, what: str) -> None:
    """Refuse a path that is a named pipe, a socket or a device, before anything opens it:
    opening a FIFO blocks until a writer comes, so a profile holding one hung the loader
    (and the dashboard) for ever.

    Raises
    ------
    ProfileError
        Naming the file and what it is.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing or unreadable: the open that follows says so
    for test, kind in _SPECIAL:
        if test(mode):
            raise ProfileError(path, f"is {kind}, not a file; expected {what} (a regular "
                               "file): perfkit does not read from it, which could wait for "
                               "ever")


def loops_back(folder: Path) -> bool:
    """Whether ``folder`` is a link to itself's parent or a folder above it (``ln -s . loop``):
    it holds nothing the walk has not seen, and walking into it repeats the tree at every
    level (a 2-rank job read as "8 separate runs")."""
    try:
        if not folder.is_symlink():
            return False
        target, parent = folder.resolve(), folder.parent.resolve()
    except (OSError, RuntimeError):  # a loop the resolver gives up on
        return True
    return target == parent or target in parent.parents


def _first_hole(fd: int, size: int) -> int | None:
    """Offset of the first sparse hole before the end of the file, or None."""
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_hole is None:
        return None
    try:
        at = os.lseek(fd, 0, seek_hole)
    except OSError:  # filesystem without the call
        return None
    finally:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
        except OSError:
            pass
    return at if at < size else None


def _utf16_without_bom(head: bytes) -> bool:
    """Whether ``head`` reads as ASCII text in UTF-16 (every other byte NUL, the others
    printable), as a UTF-16 file written without its byte-order mark does."""
    sample = head[:4096]
    if len(sample) < 8:
        return False
    for zeros, chars in ((sample[1::2], sample[0::2]), (sample[0::2], sample[1::2])):
        if zeros.count(0) >= 0.95 * len(zeros) and \
                sum(32 <= c < 127 or c in (9, 10, 13) for c in chars) >= 0.95 * len(chars):
            return True
    return False


def decode_text_bytes(path: Path, data: bytes, what: str) -> bytes:
    """UTF-8 bytes of ``data``: a UTF-8 BOM is dropped, UTF-16 (with its BOM) converted."""
    if data[:3] == b"\xef\xbb\xbf":
        return data[3:]
    if data[:2] in _UTF16_BOMS:
        try:
            return data.decode("utf-16").encode("utf-8")
        except UnicodeError as exc:
            raise ProfileError(path, f"UTF-16 text that cannot be decoded ({exc.reason}); "
                               f"expected {what}") from None
    return data


def check_nonempty(path: Path, what: str) -> None:
    """Raise ProfileError when ``path`` is missing or empty."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ProfileError(path, f"cannot read {what}: {exc.strerror or exc}") from None
    if size == 0:
        raise ProfileError(path, f"file is empty; expected {what}")

