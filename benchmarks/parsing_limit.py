"""The parsing limit: the least work that turns the benchmark inputs into DataFrames.

This is the yardstick perfkit's loaders are measured against (``loaders_bench.py`` runs it
in the same session, on the same files). It does only what no loader can skip:

- **JSON** (Kineto traces, ``trace_view.json``): read the file, decode it with msgspec
  straight into typed ``Struct`` s holding the fields perfkit keeps (``ph``, ``name``,
  ``cat``, ``pid``, ``tid``, ``ts``, ``dur``, ``id`` and the ``args`` keys perfkit reads,
  operator shapes as raw JSON text), with the garbage collector off, then build one
  DataFrame of the complete (``ph == "X"``) events (strings as Arrow-backed columns,
  numbers as float64 / int64) and one of the flow events;
- **CSV** (``kernel_details.csv``): ``pyarrow.csv.read_csv`` then ``to_pandas``.

No validation, no canonical tables, no cache. A folder of several JSON files uses one
process per file, as many at a time as perfkit's loader would (``--workers``, default the
CPU count), so the limit gets the same parallelism perfkit gets.

Usage: ``python benchmarks/parsing_limit.py PATH [--workers N] [--small-pages]``; prints
JSON (seconds, rows) on stdout. ``--small-pages`` switches transparent huge pages off for
the process first, as perfkit does around its loads, so that both are measured under the
same kernel setting. PATH is a Kineto file or folder, or an Ascend rank folder.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

__all__ = ["decode_json", "read_csv", "main"]

_IntStr = int | str | None
_FloatStr = float | str | None
_NO_RAW = msgspec.Raw(b"")


class Args(msgspec.Struct, gc=False):
    """The ``args`` keys perfkit reads from a Kineto trace."""

    name: _IntStr = None
    external_id: _IntStr = msgspec.field(default=None, name="External id")
    correlation: _IntStr = None
    stream: _IntStr = None
    device: _IntStr = None
    input_dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Concrete Inputs")


class AscendArgs(msgspec.Struct, gc=False):
    """The ``args`` keys perfkit reads from an Ascend ``trace_view.json``."""

    name: _IntStr = None
    task_type: _IntStr = msgspec.field(default=None, name="Task Type")


class Event(msgspec.Struct, gc=False):
    """One Kineto trace event, only the fields perfkit keeps."""

    ph: str = ""
    name: _IntStr = ""
    cat: _IntStr = None
    pid: _IntStr = None
    tid: _IntStr = None
    ts: _FloatStr = None
    dur: _FloatStr = None
    id: _IntStr = None
    args: Args | None = None


class AscendEvent(msgspec.Struct, gc=False):
    """One ``trace_view.json`` event, only the fields perfkit keeps."""

    ph: str = ""
    name: _IntStr = ""
    cat: _IntStr = None
    pid: _IntStr = None
    tid: _IntStr = None
    ts: _FloatStr = None
    dur: _FloatStr = None
    id: _IntStr = None
    args: AscendArgs | None = None


class Trace(msgspec.Struct):
    """A Kineto trace object (``{"traceEvents": [...]}``)."""

    traceEvents: list[Event] = msgspec.field(default_factory=list)  # noqa: N815


_EMPTY = Args()
_EMPTY_ASCEND = AscendArgs()


def _strings(values: list[object]) -> pd.Series:
    try:
        arr = pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        arr = pa.array([None if v is None else str(v) for v in values], pa.string())
    return pd.Series(pd.arrays.ArrowStringArray(arr), dtype="string")


def _numbers(values: list[object]) -> np.ndarray:
    try:
        return pa.array(values, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # trace_view.json writes ts as text
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy()


def _ints(values: list[object]) -> pd.Series:
    try:
        return pd.Series(pa.array(values, pa.int64()).to_pandas(
            types_mapper={pa.int64(): pd.Int64Dtype()}.get))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return _strings(values)


def _raw(values: list[msgspec.Raw]) -> pd.Series:
    return _strings([bytes(v).decode() or None for v in values])


def decode_json(path: Path) -> dict[str, int]:
    """Decode one Chrome-trace JSON file into DataFrames; return their row counts.

    A Kineto trace (an object with ``traceEvents``) keeps the launch links and operator
    shapes; a ``trace_view.json`` (a bare array) keeps the task type, as perfkit does.
    """
    raw = path.read_bytes()
    gc.disable()
    try:
        kineto = raw.lstrip()[:1] == b"{"
        if kineto:
            events = msgspec.json.decode(raw, type=Trace).traceEvents
        else:
            events = msgspec.json.decode(raw, type=list[AscendEvent])
        del raw
        xs = [e for e in events if e.ph == "X"]
        flows = [e for e in events if e.ph in ("s", "f", "t")]
        n = len(events)
        del events
        cols = {"name": _strings([e.name for e in xs]), "cat": _strings([e.cat for e in xs]),
                "pid": _ints([e.pid for e in xs]), "tid": _ints([e.tid for e in xs]),
                "ts": _numbers([e.ts for e in xs]), "dur": _numbers([e.dur for e in xs])}
        empty = _EMPTY if kineto else _EMPTY_ASCEND
        args = [e.args if e.args is not None else empty for e in xs]
        del xs
        if kineto:
            cols.update(
                external_id=_ints([a.external_id for a in args]),
                correlation=_ints([a.correlation for a in args]),
                stream=_ints([a.stream for a in args]),
                device=_ints([a.device for a in args]),
                input_dims=_raw([a.input_dims for a in args]),
                input_type=_raw([a.input_type for a in args]),
                concrete_inputs=_raw([a.concrete_inputs for a in args]))
        else:
            cols["task_type"] = _strings([a.task_type for a in args])
        del args
        x = pd.DataFrame(cols)
        f = pd.DataFrame({
            "name": _strings([e.name for e in flows]), "cat": _strings([e.cat for e in flows]),
            "pid": _ints([e.pid for e in flows]), "tid": _ints([e.tid for e in flows]),
            "ts": _numbers([e.ts for e in flows]), "id": _strings([e.id for e in flows]),
            "ph": _strings([e.ph for e in flows])})
    finally:
        gc.enable()
    return {"events": n, "x_rows": len(x), "flow_rows": len(f)}


def read_csv(path: Path) -> dict[str, int]:
    """Read one CSV with pyarrow into a DataFrame; return its row count."""
    frame = pacsv.read_csv(path).to_pandas(types_mapper=pd.ArrowDtype)
    return {"csv_rows": len(frame)}


def _one(path: str) -> tuple[str, dict[str, int], float]:
    t0 = time.perf_counter()
    p = Path(path)
    rows = read_csv(p) if p.suffix == ".csv" else decode_json(p)
    return path, rows, time.perf_counter() - t0


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    out = path / "ASCEND_PROFILER_OUTPUT"
    if out.is_dir():  # an Ascend rank: the two large files perfkit reads
        return [out / "kernel_details.csv", out / "trace_view.json"]
    return sorted(p for p in path.iterdir() if p.name.endswith(".json"))


def _small_pages() -> None:
    """Transparent huge pages off for this process, as perfkit runs its loads (Linux).

    The same ``prctl(PR_SET_THP_DISABLE)`` as ``perfkit/_hugepages.py``, written out here
    so that the limit uses nothing of perfkit.
    """
    import ctypes

    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(41, 1, 0, 0, 0)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    args = list(sys.argv[1:] if argv is None else argv)
    workers = os.cpu_count() or 1
    if "--workers" in args:
        i = args.index("--workers")
        workers = int(args[i + 1])
        del args[i:i + 2]
    if "--small-pages" in args:
        args.remove("--small-pages")
        _small_pages()
    path = Path(args[0])
    files = _files(path)
    t0 = time.perf_counter()
    kinds = {f.suffix for f in files}
    if len(files) > 1 and workers > 1 and kinds == {".json"}:
        with ProcessPoolExecutor(min(workers, len(files)), mp_context=get_context("fork")) as ex:
            done = list(ex.map(_one, [str(f) for f in files]))
    else:  # an Ascend rank is one process in perfkit too
        done = [_one(str(f)) for f in files]
    total = time.perf_counter() - t0
    print(json.dumps({"total_s": total, "files": {p: {"s": s, **r} for p, r, s in done}}))


if __name__ == "__main__":
    main()
