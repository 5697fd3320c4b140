"""Labels are not cut at 1280 or 1440 px: the job panel's field names
(``num_attention_heads``), the Timeline's "Export for Perfetto" button and the profile
picker's entry of an opened path ("PATH (opened by path)"). The widths are checked against
8 px a character, the dashboard font's widest average (13 px sans-serif); the browser
screenshots of docs/dashboard.md show the same at both widths."""

from __future__ import annotations

import pytest

from perfkit.widgets import dashboard


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_labels_have_room_for_their_text() -> None:
    board = dashboard(None, background_bytes=None)
    controls = board.job.controls
    assert "num_attention_heads" in controls
    for name, box in controls.items():
        width = int(box.style.description_width.removesuffix("px"))
        assert width >= 8 * len(name), name
        assert int(box.layout.width.removesuffix("px")) > width + 100, name
    reset = board.job.reset_button
    assert int(reset.layout.min_width.removesuffix("px")) >= 8 * len(reset.description)
    export = board.panels["Timeline"].export
    assert int(export.layout.min_width.removesuffix("px")) >= 8 * len(export.description) + 30
    # the picker grows with the page (an opened path's entry is long), within bounds
    for widget in (board.samples, board.path):
        assert widget.layout.width.startswith("calc(100%")
        assert widget.layout.max_width == "960px"
