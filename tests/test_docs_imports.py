"""Every ``from perfkit... import ...`` in the docs' Python blocks imports.

A walk found ``from perfkit.io import tables_first`` in docs/loading.md, which fails: the
module is ``perfkit.io.preview.tables_first``. Each one-line import of a ``python`` block
of docs/*.md is run here as written."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
_IMPORT = re.compile(r"^\s*from (perfkit[\w.]*) import ([\w, ]+?)\s*(?:#.*)?$", re.M)


def _imports() -> list[tuple[str, str, str]]:
    out = []
    for doc in sorted(DOCS.glob("*.md")):
        for block in _BLOCK.findall(doc.read_text(encoding="utf-8")):
            for module, names in _IMPORT.findall(block):
                for name in names.split(","):
                    out.append((doc.name, module, name.strip().split(" as ")[0]))
    return sorted(set(out))


IMPORTS = _imports()


def test_the_docs_have_imports_to_check() -> None:
    assert len(IMPORTS) >= 15
    assert ("loading.md", "perfkit.io.preview", "tables_first") in IMPORTS


@pytest.mark.parametrize(("doc", "module", "name"), IMPORTS)
def test_each_import_of_the_docs_works(doc: str, module: str, name: str) -> None:
    mod = importlib.import_module(module)
    if not hasattr(mod, name):  # a submodule, imported by name
        importlib.import_module(f"{module}.{name}")
