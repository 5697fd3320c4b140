"""Every bundled profile, every tab, in a real browser, offline.

For each profile of ``pk.samples()`` the sample picker opens it and every tab is shown in
turn in the same page: the tab must draw (its charts rendered by Vega), show no error,
write no number in scientific notation nor a microsecond figure with three decimals, and
neither log a console error nor ask for anything outside the machine.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from perfkit.widgets import TAB_TITLES, bundled_profiles
from perfkit.widgets.dashboard import DEFAULT_PROFILE

from .conftest import page_errors

pytest.importorskip("playwright.sync_api")

WAIT_MS = 120_000


def test_the_page_loads_offline_with_the_default_sample(ui) -> None:
    page = ui.page
    text = ui.text()
    assert f"Opened {DEFAULT_PROFILE}" in text and "16 ranks" in text
    assert ui.picked("bundled sample") == DEFAULT_PROFILE  # the picker shows what is open
    for title in TAB_TITLES:
        assert page.locator(".lm-TabBar-tab", has_text=title).count() == 1
    # the anywidget front end loaded the chart's JavaScript from the page, not a CDN
    assert page.locator(".pk-chart svg.marks").count() >= 1
    assert "STEP TIME" in text.upper() and "THROUGHPUT" in text.upper()
    assert page.external == [] and page_errors(page) == []


@pytest.mark.parametrize("name", bundled_profiles())
def test_every_tab_of_every_bundled_profile_draws(ui, name: str) -> None:
    page = ui.page
    if name != DEFAULT_PROFILE:
        ui.open_sample(name)
    for title in TAB_TITLES:
        panel = ui.show_tab(title)
        text = panel.inner_text()
        assert text.strip(), (name, title)  # never a blank tab
        assert "Unexpected error" not in text and "Traceback" not in text, (name, title)
        ui.check_numbers(f"{name} / {title}")
        assert page.external == [], (name, title, page.external[:3])
        assert page_errors(ui.page) == [], (name, title, page.errors[:3])
    ui.show_tab("Overview")


def test_without_its_token_the_server_shows_a_login_page_and_nothing_else(
        ui, server) -> None:
    """``perfkit serve`` made a random token (see conftest: the page opened the address it
    printed). Another user of the machine, who has the port but not the token, gets Voila's
    login page, never the dashboard or the kernels; the address with the token opens the
    dashboard in a fresh browser as it did for the module's page."""
    # plain HTTP without the token, or with a wrong one: redirected to the login form
    for url in (server.base, f"{server.base}?token={'0' * len(server.token)}"):
        with urllib.request.urlopen(url, timeout=120) as response:
            assert urllib.parse.urlsplit(response.url).path == "/login", url
            body = response.read().decode("utf-8")
        assert 'type="password"' in body and "new_password" not in body
        assert "pk-dashboard" not in body and "Opened" not in body and "jupyter-config-data" \
            not in body
    # the kernels' API refuses outright
    kernel = f"{server.base}api/kernels/{uuid.uuid4()}"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(kernel, timeout=120)
    assert refused.value.code == 403
    # a browser without the login cookie: the login page; with the token: the dashboard
    context = ui.page.context.browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        other = context.new_page()
        errors: list[str] = []
        other.on("pageerror", lambda e: errors.append(str(e)))
        other.route("**/*", lambda route: route.continue_() if server.owns(route.request.url)
                    else route.abort())
        other.goto(server.base, timeout=WAIT_MS)
        assert urllib.parse.urlsplit(other.url).path == "/login"
        assert other.locator("input[type=password]").count() >= 1
        assert other.locator(".pk-dashboard").count() == 0
        assert "Opened" not in other.inner_text("body")
        other.goto(server.url, timeout=WAIT_MS)
        other.wait_for_selector(".pk-dashboard .pk-chart svg.marks", timeout=WAIT_MS)
        assert f"Opened {DEFAULT_PROFILE}" in other.inner_text("body")
        assert errors == []
    finally:
        context.close()


def test_the_headline_figures_stay_inside_their_cards_in_a_narrow_window(ui) -> None:
    """At 1024 px the throughput card's figure ("6,737 tokens/s per device" on the default
    sample) once ran out of its card, cut at "per devic"; it now wraps at its spaces."""
    page = ui.page
    ui.show_tab("Overview")
    try:
        for width in (1024, 1280):
            page.set_viewport_size({"width": width, "height": 900})
            spill = page.eval_on_selector_all(
                ".pk-card", "cards => cards.filter(c => c.scrollWidth > c.clientWidth + 1)"
                ".map(c => c.innerText.slice(0, 60))")
            assert spill == [], (width, spill)
            assert page.locator(".pk-card").count() == 3
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})


def test_the_timeline_fits_a_1024_pixel_window(ui) -> None:
    """A 960 px plot and its lane names made the Timeline tab scroll sideways at 1024 px;
    the drawn chart now ends inside the window, at 1024 px and at 1280 px."""
    page = ui.page
    ui.show_tab("Timeline")
    try:
        for width in (1024, 1280):
            page.set_viewport_size({"width": width, "height": 900})
            canvas = ui.tab().locator(".pk-chart canvas.marks").first
            canvas.wait_for(state="visible", timeout=WAIT_MS)
            box = canvas.bounding_box()
            assert box["width"] > 600, width  # still a wide plot
            assert box["x"] + box["width"] <= width, (width, box)
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})
