"""The transcript of ``perfkit info sample:slow-rank`` in docs/cli.md is what the command
prints (a walk found every figure of it stale: 22,881 tokens/s per device where the command
printed 22,452, a 358 ms step where the bundled steps tables hold 365 ms). Compared line by
line, up to the first finding's evidence (the rest is cut with "..."); the path line, which
is the reader's own, is left out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfkit import cli

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def _transcript(command: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(rf"```text\n\$ {re.escape(command)}\n(.*?)```", text, re.S)
    assert block, f"no transcript of {command} in {DOC.name}"
    return block.group(1).splitlines()


def test_the_info_transcript_is_what_info_prints(capsys: pytest.CaptureFixture[str]) -> None:
    shown = _transcript("perfkit info sample:slow-rank")
    assert cli.main(["info", "sample:slow-rank"]) == 0
    printed = capsys.readouterr().out.splitlines()
    cut = next(i for i, line in enumerate(shown) if line.strip().startswith("next:"))
    for i, (doc, out) in enumerate(zip(shown[:cut], printed[:cut], strict=True)):
        if doc.lstrip().startswith("path "):
            continue
        assert doc == out, f"docs/cli.md line {i + 1} of the transcript"
