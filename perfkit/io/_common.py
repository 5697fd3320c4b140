"""Shared reading helpers of the loaders: CSV through pyarrow, JSON, timestamps, errors.

Every failure becomes a :class:`perfkit.errors.ProfileError` naming the file, and where
known the field, what was expected and what was found. Nothing here writes to disk.

Before a file is read whole, :func:`check_file` looks at its first and last bytes and at
its sparse holes: binary data, a zero-padded tail or a hole is refused at once, whatever the
file's size. Repairs that keep a correct load (the last row of a CSV cut mid-row dropped, a
second header line dropped) are reported through :func:`note` to the loader's
:func:`collecting_notes` scope and end up in ``meta.notes``.
"""

from __future__ import annotations

import csv
import ctypes
import functools
import gc
import io
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ..errors import ProfileError
from ..format import counted, plural

__all__ = [
    "NULLS",
    "release_memory",
    "HEAD_BYTES",
    "check_file",
    "decode_text_bytes",
    "note",
    "collecting_notes",
    "with_notes",
    "hccl_group_hash",
    "gc_paused",
    "read_header",
    "read_csv",
    "find_col",
    "to_float",
    "json_number",
    "counting_numbers",
    "to_ns",
    "rel_us",
    "min_ns",
    "read_json",
    "describe_json_error",
    "check_nonempty",
    "rank_from_name",
    "json_head",
    "suffix_number",
    "int64_series",
]

NULLS = ["", "N/A", "NA", "n/a", "nan", "NaN", "None", "null", "-"]
"""Cell values read as missing."""

_NUMERIC = r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$"

HEAD_BYTES = 1 << 16
JSON_HEAD_BYTES = 1 << 20
"""How much of a JSON file :func:`json_head` reads (decompressed) to peek at its header."""
"""Bytes looked at at each end of a file before it is read whole."""

_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_NOTES: ContextVar[list[str] | None] = ContextVar("perfkit_io_notes", default=None)
_UNREAD: ContextVar[dict[str, int] | None] = ContextVar("perfkit_io_unread", default=None)
_NUMBER_RE = re.compile(_NUMERIC)
_T = TypeVar("_T")


def note(message: str) -> None:
    """Report a repair (``"kernel_details.csv: file ends mid-row: last row dropped"``).

    The message goes to the innermost :func:`collecting_notes` scope; outside one it is
    dropped (the repair itself still happens).
    """
    found = _NOTES.get()
    if found is not None and message not in found:
        found.append(message)


@contextmanager
def collecting_notes() -> Iterator[list[str]]:
    """Collect the :func:`note` messages of the reads done inside the ``with`` block."""
    found: list[str] = []
    token = _NOTES.set(found)
    try:
        yield found
    finally:
        _NOTES.reset(token)


def with_notes(func: Callable[..., _T]) -> Callable[..., _T]:
    """Decorator of a ``parse(...) -> (meta, tables)``: its read notes go to ``meta.notes``."""

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> _T:
        with collecting_notes() as found:
            result = func(*args, **kwargs)
        meta = result[0]  # type: ignore[index]
        meta.notes.extend(n for n in found if n not in meta.notes)
        return result

    return run


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


@contextmanager
def gc_paused():
    """Switch Python's garbage collector off for a bulk parse (many small objects)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def release_memory() -> None:
    """Hand memory freed by a bulk parse back to the operating system.

    Decoding millions of events frees hundreds of MB in many pieces, which the C heap
    (glibc ``malloc``) and Arrow's memory pool keep for reuse; the resident size of the
    process would stay at its high-water mark. ``malloc_trim(0)`` (glibc only; a no-op
    elsewhere) and ``MemoryPool.release_unused`` return it. Costs a few milliseconds.
    """
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # not glibc (macOS, Windows, musl)
        return None


def check_nonempty(path: Path, what: str) -> None:
    """Raise ProfileError when ``path`` is missing or empty."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ProfileError(path, f"cannot read {what}: {exc.strerror or exc}") from None
    if size == 0:
        raise ProfileError(path, f"file is empty; expected {what}")


def read_header(path: Path, what: str) -> list[str]:
    """Return the column names of a CSV file, checking it is text (:func:`check_file`).

    UTF-8 with or without a byte-order mark; UTF-16 with its BOM is decoded too.
    """
    head = check_file(path, what, utf16=True)
    if head[:2] in _UTF16_BOMS:
        head = decode_text_bytes(path, head[:len(head) - len(head) % 2], what)
    first = head.split(b"\n", 1)[0]
    if b"\x00" in first:
        raise ProfileError(path, f"binary data where {what} (a CSV text file) was expected",
                           line=1)
    try:
        text = first.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProfileError(path, f"header is not UTF-8 text (byte {exc.start}); "
                           f"expected {what}", line=1) from None
    row = next(csv.reader(io.StringIO(text)), [])
    return [c.strip() for c in row]


def find_col(header: Sequence[str], *names: str) -> str | None:
    """Return the first of ``names`` present in ``header`` (case-insensitive), else None."""
    lower = {h.lower(): h for h in header}
    for n in names:
        hit = lower.get(n.lower())
        if hit is not None:
            return hit
    return None


def read_csv(path: Path, what: str, required: Iterable[Sequence[str]] = (),
             text_cols: Iterable[str] = ()) -> pa.Table:
    """Read a CSV into a pyarrow Table after checking its header.

    Parameters
    ----------
    path : Path
        The file.
    what : str
        Words for the message ("kernel_details.csv of torch_npu").
    required : iterable of name groups
        Each group lists alternative spellings; one of each must be in the header.
    text_cols : iterable of str
        Columns forced to text (timestamps with a trailing TAB, shapes).

    Returns
    -------
    pyarrow.Table
        Column names stripped of whitespace.

    Notes
    -----
    Repairs, each reported with :func:`note`: a last line without a newline (a file cut
    mid-row) or a last row with too few fields is dropped; other rows with too few fields
    are padded with NA; rows repeating the header (two files concatenated) are dropped;
    UTF-16 text is converted. Refused with a ProfileError: binary data, a row with more
    fields than the header, text that is not UTF-8 (with the offset and line).
    """
    header = read_header(path, what)
    missing = [alts[0] for alts in required if find_col(header, *alts) is None]
    if missing:
        shown = ",".join(header[:12]) + (",..." if len(header) > 12 else "")
        raise ProfileError(path, f"expected a header with {plural(len(missing), 'column')} "
                           f"{', '.join(missing)} "
                           f"({what}); found '{shown}'", line=1)
    present = {c for c in text_cols if c in header}
    types = {c: pa.string() for c in present}
    source, _, last_line = _complete_rows(path, what)
    if last_line is not None:
        note(f"{path.name} line {_line_of_end(source)}: "
             + ("the last row ends inside a quoted field (file cut mid-field?)"
                if last_line.endswith(b"\n") else
                "file ends mid-row (no newline after the last line)")
             + f": last row dropped ({_shown(last_line)})")
    bad_rows: list[tuple[int, str]] = []

    def invalid(row: Any) -> str:
        bad_rows.append((row.actual_columns, row.text))
        return "skip"

    convert = pacsv.ConvertOptions(column_types=types, null_values=NULLS,
                                   strings_can_be_null=True, quoted_strings_can_be_null=True)
    # for the careful read: 16 MB blocks, so column types are inferred from more rows
    read_options = pacsv.ReadOptions(block_size=1 << 24)
    try:
        # first the fast path, 2x quicker on a 1 M-row kernel_details.csv: pyarrow's 1 MB
        # blocks parsed in parallel, no handler for bad rows (a Python callback slows the
        # parser down); a file this fails on (a row with the wrong number of fields, a
        # type the first block did not foresee) is read again below, carefully
        table = pacsv.read_csv(source, convert_options=convert)
    except (pa.ArrowInvalid, UnicodeDecodeError, OSError):
        table = None
    try:
        if table is None:
            if isinstance(source, pa.BufferReader):
                source.seek(0)  # the first attempt read part of it
            table = pacsv.read_csv(
                source, read_options=read_options, convert_options=convert,
                parse_options=pacsv.ParseOptions(newlines_in_values=True,
                                                 invalid_row_handler=invalid))
    except (pa.ArrowInvalid, UnicodeDecodeError, OSError) as exc:
        msg = str(exc).splitlines()[0][:300]
        nul = _first_nul(path)
        if nul is not None:
            raise ProfileError(path, f"binary data (NUL bytes from offset {nul:,}): the file is "
                               f"damaged or zero-padded; expected {what} (text)") from None
        bad = _first_non_utf8(path)
        if bad is not None or "utf8" in msg.lower().replace("-", ""):
            where = "" if bad is None else f"bad byte at offset {bad[0]:,}, line {bad[1]}; "
            raise ProfileError(path, f"not UTF-8 text ({where}{msg}); expected {what} as UTF-8 "
                               "CSV") from None
        raise ProfileError(path, f"cannot be parsed ({msg}); expected {what} as "
                           "comma-separated text") from None
    if bad_rows:
        table = _repair_rows(path, what, header, source, bad_rows, table)
    table = table.rename_columns([c.strip() for c in table.column_names])
    return _drop_repeated_headers(path, table)


def _complete_rows(path: Path, what: str = "a CSV file") -> tuple[Any, int, bytes | None]:
    """What pyarrow should parse: the file, or its bytes up to the start of a cut last row.

    A last row is cut when the file does not end with a newline (every CSV writer ends
    its last row with one), or when the last line holds an odd number of double quotes: a
    quoted field opened and never closed (a file cut inside a field, a newline added
    after; profiler CSVs have no line breaks inside fields).

    Returns ``(source, size, cut)``; ``cut`` is the cut last line that was left out
    (None when the last row is complete). UTF-16 text is converted to UTF-8 in memory
    first (with a note).
    """
    with open(path, "rb") as fh:
        if fh.read(2) in _UTF16_BOMS:
            fh.seek(0)
            data = decode_text_bytes(path, fh.read(), what)
            note(f"{path.name}: UTF-16 text, converted to UTF-8")
            end = data.rfind(b"\n") + 1
            if end == len(data) and _open_quote(data[-HEAD_BYTES:]):
                end = data.rfind(b"\n", 0, end - 1) + 1
            if end == len(data) or end == 0:
                return pa.BufferReader(pa.py_buffer(data)), len(data), None
            return pa.BufferReader(pa.py_buffer(data[:end])), len(data), data[end:]
        size = os.fstat(fh.fileno()).st_size
        fh.seek(max(0, size - 1))
        if fh.read(1) == b"\n":
            start = _open_last_line(fh, size)
            if start is None:
                return path, size, None
            fh.seek(start)
            cut = fh.read(min(size - start, 4096))
            buf = pa.memory_map(str(path)).read_buffer(start)
            return pa.BufferReader(buf), size, cut if cut.endswith(b"\n") else cut + b"\n"
        end = size
        while end > 0:  # the last newline, searched backwards block by block
            start = max(0, end - HEAD_BYTES)
            fh.seek(start)
            block = fh.read(end - start)
            at = block.rfind(b"\n")
            if at >= 0:
                cut_at = start + at + 1
                fh.seek(cut_at)
                cut = fh.read(min(size - cut_at, 4096))
                buf = pa.memory_map(str(path)).read_buffer(cut_at)
                return pa.BufferReader(buf), size, cut
            end = start
    return path, size, None  # one line only (a header without newline): parse as is


def _open_quote(data: bytes) -> bool:
    """True when the last line of ``data`` (text ending with a newline) holds an odd
    number of double quotes: a quoted field that is never closed."""
    body = data[:-1]
    return body[body.rfind(b"\n") + 1:].count(b'"') % 2 == 1


def _open_last_line(fh: Any, size: int) -> int | None:
    """Offset of the last line of a file ending with a newline when that line leaves a
    quoted field open (an odd number of double quotes), else None (also when it is the
    only line: the header). Read backwards block by block from the end."""
    end, quotes = size - 1, 0
    while end > 0:
        start = max(0, end - HEAD_BYTES)
        fh.seek(start)
        block = fh.read(end - start)
        at = block.rfind(b"\n")
        quotes += block.count(b'"', at + 1)
        if at >= 0:
            return start + at + 1 if quotes % 2 else None
        end = start
    return None


def _line_of_end(source: Any) -> int:
    """Line number (1-based) of the line after the last newline of ``source`` (a path or
    the BufferReader :func:`_complete_rows` returns): the cut row that was left out.

    Counted block by block; only called when a file was repaired.
    """
    if isinstance(source, pa.BufferReader):
        source.seek(0)
        data = source.read()
        source.seek(0)
        return data.count(b"\n") + 1
    lines = 1
    with open(source, "rb") as fh:
        while block := fh.read(1 << 24):
            lines += block.count(b"\n")
    return lines


def _shown(line: bytes | str, limit: int = 60) -> str:
    """A cut line as shown in a note: quoted, shortened."""
    text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
    text = text.rstrip("\r\n")
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _first_nul(path: Path) -> int | None:
    """Offset of the first NUL byte, read block by block; None if none (or UTF-16 text)."""
    offset = 0
    with open(path, "rb") as fh:
        if fh.read(2) in _UTF16_BOMS:
            return None
        fh.seek(0)
        while block := fh.read(1 << 22):
            at = block.find(b"\x00")
            if at >= 0:
                return offset + at
            offset += len(block)
    return None


def _first_non_utf8(path: Path) -> tuple[int, int] | None:
    """(offset, line) of the first byte that is not UTF-8, read block by block; None if none.

    Only called once a CSV failed to parse, to say why.
    """
    import codecs

    dec = codecs.getincrementaldecoder("utf-8")()
    offset, lines = 0, 1
    with open(path, "rb") as fh:
        if fh.read(2) in _UTF16_BOMS:
            return None
        fh.seek(0)
        while block := fh.read(1 << 22):
            try:
                dec.decode(block)
            except UnicodeDecodeError as exc:
                at = max(0, exc.start)
                return offset + at, lines + block.count(b"\n", 0, at)
            offset += len(block)
            lines += block.count(b"\n")
    return None


def _repair_rows(path: Path, what: str, header: list[str], source: Any,
                 bad_rows: list[tuple[int, str]], table: pa.Table) -> pa.Table:
    """Rows whose field count differs from the header's.

    A short *last* row is a file cut mid-row: dropped, with a note. Other short rows (seen
    in hand-trimmed exports) are padded with NA (pandas reads them), with a note; a row
    with too many fields is refused.
    """
    if any("\x00" in t for _, t in bad_rows):
        raise ProfileError(path, "binary data (NUL bytes) inside the rows: the file is damaged "
                           f"or zero-padded; expected {what} (text)")
    long_rows = [n for n, _ in bad_rows if n > len(header)]
    if long_rows:
        n_long = len(long_rows)
        raise ProfileError(path, f"{counted(n_long, 'row')} {plural(n_long, 'has', 'have')} "
                           "more fields than the header "
                           f"({long_rows[0]} instead of {len(header)}); expected {what}")
    last = _last_line(source)
    inner = [(n, t) for n, t in bad_rows if t.rstrip("\r\n") != last]
    if len(inner) < len(bad_rows):
        note(f"{path.name} line {_line_of_end(source) - 1}: last row has too few fields "
             f"({len(header)} expected; file cut mid-row?): last row dropped ({_shown(last)})")
    if not inner:
        return table
    note(f"{path.name}: {counted(len(inner), 'row')} {plural(len(inner), 'has', 'have')} "
         "fewer fields than the header: the missing "
         "cells are read as NA")
    return _read_ragged(path, what, header, source, drop_last=len(inner) < len(bad_rows))


def _last_line(source: Any) -> str:
    if isinstance(source, pa.BufferReader):
        source.seek(0)
        data = source.read()
        source.seek(0)
    else:
        with open(source, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - HEAD_BYTES))
            data = fh.read()
    lines = data.rstrip(b"\r\n").rsplit(b"\n", 1)
    return lines[-1].rstrip(b"\r").decode("utf-8", errors="replace")


def _drop_repeated_headers(path: Path, table: pa.Table) -> pa.Table:
    """Drop rows that repeat the header (two files concatenated), with a note."""
    names = [c for c in table.column_names
             if pa.types.is_string(table.schema.field(c).type)][:3]
    if not names or not table.num_rows:
        return table
    first = pc.fill_null(pc.equal(table.column(names[0]), names[0]), False)
    if not pc.any(first).as_py():
        return table
    same = first
    for c in names[1:]:
        same = pc.and_(same, pc.fill_null(pc.equal(table.column(c), c), False))
    n = pc.sum(same).as_py() or 0
    if not n:
        return table
    note(f"{path.name}: {counted(n, 'line')} {plural(n, 'repeats', 'repeat')} the header "
         "(files concatenated?): dropped")
    return table.filter(pc.invert(same))


def _read_ragged(path: Path, what: str, header: list[str], source: Any,
                 drop_last: bool = False) -> pa.Table:
    """Rows shorter than the header (seen in hand-trimmed exports): pad them with NA.

    Every column comes back as text; the loaders convert what they use.
    """
    if isinstance(source, pa.BufferReader):
        source.seek(0)
        source = io.BytesIO(source.read())
    try:
        frame = pd.read_csv(source, dtype=str, keep_default_na=False, na_values=NULLS,
                            encoding="utf-8-sig", names=header, skiprows=1,
                            index_col=False)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        first = str(exc).splitlines()[0][:200]
        raise ProfileError(path, f"cannot be read as {what}: rows of uneven length "
                           f"({first})") from None
    if drop_last and len(frame):
        frame = frame.iloc[:-1]
    return pa.Table.from_pandas(frame.astype(object).where(frame.notna(), None),
                                preserve_index=False)


def int64_series(arr: pa.Array | pa.ChunkedArray) -> pd.arrays.IntegerArray:
    """A pandas ``Int64`` array of int64 values with nulls, exactly.

    (``pd.array(arr.to_pandas(), dtype="Int64")`` goes through float64 when there is a
    null, which rounds epoch nanoseconds to 256 ns.)
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    arr = pc.cast(arr, pa.int64())
    values = pc.fill_null(arr, 0).to_numpy(zero_copy_only=False)
    mask = pc.is_null(arr).to_numpy(zero_copy_only=False)
    return pd.arrays.IntegerArray(values.astype(np.int64, copy=False), mask.astype(bool))


def _present(col: Any) -> int:
    """Cells holding a value (not null; the CSV reader reads empty cells as null)."""
    if col is None or pa.types.is_null(col.type):
        return 0
    return len(col) - col.null_count


def _note_unreadable(label: str | None, col: Any, missing_after: int, n: int) -> None:
    if label is None or col is None:
        return
    lost = missing_after - (n - _present(col))
    if lost > 0:
        note(f"{label}: {counted(lost, 'value')} not readable as a number (garbled, or out of "
             "range) "
             "read as NA")


def to_float(col: pa.ChunkedArray | pa.Array | None, n: int,
             label: str | None = None) -> np.ndarray:
    """Return a float64 numpy array (NaN where missing or not a number).

    With ``label`` (``"kernel_details.csv Duration(us)"``), cells that hold text but no
    number are counted in a :func:`note`.
    """
    out = _to_float(col, n)
    if label is not None:
        _note_unreadable(label, col, int(np.isnan(out).sum()), n)
    return out


def _to_float(col: pa.ChunkedArray | pa.Array | None, n: int) -> np.ndarray:
    if col is None:
        return np.full(n, np.nan)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = pc.utf8_trim(col, "\t \"")
        ok = pc.match_substring_regex(col, _NUMERIC)
        col = pc.if_else(ok, col, pa.scalar(None, pa.string()))
    if pa.types.is_null(col.type):
        return np.full(n, np.nan)
    try:
        return pc.cast(col, pa.float64(), safe=False).to_numpy(zero_copy_only=False).astype(
            np.float64, copy=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pd.to_numeric(pd.Series(col.to_pylist()), errors="coerce").to_numpy(np.float64)


def json_number(value: Any, field: str | None = None) -> float:
    """A number of a JSON file as float: NaN when missing (``null`` or absent).

    A number, or text holding one (``"12.5"``), is read. Anything else where a number
    belongs (``"fast"``, ``true``, a list, an object) is NaN, and counted under ``field`` in
    the innermost :func:`counting_numbers` scope, which notes the counts.
    """
    if value is None:
        return np.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and _NUMBER_RE.match(value):
        return float(value)
    counts = _UNREAD.get()
    if counts is not None and field is not None:
        counts[field] = counts.get(field, 0) + 1
    return np.nan


@contextmanager
def counting_numbers(name: str) -> Iterator[dict[str, int]]:
    """Count the :func:`json_number` values of the ``with`` block that are not numbers;
    at its end, one :func:`note` per field: ``"{name} {field}: N value(s) ... read as NA"``.
    """
    counts: dict[str, int] = {}
    token = _UNREAD.set(counts)
    try:
        yield counts
    finally:
        _UNREAD.reset(token)
    for field, n in counts.items():
        note(f"{name} {field}: {n} value(s) not a number (text, true/false, a list or an "
             "object) read as NA")


def to_ns(col: pa.ChunkedArray | pa.Array | None, n: int, scale_to_ns: int = 1000,
          label: str | None = None) -> pa.Array:
    """Convert microsecond timestamps (text such as ``"1736408883704643.212\\t"`` or numbers)
    to exact int64 nanoseconds (null where missing).

    Text goes through a decimal cast, so no digit is lost to float rounding.
    ``scale_to_ns`` is the number of nanoseconds in one unit of the input. A value that is
    not a number, or whose nanoseconds would overflow int64, is null (never wrapped around);
    with ``label`` their count goes to a :func:`note`.
    """
    out = _to_ns(col, n, scale_to_ns)
    if label is not None:
        _note_unreadable(label, col, out.null_count, n)
    return out


def _to_ns(col: pa.ChunkedArray | pa.Array | None, n: int, scale_to_ns: int) -> pa.Array:
    if col is None:
        return pa.nulls(n, pa.int64())
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_null(col.type):
        return pa.nulls(n, pa.int64())
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = pc.utf8_trim(col, "\t \"")
        ok = pc.match_substring_regex(col, r"^-?\d+(\.\d+)?$")
        col = pc.if_else(ok, col, pa.scalar(None, pa.string()))
        try:
            dec = pc.cast(col, pa.decimal128(28, 9))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            # rare: more than 9 decimals (dropped: below 1 fs) or more than 18 integer
            # digits (cannot be a time in int64 ns: missing)
            col = pc.if_else(pc.match_substring_regex(col, r"^-?\d{1,18}(\.\d+)?$"), col,
                             pa.scalar(None, pa.string()))
            col = pc.replace_substring_regex(col, r"^(-?\d+\.\d{9})\d+$", r"\1")
            dec = pc.cast(col, pa.decimal128(28, 9))
        limit = Decimal(_INT64_LIMIT // scale_to_ns)
        low, high = pc.min_max(dec).values()
        if (low.as_py() is not None and low.as_py() <= -limit) or \
                (high.as_py() is not None and high.as_py() >= limit):
            # values whose nanoseconds would not fit in int64 are missing, not wrapped around
            fits = pc.less(pc.abs(dec), pa.scalar(limit, pa.decimal128(28, 9)))
            dec = pc.if_else(fits, dec, pa.scalar(None, dec.type))
        scaled = pc.multiply(dec, pa.scalar(scale_to_ns, pa.decimal128(9, 0)))
        return pc.cast(scaled, pa.int64(), safe=False)
    if pa.types.is_integer(col.type):
        ints = pc.cast(col, pa.int64(), safe=False) if not pa.types.is_uint64(col.type) \
            else _ns_from_float(pc.cast(col, pa.float64()), 1)
        fits = pc.less(pc.abs(ints), _INT64_LIMIT // scale_to_ns)
        return pc.multiply(pc.if_else(fits, ints, pa.scalar(None, pa.int64())), scale_to_ns)
    return _ns_from_float(pc.cast(col, pa.float64()), scale_to_ns)


_INT64_LIMIT = 9_000_000_000_000_000_000  # a little under 2**63: no int64 overflow below it


def _ns_from_float(col: pa.Array, scale: int) -> pa.Array:
    vals = col.to_numpy(zero_copy_only=False).astype(np.float64)
    mask = ~np.isfinite(vals) | (np.abs(vals) >= _INT64_LIMIT / scale)
    vals = np.where(mask, 0.0, vals)
    whole = np.floor(vals)
    # integer part scaled exactly in int64; only the fraction goes through float math
    out = whole.astype(np.int64) * scale + np.round((vals - whole) * scale).astype(np.int64)
    return pa.array(out, mask=mask)


def rel_us(ns: pa.Array, origin_ns: int | None) -> np.ndarray:
    """Microseconds of ``ns`` relative to ``origin_ns`` as float64 (NaN where missing)."""
    if origin_ns is None:
        return np.full(len(ns), np.nan)
    diff = pc.subtract(ns, pa.scalar(int(origin_ns), pa.int64()))
    arr = pc.cast(diff, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    return arr / 1000.0


def min_ns(*arrays: pa.Array) -> int | None:
    """Smallest non-null value over the arrays, or None."""
    best: int | None = None
    for a in arrays:
        if a is None or len(a) == 0:
            continue
        m = pc.min(a).as_py()
        if m is not None and (best is None or m < best):
            best = int(m)
    return best


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


_RANK_WORDS = re.compile(r"(?:rank|(?:^|[^a-z])worker)[-_]?(\d{1,9})(?!\d)", re.IGNORECASE)
_NAME_SUFFIXES = (".gz", ".json", ".db", ".csv", ".pt.trace")


def _stem(name: str) -> str:
    stem = os.path.basename(name)
    changed = True
    while changed:
        changed = False
        for suffix in _NAME_SUFFIXES:
            if stem.lower().endswith(suffix):
                stem = stem[: -len(suffix)]
                changed = True
    return stem


def rank_from_name(name: str, suffix: bool = False) -> int | None:
    """Rank written in a file or folder name by an explicit pattern, or None.

    ``rank3``, ``rank_3``, ``rank-3``, ``sampled_rank-0``, ``worker3`` (PyTorch's trace
    handler names files ``{worker}.{timestamp}.pt.trace.json``: ``worker0.1623143089861``
    is worker 0). Other digits are not a rank: a process id (``host_21387``), a timestamp
    (``worker0.1623143089861``'s second part), a job id (``Model__1016005``).

    ``suffix``: also read a trailing ``_3`` (``trace_3.pt.trace.json``, ``device_3``). A
    folder of traces uses it only when those numbers are 0..n-1 over its files
    (:func:`suffix_number`), which a pid or a job id is not.
    """
    stem = _stem(name)
    m = _RANK_WORDS.search(stem)
    if m:
        return int(m.group(1))
    if suffix:
        return suffix_number(name)
    return None


def suffix_number(name: str) -> int | None:
    """The number after the last ``_`` of a name (``trace_3.pt.trace.json`` -> 3), or None."""
    m = re.search(r"(?:^|_)(\d{1,9})$", _stem(name))
    return int(m.group(1)) if m else None


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



def hccl_group_hash(name: str) -> str:
    """The group id HCCL writes after ``@`` in communication keys, for a group ``name``.

    Two 32-bit polynomial hashes of the communicator name (primes 29 and 131) as the high
    and low words of a 64-bit number, in decimal; msprof-analyze computes the same
    (``double_hash``) to match ``parallel_group_info`` entries to communication keys.
    """
    h0 = h1 = 0
    for ch in name:
        h0 = (h0 * 29 + ord(ch)) & 0xFFFFFFFF
        h1 = (h1 * 131 + ord(ch)) & 0xFFFFFFFF
    return str((h0 << 32) | h1)
