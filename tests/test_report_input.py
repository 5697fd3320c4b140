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


@pytest.mark.parametrize(("name", "said"), [
    ("graph_0001.ir", "a MindSpore IR graph dump, not a profile: perfkit.load_ir(PATH) reads it"),
    ("job.yaml", "a config, not a profile: give it beside the profile"),
    ("worker_0.log", "a log, not a profile: give a training log beside the profile"),
    # a zipped profile folder (a walk: "unknown kind of file", no word of unzipping)
    ("profile.zip", "a zip archive: unzip it and give the folder"),
    ("profile.tar.gz", "a tar archive: unpack it and give the folder")])
def test_a_file_read_by_another_reader_is_named_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, said: str) -> None:
    """A walk: ``perfkit info graph.ir`` said "unknown kind of file"; files perfkit reads
    otherwise (an IR dump, a config, a log) are named with what reads them."""
    path = tmp_path / name
    path.write_text("anything\n")
    assert cli.main(["info", str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"perfkit: error: {path}: {said}")


def test_a_parameter_the_notebook_does_not_read_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--config`` or ``--ir`` given to a notebook without that parameter was injected
    and never read: the page looked as if it had used them."""
    monkeypatch.setattr(write_module, "execute_notebook", _no_kernel)
    config = tmp_path / "job.yaml"
    config.write_text("model: {}\n")
    out = tmp_path / "r.html"
    assert cli.main(["report", "sample:slow-rank", "--notebook", "03", "--config",
                     str(config), "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "03_operators.ipynb has no CONFIG parameter" in err and not out.exists()
    ir = Path(__file__).resolve().parents[1] / "data" / "ir" / "control.ir.gz"
    assert cli.main(["report", "sample:slow-rank", "--notebook", "04", "--ir", str(ir),
                     "-o", str(out), "--no-progress"]) == 2
    assert "has no IR_DUMP parameter" in capsys.readouterr().err
    assert cli.main(["report", "sample:slow-rank", "--notebook", "06", "--ir",
                     str(tmp_path / "none.ir"), "-o", str(out), "--no-progress"]) == 2
    assert "--ir: must be a MindSpore IR dump file" in capsys.readouterr().err


@pytest.mark.slow  # runs notebook 06: about 6 s
@pytest.mark.timeout(180)
def test_the_recompute_notebook_checks_the_dump_and_yaml_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--ir`` and ``--config``: notebook 06 checks that dump against the YAML's
    recompute_config and says so, instead of the bundled case presented as the user's."""
    import html
    import re

    root = Path(__file__).resolve().parents[1]
    ir = root / "data" / "ir" / "control.ir.gz"
    yaml_file = root / "tests" / "data" / "configs" / "llama2_13b_pp2_select.yaml"
    out = tmp_path / "r06.html"
    assert cli.main(["report", "sample:llama2-7b-tp2", "--notebook", "06", "--ir", str(ir),
                     "--config", str(yaml_file), "-o", str(out), "--no-progress"]) == 0
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", out.read_text())).split())
    assert (f"Checked: your IR dump control.ir.gz ({ir.parent}), against the "
            "recompute_config of llama2_13b_pp2_select.yaml.") in text
    assert "the bundled example silu_mul.ir" not in text
