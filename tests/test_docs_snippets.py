"""The Python examples of docs/calculators.md print what the page shows.

Each ```python block followed by a ```text block is run as it stands (a fresh namespace,
its printed output captured) and its output compared with the text block, line by line
with trailing spaces ignored. A page that shows output the code no longer prints teaches
the wrong number (a new user found two: the pipeline message and an assumptions line).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "calculators.md"
_PAIR = re.compile(r"```python\n(.*?)```\s*\n```text\n(.*?)```", re.DOTALL)


def _pairs() -> list[tuple[int, str, str]]:
    text = DOC.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2))
            for m in _PAIR.finditer(text)]


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip().splitlines()]


PAIRS = _pairs()


def test_the_page_has_its_examples() -> None:
    assert len(PAIRS) >= 30  # 40 when this test was written


@pytest.mark.parametrize(("line", "code", "shown"), PAIRS, ids=[f"line{p[0]}" for p in PAIRS])
def test_an_example_prints_what_the_page_shows(line: int, code: str, shown: str) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{DOC.name}:{line}", "exec"), {"__name__": "__doc_example__"})
    assert _lines(out.getvalue()) == _lines(shown), f"docs/calculators.md line {line}"
