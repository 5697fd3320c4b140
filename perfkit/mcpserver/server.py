"""``perfkit mcp``: the tools of :class:`perfkit.mcpserver.tools.Tools` served over stdio
with the official MCP Python SDK (PyPI ``mcp``; ``pip install perfkit[mcp]``).

Each tool returns the JSON text of one answer (docs/json.md); an error (a path outside the
allowed folders, a file perfkit cannot read) comes back as the tool's error result, its
message naming the path. Nothing leaves the machine: stdio only, no network.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from ..errors import PerfkitError
from .tools import Tools

__all__ = ["server_class", "tool_error_class", "build_server", "serve"]

#: What the server tells the client about itself.
INSTRUCTIONS = (
    "perfkit reads LLM training profiles (PyTorch Kineto, torch_npu / Ascend, MindSpore) "
    "and answers with JSON (schema: perfkit/answers/schema.json). Start with "
    "open_profile(path); paths must lie in the folders the server was started with "
    "(--allow), or be sample:NAME for a bundled sample.")


def server_class() -> Any:
    """The SDK's decorator-based server: ``MCPServer`` (mcp 2) or ``FastMCP`` (mcp 1).

    Raises
    ------
    PerfkitError
        The ``mcp`` package is not installed (``pip install perfkit[mcp]``).
    """
    try:
        from mcp.server.mcpserver import MCPServer
        return MCPServer
    except ImportError:
        pass
    try:
        from mcp.server.fastmcp import FastMCP
        return FastMCP
    except ImportError as exc:
        raise PerfkitError("perfkit mcp needs the MCP Python SDK: pip install "
                           "'perfkit[mcp]' (or pip install mcp)") from exc


def tool_error_class() -> type[Exception]:
    """The SDK's ``ToolError``: raised in a tool, its message reaches the client as the
    error result (another exception's message is hidden by mcp 2)."""
    try:
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        from mcp.server.fastmcp.exceptions import ToolError
    return ToolError


def _call(method: Any, *args: Any, **kwargs: Any) -> str:
    """``method(*args, **kwargs)``'s answer as JSON text; an error as the SDK's
    ``ToolError`` with perfkit's one-line message (the path it names included)."""
    try:
        answer = method(*args, **kwargs)
    except PerfkitError as exc:
        raise tool_error_class()(" ".join(str(exc).split())) from exc
    except Exception as exc:  # noqa: BLE001 - a tool's boundary: one line for the client
        text = " ".join(str(exc).split())[:500]
        raise tool_error_class()(f"unexpected {type(exc).__name__}: {text}") from exc
    return json.dumps(answer, ensure_ascii=False, allow_nan=False)


def build_server(allow: Iterable[str | os.PathLike[str]]) -> Any:
    """The MCP server with perfkit's tools, reading only inside ``allow``."""
    tools = Tools(allow)
    server = server_class()("perfkit", instructions=INSTRUCTIONS)

    @server.tool()
    def open_profile(path: str, run: int | str | None = None, findings: int = 5) -> str:
        """Open a profile (folder or file, or sample:NAME): what it is, the job read from
        it, its steps, the top findings and what its recording lacks (the "info" answer)."""
        return _call(tools.open_profile, path, run=run, findings=findings)

    @server.tool()
    def list_runs(path: str) -> str:
        """The separate runs a folder holds, with the id or name open_profile's run takes
        (the "runs" answer)."""
        return _call(tools.list_runs, path)

    @server.tool()
    def get_job(path: str, run: int | str | None = None) -> str:
        """The job read from the profile: model, layout, batch, hardware, dtype, each
        value with its source (the "job" answer)."""
        return _call(tools.get_job, path, run=run)

    @server.tool()
    def advise(path: str, run: int | str | None = None, limit: int | None = None) -> str:
        """The advisor's findings, best first, each with a stable id, the milliseconds
        per step at stake, evidence and what to change (the "advise" answer)."""
        return _call(tools.advise, path, run=run, limit=limit)

    @server.tool()
    def check_recording(path: str, run: int | str | None = None) -> str:
        """What the recording lacks per analysis, and the exact profiler switch that
        records it, with its cost (the "check" answer)."""
        return _call(tools.check_recording, path, run=run)

    @server.tool()
    def compare(a: str, b: str) -> str:
        """Run b against run a: the verdict (faster, slower, no change) with the noise,
        where the time went, operators and job changes (the "compare" answer)."""
        return _call(tools.compare, a, b)

    @server.tool()
    def predict_layout(path: str, run: int | str | None = None, dp: int | None = None,
                       tp: int | None = None, pp: int | None = None,
                       vpp: int | None = None, cp: int | None = None,
                       ep: int | None = None, micro_batch_size: int | None = None,
                       num_micro_batches: int | None = None,
                       optimizer_shard: int | None = None, recompute: str | None = None,
                       sequence_parallel: bool | None = None) -> str:
        """Calibrate the step model on the profile and predict another layout of the
        same job: step time and band, parts, memory fit (the "predict" answer). Options
        not given keep the run's values."""
        return _call(
            tools.predict_layout, path, run=run, dp=dp, tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep,
            micro_batch_size=micro_batch_size, num_micro_batches=num_micro_batches,
            optimizer_shard=optimizer_shard, recompute=recompute,
            sequence_parallel=sequence_parallel)

    return server


def serve(allow: Iterable[str | os.PathLike[str]]) -> None:
    """Serve the tools on stdin / stdout until the client closes them."""
    build_server(allow).run("stdio")
