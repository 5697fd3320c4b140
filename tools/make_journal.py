"""Build the bundled tuning journal of the seed's Llama2-13B case (``data/journals/``).

Usage::

    python tools/make_journal.py                  # -> data/journals/llama2-13b-case.sqlite
    python tools/make_journal.py --out /tmp/x     # somewhere else (a folder)

Three runs, in the order of the seed's story, each measured by
:func:`perfkit.journal.measure_run` (the job read from the profile by
:func:`perfkit.infer_job`):

1. ``baseline`` — the bundled simulation ``data/simulated/llama2-13b-baseline-dp16``;
2. ``pipelined`` — the scenario ``llama2-13b-pipelined-dp8-pp2``, simulated here into a
   temporary folder with the settings of the bundled data (seed 0) and not kept: the
   journal holds everything a comparison needs, and ``perfkit simulate OUT --scenario
   llama2-13b-pipelined-dp8-pp2`` writes the same profile again, byte for byte (its
   fingerprint is the one the journal records);
3. ``tuned`` — the bundled simulation ``data/simulated/llama2-13b-tuned-dp8-pp2``.

The bundled profiles are stored as ``sample:NAME`` (found from any installation), the
pipelined one with no path and the command above as its provenance. The file is
deterministic: each run is stamped with its profile's start time instead of the time of
writing, the journal's ``created_utc`` likewise, and the file is vacuumed; rerunning the
script with the same perfkit and SQLite gives the same bytes. The script also writes
``README.md`` next to it, with the numbers read back from the journal.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
from pathlib import Path

from perfkit.format import counted
from perfkit.journal import Journal, measure_run
from perfkit.journal.text import fmt_share
from perfkit.simulate.scenarios import scenario, write_scenario

ROOT = Path(__file__).resolve().parents[1]
SIM = ROOT / "data" / "simulated"
NAME = "llama2-13b-case"
PIPELINED = "llama2-13b-pipelined-dp8-pp2"

#: label, scenario, what the seed measured for that step, the note kept with the run
RUNS = (
    ("baseline", "llama2-13b-baseline-dp16", "1,860 tokens/s/p",
     "The seed's starting point: pure data parallel, every layer recomputed to fit in "
     "memory, one micro-batch of 2 sequences per step. Seed (dp 8 on one node, 40 "
     "layers): about 1,860 tokens/s/p, MFU 40 %. Simulated: 8 of the 40 layers, dp 16 over "
     "two nodes; a quarter of the step is the gradient reduce-scatter and weight all-gather "
     "of every parameter, paid for 2 sequences."),
    ("pipelined", PIPELINED, "2,136 tokens/s/p",
     "Change the split: two pipeline stages (one per node), dp 8 inside each, still full "
     "recompute. Seed (128 micro-batches): 2,136 tokens/s/p (+15 %). Each device holds half "
     "the parameters, their traffic stays inside a node and is paid once per 8 "
     "micro-batches; the price is the bubble, (p - 1)/m. Simulated: +15 % per device too."),
    ("tuned", "llama2-13b-tuned-dp8-pp2", "2,562 tokens/s/p",
     "Spend the freed memory: selective recompute (SiLU/Mul) and full recompute only for "
     "the first layers of stage 0. Seed (recompute [4, 0] of 20 layers per stage): "
     "2,562 tokens/s/p, MFU 55.4 %. Simulated: [1, 0] of 4 layers per stage."),
)
REGENERATE = (f"perfkit simulate OUT --scenario {PIPELINED} writes this profile again, byte "
              "for byte (same fingerprint); it is not bundled to keep perfkit's data small")
BUNDLED = ("bundled sample, written by tools/make_data.py (perfkit simulate OUT --scenario "
           "{name} writes it again)")


def build(out: Path) -> Path:
    """Write ``out/llama2-13b-case.sqlite`` (replacing an older copy) and its README."""
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{NAME}.sqlite"
    for stale in (target, target.with_name(target.name + "-journal")):
        stale.unlink(missing_ok=True)
    journal = Journal(target)
    stamp = None
    with tempfile.TemporaryDirectory(prefix="perfkit-journal-") as tmp:
        for label, name, _seed, note in RUNS:
            if name == PIPELINED:
                folder = write_scenario(scenario(name), Path(tmp) / name)
                record = measure_run(folder).replace(path=None, provenance=REGENERATE)
            else:
                record = measure_run(SIM / name).replace(
                    path=f"sample:{name}", provenance=BUNDLED.format(name=name))
            stamp = stamp or record.profiled_utc
            journal.add(record.replace(added_utc=record.profiled_utc), label=label, note=note)
            print(f"{label}: {record.job_line}", file=sys.stderr)
    con = sqlite3.connect(target, isolation_level=None)
    try:
        con.execute("UPDATE meta SET value = ? WHERE key = 'created_utc'", (stamp,))
        con.execute("VACUUM")
    finally:
        con.close()
    (out / "README.md").write_text(readme(Journal(target, readonly=True)), encoding="utf-8")
    return target


def readme(journal: Journal) -> str:
    """The README of the bundled journal, its numbers read back from the journal."""
    runs = journal.runs()
    seed = {label: s for label, _n, s, _note in RUNS}
    rows = ["| run | layout | step | tokens/s per device | tokens/s/p | MFU | bubble | seed's |",
            "|---|---|---|---|---|---|---|---|"]
    for r in runs.itertuples(index=False):
        layout = f"dp {r.dp} × pp {r.pp}, {counted(r.num_micro_batches, 'micro-batch')}, " \
                 f"recompute {r.recompute}" + (f" {r.recompute_layers}"
                                               if isinstance(r.recompute_layers, list) else "")
        rows.append(f"| {r.id} `{r.label}` | {layout} | {r.step_time_s:.3f} s | "
                    f"{r.tokens_per_s_per_device:,.0f} | {r.tokens_per_s_per_p:,.0f} | "
                    f"{r.mfu_text} | {fmt_share(r.bubble_share)} | {seed.get(r.label, '')} |")
    sentences = [f"- `{a}` → `{b}`: {journal.compare(a, b).sentence()}"
                 for a, b in zip(runs["label"], runs["label"][1:], strict=False)]
    return "\n".join([
        "# The Llama2-13B case as a tuning journal", "",
        "`llama2-13b-case.sqlite` is a perfkit tuning journal (docs/journal.md) holding the "
        "three steps of the MindFormers guide's Llama2-13B case (the seed "
        "`perf_optimize.md`, \"Llama2-13B Extreme Performance Optimization\"), each "
        "measured on a **simulated** profile (`perfkit.simulate`, seed 0; not a real "
        "measurement). Open it read-only with `pk.Journal.bundled()`; "
        "`pk.Journal.bundled().copy_to(PATH)` gives a copy you can add your own runs to. "
        "Notebook `08_case_llama2_13b` replays the case from it, `10_tuning_journal` "
        "shows how to keep one.", "",
        *rows, "",
        "What changed, as the journal says it:", "", *sentences, "",
        "## Provenance", "",
        "Written by `python tools/make_journal.py` (deterministic: the same perfkit and "
        "SQLite give the same bytes). Each run is stamped with its profile's start time, "
        "not the time the script ran.", "",
        "- `baseline` and `tuned` were measured on the bundled samples "
        "`data/simulated/llama2-13b-baseline-dp16` and `data/simulated/"
        "llama2-13b-tuned-dp8-pp2`; the journal names them `sample:NAME`, so "
        "`journal.load_profile(run)` finds them in any installation.",
        f"- `pipelined` is the scenario `{PIPELINED}` (dp 8 × pp 2, 8 micro-batches, "
        "optimizer sharded over 8, full recompute; same model, hardware, efficiency and "
        "seed as the other two). Its profile (16 ranks, about 7 MB) is **not bundled**, to "
        "keep perfkit's data within its size budget; the journal keeps everything a "
        "comparison needs (the job, the metrics, the step breakdown, the findings and the "
        "operator tables per category and per name). To have the profile:", "",
        "  ```", f"  perfkit simulate OUT --scenario {PIPELINED}", "  ```", "",
        "  writes it again byte for byte: its content fingerprint is the one the journal "
        "records (`tests/test_journal_bundled.py` checks this).", "",
        "How the simulation differs from the guide (8 of 40 layers, 1 or 8 micro-batches "
        "instead of 128, a fixed kernel efficiency) is told in "
        "`data/simulated/README.md` and in notebook 08.", ""])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "journals",
                    help="folder for the journal and its README")
    args = ap.parse_args(argv)
    path = build(args.out)
    print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
