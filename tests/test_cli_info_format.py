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
