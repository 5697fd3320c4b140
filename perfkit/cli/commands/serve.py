"""``perfkit serve [PATH] [--port N] [--no-browser] [--no-preheat] [--kernel-idle-timeout S]
--no-token] [--lab STUDENT_DIR]``: serve the dashboard (:func:`perfkit.cli.launcher.serve`);
with ``--lab DIR/student-3``, that student's lab notebook as their app instead
(:mod:`perfkit.lab.app`).

Every option of ``serve`` is declared in :func:`add_parser` and read in :func:`run`, and
nowhere else."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .. import launcher
from ..args import paragraph
from ..kernel_culling import DEFAULT_IDLE_TIMEOUT_S
from ..launcher import DEFAULT_PORT, HOST, NO_TOKEN_WARNING, PROFILE_ENV, ServeError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``serve`` command to the subparsers of ``perfkit``."""
    serve_p = sub.add_parser(
        "serve", help="serve the dashboard (Voila) on 127.0.0.1",
        description=paragraph(
            "Serve the dashboard notebook that ships with perfkit with Voila on 127.0.0.1, "
            "sources stripped, no CDN needed. Access needs a token, as in Jupyter: every "
            "user of the machine can reach 127.0.0.1, so by default a random token is made "
            "and the address printed (and opened) carries it: "
            f"http://{HOST}:PORT/?token=...; a request without it gets a login page."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
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
    serve_p.add_argument("--kernel-idle-timeout", type=int, default=DEFAULT_IDLE_TIMEOUT_S,
                         metavar="SECONDS",
                         help="end the kernel of a page that was closed, reloaded or "
                              "abandoned once it has been idle, with no page connected, "
                              f"this long (default {DEFAULT_IDLE_TIMEOUT_S}; 0: never); "
                              "an open page keeps its kernel")
    serve_p.add_argument("--lab", default=None, metavar="STUDENT_DIR",
                         help="serve the lab notebook of this student folder of a lab pack "
                              "(perfkit lab make) as the student's app, instead of the "
                              "dashboard")
    access = serve_p.add_mutually_exclusive_group()
    access.add_argument("--token", metavar="VALUE", default=None,
                        help="the token visitors must give, instead of a random one (it "
                             "shows in the process list: prefer the default)")
    access.add_argument("--no-token", action="store_true",
                        help="no token: anyone on this machine may open the dashboard "
                             "(warned on stderr); for a machine you alone use")
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
    if args.token is not None and not args.token:
        raise ServeError("--token: must not be empty; to serve without a token, say "
                         "--no-token")
    if args.no_token:
        print(NO_TOKEN_WARNING.format(url=launcher.served_url(args.port)), file=sys.stderr,
              flush=True)
    return launcher.serve(args.path, port=args.port, open_browser=not args.no_browser,
                          preheat=not args.no_preheat,
                          token="" if args.no_token else args.token,
                          notebook=notebook, kernel_idle_timeout=args.kernel_idle_timeout)
