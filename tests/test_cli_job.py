"""``perfkit info``: the job read from the profile, and no impossible MFU or HFU."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfkit.cli import main
from perfkit.widgets import bundled_profile, bundled_profiles

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "tests" / "data" / "configs" / "llama2_13b_full.yaml"
_UTIL = re.compile(r"^\s*(MFU|HFU)\s+([0-9.,]+)\s?%(.*)$", re.MULTILINE)


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    """perfkit's cache in a folder of the module's own: each profile is parsed by its first
    test and read from the cache by the later ones (three read the dp16 job)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PERFKIT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    mp.delenv("PERFKIT_CACHE", raising=False)
    yield
    mp.undo()


def _info(capsys, *args: str) -> str:
    assert main(["info", *args]) == 0
    return capsys.readouterr().out


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize("name", bundled_profiles())
def test_info_shows_the_job_and_no_impossible_utilisation(capsys, name: str) -> None:
    out = _info(capsys, str(bundled_profile(name)), "--findings", "0")
    assert "The job (perfkit.infer_job" in out
    for what, value, rest in _UTIL.findall(out):
        assert float(value) <= 100.0, (name, what, value, rest)
    if "figures: not computed" not in out:
        assert _UTIL.search(out), name  # a complete job shows its MFU


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_info_with_a_config_flags_what_disagrees(capsys) -> None:
    out = _info(capsys, str(bundled_profile("simulated/llama2-13b-baseline-dp16")),
                "--findings", "0", "--config", str(CONFIG))
    assert "[config]" in out
    assert "the job has 40 layers (config) but the profile shows 8" in out
    flagged = _UTIL.findall(out)
    assert flagged and all("not plausible" in rest for _, value, rest in flagged
                           if float(value) > 100)


def test_info_with_a_missing_config_is_one_line(capsys) -> None:
    code = main(["info", str(bundled_profile("simulated/slow-rank")), "--config",
                 "/no/such.yaml"])
    err = capsys.readouterr().err
    assert code == 2 and "config not found" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_report_flags_the_mfu_of_a_config_that_disagrees(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    profile = bundled_profile("simulated/llama2-13b-baseline-dp16")
    assert main(["report", str(profile), "-o", str(out), "--no-progress",
                 "--config", str(CONFIG)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "The job" in page and "config" in page
    cells = re.findall(r"(?:MFU|HFU)</td>\s*<td[^>]*>\s*([0-9.,]+)\s?%([^<]*)<", page)
    assert cells
    for value, rest in cells:
        assert float(value.replace(",", "")) <= 100.0 or "not plausible" in rest
    assert any(float(v.replace(",", "")) > 100.0 for v, _ in cells)  # 40 layers in 8's time
    assert "the job has 40 layers (config) but the profile shows 8" in page
