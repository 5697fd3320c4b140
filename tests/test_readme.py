"""The README's tour runs as written (from the repository root, on the bundled data)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_tour_runs(monkeypatch):
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## A short tour\n\n```python\n(.*?)```", text, re.S)
    assert code, "README has no tour"
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    exec(compile(code.group(1), "README tour", "exec"), namespace)
    assert namespace["job"].ranks  # the bundled profile loaded
    assert 0 < namespace["tps"] < 1e5
