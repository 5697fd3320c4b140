"""No sentence perfkit writes counts with "(s)": counts take their own singular or plural
(``perfkit.format.counted``), as the project's grammar rule says (docs: "1 device",
"16 devices", never "rank(s)"). Read from the source's string literals (f-strings
included) with ``ast``, so that a new message cannot bring the form back."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "perfkit"
_PAREN_PLURAL = re.compile(r"[A-Za-z]\((?:s|es)\)")


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                    ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr)
                  and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings]


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_no_message_counts_with_a_parenthesised_plural() -> None:
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {text.strip()[:60]!r}"
             for path in sorted(PACKAGE.rglob("*.py"))
             for line, text in _literals(ast.parse(path.read_text(encoding="utf-8")))
             if _PAREN_PLURAL.search(text)]
    assert not found, "\n".join(found)
