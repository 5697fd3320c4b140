"""Generate the large benchmark inputs from the real samples in ../shared/samples.

Writes (under ``--out``, default ``/tmp/perfkit-bench``; never inside the repository):

- ``kineto/rank{0,1}.json``: PyTorch Kineto traces made by repeating the events of the HTA
  sample trace with shifted timestamps and fresh ids/correlations, ``--kineto-mb`` in total
  (default 1100 MB, i.e. >= 1 GB), one ``ProfilerStep#N`` per repetition; with
  ``--device-lane``, also the copy of each step on the device lane (``gpu_user_annotation``
  from the repetition's first to its last device task) that recent PyTorch versions write
  (the HTA sample predates it);
- ``ascend/rank0_ascend_pt/``: one torch_npu rank whose ``kernel_details.csv`` has
  ``--kernel-rows`` rows (default 1,000,000) and whose ``trace_view.json`` is at least
  ``--trace-mb`` MB (default 520), built by repeating the real Level1 sample; the small files
  (step_trace_time.csv, communication*.json, memory files, profiler_info) are copied as they are.

Usage: ``python benchmarks/loaders_generate.py [--out DIR] [--kineto-mb N] [--trace-mb N]``.
With ``--scales 0.25,0.5,1`` the inputs are written at each fraction of those sizes (Kineto
MB, kernel rows and trace MB scaled alike) under ``DIR/scale-<s>/`` (what
``loaders_bench.py`` reads).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import shutil
import sys
from decimal import Decimal
from pathlib import Path

try:  # the fastest encoder where it is installed; msgspec (a perfkit dependency) otherwise
    from orjson import dumps as _dumps
except ModuleNotFoundError:  # pragma: no cover - depends on the environment
    from msgspec.json import encode as _dumps

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # shared_samples: where other projects' profiles are
import shared_samples  # noqa: E402

KINETO_SAMPLE = shared_samples.sample(shared_samples.HTA) / "sampled_rank-{rank}.json.gz"
ASCEND_SAMPLE = shared_samples.sample(shared_samples.PT_LEVEL1) / "rank0_ascend_pt"


_DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _kineto(out: Path, total_mb: int, device_lane: bool = False,
            optimizer_steps: bool = False) -> None:
    out.mkdir(parents=True, exist_ok=True)
    per_rank = total_mb * 1_000_000 // 2
    for rank in (0, 1):
        src = json.loads(gzip.decompress(Path(str(KINETO_SAMPLE).format(rank=rank))
                                         .read_bytes()))
        events = [e for e in src["traceEvents"] if e.get("ph") != "M"]
        meta = [e for e in src["traceEvents"] if e.get("ph") == "M"]
        if optimizer_steps:
            events = _first_step(events)
        events = [e for e in events if "ProfilerStep#" not in e.get("name", "")]
        t0 = min(e["ts"] for e in events)
        t1 = max(e["ts"] + e.get("dur", 0) for e in events)
        period = int(t1 - t0) + 1000
        device = [e for e in events if e.get("cat") in _DEVICE_CATS]
        lane_ts = min(e["ts"] for e in device)
        lane_dur = max(e["ts"] + e.get("dur", 0) for e in device) - lane_ts
        id_step = 10_000_000
        header = {k: v for k, v in src.items() if k != "traceEvents"}
        path = out / f"rank{rank}.json"
        with open(path, "wb") as fh:
            fh.write(_dumps(header)[:-1] + b', "traceEvents": [')
            fh.write(b",\n".join(_dumps(e) for e in meta))
            written = fh.tell()
            rep = 0
            while written < per_rank:
                shift = rep * period
                batch = []
                step = {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{rep}",
                        "pid": events[0]["pid"], "tid": events[0]["tid"],
                        "ts": t0 + shift, "dur": period - 500}
                if not optimizer_steps:  # the sample's own optimizer steps end its iterations
                    batch.append(step)
                if device_lane:
                    batch.append({"ph": "X", "cat": "gpu_user_annotation",
                                  "name": f"ProfilerStep#{rep}", "pid": device[0]["pid"],
                                  "tid": device[0]["tid"], "ts": lane_ts + shift,
                                  "dur": lane_dur})
                for e in events:
                    e2 = dict(e)
                    e2["ts"] = e["ts"] + shift
                    args = e.get("args")
                    if args:
                        a2 = dict(args)
                        for key in ("External id", "correlation"):
                            if key in a2:
                                a2[key] = a2[key] + rep * id_step
                        e2["args"] = a2
                    batch.append(e2)
                chunk = b",\n" + b",\n".join(_dumps(e) for e in batch)
                fh.write(chunk)
                written += len(chunk)
                rep += 1
            fh.write(b"]}")
        print(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB, {rep} steps)")


def _first_step(events: list[dict]) -> list[dict]:
    """The events of the sample's first ProfilerStep: the host events that start before the
    second begins, and the device tasks they launched (same correlation). The sample's two
    steps went through a filter that kept different backward functions of each, so a
    repetition of both would be two iterations that differ (which the iteration rules
    refuse to tell apart); repeating the first alone makes every iteration alike."""
    starts = sorted(e["ts"] for e in events if e.get("name", "").startswith("ProfilerStep#")
                    and e.get("cat") == "user_annotation")
    cut = starts[1]
    host = [e for e in events if e.get("cat") not in _DEVICE_CATS and e["ts"] < cut]
    launched = {(e.get("args") or {}).get("correlation") for e in host} - {None}
    return host + [e for e in events if e.get("cat") in _DEVICE_CATS
                   and (e.get("args") or {}).get("correlation") in launched]


def _ascend(out: Path, kernel_rows: int, trace_mb: int) -> None:
    rank = out / "rank0_ascend_pt"
    if rank.exists():
        shutil.rmtree(rank)
    shared_samples.writable_copy(ASCEND_SAMPLE, rank, ignore=shutil.ignore_patterns(
        "kernel_details.csv", "trace_view.json"))
    src_out = ASCEND_SAMPLE / "ASCEND_PROFILER_OUTPUT"
    dst_out = rank / "ASCEND_PROFILER_OUTPUT"
    with open(src_out / "kernel_details.csv", newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = list(reader)
    start_col = header.index("Start Time(us)")
    starts = [Decimal(r[start_col].strip()) for r in rows]
    period = max(starts) - min(starts) + Decimal(1000)
    with open(dst_out / "kernel_details.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        n = 0
        rep = 0
        while n < kernel_rows:
            buf = io.StringIO()
            bw = csv.writer(buf)
            for r, s in zip(rows, starts, strict=True):
                if n >= kernel_rows:
                    break
                r2 = list(r)
                r2[start_col] = f"{s + rep * period}\t"
                bw.writerow(r2)
                n += 1
            fh.write(buf.getvalue())
            rep += 1
    print(f"wrote kernel_details.csv ({kernel_rows} rows, "
          f"{(dst_out / 'kernel_details.csv').stat().st_size / 1e6:.0f} MB)")
    events = json.loads((src_out / "trace_view.json").read_text())
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    ts = [Decimal(str(e["ts"])) for e in body if "ts" in e]
    tperiod = max(ts) - min(ts) + Decimal(1000)
    limit = trace_mb * 1_000_000
    with open(dst_out / "trace_view.json", "wb") as fh:
        fh.write(b"[" + b",".join(_dumps(e) for e in meta))
        rep = 0
        while fh.tell() < limit:
            shift = rep * tperiod
            batch = []
            for e in body:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = str(Decimal(str(e2["ts"])) + shift)
                if "id" in e2 and isinstance(e2["id"], int):
                    e2["id"] = e2["id"] + rep * 10**12
                if e2.get("name", "").startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{50 + rep}"
                batch.append(e2)
            fh.write(b"," + b",".join(_dumps(e) for e in batch))
            rep += 1
        fh.write(b"]")
    print(f"wrote trace_view.json ({(dst_out / 'trace_view.json').stat().st_size / 1e6:.0f} MB,"
          f" {rep} copies)")


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/perfkit-bench")
    ap.add_argument("--kineto-mb", type=int, default=1100)
    ap.add_argument("--kernel-rows", type=int, default=1_000_000)
    ap.add_argument("--trace-mb", type=int, default=520)
    ap.add_argument("--only", choices=["kineto", "ascend"], default=None)
    ap.add_argument("--device-lane", action="store_true",
                    help="Kineto: write each step's gpu_user_annotation copy too")
    ap.add_argument("--optimizer-steps", action="store_true",
                    help="Kineto: no ProfilerStep (the steps are the optimizer's iterations)")
    ap.add_argument("--scales", default=None,
                    help="comma-separated fractions, each written under OUT/scale-<s>/")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if ROOT in out.resolve().parents or out.resolve() == ROOT:
        raise SystemExit("refusing to write benchmark data inside the repository")
    if shared_samples.samples_dir() is None:
        raise SystemExit("the inputs are made from real samples, but "
                         + shared_samples.absent_reason())
    scales = [(s.strip(), float(s)) for s in args.scales.split(",")] if args.scales else [
        ("", 1.0)]
    for label, f in scales:
        dest = out / f"scale-{label}" if label else out
        if args.only in (None, "kineto"):
            _kineto(dest / "kineto", round(args.kineto_mb * f), args.device_lane,
                    args.optimizer_steps)
        if args.only in (None, "ascend"):
            _ascend(dest / "ascend", round(args.kernel_rows * f), round(args.trace_mb * f))


if __name__ == "__main__":
    main()
