"""The lab's operator table (what the student reads) and its answer key read the steps whose
device tasks were recorded in full, as the Operators tab does.

A lab folder holds simulated profiles, recorded in full; a folder given a profile with one
rank's task list cut (``ascend/msinsight-pt-level1``, rank 1 keeping its last 20 tasks,
as tests/analysis/test_lazy_recorded.py cuts it) showed that fragment's calls and time
beside rank 0's whole step: ``ForeachAddList`` as 6 calls where the step recorded in full
runs 3. Checked against rank 0's raw ``kernel_details.csv`` (read with csv).
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from raw_ascend import csv_rows, keep_last_tasks
from shared_samples import PT_LEVEL1, sample

from perfkit.lab.data import StudentData
from perfkit.lab.evidence import Evidence
from perfkit.lab.scenario import HARDWARE, draw

pytestmark = pytest.mark.shared_samples
_OUT = "ASCEND_PROFILER_OUTPUT"


def _folder(tmp_path: Path) -> Path:
    """A student folder whose job profile is msinsight-pt-level1 with rank 1 cut."""
    job = tmp_path / "student" / "profiles" / "job"
    shutil.copytree(sample(PT_LEVEL1), job)
    keep_last_tasks(job / "rank1_ascend_pt" / _OUT / "kernel_details.csv", 20)
    return tmp_path / "student"


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_lab_operators_are_those_of_the_steps_recorded_in_full(tmp_path):
    folder = _folder(tmp_path)
    rows = csv_rows(folder / "profiles" / "job" / "rank0_ascend_pt" / _OUT /
                    "kernel_details.csv")
    want: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        if r["Accelerator Core"] != "HCCL":
            # the export writes the shapes inside literal quotes
            want[(r["Name"], r["Input Shapes"].strip('"'))].append(float(r["Duration(us)"]))
    cut = csv_rows(folder / "profiles" / "job" / "rank1_ascend_pt" / _OUT /
                   "kernel_details.csv")
    assert len(cut) == 20
    evidence = Evidence(folder, {"brief": {"hardware": {"name": HARDWARE}}}).job_operators()
    setup = draw(1, seed=1)
    assert setup.job.path == "profiles/job" and setup.job.hardware == HARDWARE
    key = StudentData(folder, setup).operators
    assert len(evidence) == 15
    for _, row in evidence.iterrows():
        durs = want[(row["operator"], row["input_shapes"])]
        assert row["calls"] == len(durs), row["operator"]
        assert row["total_ms"] == pytest.approx(sum(durs) / 1e3, rel=1e-9)
    # the rank's costliest: the key's first rows are the table's
    top = sorted(want.items(), key=lambda kv: -sum(kv[1]))[:3]
    for (name, shapes), durs in top:
        (got,) = key[(key["name"] == name) & (key["input_shapes"] == shapes)].itertuples()
        assert (got.count, got.total_us) == (len(durs), pytest.approx(sum(durs), rel=1e-9))
    assert key["name"].head(3).tolist() == [name for (name, _), _ in top]
