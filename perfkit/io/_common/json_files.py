"""JSON files, read whole or only their head.

:func:`read_json` turns every failure into a ProfileError worded by
:func:`describe_json_error`; :func:`json_head` peeks at the first MiB.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import ProfileError
from .files import check_file, decode_text_bytes
from .memory import gc_paused

__all__ = ["JSON_HEAD_BYTES", "read_json", "describe_json_error", "json_head"]

JSON_HEAD_BYTES = 1 << 20
"""How much of a JSON file :func:`json_head` reads (decompressed) to peek at its header."""


def read_json(path: Path, what: str) -> Any:
    """Parse a JSON file, turning every failure into a ProfileError.

    A UTF-8 byte-order mark is skipped and UTF-16 text (with its BOM) is converted; the
    file is refused by :func:`check_file` before it is read whole when its ends are binary.
    """
    check_file(path, what, utf16=True)
    try:
        data = decode_text_bytes(path, path.read_bytes(), what)
    except OSError as exc:
        raise ProfileError(path, f"cannot read {what}: {exc.strerror or exc}") from None
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ProfileError(path, f"binary data (NUL byte at offset {nul:,}) where {what} "
                           "(JSON text) was expected")
    import msgspec  # here: the cached reopen, which reads no JSON, skips its import

    with gc_paused():
        try:
            return msgspec.json.decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise ProfileError(path, describe_json_error(data, str(exc), what)) from None


def describe_json_error(data: bytes, message: str, what: str) -> str:
    """Words for a JSON decode failure: truncated, binary, non-UTF-8 or malformed."""
    head = data[:4096]
    if b"\x00" in head:
        return f"binary data where {what} (JSON text) was expected"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(data) - 4 or "utf-8" in message.lower():
            return f"not UTF-8 text (bad byte at offset {exc.start}); expected {what} (JSON)"
    stripped = data.rstrip()
    if stripped and stripped[-1:] not in (b"}", b"]") and stripped.lstrip()[:1] in (b"{", b"["):
        return (f"JSON is truncated (it ends without its closing bracket); expected {what} "
                "in full")
    return f"invalid JSON ({message}); expected {what}"

def json_head(path: Path) -> tuple[bytes, bool]:
    """The first MiB of a (possibly gzipped) JSON file, and whether that is all of it."""
    import gzip
    import zlib

    try:
        with open(path, "rb") as fh:
            raw = fh.read(JSON_HEAD_BYTES + 1)
        if raw[:2] == b"\x1f\x8b":
            inflate = zlib.decompressobj(31)
            head = inflate.decompress(raw[:JSON_HEAD_BYTES], JSON_HEAD_BYTES)
            return head, len(raw) <= JSON_HEAD_BYTES and inflate.eof and \
                not inflate.unconsumed_tail
        return raw[:JSON_HEAD_BYTES], len(raw) <= JSON_HEAD_BYTES
    except (OSError, zlib.error, gzip.BadGzipFile):
        return b"", False
