"""A notebook executed in a kernel of this Python interpreter (:func:`execute_notebook`).

:func:`notebook_client` starts ipykernel's own spec with ``sys.executable`` (Unix sockets by
default, so no port is raced for); :func:`execute_notebook` runs the cells with a progress
bar and turns a failing cell, a timeout or a dead kernel into a :class:`ReportError` naming
the notebook, the cell and the error's last line.
"""

from __future__ import annotations

import math
import os
import re
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from ..errors import PerfkitError
from .notebooks import ReportError

__all__ = ["DEFAULT_TIMEOUT_S", "notebook_client", "execute_notebook"]


#: Seconds one cell may run before the report gives up.
DEFAULT_TIMEOUT_S = 600


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


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


def _perfkit_error_names() -> set[str]:
    """Class names of :class:`~perfkit.errors.PerfkitError` and its subclasses: a cell
    that raised one of these met bad input, which the message names (the file, what was
    wrong); the cell's number would only distract."""
    names, todo = set(), [PerfkitError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo += cls.__subclasses__()
    return names


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
        Show :class:`perfkit.io._common.progress.Progress` over the code cells.
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

    from ..io._common.progress import Progress

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
            if exc.ename in _perfkit_error_names():  # bad input: its message says it all
                raise ReportError(_one_line(exc.evalue)) from None
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
