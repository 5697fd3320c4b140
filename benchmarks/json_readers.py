"""C/C++ JSON parsers against perfkit's msgspec limit, side by side on the same files.

Issue 68, point 3: is there a reader faster than the parsing limit (``parsing_limit.py``:
msgspec decoding straight into typed Structs, then one DataFrame of the complete events)?
Each candidate does the same job on the same file — read the bytes, parse, and build the
DataFrame of the complete (``ph == "X"``) events with the columns every reader needs
(``name``, ``cat``, ``pid``, ``tid``, ``ts``, ``dur``) — each in a fresh process, so its
peak memory (``ru_maxrss``) is its own:

- ``msgspec-structs``: the limit itself (:func:`parsing_limit.decode_json`, all the fields
  perfkit keeps, so it does more than the others);
- ``msgspec-dicts``: ``msgspec.json.decode`` to Python objects, then the columns;
- ``orjson``: ``orjson.loads`` (C), then the columns;
- ``yyjson``: the ``yyjson`` binding (C), ``Document(...).as_obj``, then the columns;
- ``pysimdjson``: ``simdjson.Parser().parse`` (C++ simdjson, lazy proxies), each event's
  fields read through the proxy;
- ``cysimdjson``: ``cysimdjson.JSONParser().parse`` (C++ simdjson, Cython), each event's
  fields read with ``at_pointer``-free item access.

``pyarrow.json`` reads newline-delimited JSON only; a Chrome trace is one object holding
one array, so it would need the file rewritten first: not measured (said in the output).

Usage (any venv with the parsers: ``pip install msgspec orjson yyjson pysimdjson cysimdjson
pandas pyarrow``)::

    python benchmarks/loaders_generate.py --out /tmp/pk-json --kineto-mb 400 --trace-mb 250
    python benchmarks/json_readers.py /tmp/pk-json/kineto/rank0.json \\
        /tmp/pk-json/ascend/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json

Prints one table per file: seconds (best of ``--repeat``), MB/s, peak RSS, rows, the
ratio to the limit and to ``msgspec-dicts`` (the same job as the C/C++ candidates: the
limit also decodes the other fields perfkit keeps and the flow events); a parser that is
not installed is listed as such. The rows of every parser must equal the limit's (checked,
else the row says so).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["PARSERS", "main"]

PARSERS = ("msgspec-structs", "msgspec-dicts", "orjson", "yyjson", "pysimdjson", "cysimdjson")
COLUMNS = ("name", "cat", "pid", "tid", "ts", "dur")


def _frame(rows: dict[str, list]) -> object:
    import pandas as pd

    return pd.DataFrame({
        "name": pd.array(rows["name"], dtype="string[pyarrow]"),
        "cat": pd.array(rows["cat"], dtype="string[pyarrow]"),
        "pid": rows["pid"], "tid": rows["tid"],
        "ts": pd.to_numeric(pd.Series(rows["ts"]), errors="coerce"),
        "dur": pd.to_numeric(pd.Series(rows["dur"]), errors="coerce"),
    })


def _from_dicts(events: list) -> object:
    rows: dict[str, list] = {c: [] for c in COLUMNS}
    for e in events:
        if e.get("ph") == "X":
            for c in COLUMNS:
                rows[c].append(e.get(c))
    return _frame(rows)


def _events(doc: object) -> list:
    return doc["traceEvents"] if isinstance(doc, dict) else doc  # type: ignore[index]


def run_one(parser: str, path: str) -> dict:
    """Parse ``path`` with ``parser`` into the DataFrame of complete events (this process)."""
    gc.disable()
    t0 = time.perf_counter()
    data = Path(path).read_bytes()
    if parser == "msgspec-structs":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from parsing_limit import decode_json  # the limit's own decoding and frames

        del data  # it reads the file itself
        counts = decode_json(Path(path))
        seconds = time.perf_counter() - t0
        return {"seconds": seconds, "rows": int(counts["x_rows"]),
                "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    elif parser == "msgspec-dicts":
        import msgspec

        frame = _from_dicts(_events(msgspec.json.decode(data)))
    elif parser == "orjson":
        import orjson

        frame = _from_dicts(_events(orjson.loads(data)))
    elif parser == "yyjson":
        from yyjson import Document

        frame = _from_dicts(_events(Document(data).as_obj))
    elif parser == "pysimdjson":
        import simdjson

        keep = simdjson.Parser()  # a document lives as long as its parser
        doc = keep.parse(data)
        events = doc["traceEvents"] if isinstance(doc, simdjson.Object) else doc
        rows: dict[str, list] = {c: [] for c in COLUMNS}
        for e in events:
            if e.get("ph") == "X":
                for c in COLUMNS:
                    rows[c].append(e.get(c))
        frame = _frame(rows)
    elif parser == "cysimdjson":
        import cysimdjson

        keep_cy = cysimdjson.JSONParser()  # a document lives as long as its parser
        doc = keep_cy.parse(data)
        events = doc["traceEvents"] if hasattr(doc, "keys") else doc
        rows = {c: [] for c in COLUMNS}
        for e in events:
            if e.get("ph") == "X":
                for c in COLUMNS:
                    rows[c].append(e.get(c))
        frame = _frame(rows)
    else:
        raise SystemExit(f"unknown parser {parser!r}")
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "rows": len(frame),  # type: ignore[arg-type]
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _child(parser: str, path: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--one", parser, path],
                          capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        return {"error": last}
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--one", nargs=2, metavar=("PARSER", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(*args.one)))
        return 0
    print(f"load average at start: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    for path in args.paths:
        size_mb = Path(path).stat().st_size / 1e6
        print(f"\n{path} ({size_mb:.0f} MB)")
        print(f"{'parser':<17}{'s (best)':>10}{'MB/s':>8}{'peak MB':>9}{'rows':>10}"
              f"{'x limit':>9}{'x same job':>12}")
        limit = same_job = None
        for parser in PARSERS:
            runs = [_child(parser, path) for _ in range(args.repeat)]
            ok = [r for r in runs if "error" not in r]
            if not ok:
                print(f"{parser:<17}  not measured: {runs[0]['error'][:70]}")
                continue
            best = min(ok, key=lambda r: r["seconds"])
            if limit is None:
                limit = best
            elif same_job is None:
                same_job = best
            same = "" if best["rows"] == limit["rows"] else "  (rows differ from the limit)"
            ratio = f"{best['seconds'] / same_job['seconds']:>12.2f}" if same_job else \
                f"{'-':>12}"
            print(f"{parser:<17}{best['seconds']:>10.2f}{size_mb / best['seconds']:>8.0f}"
                  f"{max(r['rss_mb'] for r in ok):>9.0f}{best['rows']:>10,}"
                  f"{best['seconds'] / limit['seconds']:>9.2f}{ratio}{same}")
        print("pyarrow.json      not measured: reads newline-delimited JSON only (a trace is "
              "one object holding one array)")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
