"""JSON files, read whole or only their head.

:func:`read_json` turns every failure into a ProfileError worded by
:func:`describe_json_error`; :func:`json_head` peeks at the first MiB.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...errors import ProfileError
from .files import check_file, decode_text_bytes
from .memory import gc_paused
from .notes import note

__all__ = ["JSON_HEAD_BYTES", "read_json", "describe_json_error", "json_head",
           "keys_read_over"]

#: One JSON string, and whether a colon follows it (a key). Every string of a document is
#: one match, scanned in order, so a quote inside a string never starts one.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"(\s*:)?')
#: A quote and a colon with white space between them (``"key" : value``).
_SPACED_COLON = re.compile(rb'"\s+:')

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
            parsed = msgspec.json.decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise ProfileError(path, describe_json_error(data, str(exc), what)) from None
    lost = keys_read_over(data, parsed)
    if lost:
        note(f"{path.name}: an object holds a key twice ({lost:,} key{'s' * (lost > 1)} "
             "read over in all, those inside the earlier copies included): JSON keeps one "
             "value per key, and the last copy of each was read")
    return parsed


def keys_read_over(data: bytes, parsed: Any) -> int:
    """How many keys of ``data`` (a JSON document) the decoder read over because a later
    copy of their key, or of a key above them, came in the same object (it keeps the
    last): the keys written (strings followed by a colon) less the keys of every parsed
    object. 0 for a document whose objects hold each key once.

    Every key ends in a quote and a colon, and a string holds those two only after a
    backslash, in the file as in the parsed document written again (msgspec, C speed):
    where the file has no more such pairs than that copy, no key was lost. Only otherwise
    are the keys counted exactly, string by string and object by object (slower)."""
    import msgspec

    written_at_most = data.count(b'":') + len(_SPACED_COLON.findall(data))
    if written_at_most <= msgspec.json.encode(parsed).count(b'":'):
        return 0
    written = sum(1 for m in _STRING.finditer(data) if m.group(1))
    kept, stack = 0, [parsed]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            kept += len(value)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return max(0, written - kept)


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
