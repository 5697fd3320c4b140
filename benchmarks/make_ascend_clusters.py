"""The two Ascend clusters of the cluster-first-answer benchmark (benchmarks/README.md).

* ``<out>/h2-cluster4``: four ranks made from one rank folder (the 0.87 GB benchmark rank)
  with hard links (``cp -al``: no disk used), each with its own folder name and
  ``profiler_info_{rank}.json`` (its ``rank_id`` set), so that detection finds four ranks;
* ``<out>/h2-simpad``: the simulated ``slow-rank`` set (4 ranks, Llama 2 7B, dp 4) whose
  ``trace_view.json`` files are padded to about 104 MiB each with 1,050,000 complete events
  of a process named "padding" (1 ns apart, within the trace's span): a cluster large
  enough to read one rank first whose job is known (the padding changes no table the job
  is read from: the whole profile's throughput is the unpadded set's, 23,181 tokens/s per
  device).

Run::

    python benchmarks/make_ascend_clusters.py \
        --rank /tmp/perfkit-first-answer/full/ascend/rank0_ascend_pt --out /tmp
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAD_EVENTS = 1_050_000


def hard_linked(rank: Path, out: Path, ranks: int = 4) -> None:
    """``ranks`` copies of ``rank`` under ``out`` (hard links), each its own rank."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    info = next(rank.glob("profiler_info*.json"))
    for r in range(ranks):
        dest = out / f"rank{r}_ascend_pt"
        subprocess.run(["cp", "-al", str(rank), str(dest)], check=True)
        (dest / info.name).unlink()  # a link to the original: replaced, not edited
        text = re.sub(r'"rank_id":\s*\d+', f'"rank_id": {r}', info.read_text())
        (dest / f"profiler_info_{r}.json").write_text(text)


def padded(out: Path) -> None:
    """The simulated slow-rank set with padded traces (module docstring)."""
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(ROOT / "data" / "simulated" / "slow-rank", out)
    (out / "README.md").unlink(missing_ok=True)
    for f in out.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"):
        events = json.loads(f.read_text())
        t0 = min(float(e["ts"]) for e in events if e.get("ph") == "X")
        line = (',\n{"ph": "X", "name": "pad", "pid": 999, "tid": 1, "ts": "%.3f", '
                '"dur": 0.5, "args": {}}')
        with open(f, "w", encoding="utf-8") as fh:
            fh.write("[\n" + ",\n".join(json.dumps(e) for e in events))
            fh.write(',\n{"ph": "M", "name": "process_name", "pid": 999, "tid": 0, '
                     '"args": {"name": "padding"}}')
            fh.write("".join(line % (t0 + i * 1e-3) for i in range(PAD_EVENTS)))
            fh.write("\n]\n")


def main() -> None:
    """Command-line entry point (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", required=True, help="an Ascend rank folder (*_ascend_pt)")
    ap.add_argument("--out", default="/tmp")
    args = ap.parse_args()
    hard_linked(Path(args.rank), Path(args.out) / "h2-cluster4")
    padded(Path(args.out) / "h2-simpad")


if __name__ == "__main__":
    main()
