"""The README's tour runs as written, from a folder outside the repository, on the bundled
samples (``pk.load("sample:...")`` finds them inside the package, whatever the folder)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_tour_runs(monkeypatch, tmp_path):
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## A short tour\n\n```python\n(.*?)```", text, re.S)
    assert code, "README has no tour"
    assert '"data/' not in code.group(1), "the tour must not need a checkout's data/ folder"
    monkeypatch.chdir(tmp_path)  # nothing of the repository around
    namespace: dict = {}
    exec(compile(code.group(1), "README tour", "exec"), namespace)
    assert namespace["job"].ranks == [0, 1, 2, 3]  # the bundled slow-rank sample: 4 ranks
    assert namespace["job"].meta.path.endswith("slow-rank")
    # tokens per second per device: 1024 sequences x 4096 tokens / 102.3 s / 16 devices
    assert abs(namespace["tps"] - 1024 * 4096 / 102.3 / 16) < 1e-6
    assert sorted(tmp_path.iterdir()) == []  # and nothing written into the working folder
