"""The ``perfkit`` command.

``perfkit serve [PATH] [--port N] [--no-browser] [--no-preheat]``
    Serve the dashboard notebook (``dashboard.ipynb``, shipped with perfkit) with Voila on
    127.0.0.1, sources stripped, tracebacks hidden, one pre-started kernel that has
    already run the notebook kept ready. ``PATH`` (a profile) reaches the notebook through
    the ``PERFKIT_PROFILE`` environment variable. The page needs no CDN: Voila runs with a
    small template (written to a temporary folder for the life of the server) that drops
    the CDN links of the stock ``lab`` template (Font Awesome CSS, Mermaid).
``perfkit info [PATH] [--findings N] [--config FILE ...]``
    Without PATH: the perfkit version and the model and hardware presets. With PATH (a
    profile): its format, framework, device, profiler level, ranks, the job read from it
    (:func:`perfkit.infer_job`: model, layout, hardware, each value's source, the figures
    MFU/HFU guarded), the steps with the measured step time, and the advisor's top
    findings for that job (:func:`profile_info_text`).
``perfkit report PATH [-o report.html] [--notebook NAME] [--timeout S] [--config FILE ...]``
    Run a guided notebook (default ``00_start_here``) on the profile and write its
    outputs as one self-contained HTML file, without code cells or CDN scripts
    (:func:`perfkit.report.write_report`), with a progress bar over the cells on stderr.
``perfkit compare A B [--gate PCT] [--json] [--html FILE] [--journal FILE]``
    Compare two runs (:func:`perfkit.compare`): step times with their spread, a verdict
    that knows the noise, the difference by step part, kernel kind and operator, the job's
    changes; exit status 1 when B is slower than A beyond ``--gate`` and the noise.
``perfkit simulate OUT [--scenario NAME | --model ... --dp ... --fault ...]``
    Write a simulated profile (:func:`perfkit.simulate.simulate`): one of the bundled
    teaching scenarios, or any model, parallel layout and faults (:func:`parse_fault`).
``perfkit notebooks [DIR] [--force]``
    Copy the guided notebooks into a working folder (default ``perfkit-notebooks``),
    keeping copies the user has edited unless ``--force`` (:func:`perfkit.workspace.
    copy_notebooks`), and print the ``jupyter lab`` command that opens them.
``perfkit journal add PATH | list | compare A B [--journal FILE] [--html FILE]``
    The tuning journal (:mod:`perfkit.journal`): record a run, list the runs, say what
    changed between two.

Wherever a profile PATH is taken, ``sample:NAME`` names a bundled sample
(:func:`perfkit.samples`), e.g. ``perfkit info sample:slow-rank``.

Errors perfkit can explain are printed as one line on stderr with exit status 2.

Layout: :mod:`.parser` (the parser and :func:`main`), :mod:`.commands` (one module per
command and the list of commands; a new command is a module there and its name in
``COMMANDS``), :mod:`.launcher` (Voila), :mod:`.profile_text` (what ``perfkit info PATH``
prints), :mod:`.fault_spec` (``--fault``), :mod:`.args` (what the commands' arguments
share). This module re-exports their public names for callers; code that replaces one (a
test's monkeypatch) sets it in the module that reads it, e.g. ``perfkit.cli.launcher``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .commands.info import info_text
from .commands.notebooks import notebooks_command
from .commands.simulate import simulate_command
from .fault_spec import parse_fault
from .launcher import (
    DASHBOARD_NOTEBOOK,
    PROFILE_ENV,
    ServeError,
    locate_dashboard,
    serve,
    voila_argv,
)
from .launcher import DEFAULT_PORT as DEFAULT_PORT
from .launcher import HOST as HOST
from .launcher import TEMPLATE_NAME as TEMPLATE_NAME
from .launcher import WEBSOCKET_MAX_MESSAGE_BYTES as WEBSOCKET_MAX_MESSAGE_BYTES
from .parser import build_parser, main
from .profile_text import profile_info_text

if TYPE_CHECKING:
    from .fault_spec import FAULTS  # noqa: F401

__all__ = ["ServeError", "DASHBOARD_NOTEBOOK", "PROFILE_ENV", "main", "build_parser",
           "info_text", "profile_info_text", "locate_dashboard",
           "voila_argv", "serve", "FAULTS", "parse_fault", "simulate_command",
           "notebooks_command"]


def __getattr__(name: str) -> Any:
    """``FAULTS`` from :mod:`.fault_spec`, on first use (it imports the simulator)."""
    if name == "FAULTS":
        from . import fault_spec

        return fault_spec.FAULTS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
