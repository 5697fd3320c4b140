"""``rfc3987_syntax`` is imported on first use, and jsonschema's checks answer as before.

Each case runs in a fresh interpreter (the deferral happens once per process, before
Altair imports jsonschema). The answers are compared with those of an interpreter that
never imported perfkit, where jsonschema imports the real module itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

__all__: list[str] = []

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("rfc3987_syntax") is None,
                                reason="rfc3987_syntax is not installed here")

#: IRIs and non-IRIs for jsonschema's ``iri`` and ``iri-reference`` formats.
CASES = ["https://example.org/a/b?c=d#e", "http://例え.テスト/パス", "urn:isbn:0451450523",
         "relative/path", "//host/only", "http://[::1]:80/", "no scheme here", "http://a b/",
         "http://%zz/", "", "mailto:someone@example.com", "ftp://x/%20y"]

_CHECK = """
import json, sys
{before}
import jsonschema
loaded_before = "rfc3987_syntax.syntax_helpers" in sys.modules
checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
cases = json.loads(sys.argv[1])
answers = [[checker.conforms(c, "iri"), checker.conforms(c, "iri-reference")] for c in cases]
print(json.dumps({{"loaded_before": loaded_before, "answers": answers,
                  "loaded_after": "rfc3987_syntax.syntax_helpers" in sys.modules}}))
"""


def _run(before: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHECK.format(before=before), json.dumps(CASES)],
                         capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_charts_leave_the_parser_unbuilt_and_the_checks_unchanged() -> None:
    plain = _run("")
    deferred = _run("import perfkit.charts, perfkit.widgets")
    assert plain["loaded_before"], "without perfkit, jsonschema imports the parser at once"
    assert not deferred["loaded_before"], "perfkit's charts built the IRI parser on import"
    assert deferred["answers"] == plain["answers"]
    assert deferred["loaded_after"]
    # the cases are not all one answer: the comparison can fail
    flat = [a for pair in plain["answers"] for a in pair]
    assert True in flat and False in flat


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_real_module_replaces_the_stand_in_on_first_use() -> None:
    got = _run("import perfkit\nimport rfc3987_syntax\n"
               "stand_in = sys.modules['rfc3987_syntax']\n"
               "assert stand_in.RFC3987_SYNTAX_PARSER_TYPE == 'earley'\n"
               "assert sys.modules['rfc3987_syntax'] is not stand_in\n"
               "assert sys.modules['rfc3987_syntax'].syntax_parser is not None\n"
               "namespace = {}\n"
               "exec('from rfc3987_syntax import *', namespace)\n"
               "assert {'is_valid_syntax', 'parse', 'syntax_parser'} <= set(namespace)")
    assert got["loaded_before"]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_nothing_is_deferred_once_jsonschema_is_imported() -> None:
    got = _run("import jsonschema\nimport perfkit\n"
               "from perfkit._deferred_imports import defer_rfc3987_syntax\n"
               "assert not defer_rfc3987_syntax()")
    assert got["loaded_before"]


def test_a_module_that_fails_to_import_leaves_the_format_unchecked_as_before(
        tmp_path: Path) -> None:
    # an installed rfc3987_syntax whose import fails: jsonschema then leaves ``iri``
    # unchecked (it suppresses the ImportError); with the stand-in the answer is the same,
    # and the import is tried once, not on every check
    package = tmp_path / "rfc3987_syntax"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import builtins\nbuiltins.TRIES = getattr(builtins, 'TRIES', 0) + 1\n"
        "raise ImportError('broken on purpose')\n", encoding="utf-8")
    code = ("import builtins, json, sys\n{before}\nimport jsonschema\n"
            "checker = jsonschema.Draft202012Validator.FORMAT_CHECKER\n"
            "answers = [checker.conforms('no scheme here', 'iri') for _ in range(3)]\n"
            "print(json.dumps([answers, getattr(builtins, 'TRIES', 0)]))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    got = {}
    for name, before in (("plain", ""), ("deferred", "import perfkit")):
        out = subprocess.run([sys.executable, "-c", code.format(before=before)], env=env,
                             capture_output=True, text=True, check=True, timeout=120,
                             cwd=tmp_path)
        got[name] = json.loads(out.stdout)
    assert got["plain"] == [[True, True, True], 1]
    assert got["deferred"] == got["plain"]
