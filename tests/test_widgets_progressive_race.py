"""The dashboard's tabs drawn while a background opening hands its profile over.

The dashboard draws the tab on show on the kernel's thread, outside its lock, while the
background opening's thread gives every tab the profile and the job panel the job
(:mod:`perfkit.widgets.background`). Under CPU load a draw lands anywhere in that swap. The
tests force the orderings (no timing is asserted): a tab drawn at any point of the swap
shows either what it waits for or the whole page (the same text as a plain open), never the
profile without its job ("throughput –" and "MFU –" saying "no job: open a profile", no
"What perfkit could not read", a Planner with no figures), and never a blank body. The
step figure is checked against the raw trace read with ``json``.
"""

from __future__ import annotations

import re
import statistics
import threading
from typing import Any

import pytest
from raw_kineto import raw_walls
from shared_samples import HTA, shared_sample
from widget_html import panel_html

import perfkit as pk
from perfkit.format import time_text
from perfkit.io.preview.steps import preview
from perfkit.widgets.dashboard import Dashboard, dashboard
from perfkit.widgets.job import JobPanel
from perfkit.widgets.opening import Opening
from perfkit.widgets.tabs import Context, PlannerTab

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: The tabs whose figures need the job (drawn during the swap).
DRAWN = ("Overview", "Planner")


def _text(markup: str) -> str:
    """The words of ``markup``: no style sheets, tags or runs of spaces."""
    markup = re.sub(r"<style.*?</style>", "", markup, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", markup)).strip()


def _card(markup: str, name: str) -> str | None:
    m = re.search(rf"<div class='pk-k'>{re.escape(name)}</div><div class='pk-v'>([^<]*)<",
                  markup)
    return m.group(1) if m else None


def _raw_step_text(folder: Any) -> str:
    """The measured step from the raw traces: per step the slowest rank's wall
    (:func:`raw_kineto.raw_walls`), the median over steps, as the page writes it."""
    per_step: dict[int, float] = {}
    for path in folder.glob("*.json.gz"):
        for step, us in raw_walls(path).items():
            per_step[step] = max(per_step.get(step, 0.0), float(us))
    return time_text(statistics.median(per_step.values()))


def _on_kernel_thread(fn: Any) -> None:
    """Run ``fn`` on another thread, as the kernel's thread draws the tab on show while the
    background thread swaps (it holds no lock of the dashboard's)."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - raised again in the test
            failed.append(exc)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(300)
    assert not thread.is_alive(), "the draw did not end"
    if failed:
        raise failed[0]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_a_tab_drawn_during_the_swap_never_shows_the_profile_without_its_job() -> None:
    folder = shared_sample(HTA)
    plain = dashboard(str(folder), background_bytes=None)  # a plain open: the reference
    expected = {t: _text(panel_html(plain.select(t))) for t in DRAWN}
    step = _raw_step_text(folder)
    html = panel_html(plain.panels["Overview"])
    assert _card(html, "step time") == step and "What perfkit could not read" in html
    assert expected["Planner"]  # says what the Planner lacks

    board = Dashboard(background_bytes=0)
    seen: list[tuple[str, str, str]] = []  # (moment, tab, text) of each draw

    def draw(moment: str) -> None:
        for title in DRAWN:
            panel = board.panels[title]
            _on_kernel_thread(panel.refresh)
            seen.append((moment, title, _text(panel_html(panel))))

    real_opened, real_set_profile = board._opened, board.job.set_profile

    def opened(*args: Any) -> None:  # the tabs get the profile ...
        real_opened(*args)
        draw("after the tabs got the profile")

    def set_profile(*args: Any, **kwargs: Any) -> None:  # ... the job panel its job
        real_set_profile(*args, **kwargs)
        draw("after the job panel got the job")
    board._opened = opened  # type: ignore[method-assign]
    board.job.set_profile = set_profile  # type: ignore[method-assign]

    assert board.load_profile(str(folder))
    assert board.opening is not None  # opened in the background, the swap to come
    assert board.wait(300) and board.error is None
    assert {m for m, _, _ in seen} == {"after the tabs got the profile",
                                       "after the job panel got the job"}
    for moment, title, text in seen:
        assert "no job" not in text and text, f"the {title} tab drawn {moment}: {text[:300]}"
        assert text.startswith("Waiting for") or "Waiting for the" in text or \
            text == expected[title], f"the {title} tab drawn {moment}: {text[:300]}"
    # once the profile and the job are both there, what a draw shows is the plain page
    assert any(text == expected[t] for _, t, text in seen for t in DRAWN)
    for title in DRAWN:
        assert _text(panel_html(board.select(title))) == expected[title]
    html = panel_html(board.panels["Overview"])
    assert _card(html, "step time") == step


class _Interrupted(PlannerTab):
    """A Planner tab whose :meth:`show` from another thread lands while a build reads what
    the tab waits for (the background thread handing over the profile)."""

    def __init__(self, ctx: Context) -> None:
        self._arrive: Any = None  # the show() to run at the next read of ``opening``
        self.arrived: threading.Thread | None = None
        super().__init__(ctx)

    @property  # type: ignore[override]
    def opening(self) -> Any:
        value = self.__dict__.get("_opening")
        arrive, self._arrive = self._arrive, None
        if arrive is not None:
            self.arrived = threading.Thread(target=arrive)
            self.arrived.start()
            self.arrived.join(1.0)  # done at once, unless the tab holds its state meanwhile
        return value

    @opening.setter
    def opening(self, value: Any) -> None:
        self.__dict__["_opening"] = value


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_a_profile_handed_over_while_a_tab_draws_never_leaves_it_blank() -> None:
    folder = shared_sample(HTA)
    plain = dashboard(str(folder), background_bytes=None)
    expected = _text(panel_html(plain.select("Planner")))
    profile = pk.load(folder)
    job = JobPanel()
    job.set_profile(profile)
    tab = _Interrupted(Context(job, open_tab=lambda _t: None))
    tab.wait(Opening(str(folder), preview(folder)))  # the profile is being read
    tab._arrive = lambda: tab.show(profile)
    tab.refresh()  # show() arrives while this draw reads the opening
    assert tab.arrived is not None
    tab.arrived.join(60)
    text = _text(panel_html(tab))
    assert text.startswith("Waiting for the job") or text == expected, \
        f"body: {text[:200]!r}, message: {_text(tab.message.value)[:200]!r}"
    assert tab.profile is profile
    tab.refresh_if_stale()  # the profile it got meanwhile is drawn at the next refresh
    assert _text(panel_html(tab)) == expected
