"""perfkit._hugepages: huge pages off inside perfkit's calls, the process's setting restored.

The state is read back from the kernel (``prctl(PR_GET_THP_DISABLE)``), not from the
module's own bookkeeping.
"""

from __future__ import annotations

import threading

import pytest

import perfkit as pk
from perfkit import _hugepages as hp

pytestmark = pytest.mark.skipif(hp.huge_pages_disabled() is None,
                                reason="prctl(PR_GET_THP_DISABLE) not available here")


@pytest.fixture(autouse=True)
def _huge_pages_on():
    """Each test starts with huge pages allowed and leaves them so."""
    hp._set(False)
    yield
    hp._set(False)


def test_off_inside_and_restored_after():
    assert hp.huge_pages_disabled() is False
    with hp.small_pages():
        assert hp.huge_pages_disabled() is True
        with hp.small_pages():  # nested: still off, and not switched on by the inner end
            assert hp.huge_pages_disabled() is True
        assert hp.huge_pages_disabled() is True
    assert hp.huge_pages_disabled() is False


def test_restored_when_the_call_raises():
    with pytest.raises(ZeroDivisionError), hp.small_pages():
        1 / 0  # noqa: B018
    assert hp.huge_pages_disabled() is False


def test_a_setting_made_outside_is_kept():
    hp._set(True)  # the user (or a parent process) switched them off already
    with hp.small_pages():
        assert hp.huge_pages_disabled() is True
    assert hp.huge_pages_disabled() is True


def test_keep_leaves_the_kernel_alone(monkeypatch):
    monkeypatch.setenv("PERFKIT_HUGE_PAGES", "keep")
    with hp.small_pages():
        assert hp.huge_pages_disabled() is False


def test_threads_switch_back_only_when_the_last_block_ends():
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with hp.small_pages():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(5)
    with hp.small_pages():
        pass
    assert hp.huge_pages_disabled() is True  # the other thread's block is still open
    release.set()
    t.join()
    assert hp.huge_pages_disabled() is False


def test_decorated_function_runs_with_huge_pages_off():
    seen = hp.with_small_pages(hp.huge_pages_disabled)()
    assert seen is True
    assert hp.huge_pages_disabled() is False


def test_load_and_advise_leave_the_process_as_they_found_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    seen: list[bool | None] = []
    real = pk.analysis.step_breakdown

    def spy(*args, **kwargs):
        seen.append(hp.huge_pages_disabled())
        return real(*args, **kwargs)

    from perfkit.io.engines import local as detect

    real_resolve = detect.resolve_sample

    def resolve_spy(path):
        seen.append(hp.huge_pages_disabled())
        return real_resolve(path)

    monkeypatch.setattr(detect, "resolve_sample", resolve_spy)
    prof = pk.load("sample:llama2-7b-tp2", cache=False)
    assert seen and all(seen)  # the load ran with huge pages off
    assert hp.huge_pages_disabled() is False
    seen.clear()
    monkeypatch.setattr("perfkit.advisor.context.step_breakdown", spy)
    pk.advise(prof)
    assert seen and all(seen)  # the advisor's analyses ran with huge pages off
    assert hp.huge_pages_disabled() is False
