"""A long table as a reader sees it: its first rows, and the rest after one click.

perfkit's tables showed their first rows and "N more rows not shown", with no way to see
them. The next rows now sit folded in the same table, opened by a label that ticks a
hidden checkbox (CSS only: the same in the dashboard, a notebook and a saved report page).
Checked in headless Chromium on a page of two such tables, at a laptop's size.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from perfkit.tables import TABLE_CSS, table

from .conftest import chromium_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_click_shows_the_folded_rows_of_that_table_only(tmp_path: Path) -> None:
    steps = pd.DataFrame({"step": range(40), "step_us": [1000.0 + i for i in range(40)]})
    first = table(steps, caption="first", max_rows=5, folded_rows=30).html()
    second = table(steps, caption="second", max_rows=5, folded_rows=30).html()
    page_file = tmp_path / "tables.html"
    page_file.write_text(f"<html><body>{TABLE_CSS}{first}{second}</body></html>",
                         encoding="utf-8")
    with chromium_page(page_file.as_uri(), width=1366, height=768, dashboard=False,
                       owns=lambda url: url.startswith("file:")) as page:
        rows = page.locator("tbody tr:visible")
        assert rows.count() == 2 * 5
        labels = page.locator("label.pk-more")
        assert labels.nth(0).inner_text() == "▸ show 30 more rows"
        labels.nth(0).click()
        assert rows.count() == 5 + 30 + 5  # the first table to its 35th row, the second not
        assert labels.nth(0).inner_text() == "▾ show the first 5 only"
        assert page.get_by_text("5 more rows not shown").count() == 2
        labels.nth(0).click()
        assert rows.count() == 2 * 5
        page.screenshot(path=str(tmp_path / "tables.png"), full_page=True)
        assert not page.errors and not page.external
