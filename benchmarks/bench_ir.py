"""Parse time and peak memory of :func:`perfkit.load_ir` on a large synthetic IR dump.

The dump is the real MindSpore 2.10 excerpt ``data/ir/silu_mul.ir`` with its subgraph
block repeated (each copy renamed) until the file reaches ``--size-mb``. The excerpt has no
``# In file`` comment lines, so it packs more nodes per megabyte than a raw dump: a worst
case for the parser. The parse runs in a fresh child process so that its peak resident set
size is measured on its own; the child's RSS after importing perfkit is printed as the
baseline.

Usage::

    python benchmarks/bench_ir.py [--size-mb 300] [--source-lines 0] [--keep PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXCERPT = ROOT / "data" / "ir" / "silu_mul.ir"

CHILD = r"""
import json, resource, sys, time
import perfkit.io.ir.graph as ir
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
g = ir.load_ir(sys.argv[1])
elapsed = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": elapsed, "nodes": len(g.nodes), "parameters": len(g.parameters),
                  "baseline_rss_kib": base, "peak_rss_kib": peak,
                  "frame_bytes": int(g.nodes.memory_usage(deep=True).sum())}))
"""


def build(target: Path, size_mb: float, source_lines: int = 0) -> int:
    """Write the synthetic dump; return the number of subgraph copies.

    ``source_lines`` adds that many ``# In file`` comment lines after every scope line, the
    way raw dumps carry them (the committed excerpt has them removed).
    """
    text = EXCERPT.read_text(encoding="utf-8")
    start = text.index("subgraph @")
    end = text.index("\n}\n", start) + 3
    head, body = text[:start], text[start:end]
    if source_lines:
        comment = "".join(f"      # In file /site-packages/mindspore/nn/cell.py:{700 + i}, "
                          f"8~40/        return self.construct(*args, **kwargs)/\n"
                          for i in range(source_lines))
        body = "".join(line + (comment if line.startswith("      # Fullname") else "")
                       for line in body.splitlines(keepends=True))
    name = body[len("subgraph @"):body.index("(")]
    copies = max(1, int(size_mb * 2**20 / len(body.encode("utf-8"))))
    with open(target, "w", encoding="utf-8") as fh:
        fh.write(head)
        for i in range(copies):
            fh.write(body.replace(name, f"{name}_copy{i}", 1))
    return copies


def main() -> None:
    """Build the file, parse it in a child process and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=300.0)
    parser.add_argument("--source-lines", type=int, default=0,
                        help="'# In file' lines to add per node (raw dumps have ~10-20)")
    parser.add_argument("--keep", help="write the synthetic dump here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(args.keep) if args.keep else Path(tmp) / "synthetic.ir"
        t0 = time.perf_counter()
        copies = build(target, args.size_mb, args.source_lines)
        built = time.perf_counter() - t0
        size = os.path.getsize(target)
        out = subprocess.run([sys.executable, "-c", CHILD, str(target)], check=True,
                             capture_output=True, text=True, cwd=ROOT)
        res = json.loads(out.stdout.strip().splitlines()[-1])
    mib = 1024
    print(f"file            {size / 2**20:9.1f} MiB  ({copies} copies of {EXCERPT.name}, "
          f"{args.source_lines} '# In file' lines per node, built in {built:.1f} s)")
    print(f"nodes           {res['nodes']:9d}     parameters {res['parameters']}")
    print(f"parse time      {res['seconds']:9.1f} s    "
          f"({size / 2**20 / res['seconds']:.1f} MiB/s)")
    print(f"peak RSS        {res['peak_rss_kib'] / mib:9.1f} MiB  "
          f"(after import {res['baseline_rss_kib'] / mib:.1f} MiB; "
          f"growth {(res['peak_rss_kib'] - res['baseline_rss_kib']) / mib:.1f} MiB)")
    print(f"nodes DataFrame {res['frame_bytes'] / 2**20:9.1f} MiB  (deep memory_usage)")


if __name__ == "__main__":
    main()
