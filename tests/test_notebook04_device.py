"""notebooks/04_communication says once that the profile names no device.

A new user's walk found the sentence "The profile does not name its device: ..." printed
twice on one page: by the set-up cell, and again by the cell of the bandwidth explorer,
which has no preset to start from. The explorer's cell now says what to do instead.

The notebook's cells run here as stored, on the bundled CPU MindSpore run (which names no
device: checked first).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import perfkit as pk

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "04_communication.ipynb"
CPU_MINDSPORE = ROOT / "data" / "mindspore-cpu-tiny-llama"


def test_a_profile_without_a_device_is_told_so_once_and_what_to_set(
        capsys: pytest.CaptureFixture) -> None:
    assert pk.infer_job(pk.load(str(CPU_MINDSPORE), progress=False)).hardware is None
    cells = ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"]]
    ns: dict[str, Any] = {"display": lambda *_: None}
    exec(cells[0], ns)  # the parameters, then the profile a reader would inject
    ns["PROFILE"] = str(CPU_MINDSPORE)
    (setup,) = [c for c in cells if "job_device(" in c]
    (explorer,) = [c for c in cells if "bandwidth_explorer(prof" in c]
    exec(setup, ns)
    exec(explorer, ns)
    said = capsys.readouterr().out
    assert said.count("does not name its device") == 1, said
    assert "No device to hold these links against: set HARDWARE" in said
