"""The ``perfkit`` command and the dashboard notebook it serves."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import nbformat
import pytest
from shared_samples import WILD, shared_sample

import perfkit as pk
from perfkit import cli
from perfkit.cli import launcher

__all__: list[str] = []

ROOT = Path(__file__).resolve().parents[1]
CDN = re.compile(r"cdn\.jsdelivr|unpkg\.com|cdnjs\.cloudflare|cdnjs\.com", re.IGNORECASE)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- info -------------------------------------------------------------------------------

def test_info_lists_presets(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"perfkit {pk.__version__}" in out
    for name in pk.ModelSpec.presets() + pk.Hardware.presets():
        assert re.search(rf"^\s+{re.escape(name)}\s", out, re.MULTILINE), name
    # default-dtype peak in TFLOP/s and memory in GiB
    assert re.search(r"ascend-910b\s+fp16\s+320\.0\s+64\.0", out)
    assert re.search(r"h100\s+bf16\s+989\.5\s+80\.0", out)


def test_info_lists_the_bundled_samples(capsys: pytest.CaptureFixture[str]) -> None:
    # each sample as the sample:NAME a command takes, with its README's first line
    assert cli.main(["info"]) == 0
    listed = capsys.readouterr().out.split("Bundled samples", 1)[1]
    table = pk.samples()
    assert len(table) >= 8
    for spec, folder in zip(table["spec"], table["path"], strict=True):
        readme = (Path(folder) / "README.md").read_text(encoding="utf-8")
        first = next(line.lstrip("#").strip() for line in readme.splitlines() if line.strip())
        assert re.search(rf"^  {re.escape(spec)}\s+{re.escape(first)}$", listed,
                         re.MULTILINE), spec


def test_info_json_without_path_and_negative_findings_are_errors(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["info", "--json"]) == 2
    assert "perfkit info PATH --json" in capsys.readouterr().err
    assert cli.main(["info", "sample:slow-rank", "--findings", "-1"]) == 2
    assert "--findings: must be a whole number >= 0 (got -1)" in capsys.readouterr().err


def test_console_script_points_at_main() -> None:
    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "perfkit"]
    assert ep.value == "perfkit.cli:main"
    assert ep.load() is cli.main


def test_usage_errors_return_status() -> None:
    assert cli.main([]) == 2
    assert cli.main(["no-such-command"]) == 2
    assert cli.main(["--version"]) == 0


# ---- serve: errors and arguments ------------------------------------------------------

def test_serve_missing_notebook_is_a_clear_error(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "notebooks" / "dashboard.ipynb"
    monkeypatch.setattr(cli.launcher, "DASHBOARD_NOTEBOOK", missing)
    assert cli.main(["serve", "--no-browser", "--port", str(_free_port())]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perfkit: error: dashboard notebook not found:")
    assert str(missing) in err
    assert "Traceback" not in err
    with pytest.raises(cli.ServeError) as info:
        cli.locate_dashboard(missing)
    assert isinstance(info.value, pk.PerfkitError)


def test_serve_missing_profile_and_busy_port(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", str(tmp_path / "nope"), "--no-browser"]) == 2
    assert "profile path not found" in capsys.readouterr().err
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert cli.main(["serve", "--no-browser", "--port", str(port)]) == 2
    assert f"127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_run_as_script_exits_with_status(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    done = subprocess.run([sys.executable, "-m", "perfkit.cli", "serve", str(missing),
                           "--no-browser"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == f"perfkit: error: profile path not found: {missing}"
    for module in ("perfkit.cli", "perfkit"):  # python -m perfkit runs the command too
        done = subprocess.run([sys.executable, "-m", module, "info"], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0 and "ascend-910b" in done.stdout, module


def test_voila_arguments() -> None:
    argv = cli.voila_argv(Path("nb.ipynb"), 9999, open_browser=False, template="perfkit")
    assert "--Voila.ip=127.0.0.1" in argv and "--port=9999" in argv
    assert "--strip_sources=True" in argv and "--no-browser" in argv
    assert "--template=perfkit" in argv
    assert "--no-browser" not in cli.voila_argv(Path("nb.ipynb"), 9999, open_browser=True)
    assert "--show_tracebacks=False" in argv
    assert "--preheat_kernel=True" in argv and "--pool_size=1" in argv
    cold = cli.voila_argv(Path("nb.ipynb"), 9999, open_browser=False, preheat=False)
    assert not [a for a in cold if "preheat" in a]
    # kernels with no page connected end after the idle timeout (default 300 s, checked
    # every 60 s); open pages keep theirs (cull_connected=False); 0: never
    assert "--MappingKernelManager.cull_idle_timeout=300" in argv
    assert "--MappingKernelManager.cull_interval=60" in argv
    assert "--MappingKernelManager.cull_connected=False" in argv
    short = cli.voila_argv(Path("nb.ipynb"), 9999, open_browser=False, kernel_idle_timeout=10)
    assert "--MappingKernelManager.cull_interval=2" in short  # a fifth of 10 s
    never = cli.voila_argv(Path("nb.ipynb"), 9999, open_browser=False, kernel_idle_timeout=0)
    assert not [a for a in never if "cull" in a]
    # a cell's outputs are waited for 60 s, not nbclient's 4 s (a busy machine's blank page)
    assert "--VoilaExecutor.iopub_timeout=60" in argv


def _sockets_fit(folder: str) -> bool:
    """Whether a kernel's Unix socket under ``folder`` is short enough (the launcher's rule)."""
    return os.name == "posix" and \
        len(folder) + launcher._SOCKET_NAME_CHARS <= launcher._MAX_SOCKET_PATH


def test_voila_kernels_on_private_unix_sockets_where_the_path_allows(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # kernels on Unix sockets in Voila's owner-only connection folder, not on TCP ports
    # every user of the machine can reach; a temporary folder whose path would make a
    # socket's path longer than the system allows (104 bytes on macOS) keeps TCP
    short = tmp_path / "t"
    short.mkdir()
    long = tmp_path / ("x" * max(1, 110 - len(str(tmp_path))))
    long.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(short))
    argv = cli.voila_argv(Path("nb.ipynb"), 9999, open_browser=False)
    if _sockets_fit(str(short)):
        assert "--KernelManager.transport=ipc" in argv
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    argv = cli.voila_argv(Path("nb.ipynb"), 9999, open_browser=False)
    assert not [a for a in argv if "transport" in a]


def test_voila_login_page_cannot_write_a_password() -> None:
    # jupyter_server's login form can set a password, which it writes into the user's
    # Jupyter config folder: perfkit's login page asks for the token only
    argv = cli.voila_argv(Path("nb.ipynb"), 9999, open_browser=False)
    assert "--PasswordIdentityProvider.allow_password_change=False" in argv
    assert not [a for a in argv if "token" in a.lower()]  # the token is never an argument


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Replace Voila's run with a recorder: serve() returns at once, nothing listens. The
    recorder runs what serve() schedules for when Voila serves, with no Voila application
    (so no preheated kernel to wait for: the address is printed at once)."""
    from perfkit.cli import launcher

    calls: list[dict] = []

    def record(argv: list[str], token: str, when_serving: Any) -> None:
        calls.append({"argv": argv, "token": token})
        asyncio.run(when_serving(None))

    monkeypatch.setattr(launcher, "_run_voila", record)
    return calls


def test_serve_makes_a_random_token_and_prints_the_address_that_carries_it(
        launched: list[dict], capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    assert cli.main(["serve", "--no-browser", "--port", str(port)]) == 0
    assert cli.main(["serve", "--no-browser", "--port", str(port)]) == 0
    first, second = (call["token"] for call in launched)
    assert re.fullmatch(r"[0-9a-f]{48}", first) and first != second  # 24 random bytes each
    out = capsys.readouterr()
    assert f"at http://127.0.0.1:{port}/?token={first} (Ctrl-C to stop)" in out.out
    assert f"?token={second} " in out.out and "warning" not in out.err


def test_serve_token_value_and_no_token(launched: list[dict],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    assert cli.main(["serve", "--no-browser", "--port", str(port), "--token", "s3cret"]) == 0
    assert launched[-1]["token"] == "s3cret"
    out = capsys.readouterr()
    assert f"at http://127.0.0.1:{port}/?token=s3cret (Ctrl-C to stop)" in out.out
    # stderr: only what the page waits for (the token is never there)
    assert out.err.startswith("perfkit: preparing the page: a kernel runs dashboard.ipynb;")
    assert out.err.count("\n") == 1 and "s3cret" not in out.err
    # --no-token: no token given to Voila (its "" disables the check), a warning on stderr
    assert cli.main(["serve", "--no-browser", "--port", str(port), "--no-token"]) == 0
    assert launched[-1]["token"] == ""
    out = capsys.readouterr()
    assert f"at http://127.0.0.1:{port}/ (Ctrl-C to stop)" in out.out
    assert out.err.startswith("perfkit: warning: --no-token:")
    assert "every user of this machine" in out.err and f"127.0.0.1:{port}" in out.err
    # a token must be text a URL can carry; an empty one is a mistake, not an opt-out
    for bad in ("", "two words", "tab\there"):
        assert cli.main(["serve", "--no-browser", "--port", str(port), "--token", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("perfkit: error: --token:") and err.count("\n") == 1, err
    with pytest.raises(SystemExit):  # the two are exclusive
        cli.build_parser().parse_args(["serve", "--token", "a", "--no-token"])
    assert len(launched) == 2


def test_serve_opens_the_address_with_its_token_through_a_private_page(
        launched: list[dict], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Voila would open the address without its token; perfkit opens it, token included,
    through a page only this user can read (not on the browser's command line)."""
    from perfkit.cli import launcher

    opened: list[tuple[int, str]] = []
    monkeypatch.setattr(launcher, "_open_browser",
                        lambda url, folder: opened.append((port, url)))
    port = _free_port()
    assert cli.main(["serve", "--port", str(port), "--token", "t0k"]) == 0
    assert opened == [(port, f"http://127.0.0.1:{port}/?token=t0k")]
    assert "--no-browser" in launched[-1]["argv"]  # never Voila's own opener
    url = launcher.served_url(port, 'a"<b>&c')  # any token travels quoted
    assert url == f"http://127.0.0.1:{port}/?token=a%22%3Cb%3E%26c"
    page = launcher._redirect_page(url, tmp_path)
    assert page.stat().st_mode & 0o777 == 0o600
    assert f'content="0;url={url}"' in page.read_text()


def test_uploads_fit_in_one_websocket_message() -> None:
    from perfkit.io._common.archive import DEFAULT_MAX_UPLOAD_BYTES

    assert cli.WEBSOCKET_MAX_MESSAGE_BYTES > DEFAULT_MAX_UPLOAD_BYTES
    args = cli.build_parser().parse_args(["serve", "--no-preheat"])
    assert args.no_preheat is True


# ---- the notebook ---------------------------------------------------------------------

def test_dashboard_notebook_is_stored_clean() -> None:
    nb = nbformat.read(cli.locate_dashboard(), as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "code" and "parameters" in first.metadata.get("tags", [])
    assert cli.PROFILE_ENV in first.source
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def _run_dashboard(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, profile: Path) -> dict:
    from perfkit import report

    monkeypatch.setenv(cli.PROFILE_ENV, str(profile))
    nb = nbformat.read(cli.locate_dashboard(), as_version=4)
    report.notebook_client(nb, cwd=tmp_path, timeout=180, transport="ipc").execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    panel = nb.cells[-1].outputs[-1].data
    assert "application/vnd.jupyter.widget-view+json" in panel
    return panel


@pytest.mark.slow
@pytest.mark.notebooks
def test_dashboard_notebook_executes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    profile = ROOT / "data" / "simulated" / "slow-rank"
    panel = _run_dashboard(monkeypatch, tmp_path, profile)
    assert f"Opened <code>{profile}</code>" in panel["text/html"]
    assert "<svg" in panel["text/html"]


@pytest.mark.slow
@pytest.mark.notebooks
def test_dashboard_notebook_shows_a_bad_profile_as_a_message(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "not-a-profile"
    empty.mkdir()
    panel = _run_dashboard(monkeypatch, tmp_path, empty)
    assert "pk-error" in panel["text/html"] and str(empty) in panel["text/html"]
    assert "Traceback" not in panel["text/html"]


# ---- serve: the real server -----------------------------------------------------------

async def _drive_panel(port: int, page: str, token: str) -> tuple[dict, str]:
    """Act as the browser: fetch the widget states from the page's kernel, set tp=3.

    Uses the Jupyter widget protocol over the kernel websocket that Voila's page opens:
    ``jupyter.widget.control`` / ``request_states``, then an ``update`` of the tp box of
    the job panel.
    Returns the states and the text of the first HTML value that mentions ``tp:``.
    """
    from tornado.httpclient import HTTPClientError
    from tornado.websocket import websocket_connect

    config = json.loads(re.search(r'<script id="jupyter-config-data" '
                                  r'type="application/json">(.*?)</script>', page,
                                  re.S).group(1))
    session = uuid.uuid4().hex

    def message(msg_type: str, content: dict, metadata: dict | None = None) -> str:
        return json.dumps({
            "header": {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "session": session,
                       "username": "test", "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": metadata or {}, "content": content,
            "channel": "shell", "buffers": []})

    async def next_comm_msg() -> dict:
        while True:
            raw = await asyncio.wait_for(ws.read_message(), 60)
            assert raw is not None, "kernel websocket closed"
            if isinstance(raw, str):
                msg = json.loads(raw)
                if msg["header"]["msg_type"] == "comm_msg":
                    return msg["content"]["data"]

    channels = (f"ws://127.0.0.1:{port}/api/kernels/{config['kernelId']}/channels"
                f"?session_id={session}")
    # the page's kernel refuses a websocket without the token (jupyter_server: 403)
    with pytest.raises(HTTPClientError) as refused:
        await websocket_connect(channels)
    assert refused.value.code == 403
    ws = await websocket_connect(f"{channels}&token={token}")
    try:
        control = uuid.uuid4().hex
        await ws.write_message(message("comm_open", {"comm_id": control, "data": {},
                                                     "target_name": "jupyter.widget.control"},
                                       {"version": "1.0.0"}))
        await ws.write_message(message("comm_msg", {"comm_id": control,
                                                    "data": {"method": "request_states"}}))
        data = await next_comm_msg()
        while data.get("method") != "update_states":
            data = await next_comm_msg()
        states = data["states"]
        (tp_id,) = [k for k, v in states.items()
                    if v["state"].get("description") == "tp"
                    and v["model_name"] == "TextModel"]
        await ws.write_message(message("comm_msg", {"comm_id": tp_id, "data": {
            "method": "update", "state": {"value": "3"}, "buffer_paths": []}}))
        for _ in range(500):
            value = str((await next_comm_msg()).get("state", {}).get("value", ""))
            if "tp:" in value:
                return states, value
        raise AssertionError("the panel never reported the bad tp")
    finally:
        ws.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_serve_smoke(tmp_path: Path) -> None:
    port = _free_port()
    profile = tmp_path / "my_profile"
    shutil.copytree(ROOT / "data" / "simulated" / "slow-link", profile)
    log = (tmp_path / "serve.log").open("w")
    env = {k: v for k, v in os.environ.items() if k != cli.PROFILE_ENV}
    token = uuid.uuid4().hex
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfkit.cli", "serve", str(profile), "--port", str(port),
         "--no-browser", "--token", token], stdout=log, stderr=subprocess.STDOUT, env=env,
        cwd=tmp_path)
    url = f"http://127.0.0.1:{port}/?token={token}"
    page = None
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=120) as response:
                    assert response.status == 200
                    page = response.read().decode("utf-8")
                    # the cookie Voila's unload request must send back to end the kernel
                    cookies = response.headers.get_all("Set-Cookie") or []
                    assert any(c.startswith("_xsrf=") for c in cookies), cookies
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(1)
        assert page is not None, (tmp_path / "serve.log").read_text()
        # without the token: Voila's login page, nothing of the dashboard
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=120) as response:
            assert response.url.startswith(f"http://127.0.0.1:{port}/login")
            refused = response.read().decode("utf-8")
        assert str(profile) not in refused and "pk-dashboard" not in refused
        # executed output of the notebook: the profile opened, the overview's chart
        # (the widget states are JSON in the page, with < escaped as \u003c)
        assert f"Opened \\u003ccode\\u003e{profile}\\u003c/code\\u003e" in page
        assert "\\u003csvg" in page
        assert not CDN.findall(page), CDN.findall(page)
        # sources are stripped: the notebook's code is not in the page
        assert "dashboard(PROFILE, run=RUN)" not in page
        # the live panel in the page's kernel: numbers, an inline SVG chart, and an error
        # message (not a crash) when the browser sets a bad tp in the job panel (the job
        # read from slow-link: Llama2-7B-like, 32 heads)
        states, error = asyncio.run(_drive_panel(port, page, token))
        html_values = [v["state"].get("value", "") for v in states.values()
                       if v["model_name"] == "HTMLModel"]
        assert any("MFU" in v for v in html_values)
        # the Overview's chart is a live offline chart (altair.JupyterChart, an anywidget):
        # its Vega-Lite spec and its JavaScript, which imports nothing from a server: the
        # bundle, sent once by the kernel's carrier of it, and the chart's few lines that
        # wait for that bundle (by its key)
        cdn = re.compile(r"""(?:import|from)\s*\(?\s*["'](?:https?:)?//""")
        code = [v["state"] for v in states.values()
                if {"key", "source"} <= v["state"].keys()]
        assert len(code) == 1, "not one carrier of the charts' code"
        assert len(code[0]["source"]) > 100_000 and not cdn.search(code[0]["source"])
        charts = [v["state"] for v in states.values() if v["state"].get("spec")]
        assert charts, "no chart widget in the page's kernel"
        for chart in charts:
            assert "vega-lite" in chart["spec"]["$schema"]
            assert len(chart["_esm"]) < 2_000 and json.dumps(code[0]["key"]) in chart["_esm"]
            assert not cdn.search(chart["_esm"])
        assert "tp: must divide num_attention_heads=32" in error
        # the address follows once the preheated kernel has drawn the page, which on a
        # busy machine can be after this page's own kernel has (at most 60 s of waiting)
        deadline = time.monotonic() + 90
        while f"token={token} " not in (tmp_path / "serve.log").read_text() and \
                time.monotonic() < deadline and proc.poll() is None:
            time.sleep(1)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            status = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            status = None
        log.close()
    assert status == 0, (tmp_path / "serve.log").read_text()
    text = (tmp_path / "serve.log").read_text()
    assert f"http://127.0.0.1:{port}/?token={token} " in text
    if _sockets_fit(tempfile.gettempdir()):  # the kernels were on Unix sockets
        assert "running over TCP" not in text, text


# ---- info PATH ------------------------------------------------------------------------

SLOW_RANK = ROOT / "data" / "simulated" / "slow-rank"


def _rank_folders(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir()
                  if p.is_dir() and p.name.endswith(("_ascend_pt", "_ascend_ms")))


def _measured_step_ms(path: Path) -> float:
    """Independent of perfkit's loaders: step_trace_time.csv of every rank, read as text.

    A step lasts Computing + Communication(Not Overlapped) + Free on a rank; the job's step
    is its slowest rank's; the measured figure is the median over the steps.
    """
    import csv
    import statistics

    per_step: dict[int, float] = {}
    for folder in _rank_folders(path):
        with (folder / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").open(newline="") as f:
            for row in csv.DictReader(f):
                us = (float(row["Computing"]) + float(row["Communication(Not Overlapped)"])
                      + float(row["Free"]))
                step = int(row["Step"])
                per_step[step] = max(per_step.get(step, 0.0), us)
    return statistics.median(per_step.values()) / 1e3


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_info_on_a_profile(capsys: pytest.CaptureFixture[str]) -> None:
    from perfkit.simulate.scenarios import scenario

    ranks = _rank_folders(SLOW_RANK)
    (fault,) = scenario("slow-rank").faults  # the answer key the data were made with
    assert cli.main(["info", str(SLOW_RANK)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\s+format\s+an Ascend text export \(ascend_text\)$", out,
                     re.MULTILINE)
    assert re.search(r"^\s+framework\s+pytorch$", out, re.MULTILINE)
    assert re.search(r"^\s+device\s+npu$", out, re.MULTILINE)
    assert re.search(r"^\s+profiler level\s+Level1$", out, re.MULTILINE)
    assert re.search(rf"^\s+ranks\s+{len(ranks)} \(0-{len(ranks) - 1}\)$", out, re.MULTILINE)
    assert re.search(rf"^\s+world size\s+{len(ranks)}$", out, re.MULTILINE)
    assert "Steps: 2 (1-2)" in out
    value, unit = re.search(r"measured step time: ([\d,.]+) (µs|ms|s)\b", out).groups()
    step_ms = float(value.replace(",", "")) * {"µs": 1e-3, "ms": 1.0, "s": 1e3}[unit]
    # three significant digits, in the unit that fits
    assert step_ms == pytest.approx(_measured_step_ms(SLOW_RANK), rel=5e-3)
    assert len(value.replace(",", "").replace(".", "").lstrip("0")) >= 3
    # the slowest rank of every step is the slow one, and it is the first finding
    rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+[\d,.]+\s+[\d.]+ %", out, re.MULTILINE)
    assert rows and {int(rank) for _, rank in rows} == {fault.rank}
    first = re.search(r"^\s+1\. \[(\w+)\] (.*)$", out, re.MULTILINE)
    assert first.group(1) == "high" and f"Rank {fault.rank} computes" in first.group(2)
    assert len(re.findall(r"^\s+\d+\. \[", out, re.MULTILINE)) <= 5


def test_profile_info_text_takes_a_profile_and_skips_findings() -> None:
    text = cli.profile_info_text(pk.load(SLOW_RANK), n_findings=0)
    assert "ascend_text" in text and "measured step time" in text
    assert "findings" not in text.lower()
    with pytest.raises(pk.InvalidArgumentError):
        cli.profile_info_text(pk.load(SLOW_RANK), n_findings=-1)


def test_info_missing_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["info", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err == f"perfkit: error: profile path not found: {tmp_path / 'nope'}\n"
    assert cli.main(["info", str(tmp_path)]) == 2  # a folder with no profile in it
    err = capsys.readouterr().err
    assert err.startswith(f"perfkit: error: {tmp_path}: no profile found")
    assert err.count("\n") == 1


# ---- report ---------------------------------------------------------------------------

def _snapshot(path: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in path.rglob("*")}


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.timeout(120)
def test_report_writes_a_self_contained_page(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.html"
    before = _snapshot(SLOW_RANK)
    start = time.perf_counter()
    assert cli.main(["report", str(SLOW_RANK), "-o", str(out)]) == 0
    seconds = time.perf_counter() - start
    assert seconds < 60, f"perfkit report took {seconds:.1f} s"
    captured = capsys.readouterr()
    assert captured.out.strip() == f"wrote {out}"
    assert "perfkit report: 00_start_here.ipynb" in captured.err  # the progress bar
    page = out.read_text(encoding="utf-8")
    # executed outputs: the facts table, inline SVG charts, the findings
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<svg") >= 2
    assert "ascend_text" in page and "Rank 2 computes" in page
    assert f"<title>perfkit report: {SLOW_RANK}</title>" in page
    assert f"perfkit {pk.__version__}" in page
    # no code: neither the sources of the code cells nor prompts
    nb = nbformat.read(ROOT / "notebooks" / "00_start_here.ipynb", as_version=4)
    assert "pk.load(PROFILE, run=RUN)" in "".join(c.source for c in nb.cells)
    for cell in nb.cells:
        if cell.cell_type == "code":
            for line in cell.source.splitlines():
                if len(line.strip()) > 12:
                    assert line.strip() not in page, line
    assert "In [" not in page and "jp-InputPrompt" not in page
    # self-contained: nothing fetched from elsewhere
    assert not CDN.findall(page), CDN.findall(page)
    assert "<script" not in page.lower() and "<link" not in page.lower()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page, re.IGNORECASE)
    # nothing was written into the profile folder
    assert _snapshot(SLOW_RANK) == before


def test_report_errors_are_one_line(tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.html"
    missing = tmp_path / "nope"
    assert cli.main(["report", str(missing), "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"perfkit: error: profile path not found: {missing}\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["report", str(empty), "-o", str(out)]) == 2  # nothing loadable
    err = capsys.readouterr().err
    assert err.startswith(f"perfkit: error: {empty}: no profile found") and \
        err.count("\n") == 1
    assert cli.main(["report", str(SLOW_RANK), "-o", str(tmp_path / "no" / "r.html")]) == 2
    assert "output folder does not exist" in capsys.readouterr().err
    inside = SLOW_RANK / "report.html"
    assert cli.main(["report", str(SLOW_RANK), "-o", str(inside)]) == 2
    assert "inside the profile folder" in capsys.readouterr().err and not inside.exists()
    assert cli.main(["report", str(SLOW_RANK), "-o", str(out), "--notebook", "nope"]) == 2
    err = capsys.readouterr().err
    assert "notebook not found: nope" in err and "00_start_here" in err
    assert not out.exists()


@pytest.mark.timeout(120)
def test_report_names_the_failing_cell(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("PROFILE = None")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_markdown_cell("# A broken notebook"),
                nbformat.v4.new_code_cell("print(PROFILE)"),
                nbformat.v4.new_code_cell("x = 1\nraise ValueError('no luck with ' + PROFILE)")]
    broken = tmp_path / "broken.ipynb"
    nbformat.write(nb, broken)
    out = tmp_path / "report.html"
    assert cli.main(["report", str(SLOW_RANK), "-o", str(out), "--notebook", str(broken),
                     "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == (f"perfkit: error: broken.ipynb, cell 4 ('x = 1') failed: ValueError: "
                   f"no luck with {SLOW_RANK}\n")
    assert not out.exists()


def test_inject_parameters(tmp_path: Path) -> None:
    from perfkit import report

    nb = nbformat.v4.new_notebook()
    first = nbformat.v4.new_code_cell("PROFILE = 'default'")
    first.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("intro"), first,
                nbformat.v4.new_code_cell("print(PROFILE)")]
    assert report.inject_parameters(nb, {"PROFILE": "C:\\a 'b'"}, N=3) == 2
    cell = nb.cells[2]
    assert cell.metadata["tags"] == ["injected-parameters"]
    scope: dict = {}
    exec(cell.source, scope)
    assert scope["PROFILE"] == "C:\\a 'b'" and scope["N"] == 3
    with pytest.raises(report.ReportError, match="no cell tagged 'parameters'"):
        report.inject_parameters(nbformat.v4.new_notebook(), PROFILE="x")


# ---- simulate -------------------------------------------------------------------------

@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_simulate_writes_a_loadable_profile(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "job"
    dp, tp, pp = 2, 2, 2
    assert cli.main(["simulate", str(out), "--model", "llama2-7b", "--num-layers", "4",
                     "--dp", str(dp), "--tp", str(tp), "--pp", str(pp),
                     "--num-micro-batches", "2", "--steps", "2", "--light",
                     "--fault", "slow-rank:rank=5,factor=1.5",
                     "--fault", "data-stall:stall_us=20000,every=2"]) == 0
    captured = capsys.readouterr()
    assert f"wrote {dp * tp * pp} rank folders, 2 steps" in captured.out
    folders = _rank_folders(out)
    assert len(folders) == dp * tp * pp
    meta = json.loads((folders[0] / "profiler_metadata.json").read_text())
    sim = meta["perfkit_simulation"]
    assert sim["parallel"]["dp"] == dp and sim["model"]["num_layers"] == 4
    assert sim["faults"] == [{"fault": "SlowRank", "rank": 5, "factor": 1.5},
                             {"fault": "DataLoadingStall", "stall_us": 20000.0, "every": 2,
                              "ranks": None}]
    job = pk.load(out, cache=False)
    assert list(job.ranks) == list(range(dp * tp * pp))
    assert sorted(job.steps["step"].unique()) == [1, 2]


def test_simulate_scenario_gives_the_bundled_files(tmp_path: Path) -> None:
    out = tmp_path / "slow-rank"
    assert cli.main(["simulate", str(out), "--scenario", "slow-rank"]) == 0
    mine = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    bundled = {p.relative_to(SLOW_RANK): p.read_bytes() for p in SLOW_RANK.rglob("*")
               if p.is_file() and p.name != "README.md"}
    assert mine.keys() == bundled.keys()
    assert all(mine[k] == bundled[k] for k in mine)


def test_simulate_out_folder_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sim"
    small = ["--model", "llama2-7b", "--num-layers", "2", "--steps", "1", "--light"]
    assert cli.main(["simulate", str(out), "--dp", "4", *small]) == 0
    assert len(_rank_folders(out)) == 4
    # an earlier simulation is replaced: no stale rank folders are left
    assert cli.main(["simulate", str(out), "--dp", "2", *small]) == 0
    assert len(_rank_folders(out)) == 2
    assert "replaced 4 rank folders" in capsys.readouterr().out
    # a folder holding anything else is refused, and kept with --force
    (out / "notes.txt").write_text("mine")
    assert cli.main(["simulate", str(out), "--dp", "2", *small]) == 2
    err = capsys.readouterr().err
    assert "is not empty" in err and "--force" in err and err.count("\n") == 1
    assert cli.main(["simulate", str(out), "--dp", "2", "--force", *small]) == 0
    assert (out / "notes.txt").read_text() == "mine" and len(_rank_folders(out)) == 2
    assert not [p for p in out.iterdir() if p.name.startswith(".perfkit")]


def test_parse_fault() -> None:
    from perfkit.simulate import (
        DataLoadingStall,
        NoOverlap,
        SlowLink,
        SlowRank,
        UnfusedOperators,
    )

    assert cli.parse_fault("slow-rank:rank=3,factor=1.5") == SlowRank(3, 1.5)
    assert cli.parse_fault("slow-rank:3") == SlowRank(3)
    assert cli.parse_fault("SlowRank:3, factor=2") == SlowRank(3, 2.0)
    assert cli.parse_fault("slow-link:2,3,0.15") == SlowLink(2, 3, 0.15)
    assert cli.parse_fault("data-stall:stall-us=1000,ranks=0+2") == \
        DataLoadingStall(1000.0, ranks=(0, 2))
    assert cli.parse_fault("data-loading-stall:ranks=all") == DataLoadingStall()
    assert cli.parse_fault("unfused-operators:ops=rms_norm+rotary") == \
        UnfusedOperators(("rms_norm", "rotary"))
    assert cli.parse_fault("no-overlap") == NoOverlap()
    assert set(cli.FAULTS) >= {"slow-rank", "slow-link", "data-loading-stall",
                               "memory-pressure", "full-recompute"}


@pytest.mark.parametrize("spec, message", [
    ("slow-ranks:3", "unknown fault 'slow-ranks'; known: slow-rank"),
    ("slow-rank:rnk=3", "unknown field 'rnk'; its fields are: rank, factor"),
    ("slow-rank:rank=x", "--fault slow-rank: rank: must be a whole number"),
    ("slow-rank", "--fault slow-rank: needs rank"),
    ("slow-rank:rank=-1", "--fault slow-rank: rank: must be a whole number >= 0"),
    ("slow-link:2,2", "--fault slow-link: dst: must differ from src"),
    ("slow-rank:rank=1,2", "a bare value cannot follow a field=value"),
    ("no-overlap:1", "--fault no-overlap: takes no values"),
    ("slow-rank:rank=1,rank=2", "rank given twice"),
    ("slow-rank:9", "outside the job"),  # caught by the simulator: 2 ranks
])
def test_bad_fault_is_a_one_line_error(spec: str, message: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sim"
    assert cli.main(["simulate", str(out), "--model", "llama2-7b", "--num-layers", "2",
                     "--dp", "2", "--steps", "1", "--light", "--fault", spec]) == 2
    err = capsys.readouterr().err
    # one error line; a rank outside the job is found by the simulator, after the line
    # that says what is being simulated
    (line,) = [ln for ln in err.splitlines() if ln.startswith("perfkit: error: ")]
    assert line == err.splitlines()[-1] and message in line, err
    assert not out.exists()


def test_simulate_option_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sim"
    for argv, message in (
            (["--scenario", "nope"], "--scenario: must be one of llama2-13b-baseline-dp16"),
            (["--scenario", "slow-rank", "--dp", "2"], "drop --dp"),
            (["--model", "gpt-5"], "--model: unknown preset"),
            (["--hardware", "tpu"], "--hardware: unknown preset"),
            (["--tp", "3"], "tp: must divide num_attention_heads"),
            (["--recompute-layers", "a"], "--recompute-layers: must be a whole number")):
        assert cli.main(["simulate", str(out), *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("perfkit: error: ") and message in err, (argv, err)
        assert err.count("\n") == 1
    assert not out.exists()


# ---- help ---------------------------------------------------------------------------

@pytest.mark.parametrize("command, words", [
    ([], ["serve", "info", "report", "simulate"]),
    (["serve"], ["Voila", "--port"]),
    (["info"], ["PATH", "findings", "--findings"]),
    (["report"], ["self-contained", "--output", "--notebook", "--timeout", "00_start_here"]),
    (["simulate"], ["--scenario", "slow-rank", "--fault", "slow-link:2,3,0.15", "--dp",
                    "--force"]),
])
def test_help(command: list[str], words: list[str],
              capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    for word in words:
        assert word in out, word


def test_simulate_refuses_a_job_that_does_not_fit(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Llama2-7B on one 64 GiB NPU without sharding cannot run: exit 2 unless --allow-oom."""
    job = ["--model", "llama2-7b", "--num-layers", "32", "--steps", "1", "--light"]
    assert cli.main(["simulate", str(tmp_path / "no"), *job]) == 2
    err = capsys.readouterr().err
    assert "cannot run" in err
    # the command line's words: its flags, not the Python API's keyword (issue 64)
    assert "pass --allow-oom to write the profile anyway" in err
    assert "allow_oom" not in err and "ParallelConfig(" not in err
    assert "--optimizer-shard" in err and "--recompute" in err
    assert not any((tmp_path / "no").glob("*_ascend_pt"))
    with pytest.warns(UserWarning, match="cannot run"):
        assert cli.main(["simulate", str(tmp_path / "yes"), *job, "--allow-oom"]) == 0
    assert len(list((tmp_path / "yes").glob("*_ascend_pt"))) == 1


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
@pytest.mark.parametrize("name", WILD)
def test_info_reads_every_wild_profile(name: str, tmp_path: Path, monkeypatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``perfkit info`` on each real profile of other projects: an answer, never an error
    (the AMD trace without ProfilerStep once failed on its unnumbered step; its steps are
    now its optimizer's iterations)."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    assert cli.main(["info", str(shared_sample(f"wild/{name}"))]) == 0
    captured = capsys.readouterr()
    assert "error" not in captured.err.lower()
    assert "measured step time:" in captured.out and "Top findings" in captured.out
    if name == "tl_ddp_resnet18_mi300":  # no ProfilerStep: its 5 Optimizer.step iterations
        assert "Steps: 5 (0-4)" in captured.out
        assert "iterations inferred from the optimizer's Optimizer.step#SGD.step annotations" \
            in captured.out
        assert re.search(r"^\s+4\s+0\s+[\d.]+\s+[\d.]+ %", captured.out, re.MULTILINE)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(sys.platform == "win32", reason="process groups and SIGINT are POSIX's")
def test_ctrl_c_while_the_page_is_drawn_stops_quietly(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the terminal's process group) while the preheated kernel still
    runs the dashboard: no ipykernel traceback, and no kernel left running."""
    log_path = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if k != cli.PROFILE_ENV}
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "perfkit", "serve", "--port", str(_free_port()),
             "--no-browser"], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
            start_new_session=True)  # its own group, as a terminal's foreground job
        try:
            deadline = time.monotonic() + 120
            while "it runs the notebook" not in log_path.read_text() and \
                    time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            text = log_path.read_text()
            assert "it runs the notebook" in text and "perfkit: the page is ready" not in text, text
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    text = log_path.read_text()
    assert "Traceback" not in text and "ZMQError" not in text, text
    assert "Kernel shutdown" in text  # Voila ended the kernel, which it had started
    deadline = time.monotonic() + 10  # every process of the group has ended
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("a process of perfkit serve's group still runs")


def test_serve_s_log_drops_what_a_user_cannot_act_on() -> None:
    import logging

    from perfkit.cli.launcher import _no_voila_address

    def record(msg: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("Voila", logging.WARNING, __file__, 1, msg, args, None)

    # the masked address (perfkit prints the working one) and the trust warning about
    # perfkit's own dashboard notebook, which ships without stored outputs
    assert not _no_voila_address(record("Voil\u00e0 is running at:\nhttp://x/?token=..."))
    assert not _no_voila_address(record("Notebook %s is not trusted", "dashboard.ipynb"))
    from perfkit.resources import notebook_dir

    nb = json.loads((notebook_dir() / "dashboard.ipynb").read_text(encoding="utf-8"))
    assert not any(c.get("outputs") for c in nb["cells"])
    # anything else is kept
    assert _no_voila_address(record("Kernel started: %s", "abc"))
    assert _no_voila_address(record("Notebook %s could not be read", "x.ipynb"))
