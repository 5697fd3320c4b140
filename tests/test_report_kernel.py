"""The kernel ``perfkit report`` and the notebook tests start: how its channels connect.

Jupyter's default TCP transport picks five free ports, releases them and lets the kernel
bind them; a second process starting kernels meanwhile can take one ("Address already in
use", seen in CI with two test workers). On POSIX perfkit uses Unix sockets in the
temporary folder instead. Checked from inside the kernel (its own connection info), and on
the file system: nothing written beside the notebook, no socket left behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import nbformat
import pytest

from perfkit import report

pytestmark = pytest.mark.skipif(os.name != "posix", reason="Unix sockets are POSIX only")


def _run(tmp_path: Path, **kwargs: object) -> dict:
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(
        "import json, os\n"
        "from ipykernel import get_connection_info\n"
        "info = get_connection_info(unpack=True)\n"
        "print(json.dumps({'transport': info['transport'], 'ip': info['ip'],"
        " 'cwd': os.getcwd()}))"))
    report.notebook_client(nb, cwd=tmp_path, timeout=60, **kwargs).execute()
    return json.loads(nb.cells[0].outputs[-1]["text"])


def test_the_default_kernel_talks_over_unix_sockets_in_the_temporary_folder(
        tmp_path: Path) -> None:
    seen = _run(tmp_path)
    assert seen["transport"] == "ipc"
    assert Path(seen["cwd"]) == tmp_path  # the kernel still runs in the notebook's folder
    prefix = Path(seen["ip"])
    assert prefix.is_absolute() and prefix.parent == Path(tempfile.gettempdir())
    assert list(tmp_path.iterdir()) == []  # no socket beside the notebook
    assert list(prefix.parent.glob(prefix.name + "-*")) == []  # removed at shutdown


def test_tcp_is_still_available(tmp_path: Path) -> None:
    seen = _run(tmp_path, transport="tcp")
    assert seen["transport"] == "tcp" and seen["ip"] == "127.0.0.1"


def test_an_unknown_transport_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'tcp' or 'ipc'"):
        report.notebook_client(nbformat.v4.new_notebook(), cwd=tmp_path, transport="udp")
