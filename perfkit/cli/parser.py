"""The ``perfkit`` parser and its entry point: the commands of
:mod:`perfkit.cli.commands` under one parser, and the boundary where every error becomes
one line on stderr."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .._version import __version__
from ..errors import PerfkitError
from .commands import COMMANDS, command_modules

__all__ = ["build_parser", "main"]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``perfkit`` argument parser: one subcommand per module of
    :data:`perfkit.cli.commands.COMMANDS` (``serve``, ``info``, ``report``, ``simulate``,
    ``notebooks``, ``journal``), each with its ``run`` as the ``run`` default.

    ``only`` (a command's name): that command's subcommand alone, so that ``perfkit info``
    does not import what the other commands' options list (``simulate``'s scenarios import
    the simulator)."""
    parser = argparse.ArgumentParser(
        prog="perfkit",
        description="A workbench for tuning the training performance of large language "
                    "models.",
        epilog="Run 'perfkit COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"perfkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in command_modules(only):
        module.add_parser(sub).set_defaults(run=module.run)
    return parser


def _command_parser(parser: argparse.ArgumentParser,
                    command: str | None) -> argparse.ArgumentParser:
    """The subparser of ``command`` (``perfkit plan``'s), or ``parser`` itself."""
    for action in parser._actions:  # argparse keeps its subparsers only there
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``perfkit`` command; returns the exit status.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, 141 when the reader of its output closed the pipe (``| head``), 2 on
        a usage error, a :class:`~perfkit.errors.PerfkitError` or any
        other error (its message printed on stderr as one line, no traceback), 130 when
        interrupted.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # refused with the command's own usage, not the list of commands
            _command_parser(parser, getattr(args, "command", None)).error(
                f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # argparse exits on --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else 2
    try:
        run = getattr(args, "run", None)
        if run is None:  # no command given
            parser.print_help()
            return 2
        return run(args)
    except PerfkitError as exc:
        print(f"perfkit: error: {' '.join(str(exc).splitlines())}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader closed the pipe (perfkit info ... | head): done
        try:  # no second error when Python flushes standard output at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (AttributeError, ValueError, OSError):  # not a file descriptor (a notebook)
            pass
        return 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left
    except KeyboardInterrupt:  # Ctrl-C before Voila's loop runs (it handles its own)
        print("perfkit: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI's boundary: one line, never a traceback
        text = " ".join(str(exc).split())[:500]
        print(f"perfkit: error: unexpected {type(exc).__name__}{': ' + text if text else ''} "
              "(please report this)", file=sys.stderr)
        return 2
