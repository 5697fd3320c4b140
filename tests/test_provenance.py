"""The repository commits only data it made: nothing under ``data/`` or ``tests/data/`` names
another project as its source, carries another project's licence, or is a copy of a real
profile of ``shared/samples``.

Other projects' profiles are read from ``../shared/samples`` (``tests/shared_samples.py``).
The one exception, :data:`TOOL_OUTPUTS`, is the output of a peer tool run here on a shared
sample: its README gives the command that made it and says where the input is.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from shared_samples import samples_dir

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = (ROOT / "data", ROOT / "tests" / "data")

#: Folders holding outputs of tools run here on shared inputs -> the tool. Their README must
#: hold the command (a ``sh`` block running the tool) and name the input in shared/samples.
TOOL_OUTPUTS = {ROOT / "tests" / "data" / "msprof_analyze_level1": "msprof-analyze"}

#: Phrases that say a file came from another project: a code host, a source repository
#: (``owner/name``), a commit of one, a copy.
FOREIGN_SOURCE = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"(?:github|gitee|gitlab)\.com/",
    r"\b(?:source|original|upstream)\s+(?:repo|repository|path)s?\b",
    r"\brepository\s+\**[\w.-]+/[\w.-]+",
    r"\b[\w.-]+/[\w.-]+[^.\n]{0,60}\bcommit\s+`?[0-9a-f]{7,40}",
    r"\bcopied\s+(?:verbatim\s+|unchanged\s+|byte for byte\s+)?(?:into perfkit\s+)?from\b",
    r"\bverbatim\s+copy\b"))
#: File names of licence texts (a licence file means someone else's work is kept here).
LICENCE_FILE = re.compile(r"^(?:LICEN[CS]E|COPYING|NOTICE)", re.IGNORECASE)
#: The text files that describe where data came from.
DESCRIBES = re.compile(r"^(?:README|PROVENANCE|MANIFEST|NOTICE)|\.md$", re.IGNORECASE)


def _files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in folder.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


def _allowed(path: Path) -> bool:
    return any(folder in path.parents for folder in TOOL_OUTPUTS)


def foreign_source(text: str) -> list[str]:
    """The passages of ``text`` that name another project as the source of data."""
    return [m.group(0) for pattern in FOREIGN_SOURCE for m in pattern.finditer(text)]


def test_no_file_names_another_project_as_its_source() -> None:
    found = {}
    for path in _files():
        if _allowed(path):
            continue
        rel = path.relative_to(ROOT).as_posix()
        if LICENCE_FILE.match(path.name):
            found[rel] = "another project's licence file"
        elif DESCRIBES.search(path.name):
            hits = foreign_source(path.read_text(encoding="utf-8", errors="replace"))
            if hits:
                found[rel] = hits
    assert not found, ("data/ and tests/data/ hold only what this project made; read other "
                       f"projects' profiles from ../shared/samples instead: {found}")


def test_the_detector_knows_a_copy_when_it_reads_one() -> None:
    """The README of the real sample that used to be bundled, and phrasings like it, are
    caught; the READMEs of data made here are not."""
    copied = ("**Where it came from.** Repository Ascend/msinsight (MindStudio Insight), commit "
              "`4e16fca1f118458ce8820e9fe9c3cd323db35707`, path `test/data/pytorch/text/`. "
              "Copied into perfkit by `python tools/make_data.py --real`.")
    assert len(foreign_source(copied)) >= 2
    for text in ("- Source repository: Ascend/msinsight, commit `4e16fca`",
                 "Verbatim copy of `samples/ascend/msinsight-cluster-output/`",
                 "Original paths: `tests/data/trace_filter/sampled_rank-0.json.gz`",
                 "see https://github.com/facebookresearch/HolisticTraceAnalysis",
                 "copied from the Ascend/msinsight repository's test data"):
        assert foreign_source(text), text
    own = [p for p in _files() if DESCRIBES.search(p.name) and not _allowed(p)]
    assert len(own) >= 10  # the check above reads every README of the data
    for text in ("recorded by the perfkit team on 2026-11-22 with tools/make_kineto_llama_gpu.py",
                 "Made in this repository by `tools/make_kineto_llama.py` with torch 2.13.0",
                 "written by `perfkit.simulate` through `tools/make_data.py` with seed 0"):
        assert not foreign_source(text), text
    assert LICENCE_FILE.match("LICENSE.Ascend-msinsight.MulanPSL2.txt")
    assert LICENCE_FILE.match("COPYING") and not LICENCE_FILE.match("kernel_details.csv")


@pytest.mark.parametrize("folder", sorted(TOOL_OUTPUTS), ids=lambda p: p.name)
def test_tool_outputs_say_how_they_were_made(folder: Path) -> None:
    text = (folder / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"```sh\n(.*?)```", text, re.S)
    tool = TOOL_OUTPUTS[folder]
    assert any(tool in c for c in commands), f"{folder}: no command running {tool}"
    assert "../shared/samples/" in text, f"{folder}: the input in shared/samples is not named"


@pytest.mark.shared_samples
def test_no_committed_file_is_a_copy_of_a_shared_sample() -> None:
    """Byte for byte: no file under data/ or tests/data/ equals one of shared/samples."""
    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    shared = samples_dir()
    assert shared is not None
    theirs = {}
    for p in shared.rglob("*"):
        if p.is_file():
            theirs.setdefault(p.stat().st_size, []).append(p)
    copies = {}
    for path in _files():
        if _allowed(path):  # a tool output keeps its input's licence text
            continue
        same_size = theirs.get(path.stat().st_size, [])
        if same_size and path.stat().st_size > 0:
            mine = digest(path)
            twins = [p for p in same_size if digest(p) == mine]
            if twins:
                copies[path.relative_to(ROOT).as_posix()] = twins[0].relative_to(shared)
    assert not copies, f"copies of other projects' files (read them from shared): {copies}"
