"""``perfkit mcp``: the tools of :class:`perfkit.mcpserver.tools.Tools` served over stdio
with the official MCP Python SDK (PyPI ``mcp``; ``pip install perfkit[mcp]``).

Each tool returns one answer (docs/json.md) as the result's structured content and as its
JSON text. An error (a path outside the allowed folders, a file perfkit cannot read, an
argument of the wrong type) comes back as the tool's error result whose content is the
``error`` answer (:func:`perfkit.answers.error_answer`: a code, the one-line message
naming the path, and what to choose from where a folder holds several runs). Nothing
leaves the machine: stdio only, no network.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from ..answers.error import error_answer
from ..errors import InvalidArgumentError, PerfkitError
from .tools import Tools

__all__ = ["server_class", "error_result", "build_server", "serve"]

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


def error_result(answer: dict[str, Any]) -> Any:
    """The SDK's ``CallToolResult`` of an ``error`` answer: flagged as an error, the answer
    as its JSON text and its structured content (mcp 1 and 2 name the fields alike on the
    wire, so the result is built from those names)."""
    try:
        from mcp.types import CallToolResult
    except ImportError as exc:  # pragma: no cover - server_class() said so first
        raise PerfkitError("perfkit mcp needs the MCP Python SDK") from exc
    text = json.dumps(answer, ensure_ascii=False, allow_nan=False)
    return CallToolResult.model_validate({"content": [{"type": "text", "text": text}],
                                          "structuredContent": answer, "isError": True})


def _call(method: Any, *args: Any, **kwargs: Any) -> Any:
    """``method(*args, **kwargs)``'s answer (a dict: the SDK sends it as structured content
    and JSON text); an error as an error result holding the ``error`` answer."""
    try:
        return method(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - a tool's boundary: an answer for the client
        path = kwargs.get("path", args[0] if args and isinstance(args[0], str) else None)
        return error_result(error_answer(exc, path=path))


def _arguments_error(tool: str, exc: BaseException,
                     path: str | None = None) -> dict[str, Any]:
    """The ``error`` answer of arguments the SDK refused (pydantic's ``ValidationError``):
    which argument, and what it must be, in one line; ``path``: the call's own, where it
    gave one."""
    errors = exc.errors() if hasattr(exc, "errors") else []
    said = []
    for e in errors:
        name = ".".join(str(part) for part in e.get("loc", ())) or "arguments"
        said.append(f"{name}: {'missing' if e.get('type') == 'missing' else e.get('msg')}")
    first = ".".join(str(p) for p in errors[0].get("loc", ())) if errors else None
    err = InvalidArgumentError(first or "arguments", "; ".join(said) or str(exc))
    answer = error_answer(err, path=path, parameter=first)
    answer["message"] = f"{tool}: {'; '.join(said) or ' '.join(str(exc).split())}"
    return answer


def _server_with_answers(base: type) -> type:
    """``base`` (the SDK's server class) whose refused arguments come back as an ``error``
    answer too, not as pydantic's multi-line dump with a link to its docs."""
    class PerfkitServer(base):  # type: ignore[misc, valid-type]
        async def call_tool(self, name: str, arguments: dict[str, Any], *rest: Any,
                            **kw: Any) -> Any:
            known = getattr(self, "_perfkit_tools", None)
            if known is None:  # the tools are all registered before the first call
                known = self._perfkit_tools = [t.name for t in await self.list_tools()]
            if name not in known:  # the SDK answers plain text: "Unknown tool: NAME"
                return error_result(error_answer(InvalidArgumentError(
                    "name", f"no such tool; the tools are {', '.join(known)}", name),
                    parameter="name"))
            try:
                return await super().call_tool(name, arguments, *rest, **kw)
            except Exception as exc:
                cause = exc.__cause__
                if type(cause).__name__ != "ValidationError":
                    raise
                path = (arguments or {}).get("path")
                return error_result(_arguments_error(
                    name, cause, path if isinstance(path, str) else None))

    return PerfkitServer


def _named(cls: type) -> Any:
    """An instance of ``cls`` that introduces itself as perfkit, with perfkit's version
    (mcp 2 takes ``version=``; mcp 1's FastMCP does not, and its low-level server holds it)."""
    import inspect

    from .._version import __version__

    if "version" in inspect.signature(cls.__init__).parameters:
        return cls("perfkit", instructions=INSTRUCTIONS, version=__version__)
    server = cls("perfkit", instructions=INSTRUCTIONS)
    lowlevel = getattr(server, "_mcp_server", None)
    if lowlevel is not None and hasattr(lowlevel, "version"):
        lowlevel.version = __version__
    return server


def build_server(allow: Iterable[str | os.PathLike[str]]) -> Any:
    """The MCP server with perfkit's tools, reading only inside ``allow``."""
    tools = Tools(allow)
    server = _named(_server_with_answers(server_class()))

    @server.tool()
    def open_profile(path: str, run: int | str | None = None, findings: int = 5) -> dict[str, Any]:
        """Open a profile (folder or file, or sample:NAME): what it is, the job read from
        it, its steps, the top findings and what its recording lacks (the "info" answer)."""
        return _call(tools.open_profile, path, run=run, findings=findings)

    @server.tool()
    def list_runs(path: str) -> dict[str, Any]:
        """The separate runs a folder holds, with the id or name open_profile's run takes
        (the "runs" answer)."""
        return _call(tools.list_runs, path)

    @server.tool()
    def get_job(path: str, run: int | str | None = None) -> dict[str, Any]:
        """The job read from the profile: model, layout, batch, hardware, dtype, each
        value with its source (the "job" answer)."""
        return _call(tools.get_job, path, run=run)

    @server.tool()
    def advise(path: str, run: int | str | None = None, limit: int | None = None) -> dict[str, Any]:
        """The advisor's findings, best first, each with a stable id, the milliseconds
        per step at stake, evidence and what to change (the "advise" answer)."""
        return _call(tools.advise, path, run=run, limit=limit)

    @server.tool()
    def check_recording(path: str, run: int | str | None = None) -> dict[str, Any]:
        """What the recording lacks per analysis, and the exact profiler switch that
        records it, with its cost (the "check" answer)."""
        return _call(tools.check_recording, path, run=run)

    @server.tool()
    def compare(a: str, b: str, run_a: int | str | None = None,
                run_b: int | str | None = None) -> dict[str, Any]:
        """Run b against run a: the verdict (faster, slower, no change) with the noise,
        where the time went, operators and job changes (the "compare" answer). run_a and
        run_b pick one of the separate runs a folder holds (list_runs shows them)."""
        return _call(tools.compare, a, b, run_a=run_a, run_b=run_b)

    @server.tool()
    def predict_layout(path: str, run: int | str | None = None, dp: int | None = None,
                       tp: int | None = None, pp: int | None = None,
                       vpp: int | None = None, cp: int | None = None,
                       ep: int | None = None, micro_batch_size: int | None = None,
                       num_micro_batches: int | None = None,
                       optimizer_shard: int | None = None, recompute: str | None = None,
                       sequence_parallel: bool | None = None, model: str | None = None,
                       hardware: str | None = None,
                       config: list[str] | None = None) -> dict[str, Any]:
        """Calibrate the step model on the profile and predict another layout of the
        same job: step time and band, parts, memory fit (the "predict" answer). Options
        not given keep the run's values. model and hardware (preset names) and config
        (MindFormers YAML, HF config.json or training log paths) give what the profile
        does not show."""
        return _call(
            tools.predict_layout, path, run=run, dp=dp, tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep,
            micro_batch_size=micro_batch_size, num_micro_batches=num_micro_batches,
            optimizer_shard=optimizer_shard, recompute=recompute,
            sequence_parallel=sequence_parallel, model=model, hardware=hardware,
            config=config)

    return server


def serve(allow: Iterable[str | os.PathLike[str]]) -> None:
    """Serve the tools on stdin / stdout until the client closes them."""
    build_server(allow).run("stdio")
