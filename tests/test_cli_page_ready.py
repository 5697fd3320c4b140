"""``perfkit serve`` prints its address once Voila's preheated kernel has run the page
(perfkit.cli.page_ready), on a stand-in of Voila's kernel pool: a list of tasks per
notebook, each giving ``{"task": render task, "kernel_id": ...}`` once its kernel started.

The browser test (tests/browser/test_serve_ready_browser.py) checks the same on the real
server."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from perfkit.cli import page_ready
from perfkit.cli.page_ready import (
    FAILED,
    NO_POOL,
    RENDERED,
    TIMED_OUT,
    announce,
    wait_page_rendered,
)

NOTEBOOK = "dashboard.ipynb"


async def _kernel(render: asyncio.Future, start_s: float = 0.01) -> dict[str, Any]:
    """What Voila's ``_initialize`` gives once the kernel has started."""
    await asyncio.sleep(start_s)
    return {"task": render, "renderer": None, "kernel_id": "k1"}


async def _render(events: list[str], run_s: float) -> tuple[list[str], None]:
    await asyncio.sleep(run_s)
    events.append("rendered")
    return ["<html>"], None


def _manager(pool: list[Any], notebook: str = NOTEBOOK) -> SimpleNamespace:
    return SimpleNamespace(_pools={notebook: pool}, notebook_path=notebook)


def test_waits_for_the_kernel_then_for_its_run_of_the_notebook() -> None:
    events: list[str] = []

    async def main() -> tuple[str, list[str], bool]:
        render = asyncio.ensure_future(_render(events, 0.2))
        first = asyncio.ensure_future(_kernel(render))
        said: list[str] = []
        state = await wait_page_rendered(_manager([first]), NOTEBOOK, timeout_s=30,
                                         every_s=0.05, say=said.append)
        return state, said, first.done() and not first.cancelled()

    state, said, kept = asyncio.run(main())
    assert state == RENDERED and events == ["rendered"]  # it returned after the render
    assert kept  # Voila's task is still there for the first page, not consumed
    assert any("kernel has started" in line for line in said)
    assert any(line.startswith("still preparing the page") for line in said)


def test_a_run_longer_than_the_timeout_is_left_running() -> None:
    async def main() -> tuple[str, bool, list[str]]:
        render = asyncio.get_running_loop().create_future()  # never ends by itself
        first = asyncio.ensure_future(_kernel(render))
        said: list[str] = []
        state = await wait_page_rendered(_manager([first]), NOTEBOOK, timeout_s=0.3,
                                         every_s=0.1, say=said.append)
        alive = not render.done()  # not cancelled: the page still gets it when done
        render.cancel()
        return state, alive, said

    state, alive, said = asyncio.run(main())
    assert state == TIMED_OUT and alive
    assert any("kernel has started" in line for line in said)


def test_a_kernel_that_fails_to_start_ends_the_wait() -> None:
    async def broken() -> dict[str, Any]:
        await asyncio.sleep(0.01)
        raise RuntimeError("no kernel")

    async def main() -> str:
        first = asyncio.ensure_future(broken())
        return await wait_page_rendered(_manager([first]), NOTEBOOK, timeout_s=30)

    assert asyncio.run(main()) == FAILED


def test_nothing_to_wait_for() -> None:
    """No pool (preheating off), an empty or unknown one, a Voila without ``_pools``: the
    address is not held back."""

    async def main() -> list[str]:
        done = asyncio.get_running_loop().create_future()
        done.set_result({"task": None})
        managers = [None, SimpleNamespace(), SimpleNamespace(_pools={}),
                    _manager([]), _manager([object()]),
                    # two notebooks and none named: which page would be asked is unknown
                    SimpleNamespace(_pools={"a.ipynb": [done], "b.ipynb": [done]}),
                    _manager([done])]  # a pool item without a render task
        return [await wait_page_rendered(m, None, timeout_s=1) for m in managers]

    assert asyncio.run(main()) == [NO_POOL] * 7


def test_the_pools_only_notebook_is_found_without_its_name() -> None:
    events: list[str] = []

    async def main() -> str:
        render = asyncio.ensure_future(_render(events, 0.01))
        first = asyncio.ensure_future(_kernel(render))
        return await wait_page_rendered(_manager([first], "sub/nb.ipynb"), None, timeout_s=5)

    assert asyncio.run(main()) == RENDERED


def test_announce_prints_the_address_after_the_page_is_rendered(capsys) -> None:
    events: list[str] = []

    async def main() -> str:
        render = asyncio.ensure_future(_render(events, 0.1))
        first = asyncio.ensure_future(_kernel(render))
        app = SimpleNamespace(kernel_manager=_manager([first]))
        return await announce(app, "serving at URL", True,
                              lambda: events.append("browser opened"))

    assert asyncio.run(main()) == RENDERED
    assert events == ["rendered", "browser opened"]
    out = capsys.readouterr()
    assert out.out == "serving at URL\n"
    lines = out.err.splitlines()
    assert lines[0].startswith("perfkit: the kernel has started")
    assert lines[-1].startswith("perfkit: the page is ready (")


def test_announce_without_preheating_prints_at_once(capsys, monkeypatch) -> None:
    async def fail(*_args: Any, **_kwargs: Any) -> str:
        raise AssertionError("nothing to wait for without preheating")

    monkeypatch.setattr(page_ready, "wait_page_rendered", fail)
    opened: list[bool] = []
    state = asyncio.run(announce(None, "serving at URL", False, lambda: opened.append(True)))
    assert state == NO_POOL and opened == [True]
    out = capsys.readouterr()
    assert out.out == "serving at URL\n" and out.err == ""


def test_announce_prints_the_address_even_when_following_the_pool_fails(
        capsys, monkeypatch) -> None:
    async def broken(*_args: Any, **_kwargs: Any) -> str:
        raise KeyError("changed")

    monkeypatch.setattr(page_ready, "wait_page_rendered", broken)
    asyncio.run(announce(SimpleNamespace(kernel_manager=None), "serving at URL", True,
                         lambda: None))
    out = capsys.readouterr()
    assert out.out == "serving at URL\n"
    assert "could not follow the preheated kernel (KeyError" in out.err
