"""Run a guided notebook on a profile and write a self-contained HTML report.

``perfkit report PATH -o report.html`` is :func:`write_report`: it reads the guided
notebook ``00_start_here.ipynb`` (or another one) that ships with perfkit
(:func:`perfkit.resources.notebook_dir`), inserts a cell tagged ``injected-parameters``
after the cell tagged ``parameters`` that sets ``PROFILE`` to the profile's absolute path
(the way papermill does it), executes the notebook with nbclient in a kernel of the
current Python interpreter, and writes the outputs as one HTML file:

* no code cells and no ``In [ ]`` prompts: the markdown cells (the explanations) and the
  outputs of the code cells (tables, inline SVG charts, printed text), in notebook order;
* self-contained: one inline stylesheet, no script and no link to a CDN or any other
  server; PNG and JPEG images become ``data:`` URIs; live widgets (progress bars) are left
  out, as they have no state in a static page;
* a title naming the profile, and a note with the perfkit version, the notebook and the
  time it was made;
* before the notebook's outputs, what perfkit noted while reading the profile
  (``meta.notes``: rows dropped, values set to NA, ranks not loaded, files not found),
  whichever notebook runs.

Nothing is written into the profile folder: the kernel runs in a temporary folder, and the
loaders keep their cache outside profile folders (:mod:`perfkit.io.cache`).
"""

from __future__ import annotations

import html
import math
import os
import re
import sys
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from .bundled_samples import is_sample_spec, resolve_sample
from .errors import PerfkitError
from .format import counted, plural
from .resources import NOTEBOOK_PACKAGE, resource_path

__all__ = ["ReportError", "NOTEBOOK_DIR", "DEFAULT_NOTEBOOK", "DEFAULT_TIMEOUT_S",
           "locate_notebook", "parameters_index", "inject_parameters", "notebook_client",
           "execute_notebook", "notebook_html", "write_report"]

#: The guided notebooks that ship with perfkit (``notebooks/`` of the repository, installed
#: as ``perfkit/_notebooks``), found with importlib.resources (:mod:`perfkit.resources`).
NOTEBOOK_DIR = resource_path(NOTEBOOK_PACKAGE)
#: The notebook ``perfkit report`` runs unless told otherwise.
DEFAULT_NOTEBOOK = "00_start_here"
#: Seconds one cell may run before the report gives up.
DEFAULT_TIMEOUT_S = 600

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_REMOTE = r"""\s*=\s*["']?\s*(?:https?:)?//"""
_REMOTE_SCRIPT = re.compile(r"<script\b[^>]*\bsrc" + _REMOTE + r"[^>]*>.*?</script\s*>",
                            re.IGNORECASE | re.DOTALL)
_REMOTE_TAG = re.compile(r"<(?:script|link|img|iframe|embed|source|audio|video)\b[^>]*\b"
                         r"(?:src|href)" + _REMOTE + r"[^>]*>", re.IGNORECASE)


class ReportError(PerfkitError):
    """The report cannot be made: missing notebook or profile, bad output path, failing cell."""


# --------------------------------------------------------------------------------------
# notebooks and parameters
# --------------------------------------------------------------------------------------

def locate_notebook(notebook: str | os.PathLike[str] = DEFAULT_NOTEBOOK) -> Path:
    """The notebook file for a name (``00_start_here``, ``00_start_here.ipynb``) or a path.

    Raises
    ------
    ReportError
        No such notebook; the message lists the guided notebooks available.
    """
    given = Path(notebook).expanduser()
    candidates = [given] if given.suffix == ".ipynb" else []
    if len(given.parts) == 1:
        stem = given.name[:-6] if given.name.endswith(".ipynb") else given.name
        candidates.append(NOTEBOOK_DIR / f"{stem}.ipynb")
    for path in candidates:
        if path.is_file():
            return path
    names = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb") if p.stem != "dashboard")
    known = (f"the guided notebooks in {NOTEBOOK_DIR} are: {', '.join(names)}" if names else
             f"no notebooks found in {NOTEBOOK_DIR} (this perfkit installation lacks its "
             "notebooks; reinstall it from its wheel, or with 'pip install -e .' in a "
             "checkout)")
    raise ReportError(f"notebook not found: {notebook}; {known}")


def parameters_index(nb: Any) -> int | None:
    """Index of the first cell tagged ``parameters``, or None."""
    for i, cell in enumerate(nb.cells):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return i
    return None


def inject_parameters(nb: Any, params: Mapping[str, Any] | None = None, /,
                      **more: Any) -> int:
    """Insert a papermill-style ``injected-parameters`` cell after the parameters cell.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        Changed in place.
    params : mapping, optional
        Names and values; ``**more`` adds to them. Each value is written with ``repr``, so
        it must be a literal (str, number, bool, None, list, tuple, dict of those).

    Returns
    -------
    int
        Index of the new cell.

    Raises
    ------
    ReportError
        The notebook has no cell tagged ``parameters``.
    """
    import nbformat

    values = {**(params or {}), **more}
    where = parameters_index(nb)
    if where is None:
        raise ReportError("the notebook has no cell tagged 'parameters' to override")
    for name in values:
        if not name.isidentifier():
            raise ReportError(f"parameter name {name!r} is not a Python identifier")
    source = "# Parameters injected by perfkit\n" + "".join(
        f"{name} = {value!r}\n" for name, value in values.items())
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(where + 1, cell)
    return where + 1


# --------------------------------------------------------------------------------------
# execution
# --------------------------------------------------------------------------------------

def notebook_client(nb: Any, cwd: str | os.PathLike[str], timeout: float = DEFAULT_TIMEOUT_S,
                    transport: str | None = None, **kwargs: Any) -> Any:
    """An ``nbclient.NotebookClient`` whose kernel is this Python interpreter.

    The kernel is ipykernel's own ``python3`` spec started with ``sys.executable``, not
    whatever kernel named ``python3`` is installed on the Jupyter path (a user-wide one may
    belong to another Python without perfkit). Kernel log messages below ERROR are off.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        The notebook to execute (in place).
    cwd : path
        Working folder of the kernel.
    timeout : float
        Seconds each cell may run.
    transport : {"tcp", "ipc"}, optional
        How the kernel's five channels connect; default ``"ipc"`` on POSIX systems and
        ``"tcp"`` elsewhere. ``"tcp"`` (Jupyter's default) picks five
        free localhost ports, releases them and lets the kernel bind them, so a process
        starting kernels beside this one can take a port in between ("Address already in
        use"). ``"ipc"`` (POSIX only) uses Unix sockets named uniquely in the temporary
        folder instead: nothing to race for. Jupyter removes them when the kernel stops.
    **kwargs
        Further ``NotebookClient`` options (hooks such as ``on_cell_start``).
    """
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient import NotebookClient

    if transport is None:
        transport = "ipc" if os.name == "posix" else "tcp"
    if transport not in ("tcp", "ipc"):
        raise ValueError(f"transport must be 'tcp' or 'ipc', not {transport!r}")
    channels: dict[str, str] = {"transport": transport}
    if transport == "ipc":  # an absolute, unique prefix: never files in the notebook's folder
        channels["ip"] = os.path.join(tempfile.gettempdir(), f"perfkit-kernel-{uuid.uuid4().hex}")

    class _Client(NotebookClient):
        def create_kernel_manager(self) -> Any:
            # an empty kernel_dirs leaves only ipykernel's native spec (sys.executable)
            self.km = self.kernel_manager_class(
                kernel_name="python3", config=self.config,
                kernel_spec_manager=KernelSpecManager(kernel_dirs=[]), **channels)
            return self.km

    return _Client(nb, timeout=max(1, math.ceil(timeout)), kernel_name="python3",
                   extra_arguments=["--log-level=ERROR"],
                   resources={"metadata": {"path": str(cwd)}}, **kwargs)


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(_ANSI.sub("", str(text)).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _cell_number(index: int, injected: int | None) -> str:
    """``"cell N"`` counting the cells as stored (1-based), or the injected cell."""
    if injected is not None and index == injected:
        return "the injected parameters cell"
    return f"cell {index + 1 - (1 if injected is not None and index > injected else 0)}"


def _cell_label(nb: Any, index: int, name: str, injected: int | None) -> str:
    number = _cell_number(index, injected)
    if injected is not None and index == injected:
        return f"{name}, {number}"
    first = next((ln.strip() for ln in nb.cells[index].source.splitlines() if ln.strip()), "")
    return f"{name}, {number} ({_one_line(first, 60)!r})"


def execute_notebook(nb: Any, *, cwd: str | os.PathLike[str] | None = None,
                     timeout: float = DEFAULT_TIMEOUT_S, progress: bool = False,
                     name: str = "notebook", injected: int | None = None) -> Any:
    """Execute ``nb`` in place, cell by cell, with an optional progress bar on stderr.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        The notebook (changed in place: outputs filled in).
    cwd : path, optional
        Working folder of the kernel (default: a temporary folder, removed afterwards).
    timeout : float
        Seconds each cell may run.
    progress : bool
        Show :class:`perfkit.io._progress.Progress` over the code cells.
    name : str
        How error messages name the notebook.
    injected : int, optional
        Index of the injected parameters cell (error messages count cells as stored).

    Returns
    -------
    nbformat.NotebookNode
        ``nb``.

    Raises
    ------
    ReportError
        A cell raised (message: notebook, cell and the error's last line, no traceback),
        ran past ``timeout``, or the kernel could not start or died.
    """
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    from .io._progress import Progress

    if timeout <= 0:
        raise ReportError(f"timeout: must be > 0 seconds (got {timeout})")
    total = sum(1 for c in nb.cells if c.cell_type == "code" and c.source.strip())
    state = {"index": None}

    with tempfile.TemporaryDirectory(prefix="perfkit-report-") as tmp, \
            Progress(total, desc=f"perfkit report: {name}", enabled=progress) as bar:
        def on_start(cell: Any, cell_index: int, **_: Any) -> None:
            if cell.cell_type != "code":  # nbclient calls this for markdown cells too
                return
            state["index"] = cell_index
            bar.update(0, note=f"running {_cell_number(cell_index, injected)}")

        def on_done(cell: Any, cell_index: int, **_: Any) -> None:
            bar.update(1, note=f"ran {_cell_number(cell_index, injected)}")

        bar.update(0, note="starting the kernel")

        client = notebook_client(nb, cwd=tmp if cwd is None else cwd, timeout=timeout,
                                 on_cell_start=on_start, on_cell_executed=on_done)
        # the kernel process's own output (its log, a C library's prints) goes to a file
        # read only when the kernel dies, not onto the terminal under the progress bar
        log_path = Path(tmp) / "kernel.log"
        try:
            try:
                with open(log_path, "wb") as log:
                    client.execute(stdout=log, stderr=log)
            except BaseException:
                # Ctrl-C or SIGTERM: nbclient's own handler has shut the kernel down and
                # what follows is a stray error of its cleanup; report an interruption
                if getattr(client, "_async_cleanup_kernel_future", None) is not None:
                    raise KeyboardInterrupt from None
                raise
        except CellExecutionError as exc:
            where = _where(nb, state["index"], name, injected)
            what = f"{exc.ename}: {exc.evalue}" if exc.ename else str(exc).strip().splitlines()[-1]
            raise ReportError(f"{where} failed: {_one_line(what)}") from None
        except CellTimeoutError:
            raise ReportError(f"{_where(nb, state['index'], name, injected)} did not finish "
                              f"within {timeout:g} s (raise --timeout)") from None
        except DeadKernelError:
            raise ReportError(f"{_where(nb, state['index'], name, injected)}: the kernel "
                              f"died{_last_line(log_path) or ' (out of memory?)'}") from None
        except PerfkitError:
            raise
        except Exception as exc:  # kernel cannot start: no ipykernel, broken environment
            if state["index"] is not None:
                raise
            raise ReportError(f"{name}: cannot start a Python kernel with {sys.executable} "
                              f"(is ipykernel installed?): {_one_line(exc)}"
                              f"{_last_line(log_path)}") from None
    return nb


def _last_line(log: Path) -> str:
    """``" (kernel log: <last line>)"``, or ``""`` when the log is empty or missing."""
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return f" (kernel log: {_one_line(lines[-1], 200)})" if lines else ""


def _where(nb: Any, index: int | None, name: str, injected: int | None) -> str:
    return name if index is None else _cell_label(nb, index, name, injected)


# --------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------

_STYLE = """\
body { font-family: -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: #1f2328; max-width: 1100px; margin: 2em auto; padding: 0 1.5em;
       line-height: 1.5; }
header { border-bottom: 1px solid #d0d7de; margin-bottom: 1.5em; }
header h1 { margin-bottom: 0.2em; font-size: 1.6em; }
header p.note { color: #57606a; font-size: 0.9em; margin-top: 0.2em; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
            font-size: 0.88em; }
pre.output { background: #f6f8fa; padding: 0.6em 0.8em; overflow-x: auto;
             white-space: pre-wrap; border-radius: 4px; }
pre.stderr { background: #fff5f5; }
.output { margin: 0.8em 0; overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.88em; margin: 0.4em 0; }
th, td { border: 1px solid #d0d7de; padding: 0.25em 0.6em; text-align: right; }
thead th { background: #f6f8fa; }
tbody tr:nth-child(even) { background: #fafbfc; }
img, svg { max-width: 100%; height: auto; }
a.anchor-link { display: none; }
footer { border-top: 1px solid #d0d7de; margin-top: 2em; color: #57606a; font-size: 0.85em; }
section.reading { background: #fff8e6; border: 1px solid #eed9a6; border-radius: 4px;
                  padding: 0.2em 1em; margin-bottom: 1.5em; font-size: 0.9em; }
section.reading h2 { font-size: 1.1em; margin: 0.5em 0 0.2em; }
"""

_HTML_MIMES = ("text/html", "image/svg+xml", "image/png", "image/jpeg", "text/markdown",
               "text/plain")
_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _markdown(text: str) -> str:
    try:
        from nbconvert.filters.markdown_mistune import markdown2html_mistune
    except ImportError:  # pragma: no cover - nbconvert comes with jupyterlab and voila
        return f"<pre>{html.escape(text)}</pre>"
    return markdown2html_mistune(text)


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _output_html(out: Any) -> str:
    kind = out.get("output_type")
    if kind == "stream":
        css = "output stderr" if out.get("name") == "stderr" else "output"
        return f'<pre class="{css}">{html.escape(_ANSI.sub("", _text(out.get("text", ""))))}</pre>'
    if kind == "error":
        what = f"{out.get('ename', '')}: {out.get('evalue', '')}"
        return f'<pre class="output stderr">{html.escape(_one_line(what))}</pre>'
    data = out.get("data", {})
    mime = next((m for m in _HTML_MIMES if m in data), None)
    if mime is None or (mime == "text/plain" and _WIDGET_MIME in data):
        return ""  # a live widget (e.g. a progress bar): nothing to show in a static page
    value = _text(data[mime])
    if mime in ("text/html", "image/svg+xml"):
        body = value
    elif mime in ("image/png", "image/jpeg"):
        body = f'<img alt="figure" src="data:{mime};base64,{"".join(value.split())}">'
    elif mime == "text/markdown":
        body = _markdown(value)
    else:
        body = f'<pre class="output">{html.escape(_ANSI.sub("", value))}</pre>'
    return f'<div class="output">{body}</div>'


def _strip_remote(markup: str) -> tuple[str, int]:
    """Remove scripts, stylesheets and media that would be fetched from another server."""
    markup, n1 = _REMOTE_SCRIPT.subn("", markup)
    markup, n2 = _REMOTE_TAG.subn("", markup)
    return markup, n1 + n2


def _reading_html(notes: Sequence[str]) -> str:
    """The section that lists what perfkit noted while reading the profile."""
    if not notes:
        return ""
    items = "".join(f"<li>{html.escape(str(n))}</li>" for n in notes)
    return ('<section class="reading">\n<h2>Read with notes</h2>\n'
            f"<p>While reading the profile perfkit noted {counted(len(notes), 'thing')}: what was "
            "repaired, left out (rows, values set to NA, ranks not loaded) or not found "
            "(<code>meta.notes</code> of <code>perfkit.load</code>). The figures below are "
            f"computed without what was left out.</p>\n<ul>{items}</ul>\n</section>\n")


def notebook_html(nb: Any, title: str, note: str = "",
                  reading_notes: Sequence[str] = ()) -> str:
    """An executed notebook as one self-contained HTML page, without its code.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        Executed notebook.
    title : str
        Page title and heading (plain text).
    note : str
        A line under the heading (plain text).
    reading_notes : sequence of str
        The notes of loading the profile (``meta.notes``), listed before the notebook's
        outputs (whatever the notebook shows of them).

    Returns
    -------
    str
        The page: markdown cells rendered, code-cell outputs (HTML, SVG, PNG/JPEG as
        ``data:`` URIs, text) in order, an inline stylesheet, no script or link to
        another server.
    """
    parts = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            parts.append(f'<section class="markdown">{_markdown(cell.source)}</section>')
        elif cell.cell_type == "code":
            shown = "".join(_output_html(o) for o in cell.get("outputs", []))
            if shown:
                parts.append(f'<section class="outputs">{shown}</section>')
    body, removed = _strip_remote(_reading_html(reading_notes) + "\n".join(parts))
    footer = ("" if not removed else
              f"<p>{counted(removed, 'reference')} to files on other servers "
              f"{plural(removed, 'was', 'were')} removed.</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<meta name=\"generator\" content=\"perfkit\">\n"
            f"<title>{html.escape(title)}</title>\n<style>\n{_STYLE}</style>\n</head>\n"
            f"<body>\n<header>\n<h1>{html.escape(title)}</h1>\n"
            f"<p class=\"note\">{html.escape(note)}</p>\n</header>\n<main>\n{body}\n</main>\n"
            f"<footer>{footer}<p>{html.escape(note)}</p></footer>\n</body>\n</html>\n")


# --------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------

def _inside(child: Path, parent: Path) -> bool:
    try:
        child.relative_to(parent)
        return True
    except ValueError:
        return False


def _check_output(out: Path, profile: Path) -> Path:
    target = out.expanduser().resolve()
    if target.is_dir():
        raise ReportError(f"output path is a folder: {out} (give a file name, e.g. "
                          f"{Path(out) / 'report.html'})")
    if not target.parent.is_dir():
        raise ReportError(f"output folder does not exist: {target.parent} (create it first)")
    if profile.is_dir() and _inside(target, profile):
        raise ReportError(f"output {out} lies inside the profile folder {profile}; perfkit "
                          "does not write into profile folders, choose another path")
    return target


def _load_notes(path: Path) -> list[str]:
    """``meta.notes`` of the profile at ``path``: repairs, ranks not loaded, missing files.

    Loaded here again (the notebook's kernel loaded it already, so this is a cache hit
    unless the cache is off), since the notebook may not show them.
    """
    from .io.detect import load

    try:
        return list(load(path, progress=False).meta.notes)
    except PerfkitError as exc:
        return [f"the profile could not be read again to list its notes: {exc}"]


def write_report(profile: str | os.PathLike[str], out: str | os.PathLike[str],
                 notebook: str | os.PathLike[str] = DEFAULT_NOTEBOOK, *,
                 timeout: float = DEFAULT_TIMEOUT_S, progress: bool = True,
                 params: Mapping[str, Any] | None = None) -> Path:
    """Run a guided notebook on ``profile`` and write its outputs as a self-contained HTML.

    Parameters
    ----------
    profile : path
        Profile folder or file (anything :func:`perfkit.load` reads), or
        ``"sample:NAME"`` (a bundled sample); injected as the notebook's ``PROFILE``
        parameter, as an absolute path.
    out : path
        HTML file to write (replaced if it exists). Its folder must exist and must not
        lie inside the profile folder.
    notebook : str or path
        A guided notebook name (default ``00_start_here``) or an ``.ipynb`` path.
    timeout : float
        Seconds each cell may run.
    progress : bool
        Progress bar over the cells on stderr.
    params : mapping, optional
        Further parameters to inject (e.g. ``{"N_FINDINGS": 10}``).

    Returns
    -------
    Path
        The absolute path of the HTML file.

    Raises
    ------
    ReportError
        Missing profile, notebook or output folder, a failing cell (named, with the
        error's last line), a timeout.
    ProfileError
        ``profile`` holds nothing perfkit recognises.
    """
    import nbformat

    from ._version import __version__
    from .io.detect import detect

    path = Path(resolve_sample(profile)).expanduser().resolve()  # "sample:NAME" too
    if not path.exists():
        raise ReportError(f"profile path not found: {profile}")
    target = _check_output(Path(out), path)
    detect(path)  # fails early, naming the path, on a folder with no profile in it
    source = locate_notebook(notebook)
    nb = nbformat.read(source, as_version=4)
    try:
        injected = inject_parameters(nb, {**(params or {}), "PROFILE": str(path)})
    except ReportError as exc:
        raise ReportError(f"{source.name}: {exc}") from None
    execute_notebook(nb, timeout=timeout, progress=progress, name=source.name,
                     injected=injected)
    stamp = datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z").strip()
    shown = f"the bundled {str(profile).strip()} ({path})" if is_sample_spec(profile) \
        else str(path)
    note = (f"Generated by perfkit {__version__} on {stamp} by running {source.name} on "
            f"{shown}. Code cells are hidden; every table and chart is the output of the "
            "notebook.")
    page = notebook_html(nb, title=f"perfkit report: {path}", note=note,
                         reading_notes=_load_notes(path))
    target.write_text(page, encoding="utf-8")
    return target
