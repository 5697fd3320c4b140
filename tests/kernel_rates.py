"""The H100 kernel measurements shipped in ``tests/data/kernel_rates_h100`` (two runs of
``tools/measure_kernel_rates.py``; PROVENANCE.md there)."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "kernel_rates_h100"


@cache
def runs() -> tuple[dict, dict]:
    """The two runs, as the script wrote them."""
    return tuple(json.loads(gzip.open(DATA / f"run{i}.json.gz").read()) for i in (1, 2))
