"""Shared reading helpers of the loaders: CSV through pyarrow, JSON, timestamps, errors.

Every failure becomes a :class:`perfkit.errors.ProfileError` naming the file, and where
known the field, what was expected and what was found. Nothing here writes to disk.

Before a file is read whole, :func:`check_file` looks at its first and last bytes and at
its sparse holes: binary data, a zero-padded tail or a hole is refused at once, whatever the
file's size. Repairs that keep a correct load (the last row of a CSV cut mid-row dropped, a
second header line dropped) are reported through :func:`note` to the loader's
:func:`collecting_notes` scope and end up in ``meta.notes``.

One module a job, every name re-exported here: :mod:`~perfkit.io._common.notes` (the
repairs reported), :mod:`~perfkit.io._common.files` (a file refused by its ends),
:mod:`~perfkit.io._common.memory` (a bulk parse's garbage collector and memory),
:mod:`~perfkit.io._common.csv_files` (CSV tables and their repairs),
:mod:`~perfkit.io._common.numeric` (numbers and times as columns),
:mod:`~perfkit.io._common.json_files` (JSON files) and :mod:`~perfkit.io._common.names`
(ranks in file names, HCCL group ids).
"""

from __future__ import annotations

from .csv_files import NULLS, find_col, read_csv, read_header
from .files import HEAD_BYTES, check_file, check_nonempty, decode_text_bytes
from .json_files import JSON_HEAD_BYTES, describe_json_error, json_head, read_json
from .memory import gc_paused, release_memory
from .names import hccl_group_hash, rank_from_name, suffix_number
from .notes import collecting_notes, note, with_notes
from .numeric import counting_numbers, int64_series, json_number, min_ns, rel_us, to_float, to_ns

__all__ = [
    "NULLS",
    "release_memory",
    "HEAD_BYTES",
    "JSON_HEAD_BYTES",
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
