"""``perfkit report`` checks its input before any kernel starts (issue 64, point 7).

A profile that cannot be read used to start a kernel, run half the notebook and fail with
"00_start_here.ipynb, cell 5 ('prof = pk.load(PROFILE)') failed: ProfileError: ...". Now
it is read first, as ``perfkit info`` does, and the loader's message (naming the file)
is the error; an input error raised by a cell is reported without the cell's number.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from perfkit import cli

write_module = __import__("perfkit.report.write", fromlist=["execute_notebook"])


def _no_kernel(*_: Any, **__: Any) -> None:
    raise AssertionError("a kernel was started for a profile that cannot be read")


def test_a_truncated_trace_fails_before_any_kernel(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text('{"traceEvents": [')  # cut off after its first bytes
    monkeypatch.setattr(write_module, "execute_notebook", _no_kernel)
    out = tmp_path / "r.html"
    assert cli.main(["report", str(trace), "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"perfkit: error: {trace}: JSON is truncated"), err
    assert "cell" not in err and "ipynb" not in err
    assert not out.exists()


def test_a_bad_ascend_table_names_the_file_before_any_kernel(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "job" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    csv.parent.mkdir(parents=True)
    csv.write_text("a,b\n1,2\n")  # not the columns of kernel_details.csv
    monkeypatch.setattr(write_module, "execute_notebook", _no_kernel)
    assert cli.main(["report", str(tmp_path / "job"), "-o", str(tmp_path / "r.html"),
                     "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"perfkit: error: {csv}:"), err
    assert "cell" not in err


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_an_input_error_raised_by_a_cell_has_no_cell_number(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("PROFILE = None")
    params.metadata["tags"] = ["parameters"]
    csv = tmp_path / "x.csv"
    message = f"{csv}:3: a duration below zero"  # ProfileError's own layout
    nb.cells = [params, nbformat.v4.new_code_cell("import perfkit as pk"),
                nbformat.v4.new_code_cell(
                    f"raise pk.errors.ProfileError({json.dumps(str(csv))}, "
                    "'a duration below zero', line=3)")]
    broken = tmp_path / "input.ipynb"
    nbformat.write(nb, broken)
    assert cli.main(["report", "sample:slow-rank", "-o", str(tmp_path / "r.html"),
                     "--notebook", str(broken), "--no-progress"]) == 2
    assert capsys.readouterr().err == f"perfkit: error: {message}\n"
