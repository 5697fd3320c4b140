"""The answer key: ``instructor/key.json``, each student's check data, and the rule that
says whether an answer is right.

``instructor/key.json`` (:func:`read_key`) holds, per student, the settings their data
came from (:meth:`perfkit.lab.scenario.Setup.to_dict`: model, layout, faults with their
parameters, seeds) and, per question, the answer, its tolerance, the choices, the parts of
the settings it came from and how it was derived. Anyone can re-derive an answer from it.

Each student's folder holds their own part of it in ``.lab/check`` (:func:`read_check`),
so that the Check button works offline on the student's machine. It is compressed and
encoded, not encrypted: it keeps answers out of sight, not out of reach. Grading never
trusts it, nor the verdicts stored with the answers: :func:`perfkit.lab.grade` checks
every answer again against ``instructor/key.json``.
"""

from __future__ import annotations

import base64
import json
import math
import re
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import PerfkitError

__all__ = ["LabError", "KEY_FILE", "CHECK_FILE", "SHEET_FILE", "KEY_FORMAT",
           "is_right", "parse_number", "normalise", "write_json", "read_key", "write_check",
           "read_check", "read_sheet", "find_pack", "KEY_VERSION", "student_notebook",
           "NOTEBOOK_FILE", "LAB_ENV"]

#: The instructor's key, relative to the pack.
KEY_FILE = "instructor/key.json"
#: A student's check data, relative to their folder.
CHECK_FILE = ".lab/check"
#: A student's public sheet (the questions as they read them), relative to their folder.
SHEET_FILE = "lab.json"
#: Environment variable ``perfkit serve --lab`` passes the student folder in.
LAB_ENV = "PERFKIT_LAB"
#: A student's notebook, relative to their folder.
NOTEBOOK_FILE = "lab.ipynb"
#: ``format`` of key.json and of lab.json.
KEY_FORMAT = "perfkit lab pack"
#: Version of the files' layout.
KEY_VERSION = 1
_CHECK_HEADER = b"perfkit lab check data v1 (compressed, not encrypted)\n"


class LabError(PerfkitError):
    """A lab pack, a student folder or an answer cannot be used; the message says why."""


def normalise(value: Any) -> str:
    """A choice compared case- and space-insensitively."""
    return " ".join(str(value).split()).lower()


_NUMBER = re.compile(r"^[+-]?(\d[\d,_ ]*\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def parse_number(value: Any) -> float | None:
    """A number given as a number or as text (``"1,234.5"``, ``" 12.3 %"``); None if not."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(float(value)) else None
    if hasattr(value, "item"):
        return parse_number(value.item())
    if not isinstance(value, str):
        return None
    text = value.strip().rstrip("%").strip()
    if not _NUMBER.match(text):
        return None
    number = float(re.sub(r"[,_ ]", "", text))
    return number if math.isfinite(number) else None


def is_right(entry: Mapping[str, Any], value: Any) -> bool:
    """Whether ``value`` answers a key entry (``kind``, ``answer``, ``rel_tol``, ``abs_tol``).

    A number is right within ``math.isclose(value, answer, rel_tol, abs_tol)``; a choice
    when it equals the answer (case and spaces aside); several choices when the set given
    equals the set expected.
    """
    kind = entry["kind"]
    expected = entry["answer"]
    if value is None:
        return False
    if kind == "number":
        number = parse_number(value)
        return number is not None and math.isclose(
            number, float(expected), rel_tol=float(entry.get("rel_tol", 0.0)),
            abs_tol=float(entry.get("abs_tol", 0.0)))
    if kind == "choices":
        given = [value] if isinstance(value, str) else list(value) \
            if isinstance(value, Sequence | set | frozenset) else [value]
        want = [expected] if isinstance(expected, str) else list(expected)
        return {normalise(v) for v in given} == {normalise(v) for v in want}
    return normalise(value) == normalise(expected)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path: Path, data: Any) -> Path:
    """Write JSON (sorted keys, indented, numpy scalars as numbers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_plain(data), indent=1, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    return path


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LabError(f"{path}: no {what} here") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LabError(f"{path}: cannot be read as the {what} ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != KEY_FORMAT:
        raise LabError(f"{path}: not a perfkit lab {what} (no format {KEY_FORMAT!r})")
    if int(data.get("version", 0)) > KEY_VERSION:
        raise LabError(f"{path}: written by a newer perfkit (version {data.get('version')});"
                       f" this perfkit ({__version__}) reads version {KEY_VERSION}")
    return data


def read_key(pack: str | Path) -> dict[str, Any]:
    """The instructor's key of a pack (``DIR/instructor/key.json``)."""
    return _read_json(Path(pack) / KEY_FILE, "answer key")


def read_sheet(student_dir: str | Path) -> dict[str, Any]:
    """A student's sheet (``lab.json``: who they are and the questions they answer)."""
    return _read_json(Path(student_dir) / SHEET_FILE, "lab sheet")


def write_check(student_dir: Path, entries: Mapping[str, Any]) -> Path:
    """Write a student's check data (their answers, hints and explanations)."""
    path = student_dir / CHECK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(_plain(entries), ensure_ascii=False).encode("utf-8")
    path.write_bytes(_CHECK_HEADER + base64.b85encode(zlib.compress(payload, 9)) + b"\n")
    return path


def read_check(student_dir: str | Path) -> dict[str, Any]:
    """A student's check data, per question id."""
    path = Path(student_dir) / CHECK_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise LabError(f"{path}: missing; the folder is not a student folder of a perfkit "
                       "lab pack (perfkit lab make writes them)") from None
    if not raw.startswith(_CHECK_HEADER):
        raise LabError(f"{path}: not perfkit lab check data")
    try:
        data = json.loads(zlib.decompress(base64.b85decode(raw[len(_CHECK_HEADER):].strip())))
    except (ValueError, zlib.error) as exc:
        raise LabError(f"{path}: damaged ({exc})") from None
    return data


def find_pack(student_dir: str | Path) -> Path | None:
    """The pack a student folder belongs to (its parent, when it has the key), else None."""
    parent = Path(student_dir).resolve().parent
    return parent if (parent / KEY_FILE).is_file() else None


def student_notebook(student_dir: str | Path) -> Path:
    """The lab notebook of a student folder (``DIR/student-3/lab.ipynb``).

    Raises
    ------
    LabError
        The folder is not a student folder of a lab pack, or its notebook is missing.
    """
    folder = Path(student_dir).expanduser()
    if not folder.is_dir():
        raise LabError(f"{folder}: no such folder (give a student folder of a lab pack, "
                       "e.g. class/student-3)")
    read_sheet(folder)
    path = folder / NOTEBOOK_FILE
    if not path.is_file():
        raise LabError(f"{path}: the student's notebook is missing (perfkit lab make "
                       "writes it)")
    return path.resolve()
