"""The Voila launcher behind ``perfkit serve``.

:func:`serve` runs the dashboard notebook (``dashboard.ipynb``, shipped with perfkit) with
Voila on 127.0.0.1, sources stripped, tracebacks hidden, one pre-started kernel that has
already run the notebook kept ready. The profile reaches the notebook through the
``PERFKIT_PROFILE`` environment variable (:data:`PROFILE_ENV`). The page needs no CDN:
Voila runs with a small template (written to a temporary folder for the life of the
server) that drops the CDN links of the stock ``lab`` template (Font Awesome CSS, Mermaid).

Access needs a token, as in Jupyter: 127.0.0.1 is reachable by every user of the machine,
and on a shared login node any of them could otherwise open the dashboard, read through its
path box every profile the serving user can read, and upload files. :func:`serve` makes a
random token (:func:`new_token`) unless given one, hands it to Voila's own token
authentication (``Voila.token``: jupyter_server's identity provider), and prints and
opens the address that carries it (:func:`served_url`); a request without it gets Voila's
login page (an API request: HTTP 403).

The address is printed (and opened) once the preheated kernel has run the notebook
(:mod:`perfkit.cli.page_ready`), with progress lines on stderr meanwhile: the page it
leads to then answers at once instead of showing Voila's spinner for the rest of that run.
"""

from __future__ import annotations

import errno
import html
import json
import os
import secrets
import socket
import sys
import tempfile
import threading
import urllib.parse
import webbrowser
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .._version import __version__
from ..bundled_samples import is_sample_spec, path_not_found, resolve_sample
from ..errors import PerfkitError
from ..resources import DASHBOARD_NAME, NOTEBOOK_PACKAGE, resource_path
from .kernel_culling import (
    DEFAULT_IDLE_TIMEOUT_S,
    culling_argv,
    idle_clock_from_handover,
    with_xsrf_cookie,
)

__all__ = ["ServeError", "DASHBOARD_NOTEBOOK", "PROFILE_ENV", "HOST", "DEFAULT_PORT",
           "TEMPLATE_NAME", "WEBSOCKET_MAX_MESSAGE_BYTES", "NO_TOKEN_WARNING",
           "locate_dashboard", "new_token", "served_url", "voila_argv", "serve"]

#: The dashboard ``perfkit serve`` runs: ``dashboard.ipynb`` of the notebooks that ship with
#: perfkit, found with importlib.resources (:mod:`perfkit.resources`).
DASHBOARD_NOTEBOOK = resource_path(NOTEBOOK_PACKAGE) / DASHBOARD_NAME
#: Environment variable that carries the profile path to the notebook's parameters cell.
PROFILE_ENV = "PERFKIT_PROFILE"
#: The address Voila listens on: this machine only.
HOST = "127.0.0.1"
#: The port ``perfkit serve`` listens on without ``--port``.
DEFAULT_PORT = 8866
#: Name of the CDN-free Voila template :func:`serve` writes for the life of the server.
TEMPLATE_NAME = "perfkit"
#: Largest websocket message the served page may send: room for the dashboard's 200 MiB
#: upload limit (perfkit.io._common.archive.DEFAULT_MAX_UPLOAD_BYTES) plus the message's framing.
WEBSOCKET_MAX_MESSAGE_BYTES = 256 * 2**20
#: Seconds Voila waits for a cell's outputs after the kernel says the cell is done
#: (nbclient's ``iopub_timeout``, default 4 s): on a busy machine the dashboard's output
#: came later, was dropped ("Timeout waiting for IOPub output") and the page stayed blank.
IOPUB_TIMEOUT_S = 60
#: Random bytes in a token :func:`new_token` makes (48 hex digits, as Jupyter's own).
TOKEN_BYTES = 24
#: What ``perfkit serve --no-token`` prints on stderr before serving.
NO_TOKEN_WARNING = (
    "perfkit: warning: --no-token: the dashboard at {url} is open to every user of this "
    "machine (on a shared login node: all of them), who can read through it any profile "
    "you can read and upload files; serve with a token (the default) unless you alone "
    "use this machine")

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


def locate_dashboard(notebook: str | os.PathLike[str] | None = None) -> Path:
    """The dashboard notebook, or a :class:`ServeError` saying where it was looked for.

    Parameters
    ----------
    notebook : path, optional
        Defaults to :data:`DASHBOARD_NOTEBOOK` (``dashboard.ipynb`` of the notebooks that
        ship inside the perfkit package).
    """
    path = Path(DASHBOARD_NOTEBOOK if notebook is None else notebook)
    if not path.is_file():
        why = ("this perfkit installation lacks its notebooks; reinstall it from its wheel, "
               "or with 'pip install -e .' in a checkout" if notebook is None else
               "give the path of a notebook")
        raise ServeError(f"dashboard notebook not found: {path} ({why})")
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


def new_token() -> str:
    """A random token for :func:`serve`: :data:`TOKEN_BYTES` bytes from :mod:`secrets`, as
    hex digits (safe in a URL, as hard to guess as Jupyter's)."""
    return secrets.token_hex(TOKEN_BYTES)


def served_url(port: int, token: str = "") -> str:
    """The address of the dashboard on ``port``; with ``token``, the one that logs in."""
    base = f"http://{HOST}:{port}/"
    return f"{base}?{urllib.parse.urlencode({'token': token})}" if token else base


def _check_token(token: str | None) -> str:
    if token is None:
        return new_token()
    if not isinstance(token, str) or token != token.strip() or any(
            ch.isspace() or not ch.isprintable() for ch in token):
        raise ServeError("--token: must be printable text without spaces (got "
                         f"{token!r}); leave it out for a random one")
    return token


#: Longest Unix socket path the transport check allows (the C limit is 104 bytes on
#: macOS, 108 on Linux, the terminating NUL included).
_MAX_SOCKET_PATH = 100
#: Characters Voila and jupyter_client add to the temporary folder for a kernel's
#: socket: ``/voila_XXXXXXXX/kernel-<36-character id>-ipc-N``.
_SOCKET_NAME_CHARS = 64


def _kernel_transport_args() -> list[str]:
    """Voila's kernels on Unix sockets where they can be: ``--KernelManager.transport=ipc``.

    By default a kernel listens on five TCP ports of 127.0.0.1, which every user of the
    machine can connect to (the messages are signed, not encrypted, and ipykernel warns
    about it at every start). As Unix sockets they live in Voila's connection folder,
    which only the owner can enter. Not on Windows, and not where the temporary folder's
    path would make a socket's path too long for the system (kept on TCP, as before).
    """
    if os.name != "posix" or \
            len(tempfile.gettempdir()) + _SOCKET_NAME_CHARS > _MAX_SOCKET_PATH:
        return []
    return ["--KernelManager.transport=ipc"]


def voila_argv(notebook: Path, port: int, open_browser: bool, template: str | None = None,
               preheat: bool = True,
               kernel_idle_timeout: int = DEFAULT_IDLE_TIMEOUT_S) -> list[str]:
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
    preheat : bool
        Keep one kernel that has already run the notebook ready for the next visitor
        (Voila's ``preheat_kernel`` with a pool of one): the page then shows its charts
        without waiting for a kernel to start and the profile to load.
    kernel_idle_timeout : int
        Seconds a kernel with no page connected may stay idle before it is ended
        (:func:`perfkit.cli.kernel_culling.culling_argv`); 0: never.

    The token is not among them: :func:`serve` sets Voila's ``token`` directly (any text,
    none of traitlets' command-line parsing, and never in a process list).
    """
    argv = [str(notebook), f"--port={port}", f"--Voila.ip={HOST}", "--Voila.port_retries=0",
            "--strip_sources=True", "--show_tracebacks=False",
            # the login page asks for the token only: its "set a password" form would
            # write the password into the user's Jupyter config folder
            "--PasswordIdentityProvider.allow_password_change=False",
            f"--VoilaExecutor.iopub_timeout={IOPUB_TIMEOUT_S}",
            *_kernel_transport_args(), *culling_argv(kernel_idle_timeout)]
    if preheat:
        argv += ["--preheat_kernel=True", "--pool_size=1"]
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


def _redirect_page(url: str, folder: Path) -> Path:
    """A page in ``folder``, readable by this user only, that sends the browser to ``url``.

    The browser is given this page, not ``url``, as Jupyter does: the token then does not
    show on the browser's command line, which other users could read in the process list.
    """
    page = folder / "open-dashboard.html"
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    text = html.escape(url)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(f'<!DOCTYPE html><meta http-equiv="refresh" content="0;url={text}">'
                 f'<p>Opening the perfkit dashboard: <a href="{text}">{text}</a></p>')
    return page


def _open_browser(url: str, folder: Path) -> None:
    """Open ``url`` in the user's browser (through :func:`_redirect_page`), in a thread:
    starting a browser may take a while, and serving goes on meanwhile."""
    page = _redirect_page(url, folder)

    def target() -> None:
        try:
            webbrowser.open(page.as_uri(), new=2)
        except webbrowser.Error as exc:
            print(f"perfkit: no web browser could be opened ({exc}); open {url}",
                  file=sys.stderr)

    threading.Thread(target=target, name="perfkit-open-browser", daemon=True).start()


def _kill_busy_kernels(kernel_manager: Any) -> None:
    """Stop at once every kernel that is not idle.

    Stopped while a kernel still starts or runs the dashboard (Ctrl-C before the page is
    ready), Voila asks it to shut down mid-cell: the kernel closes its sockets, and when
    the cell ends it fails to send its reply and prints an ipykernel traceback on the
    terminal. Such a kernel holds nothing but the page it was drawing, so it is ended
    (``now=True``: killed, its connection files removed) before Voila shuts down the rest
    politely. Best effort: a kernel that cannot be stopped here is left to Voila.
    """
    from jupyter_core.utils import run_sync

    for kernel_id in list(kernel_manager.list_kernel_ids()):
        try:
            if getattr(kernel_manager.get_kernel(kernel_id), "execution_state", "") != "idle":
                run_sync(kernel_manager.shutdown_kernel)(kernel_id, now=True)
        except Exception:  # noqa: BLE001, S112 - Voila's own shutdown follows anyway
            continue


def _no_voila_address(record: Any) -> bool:
    """Logging filter: drop Voila's "Voilà is running at: …/?token=..." line, whose
    masked address opens a login page; :func:`serve` prints the working one. Drop too
    the contents manager's "Notebook dashboard.ipynb is not trusted" at every start:
    trust only decides whether a notebook's *stored* HTML and JavaScript outputs are shown
    (``nbformat.sign``), and the dashboard notebook ships with perfkit and without outputs
    (Voila runs it afresh), so the warning said nothing a user could act on."""
    msg = str(record.msg)
    return not (msg.startswith("Voil\u00e0 is running at")
                or msg == "Notebook %s is not trusted")


def _run_voila(argv: list[str], token: str,
               when_serving: Callable[[Any], Awaitable[Any]]) -> None:
    """Run Voila with ``argv`` and ``token`` until it stops; ``when_serving(app)`` runs on
    its event loop once the loop runs, i.e. once the port listens."""
    from tornado.ioloop import IOLoop
    from voila.app import Voila  # heavy import: only when serving

    # what Voila.launch_instance does, with the callback added before the loop starts;
    # token: Voila's (the token of jupyter_server's identity provider); "" = none
    app = Voila.instance(
        token=token,
        tornado_settings={"websocket_max_message_size": WEBSOCKET_MAX_MESSAGE_BYTES})
    app.initialize(argv)
    # one address is printed, perfkit's, which carries the token: not Voila's masked one
    app.log.addFilter(_no_voila_address)
    voila_handlers = app.init_handlers

    def init_handlers() -> list[Any]:  # Voila.start: its kernel manager is made by now
        idle_clock_from_handover(app.kernel_manager)  # a preheated kernel's page connects
        return with_xsrf_cookie(voila_handlers())  # the page's unload ends its kernel

    app.init_handlers = init_handlers
    voila_stop = app.stop

    def stop() -> None:  # what Voila calls once its loop ends: busy kernels first
        _kill_busy_kernels(app.kernel_manager)
        voila_stop()

    app.stop = stop
    IOLoop.current().add_callback(when_serving, app)  # the loop Voila starts
    app.start()


def serve(profile: str | os.PathLike[str] | None = None, port: int = DEFAULT_PORT,
          open_browser: bool = True, notebook: str | os.PathLike[str] | None = None,
          preheat: bool = True, token: str | None = None,
          kernel_idle_timeout: int = DEFAULT_IDLE_TIMEOUT_S) -> int:
    """Serve the dashboard with Voila until interrupted (Ctrl-C or SIGTERM).

    Parameters
    ----------
    profile : path, optional
        Profile folder or file, or ``"sample:NAME"`` (a bundled sample); must exist.
        Passed to the notebook as ``PERFKIT_PROFILE``, as an absolute path (a bundled
        sample as ``sample:NAME``, so that the page names it as its picker does).
    port : int
        Port on 127.0.0.1.
    open_browser : bool
        Whether to open the address (with its token) in a browser tab once it is printed.
    notebook : path, optional
        Notebook to serve (default :data:`DASHBOARD_NOTEBOOK`).
    preheat : bool
        Keep a kernel that has already run the notebook ready (see :func:`voila_argv`),
        and print the address once it has (:func:`perfkit.cli.page_ready.announce`: at
        most :data:`~perfkit.cli.page_ready.PREPARE_TIMEOUT_S` later, saying on stderr
        what it waits for); False prints it as soon as the port listens.
    token : str, optional
        The token a visitor must give. None (default): a new random one
        (:func:`new_token`); ``""``: none, the dashboard is open to every user of the
        machine (the CLI's ``--no-token`` prints :data:`NO_TOKEN_WARNING`). The address
        printed (and opened) carries it: :func:`served_url`.
    kernel_idle_timeout : int
        Seconds a page's kernel may stay idle once no page is connected to it (closed,
        reloaded, abandoned) before it is ended; 0: never
        (:mod:`perfkit.cli.kernel_culling`, which also makes Voila's own end-on-unload work).

    Returns
    -------
    int
        0 once the server has stopped.

    Notes
    -----
    The kernel websocket accepts messages up to :data:`WEBSOCKET_MAX_MESSAGE_BYTES`
    (tornado's default is 10 MiB): an upload of a zipped profile travels in one message,
    and the dashboard refuses, with a message, uploads above its own (smaller) limit.

    Raises
    ------
    ServeError
        Notebook or profile missing, port not available, a token with spaces or control
        characters.
    """
    token = _check_token(token)
    if not isinstance(kernel_idle_timeout, int) or kernel_idle_timeout < 0:
        raise ServeError("--kernel-idle-timeout: must be a whole number of seconds, 0 or "
                         f"more (got {kernel_idle_timeout!r})")
    path = locate_dashboard(notebook)
    profile_path = None
    if profile is not None:
        profile_path = Path(resolve_sample(profile)).expanduser().resolve()
        if not profile_path.exists():
            raise ServeError(path_not_found(profile))
    _check_port(port)
    if preheat:  # at once: importing and starting Voila take seconds
        on = f" on {profile_path}" if profile_path is not None else ""
        print(f"perfkit: preparing the page: a kernel runs {path.name}{on}; its address "
              "follows once the page is ready …", file=sys.stderr, flush=True)
    from .page_ready import announce  # asyncio: only when serving

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
            # a bundled sample by its name, so that the page names it as its picker does
            os.environ[PROFILE_ENV] = (profile.strip() if is_sample_spec(profile)
                                       else str(profile_path))
        else:
            os.environ.pop(PROFILE_ENV, None)
        url = served_url(port, token)
        line = f"perfkit {__version__}: serving {path.name} at {url} (Ctrl-C to stop)"

        def on_ready() -> None:
            if open_browser:  # not Voila's: it opens the address without the token
                _open_browser(url, Path(tmp))

        try:
            _run_voila(voila_argv(path, port, False, template, preheat=preheat,
                                  kernel_idle_timeout=kernel_idle_timeout), token,
                       lambda app: announce(app, line, preheat, on_ready))
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return 0
