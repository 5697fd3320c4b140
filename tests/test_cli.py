"""The ``perfkit`` command and the dashboard notebook it serves."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from importlib.metadata import entry_points
from pathlib import Path

import nbformat
import pytest

import perfkit as pk
from perfkit import cli

__all__: list[str] = []

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
    monkeypatch.setattr(cli, "DASHBOARD_NOTEBOOK", missing)
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


def test_run_as_script_exits_with_status(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    done = subprocess.run([sys.executable, "-m", "perfkit.cli", "serve", str(missing),
                           "--no-browser"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == f"perfkit: error: profile path not found: {missing}"
    done = subprocess.run([sys.executable, "-m", "perfkit.cli", "info"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "ascend-910b" in done.stdout


def test_voila_arguments() -> None:
    argv = cli.voila_argv(Path("nb.ipynb"), 9999, open_browser=False, template="perfkit")
    assert "--Voila.ip=127.0.0.1" in argv and "--port=9999" in argv
    assert "--strip_sources=True" in argv and "--no-browser" in argv
    assert "--template=perfkit" in argv
    assert "--no-browser" not in cli.voila_argv(Path("nb.ipynb"), 9999, open_browser=True)


# ---- the notebook ---------------------------------------------------------------------

def test_dashboard_notebook_is_stored_clean() -> None:
    nb = nbformat.read(cli.locate_dashboard(), as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "code" and "parameters" in first.metadata.get("tags", [])
    assert cli.PROFILE_ENV in first.source
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def test_dashboard_notebook_executes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from nbclient import NotebookClient

    monkeypatch.setenv(cli.PROFILE_ENV, str(tmp_path))
    nb = nbformat.read(cli.locate_dashboard(), as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    panel = nb.cells[-1].outputs[-1].data
    assert "application/vnd.jupyter.widget-view+json" in panel
    assert "MFU" in panel["text/html"] and str(tmp_path) in panel["text/html"]


# ---- serve: the real server -----------------------------------------------------------

async def _drive_panel(port: int, page: str) -> tuple[dict, str]:
    """Act as the browser: fetch the widget states from the page's kernel, set tp=3.

    Uses the Jupyter widget protocol over the kernel websocket that Voila's page opens:
    ``jupyter.widget.control`` / ``request_states``, then an ``update`` of the tp box.
    Returns the states and the text of the first HTML value that mentions ``tp:``.
    """
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

    ws = await websocket_connect(f"ws://127.0.0.1:{port}/api/kernels/{config['kernelId']}"
                                 f"/channels?session_id={session}")
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
                    if v["state"].get("description") == "tensor parallel (tp)"]
        await ws.write_message(message("comm_msg", {"comm_id": tp_id, "data": {
            "method": "update", "state": {"value": 3}, "buffer_paths": []}}))
        for _ in range(500):
            value = str((await next_comm_msg()).get("state", {}).get("value", ""))
            if "tp:" in value:
                return states, value
        raise AssertionError("the panel never reported the bad tp")
    finally:
        ws.close()


@pytest.mark.timeout(300)
def test_serve_smoke(tmp_path: Path) -> None:
    port = _free_port()
    profile = tmp_path / "my_profile"
    profile.mkdir()
    log = (tmp_path / "serve.log").open("w")
    env = {k: v for k, v in os.environ.items() if k != cli.PROFILE_ENV}
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfkit.cli", "serve", str(profile), "--port", str(port),
         "--no-browser"], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    url = f"http://127.0.0.1:{port}/"
    page = None
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=120) as response:
                    assert response.status == 200
                    page = response.read().decode("utf-8")
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(1)
        assert page is not None, (tmp_path / "serve.log").read_text()
        # executed output of the notebook: the panel's table and the profile path
        assert "MFU" in page and "tokens/s/p" in page
        assert str(profile) in page
        assert not CDN.findall(page), CDN.findall(page)
        # sources are stripped: the notebook's code is not in the page
        assert "metrics_panel(profile=PROFILE)" not in page
        # the live panel in the page's kernel: numbers, an inline SVG chart, and an error
        # message (not a crash) when the browser sets a bad tp
        states, error = asyncio.run(_drive_panel(port, page))
        html_values = [v["state"].get("value", "") for v in states.values()
                       if v["model_name"] == "HTMLModel"]
        assert any("MFU" in v for v in html_values)
        assert any(v.lstrip().startswith("<svg") for v in html_values)
        assert "tp: must divide num_attention_heads=40" in error
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
    assert f"http://127.0.0.1:{port}/" in text
