"""``perfkit mcp --allow DIR [--allow DIR ...]``: serve perfkit's tools to an assistant
over the Model Context Protocol (stdio; :mod:`perfkit.mcpserver`; docs/json.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ...errors import PerfkitError
from ..args import paragraph

__all__ = ["add_parser", "run"]

EPILOG = """\
examples:
  perfkit mcp --allow ~/profiles                 the tools read profiles under ~/profiles
  perfkit mcp --allow /data/a --allow /data/b    two folders

An assistant's configuration starts it as a command, e.g.
  {"command": "perfkit", "args": ["mcp", "--allow", "/home/me/profiles"]}
Needs the MCP Python SDK: pip install 'perfkit[mcp]'.
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``mcp`` command to the subparsers of ``perfkit``."""
    p = sub.add_parser(
        "mcp", help="serve perfkit's answers to an assistant (MCP over stdio)",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description=paragraph("Run a Model Context Protocol server on stdin/stdout whose "
                              "tools open a profile, list runs, get the job, advise, check "
                              "the recording, compare two runs and predict a layout, each "
                              "answering with JSON. It reads only inside the folders named "
                              "with --allow (and the bundled samples, sample:NAME) and "
                              "writes nothing there."))
    p.add_argument("--allow", action="append", default=[], metavar="DIR",
                   help="a folder the tools may read (repeatable)")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``perfkit mcp`` until the client closes stdin."""
    for folder in args.allow:
        if not Path(folder).expanduser().is_dir():
            raise PerfkitError(f"--allow: not a folder: {folder}")
    from ...mcpserver.server import serve

    serve(args.allow)
    return 0
