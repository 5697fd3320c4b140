"""CSV files through pyarrow, with the repairs that keep a correct load.

The header (:func:`read_header`, :func:`find_col`) and the table (:func:`read_csv`): a row
cut at the end is dropped, short rows are padded, repeated headers and rows of empty cells
dropped, each repair reported through :func:`~perfkit.io._common.notes.note`.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ...errors import ProfileError
from ...format import counted, plural
from .files import _UTF16_BOMS, HEAD_BYTES, check_file, decode_text_bytes
from .notes import note

__all__ = ["NULLS", "read_header", "find_col", "read_csv"]

NULLS = ["", "N/A", "NA", "n/a", "nan", "NaN", "None", "null", "-"]
"""Cell values read as missing."""


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
             text_cols: Iterable[str] = (),
             key_cols: Iterable[str] | None = None,
             columns: Iterable[str] | None = None) -> pa.Table:
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
    key_cols : iterable of str, optional
        The columns the caller's figures are built from. Given, a last row without a
        newline that has all its fields is kept when its last column is none of these
        (:func:`_unterminated_row`); None (the default): such a row is always dropped.
    columns : iterable of str, optional
        Only these columns (case-insensitive; those the header lacks are left out): every
        row is still parsed and checked, but only these are converted, which is most of
        the time (0.2 s instead of 1.1 s for 4 of the 46 columns of a 1 M-row
        ``kernel_details.csv``). None (the default): every column.

    Returns
    -------
    pyarrow.Table
        Column names stripped of whitespace.

    Notes
    -----
    Repairs, each reported with :func:`note`: a last line without a newline (a file cut
    mid-row) or a last row with too few fields is dropped (a last line with all its
    fields whose last column is not in ``key_cols`` is kept, its last cell read as NA:
    only that cell can have been cut); other rows with too few fields are padded with
    NA; rows repeating the header (two files concatenated) are dropped; UTF-16 text is
    converted. Refused with a ProfileError: binary data, a row with more
    fields than the header, text that is not UTF-8 (with the offset and line).
    """
    header = read_header(path, what)
    missing = [alts[0] for alts in required if find_col(header, *alts) is None]
    if missing:
        shown = ",".join(header[:12]) + (",..." if len(header) > 12 else "")
        raise ProfileError(path, f"expected a header with {plural(len(missing), 'column')} "
                           f"{', '.join(missing)} "
                           f"({what}); found '{shown}'", line=1)
    twice = [h for i, h in enumerate(header) if h and h in header[:i]]
    if twice:  # which of the two is the column is anyone's guess
        at = [i + 1 for i, h in enumerate(header) if h == twice[0]]
        raise ProfileError(path, f"its header names column '{twice[0]}' twice (columns "
                           f"{' and '.join(map(str, at[:2]))}): which one holds "
                           f"{twice[0]} cannot be told; expected {what}", line=1)
    forced = {c.lower() for c in text_cols}  # as the header check: in any letter case
    present = {h for h in header if h.lower() in forced}
    types = {c: pa.string() for c in present}
    wanted = None if columns is None else \
        [h for h in header if h.lower() in {c.lower() for c in columns}]
    source, _, last_line = _complete_rows(path, what)
    if last_line is not None:
        kept = None if key_cols is None or last_line.endswith(b"\n") else \
            _unterminated_row(last_line, header, key_cols)
        line = _line_of_end(source)
        if kept is not None:
            source = _with_row(source, kept)
            note(f"{path.name} line {line}: the file ends without a newline after its last "
                 f"row; the row is kept, as all its {len(header)} fields are there, but its "
                 f"last cell ({header[-1]}) may be cut short and is read as missing "
                 f"({_shown(last_line)})")
        else:
            note(f"{path.name} line {line}: "
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
        table = pacsv.read_csv(source, convert_options=convert if wanted is None else
                               _only(convert, wanted))
    except (pa.ArrowInvalid, pa.ArrowKeyError, UnicodeDecodeError, OSError):
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
    if wanted is not None and len(wanted) < table.num_columns:  # the careful read's
        table = table.select([c for c in table.column_names if c in wanted])
    table = _drop_empty_rows(path, _drop_repeated_headers(path, table))
    if not table.num_rows:
        note(f"{path.name}: a header and no row: nothing in it is read")
    return table


def _drop_empty_rows(path: Path, table: pa.Table) -> pa.Table:
    """Drop rows with every cell empty (a spreadsheet's trailing ``,,,,`` lines), with a
    note: read, each would be a row of NA (a kernel with no name, start or duration)."""
    if not table.num_columns or not table.num_rows or not table.column(0).null_count:
        return table
    empty = pc.is_null(table.column(0))
    for column in table.columns[1:]:
        if not column.null_count:
            return table
        empty = pc.and_(empty, pc.is_null(column))
    n = pc.sum(empty).as_py() or 0
    if not n:
        return table
    note(f"{path.name}: {counted(n, 'row')} with every cell empty (a spreadsheet's blank "
         "lines): dropped")
    return table.filter(pc.invert(empty))


def _only(convert: pacsv.ConvertOptions, columns: list[str]) -> pacsv.ConvertOptions:
    """``convert`` converting only ``columns`` (a header cell with spaces around it is not
    found under its stripped name: the read fails and the careful read, of every column,
    follows)."""
    return pacsv.ConvertOptions(column_types=convert.column_types,
                                null_values=convert.null_values,
                                strings_can_be_null=True, quoted_strings_can_be_null=True,
                                include_columns=columns)


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
                cut = fh.read(min(size - cut_at, _TAIL_BYTES))
                buf = pa.memory_map(str(path)).read_buffer(cut_at)
                return pa.BufferReader(buf), size, cut
            end = start
    return path, size, None  # one line only (a header without newline): parse as is


#: The most of a last line without a newline read to check it (:func:`_unterminated_row`).
_TAIL_BYTES = 1 << 20


def _unterminated_row(line: bytes, header: Sequence[str], key_cols: Iterable[str]
                      ) -> bytes | None:
    """A last line without a newline, as a row to keep; None: drop it.

    A file cut inside its last row leaves a line without a newline; one cut inside the
    last *field* still has every field, and what is left of a number reads as a smaller
    one (``17902.5`` cut to ``179``). Every other field ends with a comma, so it is
    whole. The row is kept, its last cell emptied (read as missing) and a newline added,
    when it has exactly the header's fields, no quoted field is left open, and the last
    column is not in ``key_cols``; otherwise None.
    """
    if len(header) < 2 or len(line) >= _TAIL_BYTES or line.count(b'"') % 2:
        return None
    if header[-1].lower() in {c.strip().lower() for c in key_cols}:  # as find_col
        return None
    try:
        fields = next(csv.reader([line.decode("utf-8")]), [])
    except (UnicodeDecodeError, csv.Error):
        return None
    if len(fields) != len(header):
        return None
    quoted, last_comma = False, -1
    for i, byte in enumerate(line):
        if byte == 0x22:  # '"'
            quoted = not quoted
        elif byte == 0x2C and not quoted:  # ','
            last_comma = i
    return line[:last_comma + 1] + b"\n"


def _with_row(source: pa.BufferReader, row: bytes) -> pa.BufferReader:
    """The complete rows :func:`_complete_rows` gave, with ``row`` (ending with a newline)
    after them (one copy of the text)."""
    source.seek(0)
    head = source.read_buffer()
    data = bytearray(head.size + len(row))
    data[:head.size] = memoryview(head)
    data[head.size:] = row
    return pa.BufferReader(pa.py_buffer(data))


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
