"""The ``perfkit`` command.

``perfkit serve [PATH] [--port N] [--no-browser]``
    Serve the dashboard notebook (``notebooks/dashboard.ipynb``) with Voila on
    127.0.0.1, sources stripped. ``PATH`` (a profile) reaches the notebook through the
    ``PERFKIT_PROFILE`` environment variable. The page needs no CDN: Voila runs with a
    small template (written to a temporary folder for the life of the server) that drops
    the CDN links of the stock ``lab`` template (Font Awesome CSS, Mermaid).
``perfkit info``
    Print the perfkit version and the model and hardware presets.

Errors perfkit can explain are printed as one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import socket
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .errors import PerfkitError
from .specs import Hardware, ModelSpec

__all__ = ["ServeError", "DASHBOARD_NOTEBOOK", "PROFILE_ENV", "main", "build_parser",
           "info_text", "locate_dashboard", "voila_argv", "serve"]

#: Where ``perfkit serve`` looks for the dashboard: ``<repository>/notebooks/dashboard.ipynb``.
DASHBOARD_NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "dashboard.ipynb"
#: Environment variable that carries the profile path to the notebook's parameters cell.
PROFILE_ENV = "PERFKIT_PROFILE"
HOST = "127.0.0.1"
DEFAULT_PORT = 8866
TEMPLATE_NAME = "perfkit"

# Voila template: the stock "lab" template less its CDN references. The lab template's
# notebook_css block links Font Awesome from a CDN, so it is rewritten here (same content
# otherwise) and calls the nbconvert block directly (super.super); the nbconvert lab
# template imports Mermaid from a CDN, whose block is emptied. MathJax is already removed
# by Voila's lab template.
_TEMPLATE_CONF = {"base_template": "lab"}
_TEMPLATE_INDEX = """\
{%- extends 'voila/templates/lab/index.html.j2' -%}
{% import "spinner.macro.html.j2" as spinner %}

{%- block notebook_css -%}
  {% if frontend == "voila" %}
    {{ resources.include_js("static/voila-style.js") }}
  {% endif %}
  {{ spinner.css() }}
  <style>
    .jp-mod-noOutputs.jp-mod-noInput { display: none; }
  </style>
  {{ super.super() }}
{%- endblock notebook_css -%}

{%- block html_head_js_mermaidjs -%}
{%- endblock html_head_js_mermaidjs -%}
"""


class ServeError(PerfkitError):
    """``perfkit serve`` cannot start: missing notebook or profile, busy port."""


# --------------------------------------------------------------------------------------
# info
# --------------------------------------------------------------------------------------

def info_text() -> str:
    """What ``perfkit info`` prints: version, model presets, hardware presets.

    Returns
    -------
    str
        Plain text, one preset a line; hardware peaks are dense FLOP/s of the preset's
        default dtype, memory in GiB (2**30 bytes).
    """
    lines = [f"perfkit {__version__}", "", "Model presets (ModelSpec.preset):",
             f"  {'name':<14}{'parameters':>12}{'layers':>8}{'hidden':>8}{'heads':>7}"
             f"{'kv':>5}{'seq':>7}  mlp"]
    for name in ModelSpec.presets():
        m = ModelSpec.preset(name)
        params = f"{m.num_parameters() / 1e9:,.2f} B"
        lines.append(f"  {name:<14}{params:>12}{m.num_layers:>8}{m.hidden_size:>8}"
                     f"{m.num_attention_heads:>7}{m.num_kv_heads:>5}{m.seq_length:>7}  "
                     f"{m.mlp}{f' MoE {m.num_experts}x top-{m.moe_top_k}' if m.is_moe else ''}")
    lines += ["", "Hardware presets (Hardware.preset):",
              f"  {'name':<14}{'dtype':>6}{'peak TFLOP/s':>14}{'memory GiB':>12}"]
    for name in Hardware.presets():
        hw = Hardware.preset(name)
        lines.append(f"  {name:<14}{hw.default_dtype:>6}{hw.peak() / 1e12:>14,.1f}"
                     f"{hw.memory_bytes / 2**30:>12,.1f}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# serve
# --------------------------------------------------------------------------------------

def locate_dashboard(notebook: str | os.PathLike[str] | None = None) -> Path:
    """The dashboard notebook, or a :class:`ServeError` saying where it was looked for.

    Parameters
    ----------
    notebook : path, optional
        Defaults to :data:`DASHBOARD_NOTEBOOK` (``notebooks/dashboard.ipynb`` next to the
        ``perfkit`` package, i.e. in a source checkout installed with ``pip install -e .``).
    """
    path = Path(DASHBOARD_NOTEBOOK if notebook is None else notebook)
    if not path.is_file():
        raise ServeError(
            f"dashboard notebook not found: {path} (perfkit serve runs the notebook "
            "notebooks/dashboard.ipynb of a perfkit source checkout; install perfkit from "
            "the repository with 'pip install -e .')")
    return path


def _check_port(port: int) -> None:
    if not 1 <= port <= 65535:
        raise ServeError(f"--port: must be in 1..65535 (got {port})")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            why = "already in use" if exc.errno == errno.EADDRINUSE else str(exc)
            raise ServeError(f"--port: cannot listen on {HOST}:{port} ({why}); "
                             "choose another port with --port N") from exc


def voila_argv(notebook: Path, port: int, open_browser: bool, template: str | None = None
               ) -> list[str]:
    """Command-line arguments for Voila (without the program name).

    Parameters
    ----------
    notebook : Path
        The notebook to serve.
    port : int
        Port on 127.0.0.1; Voila may not try another one (``port_retries=0``), so the URL
        printed before serving is the one served.
    open_browser : bool
        False adds ``--no-browser``.
    template : str, optional
        Voila template name (``--template``).
    """
    argv = [str(notebook), f"--port={port}", f"--Voila.ip={HOST}", "--Voila.port_retries=0",
            "--strip_sources=True"]
    if template:
        argv.append(f"--template={template}")
    if not open_browser:
        argv.append("--no-browser")
    return argv


def _voila_data_root() -> Path | None:
    """The Jupyter data folder holding Voila's stock ``lab`` template, if any.

    Our template extends ``voila/templates/lab/index.html.j2``; Voila only finds it when
    its data folder is on the Jupyter path, which is not the case in every environment
    (a virtual environment layered on a system Python, for one).
    """
    import sysconfig

    from jupyter_core.paths import jupyter_path

    candidates = [Path(p) for p in jupyter_path()]
    candidates += [Path(sys.prefix) / "share" / "jupyter",
                   Path(sys.base_prefix) / "share" / "jupyter",
                   Path(sysconfig.get_path("data")) / "share" / "jupyter"]
    for root in candidates:
        if (root / "voila" / "templates" / "lab" / "index.html.j2").is_file():
            return root
    return None


def _write_template(root: Path) -> None:
    folder = root / "voila" / "templates" / TEMPLATE_NAME
    folder.mkdir(parents=True)
    (folder / "conf.json").write_text(json.dumps(_TEMPLATE_CONF), encoding="utf-8")
    (folder / "index.html.j2").write_text(_TEMPLATE_INDEX, encoding="utf-8")


def serve(profile: str | os.PathLike[str] | None = None, port: int = DEFAULT_PORT,
          open_browser: bool = True, notebook: str | os.PathLike[str] | None = None) -> int:
    """Serve the dashboard with Voila until interrupted (Ctrl-C or SIGTERM).

    Parameters
    ----------
    profile : path, optional
        Profile folder or file; must exist. Passed to the notebook as ``PERFKIT_PROFILE``.
    port : int
        Port on 127.0.0.1.
    open_browser : bool
        Whether Voila opens a browser tab.
    notebook : path, optional
        Notebook to serve (default :data:`DASHBOARD_NOTEBOOK`).

    Returns
    -------
    int
        0 once the server has stopped.

    Raises
    ------
    ServeError
        Notebook or profile missing, port not available.
    """
    path = locate_dashboard(notebook)
    profile_path = None
    if profile is not None:
        profile_path = Path(profile).expanduser().resolve()
        if not profile_path.exists():
            raise ServeError(f"profile path not found: {profile}")
    _check_port(port)

    from voila.app import Voila  # heavy import: only when serving

    saved = {name: os.environ.get(name) for name in (PROFILE_ENV, "JUPYTER_PATH")}
    stock = _voila_data_root()
    with tempfile.TemporaryDirectory(prefix="perfkit-voila-") as tmp:
        template = None
        if stock is not None:
            _write_template(Path(tmp))
            template = TEMPLATE_NAME
        else:
            print("perfkit: Voila's lab template was not found on the Jupyter path; serving "
                  "the stock template (its icon font comes from a CDN)", file=sys.stderr)
        os.environ["JUPYTER_PATH"] = os.pathsep.join(
            str(p) for p in (tmp, stock, saved["JUPYTER_PATH"]) if p)
        if profile_path is not None:
            os.environ[PROFILE_ENV] = str(profile_path)
        else:
            os.environ.pop(PROFILE_ENV, None)
        print(f"perfkit {__version__}: serving {path.name} at http://{HOST}:{port}/ "
              "(Ctrl-C to stop)", flush=True)
        try:
            Voila.launch_instance(argv=voila_argv(path, port, open_browser, template))
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return 0


# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    """The ``perfkit`` argument parser (subcommands ``serve`` and ``info``)."""
    parser = argparse.ArgumentParser(
        prog="perfkit",
        description="A workbench for tuning the training performance of large language "
                    "models.")
    parser.add_argument("--version", action="version", version=f"perfkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve_p = sub.add_parser(
        "serve", help="serve the dashboard (Voila) on 127.0.0.1",
        description="Serve notebooks/dashboard.ipynb with Voila on 127.0.0.1, sources "
                    "stripped, no CDN needed.")
    serve_p.add_argument("path", nargs="?", default=None, metavar="PATH",
                         help="profile folder or file to show (passed to the notebook as "
                              f"{PROFILE_ENV})")
    serve_p.add_argument("--port", type=int, default=DEFAULT_PORT,
                         help=f"port on {HOST} (default {DEFAULT_PORT})")
    serve_p.add_argument("--no-browser", action="store_true",
                         help="do not open a web browser")
    sub.add_parser("info", help="print the version and the model and hardware presets",
                   description="Print the perfkit version and the model and hardware presets.")
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
        0 on success, 2 on a usage error or a :class:`~perfkit.errors.PerfkitError`
        (its message printed on stderr, no traceback), 130 when interrupted.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else 2
    try:
        if args.command == "info":
            print(info_text())
            return 0
        if args.command == "serve":
            return serve(args.path, port=args.port, open_browser=not args.no_browser)
        parser.print_help()
        return 2
    except PerfkitError as exc:
        print(f"perfkit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C before Voila's loop runs (it handles its own)
        print("perfkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
