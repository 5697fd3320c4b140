"""``perfkit info`` writes numbers for people: units that fit, shares that add up, no
scientific notation."""

from __future__ import annotations

import re

import pytest

from perfkit.cli import profile_info_text
from perfkit.widgets import bundled_profile, bundled_profiles

SCI = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[eE][+-]?\d+(?![\w])")
US3 = re.compile(r"(?<![\d,.])[1-9][\d,]*\.\d{3}\s*(?:µs|us)\b|\d,\d{3}\.\d{3}\b")


@pytest.mark.slow
@pytest.mark.parametrize("name", bundled_profiles())
def test_info_has_no_scientific_notation_and_a_split_that_adds_up(name: str) -> None:
    text = profile_info_text(str(bundled_profile(name)), n_findings=3)
    assert not SCI.search(text), SCI.search(text).group(0)
    assert not US3.search(text), US3.search(text).group(0)
    match = re.search(r"where the step goes: (.*?) \(shares", text.replace("\n    ", " "),
                      re.S)
    if "measured step time: unknown" in text or "Steps: none" in text:
        return
    shares = [float(v) for v in re.findall(r"([\d.]+) %", match.group(1))]
    assert sum(shares) == pytest.approx(100.0, abs=0.2)  # each rounded to 0.1


def test_info_gives_the_throughput_of_a_job_without_hardware() -> None:
    # the Kineto CPU run: no accelerator, so no MFU, but its tokens/s are measured
    text = profile_info_text(str(bundled_profile("kineto-tiny-llama")), n_findings=0)
    step_s = float(re.search(r"measured step time: ([\d.]+) ms", text).group(1)) / 1e3
    tps = float(re.search(r"tokens/s per device\s+([\d,]+)", text).group(1).replace(",", ""))
    # 8 sequences x 64 tokens over 2 devices in the measured step
    assert tps == pytest.approx(8 * 64 / (step_s * 2), rel=5e-3)
    assert "other figures: not computed" in text and "CPU-only run" in text


def _stall_steps() -> tuple[float, float]:
    """data-stall's step_trace_time.csv, read with csv: the step shown (median over steps
    of the slowest rank's Computing + Communication(Not Overlapped) + Free + Preparing)
    and the advisor's basis (the mean over steps of the same), in ms."""
    import csv
    import statistics

    folder = bundled_profile("data-stall")
    steps: dict[int, list[tuple[float, float]]] = {}
    for f in folder.glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"):
        with open(f, newline="") as fh:
            for row in csv.DictReader(fh):
                step = sum(float(row[c]) for c in ("Computing",
                                                   "Communication(Not Overlapped)", "Free"))
                steps.setdefault(int(row["Step"]), []).append(
                    (step, step + float(row["Preparing"])))
    shown = statistics.median(max(w for _, w in rows) for rows in steps.values())
    basis = statistics.mean(max(w for _, w in rows) for rows in steps.values())
    return shown / 1e3, basis / 1e3


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_a_share_of_another_step_than_the_one_shown_names_its_basis() -> None:
    """Two of data-stall's three steps wait 120 ms for data: the step shown is the median
    (333 ms), the advisor's shares are of the mean (294 ms), and say so."""
    shown, basis = _stall_steps()
    assert abs(basis - shown) > 0.1 * shown
    text = profile_info_text(str(bundled_profile("data-stall")), n_findings=3)
    text = re.sub(r"\n +", " ", text)  # lines wrapped for the terminal, joined
    assert f"measured step time: {shown:.0f} ms" in text
    stakes = re.findall(r"at stake: ([\d.]+) ms per step \(([\d.]+) % of ([^;]*)\);", text)
    assert stakes
    for ms, pct, of in stakes:
        assert of == f"{basis:.0f} ms"
        assert float(pct) == pytest.approx(100 * float(ms) / basis, abs=0.15)
    assert f"(shares of {basis:.0f} ms, the mean over steps of the slowest rank's step " \
           f"and the preparing before it; the step time shown, {shown:.0f} ms, is the median " \
           "over the steps" in text
    # where the two agree (preparing of a fraction of a millisecond) the share is "of the
    # step", as the headline shows it
    other = profile_info_text(str(bundled_profile("slow-rank")), n_findings=3)
    assert "% of the step)" in other and "the preparing before it" not in other


def test_a_figure_names_the_job_s_warnings_once() -> None:
    """A walk found "see the job's warning above" ten times in one warning, once per job
    problem the guard had joined: a run of them is named once, with its count."""
    from perfkit.cli.profile_text import _said_above

    problems = ["the job has tp 4 (config) but the profile shows 2",
                "the job has pp 2 (config) but the profile shows 1", "a third"]
    warning = "MFU 742.7 % is above 100 % of the peak, which is impossible: " + \
        "; ".join(problems)
    assert _said_above(warning, problems) == (
        "MFU 742.7 % is above 100 % of the peak, which is impossible: see the job's 3 "
        "warnings above")
    assert _said_above(f"x: {problems[1]}", problems) == "x: see the job's warning above"
    assert _said_above("x: nothing of theirs", problems) == "x: nothing of theirs"
