"""The element-wise chains finding reads only the steps whose device tasks were recorded in
full, where the attention finding is measured too, as it does where it is not.

Where ``attention_not_fused`` is measured, the chains are searched without the attention
chains' kernels; that search read the whole profile (``ctx.profile``) while every other
operator rule reads the steps recorded in full (``ctx.tasks``), and the time per step is
divided by those steps only. No real profile of the samples has both (the ones with a step
recorded in part, ``msinsight-pt-gpt3-old``, ``compute_advice_v2`` and ``wild/mi_run1``,
have no step recorded in full or no attention chain), so the case is made from one:
msprof-analyze's ``compute_advice_v1`` (one step of 591 tasks with unfused attention
chains, ``tests/analysis/test_bmm_attention_sequence.py``) followed by a fragment of a
second step, 100 of its tasks again 1 ms after its end, and a step trace whose two steps
are as busy as the first step's tasks (the raw rows read with ``csv``). The fragment made
42 chains of 17.0 ms per step where the recorded step holds 41 of 13.7 ms.
"""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

import pytest
from raw_ascend import csv_rows, task_union_us
from shared_samples import shared_sample

import perfkit as pk
from perfkit.analysis.recorded import recorded_profile

pytestmark = pytest.mark.shared_samples
V1 = "ascend/msprof-analyze-tests/compute_advice_v1"
#: The rows of compute_advice_v1 copied into the second step (a fragment of it).
_FRAGMENT = slice(200, 300)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def _with_a_fragment(folder: Path, tmp_path: Path) -> Path:
    """compute_advice_v1's step 1, then rows 200-299 again as step 2 (1 ms after step 1's
    last task ends); a step trace with both steps as busy as step 1's tasks."""
    rows = csv_rows(folder / "kernel_details.csv")
    assert {r["Step Id"] for r in rows} == {"1"}
    start = [Decimal(r["Start Time(us)"]) for r in rows]
    end = max(s + Decimal(r["Duration(us)"]) for s, r in zip(start, rows, strict=True))
    shift = end - min(start) + Decimal(1000)
    fragment = [dict(r, **{"Step Id": "2", "Start Time(us)": str(s + shift)})
                for s, r in zip(start[_FRAGMENT], rows[_FRAGMENT], strict=True)]
    busy = task_union_us(rows)
    assert task_union_us(fragment) < 0.05 * busy  # a fragment of a step (2.1 %)
    out = tmp_path / "two_steps"
    out.mkdir()
    with (out / "kernel_details.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows + fragment)
    with (out / "step_trace_time.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
                    "Communication", "Free"])
        w.writerows([[s, busy, 0, 0, 0, 0] for s in (1, 2)])
    return out


def _finding(p, rule: str):
    (f,) = [f for f in pk.advise(p) if f.rule == rule]
    return f


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_chains_beside_a_measured_attention_finding_are_the_recorded_steps(tmp_path):
    folder = shared_sample(V1)
    two = pk.load(_with_a_fragment(folder, tmp_path), cache=False, progress=False)
    assert two.steps["tasks_recorded"].tolist() == [True, False]
    one = pk.load(folder, cache=False, progress=False)
    assert _finding(two, "attention_not_fused").measured  # the branch under test
    # the case differs: the whole profile's chains hold the fragment's
    hw, _why = pk.analysis.infer_hardware(two)
    whole, recorded = (pk.analysis.elementwise_chains(
        p, hw, min_chain=3, kernel_efficiency=0.7, without_attention=True,
        without_copies=True)["saving_us"].sum() for p in (two, recorded_profile(two)))
    assert whole > recorded
    got, alone = _finding(two, "elementwise_chains"), _finding(one, "elementwise_chains")
    # step 1 is compute_advice_v1 itself: its finding, over step 1 of 2
    assert got.ms_per_step == pytest.approx(alone.ms_per_step, rel=1e-9)
    assert got.evidence.split(" per step;")[0] == alone.evidence.split(" per step;")[0]
    assert got.evidence.endswith("counted over the steps whose device tasks were recorded "
                                 "in full: step 1 of 2")
