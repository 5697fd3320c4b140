"""``perfkit mcp``, driven by the MCP SDK's own client over stdio: the tools answer with
JSON valid against the shipped schema, and a path outside ``--allow`` is refused."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from answer_schema import no_nan, validate

mcp = pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from perfkit._version import __version__ as pk_version  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data"
TOOLS = {"open_profile", "list_runs", "get_job", "advise", "check_recording", "compare",
         "predict_layout"}


def _is_error(result: Any) -> bool:
    """The result's error flag: ``is_error`` (mcp 2) or ``isError`` (mcp 1)."""
    flag = getattr(result, "is_error", None)
    return bool(result.isError if flag is None else flag)


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def _session_calls(allowed: Path, outside: Path) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "perfkit", "mcp", "--allow", str(allowed)],
                                   env=dict(os.environ))
    out: dict[str, Any] = {}
    with open(os.devnull, "w") as errlog:  # the loaders' progress lines go to stderr
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as session:
            out["init"] = await session.initialize()
            out["tools"] = {t.name for t in (await session.list_tools()).tools}
            out["advise"] = await session.call_tool(
                "advise", {"path": "sample:slow-rank", "limit": 1})
            out["open"] = await session.call_tool("open_profile",
                                                  {"path": str(allowed), "findings": 0})
            out["outside"] = await session.call_tool("open_profile", {"path": str(outside)})
            out["dotdot"] = await session.call_tool(
                "get_job", {"path": str(allowed / ".." / outside.name)})
            out["negative"] = await session.call_tool(
                "advise", {"path": "sample:slow-rank", "limit": -1})
            out["not_a_number"] = await session.call_tool(
                "advise", {"path": "sample:slow-rank", "limit": "abc"})
            out["no_path"] = await session.call_tool("open_profile", {})
            out["missing"] = await session.call_tool(
                "open_profile", {"path": str(allowed / "nothing-here")})
            out["no_device"] = await session.call_tool(
                "predict_layout", {"path": str(allowed / "rank0.pt.trace.json.gz")})
            out["no_tool"] = await session.call_tool("no_such_tool", {})
    return out


def _structured(result: Any) -> Any:
    """The result's structured content (``structured_content``, mcp 1: ``structuredContent``)."""
    flag = getattr(result, "structured_content", None)
    return result.structuredContent if flag is None else flag


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_mcp_server_over_stdio(tmp_path: Path) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    # one rank of the bundled CPU Kineto trace, in the allowed folder and outside it
    shutil.copy(DATA / "kineto-tiny-llama" / "rank0.pt.trace.json.gz", allowed)
    shutil.copy(DATA / "kineto-tiny-llama" / "rank0.pt.trace.json.gz", outside)
    out = anyio.run(_session_calls, allowed, outside)
    assert out["tools"] >= TOOLS

    assert not _is_error(out["advise"]), _text(out["advise"])
    advice = no_nan(_text(out["advise"]))
    validate(advice, "advise")
    # the sample's README: rank 2 computes 25 % slower; the advisor ranks that first
    top = advice["findings"][0]
    assert top["rule"] == "slow_ranks" and top["id"].startswith("slow_ranks/rank-2-")
    assert len(advice["findings"]) == 1 and advice["total"] > 1

    assert not _is_error(out["open"]), _text(out["open"])
    info = no_nan(_text(out["open"]))
    validate(info, "info")
    assert info["profile"]["source_format"] == "kineto" and info["profile"]["ranks"] == [0]
    assert info["findings"] == [] and info["findings_total"] is None

    # the answer itself is the structured content, not a string holding it
    assert _structured(out["advise"]) == advice

    for refused in (out["outside"], out["dotdot"]):
        assert _is_error(refused)
        assert "path not allowed" in _text(refused) and str(outside.name) in _text(refused)
        assert json.loads(_text(refused))["error"] == "path_not_allowed"
    # every error is an answer a program reads: a code, the argument or path, one line
    expected = {"negative": ("invalid_argument", "limit", "limit: must be a whole number >= 0"),
                "not_a_number": ("invalid_argument", "limit", "advise: limit: "),
                "no_path": ("invalid_argument", "path", "open_profile: path: missing"),
                "missing": ("not_found", None, "profile path not found: "),
                # a CPU trace names no device: the tool's own argument is named
                "no_device": ("invalid_argument", "hardware", "give hardware=NAME"),
                # the SDK answered plain text "Unknown tool: no_such_tool" (a walk)
                "no_tool": ("invalid_argument", "name", "no such tool; the tools are ")}
    for name, (code, parameter, said) in expected.items():
        assert _is_error(out[name]), name
        error = no_nan(_text(out[name]))
        validate(error, "error")
        assert _structured(out[name]) == error
        assert (error["error"], error["parameter"]) == (code, parameter), (name, error)
        assert said in error["message"] and "\n" not in error["message"], (name, error)
        assert "pydantic" not in error["message"]
    assert json.loads(_text(out["missing"]))["path"] == str(allowed / "nothing-here")
    # an argument refused by its type still names the call's path
    assert json.loads(_text(out["not_a_number"]))["path"] == "sample:slow-rank"
    init = out["init"]  # the server introduces itself with perfkit's version
    info = getattr(init, "server_info", None) or init.serverInfo
    assert (info.name, info.version) == ("perfkit", pk_version)
    assert sorted(os.listdir(allowed)) == ["rank0.pt.trace.json.gz"]  # nothing written


def test_compare_tool_says_when_compare_is_missing(tmp_path: Path) -> None:
    """Without ``perfkit.compare`` the tool's error says so; with it, it answers
    ``compare`` (tested where the module exists)."""
    from perfkit.errors import PerfkitError
    from perfkit.mcpserver import Tools

    tools = Tools([tmp_path])
    try:
        import perfkit.compare  # noqa: F401
    except ImportError:
        with pytest.raises(PerfkitError, match="no perfkit.compare module"):
            tools.compare("sample:slow-rank", "sample:slow-link")
        return
    answer = tools.compare("sample:slow-rank", "sample:slow-link")
    validate(json.loads(json.dumps(answer)), "compare")


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_tools_runs_job_and_predict(tmp_path: Path) -> None:
    """The tools the stdio test does not call, in process: each answer valid, its figures
    those of the API (the layout written out by hand)."""
    import perfkit as pk
    from perfkit import plan
    from perfkit.mcpserver import Tools

    # two separate runs in one folder: the two ranks of the bundled trace, each alone
    for rank in (0, 1):
        run = tmp_path / f"run{rank}"
        run.mkdir()
        shutil.copy(DATA / "kineto-tiny-llama" / f"rank{rank}.pt.trace.json.gz", run)
    tools = Tools([tmp_path])
    runs = tools.list_runs(str(tmp_path))
    validate(runs, "runs")
    assert len(runs["runs"]) == len(pk.runs(tmp_path))
    job = tools.get_job("sample:llama2-13b-baseline-dp16")
    validate(job, "job")
    # the sample's README: llama2-13b-8l (hidden 5120, 8 layers), data parallel 16
    model = job["job"]["model"]
    assert job["job"]["parallel"]["dp"] == 16
    assert (model["num_layers"], model["hidden_size"]) == (8, 5120)
    answer = tools.predict_layout("sample:llama2-13b-baseline-dp16", dp=8, pp=2)
    validate(no_nan(json.dumps(answer)), "predict")
    profile = pk.load("sample:llama2-13b-baseline-dp16")  # calibrated as the Planner tab
    cal = plan.calibrate(profile, static_scheme=pk.infer_job(profile).static_scheme,
                         close=True)
    par = pk.ParallelConfig(dp=8, pp=2, micro_batch_size=2, num_micro_batches=2,
                            optimizer_shard=8, recompute="full")
    assert answer["step_ms"] == pytest.approx(plan.predict(cal, parallel=par).step_s * 1e3)
    from perfkit.errors import PerfkitError

    with pytest.raises(PerfkitError, match="unknown layout options"):
        tools.predict_layout("sample:llama2-13b-baseline-dp16", tp_size=2)


def test_error_answers_name_their_kind(tmp_path: Path) -> None:
    """Each kind of failure has its code (the schema lists the same ones), a folder of two
    runs lists them, and the path is the one the caller typed, through a link too."""
    import perfkit as pk
    from perfkit.answers import ERROR_CODES, error_answer, schema
    from perfkit.errors import InvalidArgumentError, PerfkitError, RunsFound
    from perfkit.mcpserver import Tools

    assert schema()["$defs"]["error"]["properties"]["error"]["enum"] == list(ERROR_CODES)
    from kineto_files import write_trace

    folder = tmp_path / "runs"
    folder.mkdir()
    write_trace(folder / "a_rank0.json", 0, 2, 1.7e15)
    write_trace(folder / "c_rank0.json", 0, 2, 1.7e15 + 3600e6)  # an hour later: another run
    link = tmp_path / "link"
    link.symlink_to(folder)
    tools = Tools([tmp_path])
    with pytest.raises(RunsFound) as caught:
        pk.load(folder)
    runs = error_answer(caught.value)
    assert (runs["error"], len(runs["runs"])) == ("several_runs", len(pk.runs(folder)))
    with pytest.raises(PerfkitError) as caught:
        tools.get_job(str(link / "nothing"))
    missing = error_answer(caught.value)
    assert missing["error"] == "not_found"
    assert missing["message"] == f"profile path not found: {link / 'nothing'}"
    with pytest.raises(InvalidArgumentError) as caught:
        tools.advise("sample:slow-rank", limit=-1)
    assert error_answer(caught.value)["parameter"] == "limit"
    unexpected = error_answer(ZeroDivisionError("division by zero"))
    assert (unexpected["error"], unexpected["message"]) == (
        "unexpected", "unexpected ZeroDivisionError: division by zero")
    # a run id the folder does not hold is the argument's error, with the runs to choose
    with pytest.raises(PerfkitError) as caught:
        tools.open_profile(str(folder), run=7)
    no_run = error_answer(caught.value)
    assert (no_run["error"], no_run["parameter"]) == ("invalid_argument", "run")
    assert len(no_run["runs"]) == len(pk.runs(folder)) == 2
    # compare picks each side's run with its own argument, and names it when missing
    with pytest.raises(PerfkitError) as caught:
        tools.compare(str(folder), str(folder), run_a=0)
    several = error_answer(caught.value)
    assert (several["error"], several["parameter"]) == ("several_runs", "run_b")
    assert "give the tool's run_b argument" in several["message"]
    for answer in (runs, missing, unexpected, no_run, several):
        validate(json.loads(json.dumps(answer)), "error")
