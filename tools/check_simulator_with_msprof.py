"""Check that a simulated profile is accepted by the real peer tool, msprof-analyze.

Usage::

    python tools/check_simulator_with_msprof.py [--venv /tmp/venvs/msprof] [--keep DIR]

Steps:

1. make (or reuse) a separate virtual environment holding ``msprof-analyze`` from PyPI
   (``python3 -m venv VENV && VENV/bin/pip install msprof-analyze``); perfkit never
   imports it;
2. simulate an 8-rank job (Llama2-7B-like, 4 layers, dp 2 x tp 2 x pp 2, 2 steps) with
   :func:`perfkit.simulate.simulate`;
3. run ``msprof-analyze cluster -d <profile> -m all --export_type text``;
4. assert that it succeeded (exit 0, its four output files, no ``[ERROR]`` line, every
   communication-matrix link mapped to global ranks), that the per-rank figures of its
   ``cluster_step_trace_time.csv`` equal perfkit's ``steps`` table of the same profile,
   that each operator's elapse time in its ``cluster_communication.json`` equals perfkit's
   ``comm_ops``, and that its pipeline-stage rows group the ranks as the simulated
   pipeline does.

Prints a summary and exits 1 on any failed check. msprof-analyze itself exits 0 even when
an analysis fails, hence the log checks.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import perfkit as pk
from perfkit.io._common import hccl_group_hash
from perfkit.io.engines.local import load
from perfkit.simulate import simulate

COLUMNS = {"Computing": "computing_us", "Communication(Not Overlapped)": "comm_not_overlapped_us",
           "Overlapped": "overlapped_us", "Communication": "communication_us", "Free": "free_us",
           "Stage": "stage_us", "Bubble": "bubble_us", "Preparing": "preparing_us"}
OUTPUTS = ("cluster_step_trace_time.csv", "cluster_communication.json",
           "cluster_communication_matrix.json", "communication_group.json")


def ensure_venv(venv: Path) -> Path:
    """The msprof-analyze executable, installing it into ``venv`` when missing."""
    exe = venv / "bin" / "msprof-analyze"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "msprof-analyze"],
                       check=True)
    return exe


def version(venv: Path) -> str:
    out = subprocess.run([str(venv / "bin" / "pip"), "show", "msprof-analyze"],
                         capture_output=True, text=True, check=False).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines()
                 if line.startswith("Version:")), "unknown")


def simulate_job(out: Path) -> tuple[pk.ParallelConfig, Path]:
    model = pk.ModelSpec.preset("llama2-7b").replace(num_layers=4)
    par = pk.ParallelConfig(dp=2, tp=2, pp=2, num_micro_batches=4, recompute="selective")
    simulate(model, par, pk.Hardware.preset("ascend-910b"), steps=2, seed=0, out=out)
    return par, out


def check(profile: Path, exe: Path, work: Path, par: pk.ParallelConfig) -> dict[str, object]:
    failures: list[str] = []
    outdir = work / "msprof_out"
    cmd = [str(exe), "cluster", "-d", str(profile), "-o", str(outdir), "-m", "all",
           "--export_type", "text", "--force"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        failures.append(f"exit code {proc.returncode}")
    errors = [line for line in log.splitlines() if "[ERROR]" in line]
    if errors:
        failures.append(f"{len(errors)} ERROR lines, first: {errors[0][:200]}")
    unmapped = [line for line in log.splitlines() if "cannot be mapped" in line]
    if unmapped:
        failures.append(f"{len(unmapped)} matrix links not mapped to global ranks")
    result = outdir / "cluster_analysis_output"
    for name in OUTPUTS:
        if not (result / name).is_file():
            failures.append(f"missing output {name}")
    compared = 0
    max_rel = 0.0
    stage_sets: set[tuple[int, ...]] = set()
    if (result / "cluster_step_trace_time.csv").is_file():
        steps = load(profile, cache=False).steps
        with open(result / "cluster_step_trace_time.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        for row in rows:
            if row["Type"] == "stage":
                stage_sets.add(tuple(int(x) for x in row["Index"].strip("()").split(",")))
                continue
            ours = steps[(steps["rank"] == int(row["Index"]))
                         & (steps["step"] == float(row["Step"]))]
            if len(ours) != 1:
                failures.append(f"rank {row['Index']} step {row['Step']} not in perfkit")
                continue
            for col, canon in COLUMNS.items():
                a, b = float(row[col]), float(ours[canon].iloc[0])
                rel = abs(a - b) / max(abs(b), 1.0)
                max_rel = max(max_rel, rel)
                if rel > 1e-6:
                    failures.append(f"rank {row['Index']} {col}: msprof {a} vs perfkit {b}")
                compared += 1
        n_ranks = len({int(r["Index"]) for r in rows if r["Type"] == "rank"})
        if n_ranks != par.world_size:
            failures.append(f"msprof-analyze saw {n_ranks} ranks, expected {par.world_size}")
        per_stage = par.dp * par.tp
        expected = {tuple(range(s * per_stage, (s + 1) * per_stage)) for s in range(par.pp)}
        if stage_sets != expected:
            failures.append(f"stage rows {sorted(stage_sets)} != pipeline {sorted(expected)}")
    comm_compared = 0
    if (result / "cluster_communication.json").is_file():
        ops = load(profile, cache=False).comm_ops
        # perfkit names groups as the metadata does; HCCL keys carry the name's hash
        elapse = {(int(r.rank), str(r.name), hccl_group_hash(str(r.group))): float(r.elapse_us)
                  for r in ops.itertuples()}
        data = json.loads((result / "cluster_communication.json").read_text())
        for per_step in data.values():
            for per_op in per_step.values():
                for key, per_rank in per_op.items():
                    if key.startswith("Total"):
                        continue
                    name, _, group = key.rpartition("@")
                    for rank, entry in per_rank.items():
                        ms = entry["Communication Time Info"]["Elapse Time(ms)"]
                        ours = elapse.get((int(rank), name, group))
                        if ours is None or abs(ms * 1000 - ours) > 1e-6 * max(ours, 1.0):
                            failures.append(f"rank {rank} {key}: msprof {ms} ms, perfkit {ours}")
                        comm_compared += 1
        if not comm_compared:
            failures.append("no communication operator in cluster_communication.json")
    if (result / "communication_group.json").is_file():
        groups = json.loads((result / "communication_group.json").read_text())
        n_groups = len(groups.get("collective", [])) + len(groups.get("p2p", []))
    else:
        n_groups = 0
    return {"command": " ".join(["msprof-analyze", *cmd[1:]]), "exit_code": proc.returncode,
            "wall_s": round(wall, 2), "figures_compared": compared,
            "communication_ops_compared": comm_compared,
            "max_relative_difference": max_rel, "stage_rows": sorted(stage_sets),
            "communication_groups": n_groups, "failures": failures}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=Path, default=Path("/tmp/venvs/msprof"))
    ap.add_argument("--keep", type=Path, help="keep the profile and output here")
    args = ap.parse_args(argv)
    exe = ensure_venv(args.venv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        par, profile = simulate_job(work / "profile")
        summary = check(profile, exe, work, par)
    summary["msprof_analyze_version"] = version(args.venv)
    summary["date_utc"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(json.dumps(summary, indent=2))
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
