"""One Jupyter kernel that runs several notebooks, one after another (:class:`WarmKernel`).

A fresh kernel costs about 4 s of CPU before a notebook's own work starts: the kernel's
start (ipykernel, IPython), the imports of the notebook's first cell (pandas, altair, the
perfkit modules) and vl-convert's first chart render. Tests that check what a notebook
shows on one profile after another (the notebook's code path, not a fresh kernel's
start-up) run the notebooks in one such kernel, cleared between them: ``%reset -f`` drops
every name the previous notebook defined (so a name the next notebook forgets to define
is still a ``NameError``), the widgets it opened are closed, and the working folder is the
next notebook's. What a fresh kernel costs a user is measured where the test is of that
(``tests/test_notebooks.py``'s run of each notebook as stored).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import nbformat
from jupyter_core.utils import run_sync

from perfkit import report

__all__ = ["WarmKernel"]

#: What runs before each notebook: the previous notebook's names, widgets and folder go.
_RESET = """\
%reset -f
import gc as _gc, os as _os
try:
    from ipywidgets import Widget as _W
    _W.close_all()
except ImportError:
    pass
_os.chdir({cwd!r})
_gc.collect()
del _gc, _os
"""


class WarmKernel:
    """A kernel of this interpreter (:func:`perfkit.report.notebook_client`, Unix sockets)
    kept between notebooks; started on first use and again after a run that failed."""

    def __init__(self) -> None:
        self._owner: Any = None  # the client that started the kernel (and shuts it down)

    def _manager(self, cwd: Path) -> Any:
        if self._owner is not None and not run_sync(self._owner.km.is_alive)():
            self.close()
        if self._owner is None:
            owner = report.notebook_client(nbformat.v4.new_notebook(), cwd=cwd,
                                           transport="ipc")
            owner.km = owner.create_kernel_manager()
            owner.start_new_kernel()
            self._owner = owner
        return self._owner.km

    def execute(self, nb: nbformat.NotebookNode, cwd: Path, timeout: float) -> None:
        """Run ``nb`` (in place) in the kernel, its working folder ``cwd``; nbclient's own
        errors propagate, and the kernel is shut down after one (the next run starts
        another)."""
        km = self._manager(cwd)
        reset = nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell(_RESET.format(cwd=os.fspath(cwd)))])
        try:
            for book in (reset, nb):
                client = report.notebook_client(book, cwd=cwd, timeout=timeout, km=km)
                try:
                    client.execute()
                finally:
                    if client.kc is not None:
                        client.kc.stop_channels()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Shut the kernel down (nothing when none runs)."""
        owner, self._owner = self._owner, None
        if owner is not None:
            owner._cleanup_kernel()
