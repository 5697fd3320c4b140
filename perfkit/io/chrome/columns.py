"""Decoded trace events to columns: Arrow chunks batch by batch, then pandas.

:class:`_Builder` sorts each batch of decoded events (:mod:`perfkit.io.chrome.events`) by
kind — complete events, flows, instants, metadata — and :class:`_Columns` turns each field
into an Arrow chunk with one list comprehension, so the structs can be dropped batch by
batch; :meth:`_Builder.finish` makes the :class:`~perfkit.io.chrome.events.ChromeTrace`.
Timestamps become exact int64 nanoseconds (NA as the int64 minimum), ids int64 or text,
operator arguments raw JSON text; text columns can be kept as Categoricals.
"""

from __future__ import annotations

from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..._text_dtype import TEXT
from ...format import counted
from .._common import to_ns
from .events import (
    _BASE,
    _EMPTY_ARGS,
    _FLOW_ONLY,
    _MEMORY,
    _RAW_FIELDS,
    _SPARSE,
    ARG_COLUMNS,
    HEADER_KEYS,
    X_COLUMNS,
    ChromeTrace,
    _Event,
    _Trace,
)

__all__: list[str] = []  # private to the Chrome trace reader (perfkit.io.chrome.decode)

def _int_or_none(v: Any) -> int | None:
    """A rank or world size: a whole number in [0, 10**9), else None."""
    if isinstance(v, bool) or isinstance(v, float) and not v.is_integer():
        return None
    try:
        out = int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return out if 0 <= out < 10**9 else None


_CHUNK = 1 << 18
_NA_NS = np.iinfo(np.int64).min


def _pa_str(values: list[Any]) -> pa.Array:
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return _pa_str_of(values)


def _pa_str_of(values: list[Any]) -> pa.Array:
    """Text of each value (``str(v)``), null for None."""
    if None in values:
        return pa.array([None if v is None else str(v) for v in values], pa.string())
    return pa.array(list(map(str, values)), pa.string())


def _pa_str_of_few(values: list[Any]) -> pa.Array:
    """:func:`_pa_str_of` for values that are only ``int``, ``str`` or None.

    Ids such as ``pid`` / ``tid`` take few distinct values: each distinct one is turned
    into text once and the column is built by code. (Only for ints and strings: a float
    equal to an int would share its dictionary slot and lose its own text.)
    """
    slots = {v: i for i, v in enumerate(dict.fromkeys(values))}
    if 4 * len(slots) > len(values):
        return _pa_str_of(values)
    codes = np.fromiter(map(slots.__getitem__, values), np.int64, len(values))
    texts = pa.array([None if v is None else str(v) for v in slots], pa.string())
    return texts.take(pa.array(codes))


def _pa_id(values: list[Any]) -> pa.Array:
    """int64 when every value is an integer, else text."""
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return _pa_str(values)


def _pa_raw(values: list[Any]) -> pa.Array:
    """JSON text of raw argument values (``Input Dims``), null where absent or ``null``.

    The raw values are joined into one buffer and cut by their lengths into an Arrow
    column (no Python object per value); text that is not UTF-8 has its bad bytes replaced,
    as ``bytes.decode(errors="replace")`` does.
    """
    data = b"".join(values)
    n = len(values)
    if not data:
        return pa.nulls(n, pa.string())
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, values), np.int64, n), out=offsets[1:])
    arr = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets),
                                                      pa.py_buffer(data)])
    gone = pc.or_(pc.equal(pc.binary_length(arr), 0), pc.equal(arr, _NULL_JSON))
    arr = pc.if_else(gone, pa.scalar(None, pa.large_binary()), arr)
    try:
        return arr.cast(pa.large_string()).cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8
        return pa.array([None if v is None else v.decode("utf-8", "replace")
                         for v in arr.to_pylist()], pa.string())


_NULL_JSON = pa.scalar(b"null", pa.large_binary())


def _pa_num(values: list[Any]) -> pa.Array:
    try:
        return pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        num = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
        return pa.array(num.to_numpy(np.float64), pa.float64(), from_pandas=True)


def _pa_ts(values: list[Any], base_ns: int) -> pa.Array:
    """Absolute int64 nanoseconds of raw ``ts`` values; :data:`_NA_NS` where unreadable."""
    return _filled(_ns_of(values, base_ns))


def _filled(ns: pa.Array) -> pa.Array:
    return pc.fill_null(ns, pa.scalar(_NA_NS, pa.int64()))


def _ns_of(values: list[Any], base_ns: int) -> pa.Array:
    """Absolute int64 nanoseconds of raw ``ts`` values; null where none could be read."""
    try:
        arr = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        arr = _pa_str(values)
    ns = to_ns(arr, len(values))
    if base_ns:
        ns = pc.add(ns, pa.scalar(base_ns, pa.int64()))
    return ns


def _first_null(arr: pa.Array) -> int:
    """Index of the first null of ``arr`` (which has one)."""
    return int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])


def _to_pandas(chunks: list[pa.Array], kind: str, categorical: bool = False) -> Any:
    """One pandas column from per-chunk arrow arrays (``kind``: str, id, num, ts).

    ``categorical``: a text column becomes a pandas Categorical (the chunks may already be
    dictionary-encoded), holding each distinct text once.
    """
    text = kind == "str" or kind == "id" and any(
        pa.types.is_string(c.type) or pa.types.is_dictionary(c.type) for c in chunks)
    if categorical and text:
        parts = [c if pa.types.is_dictionary(c.type) else pc.dictionary_encode(
            c if c.type == pa.string() else pc.cast(c, pa.string())) for c in chunks]
        col = pa.chunked_array(parts).unify_dictionaries()
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        return pd.Series(arr.to_pandas())
    if kind == "id" and any(pa.types.is_string(c.type) for c in chunks):
        chunks = [c if pa.types.is_string(c.type) else pc.cast(c, pa.string()) for c in chunks]
        kind = "str"
    if kind == "str":
        chunks = [c if c.type == pa.string() else pc.cast(c, pa.string()) for c in chunks]
        col = pa.chunked_array(chunks, pa.string())
        if col.num_chunks > 1 and col.nbytes < 1 << 30:
            # one contiguous array: the many takes of the tables are much faster on it
            col = pa.chunked_array([col.combine_chunks()])
        return pd.Series(pd.arrays.ArrowStringArray(col), dtype=TEXT)
    arr = pa.chunked_array(chunks).combine_chunks() if len(chunks) > 1 else chunks[0]
    if kind == "id":
        if pa.types.is_null(arr.type):
            arr = pa.nulls(len(arr), pa.int64())
        return pd.Series(arr.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get))
    if kind == "num":
        if pa.types.is_null(arr.type):
            return np.full(len(arr), np.nan)
        return arr.to_numpy(zero_copy_only=False).astype(np.float64)
    return arr.to_numpy(zero_copy_only=False).astype(np.int64)

class _Columns:
    """Arrow column chunks of one kind of event, filled batch by batch.

    Each column is read from the structs with its own list comprehension (the cheapest way
    to read one attribute of many objects) and handed to Arrow at once.
    """

    def __init__(self, args: tuple[str, ...] | None, typed: bool = True,
                 categorical: tuple[str, ...] = ()) -> None:
        # typed: the events come from the typed decoder (ids are int, str or None only)
        self.text_of = _pa_str_of_few if typed else _pa_str_of
        # text columns kept dictionary-encoded, block by block (see read_chrome_trace)
        self.categorical = frozenset(categorical)
        self.flows = args is None
        base = _BASE + _FLOW_ONLY if self.flows else _BASE
        self.args = tuple((c, *ARG_COLUMNS[c]) for c in (args or ()) if c not in _SPARSE)
        # what a collective says about itself: on a few events only, read sparsely
        self.sparse = tuple(c for c in (args or ()) if c in _SPARSE)
        self.kinds = {c: k for c, _, k in base} | {c: k for c, _, k in self.args}
        self.chunks: dict[str, list[Any]] = {k: [] for k in self.kinds}
        if self.sparse:
            self.chunks["_sparse"] = []
        self.n = 0
        self.mixed: set[str] = set()  # columns already seen holding a value of another type
        self.unread_ts: list[Any] = []  # the first raw ``ts`` that gave no timestamp, if any

    def add(self, evs: list[_Event]) -> None:
        """Convert ``evs`` (in slices, so temporary lists stay small)."""
        for lo in range(0, len(evs), _CHUNK):
            part = evs[lo:lo + _CHUNK] if lo or len(evs) > _CHUNK else evs
            self.n += len(part)
            c = self.chunks
            c["name"].append(self._str("name", [e.name for e in part]))
            c["cat"].append(self._str("cat", [e.cat for e in part]))
            c["pid"].append(self._id("pid", [e.pid for e in part]))
            c["tid"].append(self._id("tid", [e.tid for e in part]))
            ts = _ns_of([e.ts for e in part], 0)
            if ts.null_count and not self.unread_ts:
                self.unread_ts.append(part[_first_null(ts)].ts)
            c["ts_ns"].append(_filled(ts))
            c["dur_us"].append(_pa_num([e.dur for e in part]))
            if self.flows:
                c["id"].append(self._str("id", [e.id for e in part]))
                c["ph"].append(self._str("ph", [e.ph for e in part]))
            if self.args:
                args = [e.args for e in part]
                if None in args:
                    args = [_EMPTY_ARGS if a is None else a for a in args]
                for col, attr, kind in self.args:
                    values = list(map(attrgetter(attr), args))
                    if col == "external_id" and None in values:
                        # PyTorch 1.8-1.9 wrote a device task's link as "external id"
                        old = list(map(attrgetter("external_id_old"), args))
                        if old.count(None) != len(old):
                            values = [v if v is not None else o
                                      for v, o in zip(values, old, strict=True)]
                    c[col].append(self._convert(col, kind, values))
                if self.sparse:
                    hits = [i for i, a in enumerate(args) if a.collective is not None]
                    c["_sparse"].append((len(part), hits, {
                        col: [getattr(args[i], ARG_COLUMNS[col][0]) for i in hits]
                        for col in self.sparse}))
            for col in self.categorical:
                if col in c and c[col][-1].type == pa.string():
                    c[col][-1] = pc.dictionary_encode(c[col][-1])

    def _convert(self, col: str, kind: str, values: list[Any]) -> pa.Array:
        if kind == "str":
            return self._str(col, values)
        if kind == "id":
            return self._id(col, values)
        if kind == "num":
            return _pa_num(values)
        if kind == "ts":
            return _pa_ts(values, 0)
        return _pa_raw(values)

    def _str(self, key: str, values: list[Any]) -> pa.Array:
        """Text column chunk (see :func:`_pa_str`); remembers columns that need ``str()``."""
        if key in self.mixed:
            return self.text_of(values)
        try:
            return pa.array(values, pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            self.mixed.add(key)
            return self.text_of(values)

    def _id(self, key: str, values: list[Any]) -> pa.Array:
        """Id column chunk (see :func:`_pa_id`): int64, or text once a value was not an int.

        A column that was text in an earlier chunk goes straight to text: the chunks are
        made one type (text) by :func:`_to_pandas` anyway.
        """
        if key not in self.mixed:
            try:
                return pa.array(values, pa.int64())
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                self.mixed.add(key)
        return self.text_of(values)

    def frame(self, base_ns: int) -> pd.DataFrame:
        if not self.n:
            cols = ["name", "cat", "pid", "tid", "ts_ns", "dur_us", "id"]
            return pd.DataFrame({c: [] for c in cols})
        out = {}
        for k, kind in self.kinds.items():  # each column's chunks are let go once converted
            out[k] = _to_pandas(self.chunks.pop(k), "str" if kind == "raw" else kind,
                                k in self.categorical)
        if self.sparse:
            out.update(self._sparse_columns(self.chunks.pop("_sparse")))
        if base_ns:
            ts = out["ts_ns"]
            out["ts_ns"] = np.where(ts == _NA_NS, ts, ts + np.int64(base_ns))
        if "total_allocated" in out and all(pd.isna(out[c]).all()
                                            for c in ("total_allocated", "bytes")):
            for c in _MEMORY:
                del out[c]
        for c in _RAW_FIELDS:
            if c in out and out[c].isna().all():
                del out[c]
        self.chunks = {}
        return pd.DataFrame(out)


    def _sparse_columns(self, chunks: list[Any]) -> dict[str, Any]:
        """Full-length columns of the sparse args (NA where an event has none): numbers as
        float64, texts as Categoricals (few distinct values)."""
        pos: list[int] = []
        vals: dict[str, list[Any]] = {c: [] for c in self.sparse}
        offset = 0
        for length, hits, values in chunks:
            pos.extend(offset + h for h in hits)
            for c in self.sparse:
                vals[c].extend(values[c])
            offset += length
        where = np.asarray(pos, dtype=np.int64)
        out: dict[str, Any] = {}
        for c in self.sparse:
            if ARG_COLUMNS[c][1] == "num":
                col = np.full(self.n, np.nan)
                col[where] = pd.to_numeric(pd.Series(vals[c], dtype=object),
                                           errors="coerce").to_numpy(np.float64)
                out[c] = col
                continue
            text = pd.Series([None if v is None else str(v) for v in vals[c]], dtype=object)
            code, cats = pd.factorize(text, use_na_sentinel=True)
            full = np.full(self.n, -1, dtype=np.int64)
            full[where] = code
            out[c] = pd.Series(pd.Categorical.from_codes(full, categories=pd.Index(
                cats, dtype=TEXT)))
        return out


class _Builder:
    """Collects decoded events batch by batch into columns; the structs are then dropped."""

    def __init__(self, columns: tuple[str, ...] = X_COLUMNS, typed: bool = True,
                 categorical: tuple[str, ...] = ()) -> None:
        self.x = _Columns(columns, typed, categorical)
        self.flows = _Columns(None, typed)
        self.inst = _Columns(_MEMORY, typed)
        self.processes: dict[Any, str] = {}
        self.labels: dict[Any, str] = {}
        self.threads: dict[tuple[Any, Any], str] = {}
        self.n_events = 0
        self.no_ph = 0  # events without a "ph": of no kind, left out (said in a note)

    def add(self, events: list[_Event]) -> None:
        """Take one batch of events (the list is emptied)."""
        xs: list[_Event] = []
        flows: list[_Event] = []
        inst: list[_Event] = []
        for e in events:
            ph = e.ph
            if ph == "X":
                xs.append(e)
            elif ph in ("s", "f", "t"):
                flows.append(e)
            elif ph in ("i", "I"):
                inst.append(e)
            elif ph == "M" and e.args is not None:
                if e.name == "process_name":
                    self.processes[e.pid] = str(e.args.name)
                elif e.name == "process_labels":
                    self.labels[e.pid] = str(e.args.labels)
                elif e.name == "thread_name":
                    self.threads[(e.pid, e.tid)] = str(e.args.name)
            elif not ph:
                self.no_ph += 1
        self.n_events += len(events)
        events.clear()
        self.x.add(xs)
        self.flows.add(flows)
        self.inst.add(inst)

    def finish(self, trace: _Trace | None, is_object: bool) -> ChromeTrace:
        base_ns = int(trace.baseTimeNanoseconds or 0) if trace is not None else 0
        notes = []
        if not -(1 << 62) < base_ns < (1 << 62):  # cannot be a time: would overflow int64
            notes.append(f"baseTimeNanoseconds {base_ns} is out of range: ignored")
            base_ns = 0
        if self.no_ph:
            notes.append(f"{counted(self.no_ph, 'event')} without a phase (ph), so of no "
                         "known kind (complete, instant, flow): left out")
        rank = world = backend = None
        if trace is not None and trace.distributedInfo is not None:
            rank = _int_or_none(trace.distributedInfo.rank)
            world = _int_or_none(trace.distributedInfo.world_size)
            backend = trace.distributedInfo.backend
        groups: list[dict[str, Any]] = []
        props: list[dict[str, Any]] = []
        header: dict[str, Any] = {}
        if trace is not None:
            if trace.distributedInfo is not None:
                groups = _dict_list(trace.distributedInfo.pg_config)
            props = _dict_list(trace.deviceProperties)
            header = {k: getattr(trace, k) for k in HEADER_KEYS
                      if getattr(trace, k) is not None}
        return ChromeTrace(
            x=self.x.frame(base_ns), flows=self.flows.frame(base_ns),
            instants=self.inst.frame(base_ns), processes=self.processes, labels=self.labels,
            threads=self.threads, rank=rank, world_size=world,
            backend=None if backend is None else str(backend), is_object=is_object,
            n_events=self.n_events, notes=notes, process_groups=groups,
            device_properties=props, header=header, unread_ts=self.x.unread_ts[:1])


def _dict_list(raw: msgspec.Raw) -> list[dict[str, Any]]:
    """The dicts of a raw JSON list (``pg_config``, ``deviceProperties``); [] otherwise."""
    if not bytes(raw):
        return []
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _columns(path: Path, events: list[_Event], trace: _Trace | None,
             is_object: bool, columns: tuple[str, ...] = X_COLUMNS,
             typed: bool = True, categorical: tuple[str, ...] = ()) -> ChromeTrace:
    """Columns of an already decoded event list (the whole-file path).

    ``typed``: the events come from the typed decoder, not from :func:`_fallback`.
    """
    builder = _Builder(columns, typed, categorical)
    while events:  # from the end, in slices, releasing each slice once converted
        part = events[-_CHUNK:]
        del events[-_CHUNK:]
        builder.add(part)
    # batches were taken from the end: put the chunks back in file order
    for cols in (builder.x, builder.flows, builder.inst):
        cols.chunks = {k: v[::-1] for k, v in cols.chunks.items()}
    return builder.finish(trace, is_object)
