"""``perfkit serve [PATH] [--port N] [--no-browser] [--no-preheat]``: serve the dashboard
(:func:`perfkit.cli.launcher.serve`); ``perfkit serve --lab DIR/student-3`` serves that
student's lab notebook as their app instead (:mod:`perfkit.lab.app`)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .. import launcher
from ..launcher import DEFAULT_PORT, HOST, PROFILE_ENV

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``serve`` command to the subparsers of ``perfkit``."""
    serve_p = sub.add_parser(
        "serve", help="serve the dashboard (Voila) on 127.0.0.1",
        description="Serve the dashboard notebook that ships with perfkit with Voila on "
                    "127.0.0.1, sources stripped, no CDN needed.")
    serve_p.add_argument("path", nargs="?", default=None, metavar="PATH",
                         help="profile folder or file to show, or sample:NAME (passed to "
                              f"the notebook as {PROFILE_ENV})")
    serve_p.add_argument("--port", type=int, default=DEFAULT_PORT,
                         help=f"port on {HOST} (default {DEFAULT_PORT})")
    serve_p.add_argument("--no-browser", action="store_true",
                         help="do not open a web browser")
    serve_p.add_argument("--no-preheat", action="store_true",
                         help="start a kernel per page instead of keeping one that has "
                              "already run the dashboard ready (slower first chart, one "
                              "kernel less in memory)")
    serve_p.add_argument("--lab", default=None, metavar="STUDENT_DIR",
                         help="serve the lab notebook of this student folder of a lab pack "
                              "(perfkit lab make) as the student's app, instead of the "
                              "dashboard")
    return serve_p


def run(args: argparse.Namespace) -> int:
    """Run ``perfkit serve``: serve until interrupted; returns the exit status."""
    notebook = None
    if args.lab is not None:
        from ...lab.key import LAB_ENV, student_notebook

        if args.path is not None:
            raise launcher.ServeError("give a profile PATH or --lab STUDENT_DIR, not both")
        notebook = student_notebook(args.lab)
        os.environ[LAB_ENV] = str(notebook.parent)
    return launcher.serve(args.path, port=args.port, open_browser=not args.no_browser,
                          preheat=not args.no_preheat, notebook=notebook)
