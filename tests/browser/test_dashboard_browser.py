"""Every bundled profile, every tab, in a real browser, offline.

For each profile of ``pk.samples()`` the sample picker opens it and every tab is shown in
turn in the same page: the tab must draw (its charts rendered by Vega), show no error,
write no number in scientific notation nor a microsecond figure with three decimals, and
neither log a console error nor ask for anything outside the machine.
"""

from __future__ import annotations

import pytest

from perfkit.widgets import TAB_TITLES, bundled_profiles
from perfkit.widgets.dashboard import DEFAULT_PROFILE

pytest.importorskip("playwright.sync_api")


def test_the_page_loads_offline_with_the_default_sample(ui) -> None:
    page = ui.page
    text = ui.text()
    assert f"Opened {DEFAULT_PROFILE}" in text and "16 rank(s)" in text
    assert ui.picked("bundled sample") == DEFAULT_PROFILE  # the picker shows what is open
    for title in TAB_TITLES:
        assert page.locator(".lm-TabBar-tab", has_text=title).count() == 1
    # the anywidget front end loaded the chart's JavaScript from the page, not a CDN
    assert page.locator(".pk-chart svg.marks").count() >= 1
    assert "STEP TIME" in text.upper() and "THROUGHPUT" in text.upper()
    assert page.external == [] and page.errors == []


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
        assert page.errors == [], (name, title, page.errors[:3])
    ui.show_tab("Overview")
