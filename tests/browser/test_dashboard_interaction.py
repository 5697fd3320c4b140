"""Using the dashboard in a real browser: tooltips, clicks that filter tables, the job
panel, bad paths and uploads. One served dashboard and one page for the whole module."""

from __future__ import annotations

import zipfile

import pytest

from perfkit.widgets import bundled_profile
from perfkit.widgets.dashboard import DEFAULT_PROFILE

from .conftest import page_errors

pytest.importorskip("playwright.sync_api")

WAIT_MS = 120_000


def _hover_tooltip(ui, mark) -> str:
    """Hover over ``mark`` and return the text of Vega's tooltip."""
    mark.scroll_into_view_if_needed()
    box = mark.bounding_box()
    ui.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + min(box["height"] / 2, 20))
    tip = ui.page.locator("#vg-tooltip-element.visible")
    tip.wait_for(timeout=WAIT_MS)
    return tip.inner_text()


def test_a_tooltip_gives_exact_values_with_units(ui) -> None:
    ui.show_tab("Overview")
    marks = ui.marks()
    assert marks.count() >= 16 * 2  # two parts or more for each of the 16 ranks
    text = _hover_tooltip(ui, marks.nth(3))
    assert "rank" in text and "time (ms)" in text and "share of the step" in text
    ui.show_tab("Operators")
    text = _hover_tooltip(ui, ui.marks().first)
    assert "MatMulV3" in text and "device time per rank and step, mean over ranks (ms)" in text
    assert "calls per rank and step" in text  # the basis of both, never mixed (issue 29.5)
    assert page_errors(ui.page) == []


def test_clicking_a_rank_filters_the_steps_table(ui) -> None:
    ui.show_tab("Overview")
    marks = ui.marks()
    ranks = marks.count()
    marks.nth(ranks - 1).click()  # the last bar drawn: a part of rank 15
    ui.wait_text("Steps of rank 15")
    assert "Steps of rank 15" in ui.tab().inner_text()
    # the rank picker follows the click
    assert ui.picked("steps of", ui.tab()) == "rank 15"
    box = marks.nth(0).bounding_box()
    ui.page.mouse.dblclick(box["x"] + box["width"] / 2, box["y"] + 5)  # clears
    ui.page.wait_for_function(
        "() => document.body.innerText.includes('over the ranks and its split')",
        timeout=WAIT_MS)


def test_clicking_an_operator_lists_its_task_names(ui) -> None:
    ui.show_tab("Operators")
    ui.marks().first.click()
    ui.wait_text("Task names of type MatMulV3")
    text = ui.tab().inner_text()
    assert "aclnnMm_qkv_MatMulV3" in text or "aclnnMm_w1_MatMulV3" in text
    assert page_errors(ui.page) == []


def test_clicking_a_finding_shows_it_alone(ui) -> None:
    panel = ui.show_tab("Advice")
    rows = panel.locator("table.perfkit-findings tbody tr")
    before = rows.count()
    assert before >= 3
    ui.marks().first.click()
    ui.page.wait_for_function(
        "() => [...document.querySelectorAll('.pk-tab')].filter(t => t.offsetParent)[0]"
        ".querySelectorAll('table.perfkit-findings tbody tr').length === 1", timeout=WAIT_MS)
    assert ui.tab().locator("button", has_text="Evidence:").count() == 1
    assert page_errors(ui.page) == []


def test_an_evidence_button_opens_its_tab(ui) -> None:
    ui.show_tab("Overview")
    button = ui.tab().locator("button", has_text="Evidence: Recompute")
    button.first.click()
    ui.page.wait_for_selector(".lm-TabBar-tab.lm-mod-current:has-text('Recompute')",
                              timeout=WAIT_MS)
    ui.page.wait_for_selector("text=Recompute seen in the profile", timeout=WAIT_MS)


def test_the_timeline_zooms_shows_tooltips_and_exports(ui) -> None:
    page = ui.page
    ui.show_tab("Timeline")
    canvas = ui.tab().locator(".pk-chart canvas.marks").first
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    assert box["width"] > 600
    before = canvas.screenshot()
    # hover the first lane (a dense row of kernels of the slowest rank): a tooltip
    x, y = box["x"] + box["width"] * 0.45, box["y"] + 38
    page.mouse.move(x, y)
    page.mouse.move(x + 2, y)
    tip = page.locator("#vg-tooltip-element.visible")
    tip.wait_for(timeout=WAIT_MS)
    assert "duration" in tip.inner_text()
    for _ in range(5):  # zoom in on x with the wheel
        page.mouse.wheel(0, -240)
    page.mouse.move(box["x"] + 5, box["y"] + box["height"] + 60)  # the tooltip away
    page.wait_for_timeout(500)
    assert canvas.screenshot() != before
    ui.tab().locator("button", has_text="Export for Perfetto").click()
    ui.wait_text("Open it in Perfetto UI")
    link = ui.tab().locator("a", has_text="Download it")
    assert link.get_attribute("download").endswith(".json.gz")
    assert link.get_attribute("href").startswith("data:application/gzip;base64,")
    assert page_errors(page) == [] and page.external == []


def test_the_job_panel_is_one_line_that_unfolds_to_edit(ui) -> None:
    page = ui.page
    ui.show_tab("Overview")
    box = page.get_by_label("tp", exact=True)
    assert not box.is_visible()  # folded: the tabs stay near the top
    tabs_top = page.locator(".lm-TabBar").first.bounding_box()["y"]
    page.locator("button", has_text="Edit the job").click()
    box.wait_for(state="visible", timeout=WAIT_MS)
    box.fill("3")  # 40 heads are not divisible by 3
    box.press("Enter")
    page.wait_for_selector("text=tp: must divide num_attention_heads=40", timeout=WAIT_MS)
    box.fill("1")
    box.press("Enter")
    page.wait_for_function("() => !document.body.innerText.includes('must divide')",
                           timeout=WAIT_MS)
    page.locator("button", has_text="Fold the job").click()
    box.wait_for(state="hidden", timeout=WAIT_MS)
    assert page.locator(".lm-TabBar").first.bounding_box()["y"] == pytest.approx(tabs_top,
                                                                                abs=2)
    assert tabs_top < 500  # the job panel no longer pushes the tabs down
    assert page_errors(page) == []


def test_labels_are_not_truncated_and_tables_not_clipped_at_1280_pixels(ui) -> None:
    from perfkit.widgets import TAB_TITLES

    for title in TAB_TITLES:
        ui.show_tab(title)
        # a label cut with an ellipsis is wider inside than the box that shows it
        truncated = ui.page.evaluate("""() => [...document.querySelectorAll(
                '.widget-label, .widget-label-basic, .lm-TabBar-tabLabel, .widget-toggle-button')]
            .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
            .map(e => e.innerText)""")
        assert truncated == [], (title, truncated)
        # every table of the tab fits the page's width (the collectives table was clipped)
        wide = ui.page.evaluate("""() => [...document.querySelectorAll('.pk-tab')]
            .filter(t => t.offsetParent !== null)
            .flatMap(t => [...t.querySelectorAll('.pk-table table, .pk-metrics table')])
            .filter(t => t.getBoundingClientRect().right > window.innerWidth)
            .map(t => (t.querySelector('caption') || t).innerText.slice(0, 60))""")
        assert wide == [], (title, wide)


def test_a_bad_path_shows_the_message_and_the_page_keeps_working(ui) -> None:
    page = ui.page
    box = page.get_by_placeholder("/path/to/your/profile (folder or file)")
    box.fill("/no/such/profile")
    box.press("Enter")
    ui.wait_text("no such file or folder")
    text = ui.text()
    assert "/no/such/profile" in text and "Traceback" not in text
    assert f"Still showing {DEFAULT_PROFILE}" in text
    assert ui.picked("bundled sample") == DEFAULT_PROFILE  # still what is open
    ui.open_sample("simulated/slow-rank")
    assert "4 ranks" in ui.text()
    assert page_errors(page) == []


def _upload(page, path) -> None:
    with page.expect_file_chooser(timeout=WAIT_MS) as chooser:
        page.locator(".widget-upload", has_text="Upload .zip").first.click()
    chooser.value.set_files(str(path))


def test_uploading_a_zipped_profile_opens_it(ui, tmp_path) -> None:
    page = ui.page
    folder = bundled_profile("simulated/slow-link")
    archive = tmp_path / "slow-link.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, f"slow-link/{path.relative_to(folder).as_posix()}")
    _upload(page, archive)
    ui.wait_text("Opened slow-link.zip")
    assert "4 ranks" in ui.text()
    assert "slow-link.zip" in ui.picked("bundled sample")  # an upload is open
    bad = tmp_path / "notes.zip"
    bad.write_text("not a zip archive", encoding="utf-8")
    _upload(page, bad)
    ui.wait_text("Still showing slow-link.zip")
    assert "notes.zip" in ui.text()
    assert page_errors(page) == [] and page.external == []
