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
loaders keep their cache outside profile folders (:mod:`perfkit.io.cache.store`).

One job per module: :mod:`~perfkit.report.notebooks` (which notebook, its parameters),
:mod:`~perfkit.report.execute` (the kernel and the run), :mod:`~perfkit.report.page` (the
HTML) and :mod:`~perfkit.report.write` (:func:`write_report`).
"""

from __future__ import annotations

from .execute import DEFAULT_TIMEOUT_S, execute_notebook, notebook_client
from .notebooks import (
    DEFAULT_NOTEBOOK,
    NOTEBOOK_DIR,
    ReportError,
    inject_parameters,
    locate_notebook,
    parameters_index,
    takes_parameter,
)
from .page import notebook_html
from .write import write_report

__all__ = ["ReportError", "NOTEBOOK_DIR", "DEFAULT_NOTEBOOK", "DEFAULT_TIMEOUT_S",
           "locate_notebook", "parameters_index", "takes_parameter", "inject_parameters",
           "notebook_client", "execute_notebook", "notebook_html", "write_report"]
