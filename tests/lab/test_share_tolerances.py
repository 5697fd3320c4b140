"""Exposed communication's and the pipeline bubble's answers against the wrong quantity
beside each.

``exposed_comm`` asks rank 0's Communication (Not Overlapped) less its Bubble, over its
step. Its old tolerance, ±5 % or 0.3 point, is a third of the answer on the bundled jobs
(about 0.9 %): on a job with data parallelism and a pipeline, Communication (Not
Overlapped) with the bubble left in lay within it wherever the bubble was under 0.3 point
of the step, and 0 was right wherever the answer was under 0.3 %. ``bubble`` asks
(pp − 1) / (v·m) of the ideal compute time; its ±0.5 point accepted the bubble over the
whole time, (pp − 1) / (v·m + pp − 1), on the advanced pack's second student (5.56 %
against 5.26 %). Both tolerances are now the student's own, from the rounding of what
the student reads; the key says whether the wrong quantity can be told apart. Every
figure here is read from rank 0's step_trace_time.csv with the csv module, or worked out
by hand from the pipeline's settings.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from raw_lab import asked, carried, shown, step_wall, worst_reading

from perfkit.lab.key import is_right
from perfkit.lab.make import _key_entry
from perfkit.lab.questions import QUESTIONS

pytestmark = pytest.mark.xdist_group("lab")


def test_the_exposed_comm_checker_rejects_the_wrong_shares_where_they_can_be_told_apart(
        intro_pack: Path, advanced_pack: Path) -> None:
    """Per student asked: the answer, Communication (Not Overlapped) and all the
    communication (the Communication column), each over the step, from the raw file; the
    tolerance by hand. A wrong share that differs from the answer is right only within
    the tolerance and the key says which; 0 is wrong; a student who reads the table and
    answers to one decimal is right. The old ±5 %/0.3 point is not the tolerance."""
    seen = 0
    for pack, student, a, row in asked((intro_pack, advanced_pack), "exposed_comm"):
        seen += 1
        cno = row["Communication(Not Overlapped)"]
        wall = step_wall(row)
        exposed = max(cno - row["Bubble"], 0.0)
        pct = 100 * exposed / wall
        tol = worst_reading(exposed, wall) + 0.05
        assert math.isclose(a["answer"], pct, rel_tol=1e-9)
        assert a["rel_tol"] == 0 and math.isclose(a["abs_tol"], tol, rel_tol=1e-9), \
            (student, a["rel_tol"], a["abs_tol"], tol)
        wrongs = {"not_overlapped_pct": cno, "communication_pct": row["Communication"]}
        apart = True
        for fact, us in wrongs.items():
            share = 100 * us / wall
            if abs(us - exposed) <= 1e-3:  # the same figure: not a wrong answer here
                continue
            told = abs(share - pct) > tol
            apart &= told
            print(f"{pack.name} {student}: exposed {pct:.4f} %, {fact} {share:.4f} %, "
                  f"tolerance ±{tol:.3f}: {'told apart' if told else 'not told apart'}")
            assert is_right(a, share) is not told, (student, fact, pct, share, tol)
        for fact, us in wrongs.items():
            assert math.isclose(a["facts"][fact], 100 * us / wall, rel_tol=1e-9), fact
        assert a["facts"]["told_apart"] is apart
        assert not is_right(a, 0)
        read = round(100 * shown(exposed) / shown(wall), 1)
        assert is_right(a, read), (student, read, pct, tol)
        for kept in carried(pack, student, "exposed_comm"):
            assert math.isclose(kept["abs_tol"], tol, rel_tol=1e-9)
            assert kept["rel_tol"] == 0
    assert seen >= 3


def _exposed_entry(computing: float, exposed: float, bubble: float, overlapped: float,
                   free: float, preparing: float) -> tuple[dict, float]:
    """exposed_comm's key entry for a made-up rank 0 (µs) and its step, by hand."""
    cno = exposed + bubble
    steps = pd.DataFrame({"rank": [0], "step": [1], "computing_us": [computing],
                          "comm_not_overlapped_us": [cno], "bubble_us": [bubble],
                          "overlapped_us": [overlapped], "free_us": [free],
                          "preparing_us": [preparing], "step_us": [computing + cno + free]})
    q = QUESTIONS["exposed_comm"]
    sol = q.solve(SimpleNamespace(job_steps=steps))  # type: ignore[arg-type]
    return _key_entry(q, sol, None, {"job": {}}), computing + cno + free + preparing  # type: ignore[arg-type]


def test_a_data_parallel_pipeline_rejects_not_overlapped_with_the_bubble_left_in() -> None:
    """A made-up stage of a dp × pp job: 4 ms of exposed communication and a 0.8 ms bubble
    in a 400 ms step. The answer is 1.00 %, Communication (Not Overlapped) 1.20 %: the old
    ±0.3 point marked 1.2 right; now it is wrong, and so is all the communication (6.2 %),
    while the answer read from the table to one decimal is right."""
    exposed, bubble, overlapped = 4_000.0, 800.0, 20_000.0
    entry, wall = _exposed_entry(390_000.0, exposed, bubble, overlapped, 200.0, 5_000.0)
    pct, cno_pct = 100 * exposed / wall, 100 * (exposed + bubble) / wall
    assert math.isclose(entry["answer"], pct, rel_tol=1e-12)
    assert 0.15 < cno_pct - pct < 0.3  # inside the old tolerance
    assert not is_right(entry, cno_pct) and not is_right(entry, round(cno_pct, 1))
    assert not is_right(entry, 100 * (exposed + bubble + overlapped) / wall)
    assert is_right(entry, round(100 * shown(exposed / 1e3) / shown(wall / 1e3), 1))
    assert entry["facts"]["told_apart"] is True
    assert "not mark it wrong" not in entry["derivation"]


def test_a_small_exposed_share_no_longer_takes_0() -> None:
    """0.8 ms exposed in a 400 ms step is 0.2 %: the old 0.3 point took 0 as right, as if
    nothing were exposed; now 0 is wrong and 0.2 right."""
    entry, wall = _exposed_entry(395_000.0, 800.0, 0.0, 10_000.0, 200.0, 4_000.0)
    assert math.isclose(entry["answer"], 100 * 800 / wall, rel_tol=1e-12)
    assert not is_right(entry, 0) and is_right(entry, round(100 * 800 / wall, 1))


def test_the_bubble_checker_rejects_the_bubble_over_the_whole_time(
        intro_pack: Path, advanced_pack: Path) -> None:
    """Per student, by hand from the pipeline's settings: (pp − 1) / (v·m) and the likely
    wrong (pp − 1) / (v·m + pp − 1). The wrong one is right only within 0.05 point (an
    answer to one decimal, the figures being exact) and the key says which; the answer to
    one decimal is right. On the advanced pack's second student (pp 2, m 6, v 3: 5.556 %
    against 5.263 %) the old ±0.5 point accepted the wrong one."""
    apart_seen = 0
    for pack in (intro_pack, advanced_pack):
        key = json.loads((pack / "instructor" / "key.json").read_text())
        for student, entry in key["entries"].items():
            a = entry["answers"]["bubble"]
            p = entry["settings"]["pipeline"]
            pp, slots = p["pp"], p["vpp"] * p["num_micro_batches"]
            pct, of_all = 100 * (pp - 1) / slots, 100 * (pp - 1) / (slots + pp - 1)
            apart = abs(of_all - pct) > 0.05
            apart_seen += apart
            print(f"{pack.name} {student}: bubble {pct:.4f} %, over the whole time "
                  f"{of_all:.4f} %: {'told apart' if apart else 'not told apart'}")
            assert math.isclose(a["answer"], pct, rel_tol=1e-12)
            assert a["rel_tol"] == 0 and math.isclose(a["abs_tol"], 0.05, rel_tol=1e-6), \
                (student, a["rel_tol"], a["abs_tol"])
            assert is_right(a, of_all) is not apart, (student, pct, of_all)
            assert a["facts"]["told_apart"] is apart
            assert math.isclose(a["facts"]["of_all_time_pct"], of_all, rel_tol=1e-12)
            assert is_right(a, round(pct, 1)) and not is_right(a, pct + 0.06)
            for kept in carried(pack, student, "bubble"):
                assert math.isclose(kept["abs_tol"], 0.05, rel_tol=1e-6)
    assert apart_seen >= 1
