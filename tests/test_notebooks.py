"""The guided notebooks run top to bottom, as stored and on profiles of every kind.

Each notebook in ``notebooks/`` (the Voila dashboard has its own tests) is executed with
nbclient: as stored (its default is a bundled Ascend profile: a simulated torch_npu
export), and on the three other kinds of profile perfkit reads (issue 29.2) — a GPU
Kineto trace (H100), a CPU Kineto trace (the bundled 2-rank gloo DDP run) and a MindSpore
CPU profile (the bundled tiny Llama) — with its parameters overridden the way papermill
does it: a cell tagged ``injected-parameters`` inserted right after the cell tagged
``parameters``, pointing ``PROFILE`` (and every other profile parameter) at the profile.
A section that needs a field the profile does not give (a CPU run names no hardware)
says so and is skipped: a run must finish in under 60 s without an error output. Stored
notebooks must have no outputs and a parameters cell first.

Each notebook runs as stored in a fresh kernel, as a reader first opens it (its time
includes the kernel's start and the first cell's imports); its runs on the other kinds of
profile, which test its code on those profiles, share one kernel per test process,
cleared between notebooks (``tests/notebook_kernel.py``): a fresh kernel for each would
cost about 4 s of CPU more, 33 times.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from notebook_kernel import WarmKernel

from perfkit import report

__all__: list[str] = []

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
DATA = ROOT / "data"
TIME_LIMIT_S = 60.0
ALL_NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
GUIDED = [p for p in ALL_NOTEBOOKS if p.name != "dashboard.ipynb"]
CDN = ("cdn.jsdelivr", "unpkg.com", "cdnjs")

#: The kinds of profile every notebook runs on besides its bundled Ascend default.
KINDS: dict[str, str] = {
    "gpu-kineto": str(ROOT / "tests" / "data" / "kineto_llama_h100"),
    "cpu-kineto": str(DATA / "kineto-tiny-llama"),
    "mindspore-cpu": str(DATA / "mindspore-cpu-tiny-llama"),
}
#: Parameters besides the profiles that a notebook needs to run on another profile (the
#: job of each profile is read from it: pk.infer_job).
SETTINGS: dict[str, dict[str, Any]] = {
    "00_start_here": {"N_FINDINGS": 3},
    "02_parallel_strategy": {"MODEL": "llama2-7b", "NUM_DEVICES": 8,
                             "GLOBAL_BATCH_SIZE": 256},
    "09_exercises": {"PP": 2, "MICRO_BATCHES": 4},
}
#: The parameters that name a profile: every one points at the profile of the kind.
PROFILE_PARAMETERS = ("PROFILE", "TUNED_PROFILE", "BASELINE")


def kind_parameters(path: Path, profile: str) -> dict[str, Any]:
    """The injected parameters that run ``path`` on ``profile``."""
    default = _read(path).cells[0].source
    values = {name: profile for name in PROFILE_PARAMETERS
              if re.search(rf"^{name}\s*=", default, flags=re.M)}
    return {**values, **SETTINGS.get(path.stem, {})}


#: An MFU or HFU cell of a table (a DataFrame or the metrics panel), with its value.
_UTILISATION = re.compile(r"(?:MFU|HFU)</td>\s*<td[^>]*>\s*([0-9.,]+)\s?%([^<]*)<")
#: A number in scientific notation, and a microsecond figure with three decimals, in the
#: text a reader sees (HTML tables and plain text; SVG charts and widget state left out).
_SCI = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[eE][+-]?\d+(?![\w])")
_US3 = re.compile(r"(?<![\d,.])[1-9][\d,]*\.\d{3}\s*(?:µs|us)\b|\d,\d{3}\.\d{3}\b")


def _seen_text(out: Any) -> str:
    """The text of an output as a reader sees it: HTML without tags, styles and charts (the
    static snapshot of a widget included: ``perfkit report`` shows it), or the plain text
    when there is neither HTML nor a widget."""
    data = out.get("data", {}) if out.output_type != "stream" else {}
    if out.output_type == "stream":
        return out.get("text", "")
    markup = data.get("text/html")
    if not markup and ("application/vnd.jupyter.widget-view+json" in data
                       or "image/svg+xml" in data):
        return ""
    if markup:
        markup = re.sub(r"<style.*?</style>|<svg.*?</svg>", " ", markup, flags=re.S)
        markup = re.sub(r"</t[hd]>", " | ", markup)  # table cells are not one sentence
        return re.sub(r"<[^>]+>", " ", markup)
    return data.get("text/plain", "")


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def inject_parameters(nb: nbformat.NotebookNode, values: dict[str, Any]) -> None:
    """Insert a papermill-style ``injected-parameters`` cell after the parameters cell.

    The same helper ``perfkit report`` uses (:func:`perfkit.report.inject_parameters`).
    """
    report.inject_parameters(nb, values)


def execute(path: Path, values: dict[str, Any] | None = None,
            kernel: WarmKernel | None = None) -> tuple[Any, float]:
    """Run a notebook in its folder; returns the executed notebook and the seconds taken.

    The kernel is this interpreter's (:func:`perfkit.report.notebook_client`), as for
    ``perfkit report``: a fresh one, or ``kernel`` (already started, cleared first);
    nbclient's own errors (with the cell's traceback) propagate.
    """
    nb = _read(path)
    if values:
        inject_parameters(nb, values)
    start = time.perf_counter()
    if kernel is not None:
        kernel.execute(nb, cwd=path.parent, timeout=int(TIME_LIMIT_S * 2))
    else:
        client = report.notebook_client(nb, cwd=path.parent, timeout=int(TIME_LIMIT_S * 2),
                                       transport="ipc")  # no port race between test workers
        client.execute()
    return nb, time.perf_counter() - start


@pytest.fixture(scope="session")
def warm_kernel() -> Iterator[WarmKernel]:
    """One kernel for this test process's runs of the notebooks on other profiles."""
    kernel = WarmKernel()
    try:
        yield kernel
    finally:
        kernel.close()


def _check_outputs(nb: nbformat.NotebookNode, name: str, grammar: Any = None) -> None:
    shown = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            assert out.output_type != "error", f"{name}: {out.ename}: {out.evalue}"
            text = out.get("text", "") if out.output_type == "stream" else str(out.get("data"))
            assert "Traceback" not in text, f"{name}: a traceback was printed: {text[:500]}"
            assert not any(c in text for c in CDN), f"{name}: output refers to a CDN"
            seen = _seen_text(out)
            assert not _SCI.search(seen), f"{name}: scientific notation {_SCI.search(seen)[0]}"
            assert not _US3.search(seen), f"{name}: three decimals of µs {_US3.search(seen)[0]}"
            if grammar is not None:
                assert not grammar(seen), f"{name}: {grammar(seen)}"
            for value, rest in _UTILISATION.findall(text):
                # an impossible utilisation is never shown as a plain number
                assert float(value.replace(",", "")) <= 100.0 or "not plausible" in rest, \
                    f"{name}: MFU/HFU {value} %"
            shown += out.output_type in ("execute_result", "display_data")
    assert shown > 0, f"{name}: nothing was displayed"


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def test_guided_notebooks_are_there() -> None:
    names = {p.stem for p in GUIDED}
    assert {"00_start_here", "01_metrics", "02_parallel_strategy", "03_operators",
            "04_communication", "05_memory", "06_recompute", "07_cluster",
            "08_case_llama2_13b", "09_exercises", "10_tuning_journal"} <= names


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=_ids(ALL_NOTEBOOKS))
def test_stored_without_outputs_and_parameters_first(path: Path) -> None:
    nb = _read(path)
    nbformat.validate(nb)
    first = nb.cells[0]
    assert first.cell_type == "code"
    assert "parameters" in first.metadata.get("tags", []), "first cell must be 'parameters'"
    assert "PROFILE" in first.source
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name} is stored with outputs"
            assert cell.execution_count is None, f"{path.name} is stored with counts"
    text = path.read_text(encoding="utf-8")
    assert not any(c in text for c in CDN)


@pytest.mark.parametrize("path", GUIDED, ids=_ids(GUIDED))
def test_notebook_imports_perfkit_only(path: Path) -> None:
    for cell in _read(path).cells:
        if cell.cell_type != "code":
            continue
        for line in cell.source.splitlines():
            words = line.split()
            if words[:1] in (["import"], ["from"]):
                assert words[1].split(".")[0] == "perfkit", f"{path.name}: {line}"


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.parametrize("path", GUIDED, ids=_ids(GUIDED))
def test_notebook_runs_on_bundled_data(path: Path) -> None:
    nb, seconds = execute(path)
    _check_outputs(nb, path.name)
    assert seconds < TIME_LIMIT_S, f"{path.name} took {seconds:.1f} s"


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("path", GUIDED, ids=_ids(GUIDED))
def test_notebook_runs_on_every_kind(path: Path, kind: str, grammar: Any,
                                    warm_kernel: WarmKernel) -> None:
    values = kind_parameters(path, KINDS[kind])
    default = _read(path).cells[0].source
    assert "PROFILE" in values and repr(values["PROFILE"]) not in default
    nb, seconds = execute(path, values, kernel=warm_kernel)
    _check_outputs(nb, f"{path.name} on {kind}", grammar)
    injected = nb.cells[1]
    assert "injected-parameters" in injected.metadata["tags"]
    assert seconds < TIME_LIMIT_S, f"{path.name} on {kind} took {seconds:.1f} s"


@pytest.mark.notebooks
def test_injection_overrides_the_default(tmp_path: Path, warm_kernel: WarmKernel) -> None:
    nb = nbformat.v4.new_notebook()
    first = nbformat.v4.new_code_cell("PROFILE = 'default'")
    first.metadata["tags"] = ["parameters"]
    nb.cells = [first, nbformat.v4.new_code_cell("print(PROFILE)")]
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    done, _ = execute(path, {"PROFILE": "other"}, kernel=warm_kernel)
    assert done.cells[-1].outputs[0]["text"].strip() == "other"


@pytest.mark.notebooks
def test_the_shared_kernel_forgets_the_previous_notebook(tmp_path: Path,
                                                        warm_kernel: WarmKernel) -> None:
    """A notebook run in the shared kernel sees none of the names the one before defined
    and runs in its own folder, as in a fresh kernel."""
    first, second = tmp_path / "a", tmp_path / "b"
    for folder, source in ((first, "PROFILE = 'left over'\nimport os\nprint(os.getcwd())"),
                           (second, "import os\nprint('PROFILE' in dir(), os.getcwd())")):
        folder.mkdir()
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]),
                       folder / "probe.ipynb")
    done, _ = execute(first / "probe.ipynb", kernel=warm_kernel)
    assert done.cells[0].outputs[0]["text"].strip() == str(first)
    done, _ = execute(second / "probe.ipynb", kernel=warm_kernel)
    assert done.cells[0].outputs[0]["text"].strip() == f"False {second}"


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
@pytest.mark.notebooks
def test_the_recompute_notebook_predicts_with_the_closing_asked(warm_kernel: WarmKernel
                                                                ) -> None:
    """``CLOSING = "kernels"`` (first cell) reaches the calibration: the notebook's fit is
    closed by kernel kind and pass, and its full-recompute row is the one the dashboard's
    functions give with that closing (``fit_job``, ``recompute_modes``, called here)."""
    import perfkit as pk
    from perfkit.plan.calibrate import FORWARD_CLOSING
    from perfkit.widgets.prediction import fit_job, recompute_modes

    path = NOTEBOOK_DIR / "06_recompute.ipynb"
    trace = ROOT / "tests" / "data" / "kineto_llama_layouts_h100" / "a.pt.trace.json.gz"
    nb = _read(path)
    inject_parameters(nb, {**kind_parameters(path, str(trace)), "CLOSING": "kernels"})
    nb.cells.append(nbformat.v4.new_code_cell(
        "print(sorted(t for t, _v, _h in fit.calibration.terms))\n"
        "print(repr(float(tradeoff.set_index('recompute').loc['full', 'compute_s'])))"))
    warm_kernel.execute(nb, cwd=path.parent, timeout=int(TIME_LIMIT_S * 2))
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs).strip()
    assert FORWARD_CLOSING in text, text
    profile = pk.load(trace, cache=False)
    job = pk.infer_job(profile)
    direct = recompute_modes(fit_job(profile, job, "kernels"), job)
    assert float(text.splitlines()[-1]) == pytest.approx(
        float(direct.set_index("recompute").loc["full", "compute_s"]), rel=1e-9)
