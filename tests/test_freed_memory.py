"""perfkit._freed_memory: freed arrays kept for reuse inside perfkit's calls (glibc).

What the thresholds do is read from the kernel's count of page faults
(``getrusage``): a freed 64 MiB array that stays in the process is handed out again
without faulting its pages in; one given back to the kernel faults every page again.
"""

from __future__ import annotations

import resource
import threading

import numpy as np
import pytest

import perfkit as pk
from perfkit import _freed_memory as fm
from perfkit._hugepages import small_pages
from perfkit._switch import ProcessSwitch

PAGES = (64 << 20) // resource.getpagesize()  # pages of the 64 MiB test array
glibc = pytest.mark.skipif(fm._mallopt() is None, reason="glibc's mallopt not available")


def _faults_of_second_allocation() -> int:
    """Faults while a 64 MiB array is filled, freed, and a new one filled."""
    first = np.ones(PAGES * resource.getpagesize() // 8)
    del first
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    second = np.ones(PAGES * resource.getpagesize() // 8)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del second
    return faults


@glibc
def test_freed_memory_reused_inside_and_given_back_after() -> None:
    with small_pages():  # 4 KiB pages: one fault per page, huge pages or not
        with fm.freed_memory_kept():
            inside = _faults_of_second_allocation()
        after = _faults_of_second_allocation()  # 64 MiB > the 32 MiB mmap threshold
    assert inside < PAGES * 0.05
    assert after > PAGES * 0.9


@glibc
def test_keep_leaves_glibc_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFKIT_MALLOC", "keep")
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(fm, "_set", lambda m, t: calls.append((m, t)) or True)
    with fm.freed_memory_kept():
        pass
    assert calls == []


@glibc
def test_advise_keeps_freed_memory_and_sets_the_after_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(fm, "_set", lambda m, t: calls.append((m, t)) or True)
    pk.advise(pk.load("sample:llama2-7b-tp2", progress=False))
    assert calls == [(fm.KEPT_BYTES, fm.KEPT_BYTES),
                     (fm.AFTER_MMAP_BYTES, fm.AFTER_TRIM_BYTES)]
    assert fm.AFTER_MMAP_BYTES == 32 << 20 or fm.AFTER_MMAP_BYTES == 16 << 20  # 64/32-bit


def test_switch_nests_across_threads_and_restores_on_error() -> None:
    log: list[str] = []
    switch = ProcessSwitch(lambda: log.append("on") or True, lambda: log.append("back"),
                           "PERFKIT_TEST_SWITCH_UNSET")
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with switch.block():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(5)
    with pytest.raises(ZeroDivisionError), switch.block(), switch.block():
        1 / 0  # noqa: B018
    assert log == ["on"]  # the other thread's block is still open
    release.set()
    t.join()
    assert log == ["on", "back"]
    refused = ProcessSwitch(lambda: False, lambda: log.append("never"), "X_UNSET")
    with refused.block():
        pass
    assert log == ["on", "back"]  # nothing switched, nothing switched back
