"""The loaders' room: every module of ``perfkit/io`` sits in a format package or a named
plumbing package, each format is one registry line, and the rooms stay small and acyclic.

Read from the source tree, independently of the registry's own code: the packages found on
disk are compared with the two lists below, and every registered function is imported.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from perfkit.io import readers
from perfkit.io.detect import sources

IO = Path(__file__).resolve().parents[2] / "perfkit" / "io"

#: One package per family of files a user brings.
FORMAT_PACKAGES = {"kineto", "ascend", "cann", "mindspore", "chrome", "ir", "logs"}
#: Shared plumbing, named by its job.
PLUMBING_PACKAGES = {"detect", "engines", "preview", "cache", "canonical", "_common"}
#: The only modules directly in perfkit/io: the package and the reader's contract.
TOP_MODULES = {"__init__.py", "readers.py"}


def _modules() -> list[Path]:
    return sorted(p for p in IO.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_sits_in_a_format_or_plumbing_package() -> None:
    stray = []
    for path in _modules():
        rel = path.relative_to(IO)
        if len(rel.parts) == 1:
            if rel.name not in TOP_MODULES:
                stray.append(str(rel))
        elif rel.parts[0] not in FORMAT_PACKAGES | PLUMBING_PACKAGES:
            stray.append(str(rel))
    assert not stray, f"modules outside the named packages of perfkit/io: {stray}"


def test_every_named_package_is_a_package_on_disk() -> None:
    for name in FORMAT_PACKAGES | PLUMBING_PACKAGES:
        assert (IO / name / "__init__.py").is_file(), name
        doc = ast.get_docstring(ast.parse((IO / name / "__init__.py").read_text()))
        assert doc, f"perfkit/io/{name} says nothing of its job"


def test_no_module_of_io_is_over_500_lines() -> None:
    long = {str(p.relative_to(IO)): n for p in _modules()
            if (n := p.read_text(encoding="utf-8").count("\n")) >= 500}
    assert not long, long


def _imports(path: Path) -> set[str]:
    parts = list(path.relative_to(IO.parent.parent).with_suffix("").parts)
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            found.add(name)
            found.update(f"{name}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(IO.parent.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_cycle_between_modules_of_io() -> None:
    names = {_module_name(p): p for p in _modules()}
    graph = {m: {d for d in _imports(p) if d in names and d != m
                 and not m.startswith(d + ".")} for m, p in names.items()}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            assert state.get(d) != 1, " -> ".join(path + [m, d])
            if d not in state:
                visit(d, path + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_plumbing_names_formats_only_through_the_registry() -> None:
    # detection and the parse of a rank dispatch by the registry: no format package is
    # imported by the dispatching modules for its reader
    for rel in ("detect/sources.py", "preview/ranks.py"):
        text = (IO / rel).read_text()
        for fmt_pkg in ("cann", "mindspore"):
            assert f"from ..{fmt_pkg}" not in text, (rel, fmt_pkg)


@pytest.mark.parametrize("reader", readers.READERS, ids=lambda r: r.fmt)
def test_every_registered_function_exists(reader: readers.Reader) -> None:
    for role in ("read", "claim", "steps"):
        spec = getattr(reader, role)
        if spec is None:
            continue
        module, _, name = spec.partition(":")
        assert callable(getattr(importlib.import_module(f"perfkit.io.{module}"), name)), spec
    assert reader.function("read") is not None


def test_the_registry_is_the_formats_of_a_rank_source() -> None:
    codes = [r.fmt for r in readers.READERS]
    assert len(codes) == len(set(codes))
    assert set(sources.FORMATS) == set(codes) | {"unreadable", "not_a_trace"}
    for r in readers.READERS:  # the pages say each format in the registry's words
        assert sources.format_words(r.fmt) == r.words


def test_an_unknown_format_is_refused_by_name(tmp_path: Path) -> None:
    from perfkit.errors import ProfileError

    with pytest.raises(ProfileError, match="unknown source format 'nsys'"):
        sources.parse_source(sources.RankSource("nsys", str(tmp_path / "x.sqlite")))


def test_a_new_format_is_one_registry_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    # a reader registered at run time claims its files and reads them: nothing else changes
    import pandas as pd

    import perfkit as pk
    from perfkit.profile import ProfileMeta

    module = tmp_path / "toy_reader.py"
    module.write_text(
        "import pandas as pd\n"
        "from pathlib import Path\n"
        "from perfkit.profile import ProfileMeta\n"
        "from perfkit.io.detect.sources import RankSource\n"
        "def claim(path, head=None):\n"
        "    if Path(path).suffix == '.toy':\n"
        "        return [RankSource('toy', str(path), 0, (str(path),))]\n"
        "    return None\n"
        "def read_rank(source):\n"
        "    n = len(Path(source.path).read_text().split())\n"
        "    steps = pd.DataFrame({'step': range(n), 'computing_us': [1000.0] * n})\n"
        "    return ProfileMeta('toy', rank=0, path=source.path), {'steps': steps}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import sys
    import types

    shim = types.ModuleType("perfkit.io.toy_reader")  # what a folder perfkit/io/toy/ would be
    exec(module.read_text(), shim.__dict__)
    monkeypatch.setitem(sys.modules, "perfkit.io.toy_reader", shim)
    toy = readers.Reader("toy", "a toy format", read="toy_reader:read_rank",
                         claim="toy_reader:claim")
    monkeypatch.setattr(readers, "READERS", (toy, *readers.READERS))
    monkeypatch.setattr(readers, "_BY_FMT", {**readers._BY_FMT, "toy": toy})
    f = tmp_path / "run.toy"
    f.write_text("a b c")
    prof = pk.load(f, cache=False)
    assert isinstance(prof.meta, ProfileMeta) and prof.meta.source_format == "toy"
    assert len(prof.steps) == 3  # three words, three steps: read by the toy reader
    assert isinstance(prof.steps, pd.DataFrame)
