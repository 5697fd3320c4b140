"""Loading progress inside a panel (perfkit.io._common.progress.progress_in): the dashboard shows
the bars of the profile it opens in its own box, under the picker, and the box is empty
again once the profile is open: nothing is left in the cell's output above the panel
(the served page showed a cut-off "perfkit: lo…" bar there, issue 29 point 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfkit.io._common import progress as _progress

W = pytest.importorskip("ipywidgets")


def test_a_bar_made_in_the_block_goes_into_the_box_and_leaves_it_when_done(
        monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[object] = []
    monkeypatch.setattr(_progress, "in_notebook", lambda: True)
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.append(a))
    box = W.VBox()
    with _progress.progress_in(box):
        bar = _progress.Progress(3, "perfkit: loading 3 ranks")
        assert bar.mode == "widget" and len(box.children) == 1
        row = box.children[0]
        progress, label = row.children
        bar.update(1, "rank 0")
        # the whole description, never cut to the widget's description width
        assert label.value == "perfkit: loading 3 ranks: 1/3 rank 0"
        assert progress.value == 1 and progress.max == 3
        bar.update(2)
        bar.close()
    assert box.children == ()  # gone when done
    assert row.comm is None and progress.comm is None  # its widgets closed
    assert shown == []  # nothing displayed in the cell's output
    # outside the block, a notebook bar goes to the output and stays when finished
    bar = _progress.Progress(2, "loading")
    bar.update(2)
    bar.close()
    assert len(shown) == 1 and box.children == ()
    assert bar._label.value.startswith("loading: 2/2 in ")


def test_a_bar_closed_by_an_error_leaves_the_box_too() -> None:
    box = W.VBox()
    with pytest.raises(RuntimeError), _progress.progress_in(box), \
            _progress.Progress(2, "loading") as bar:
        bar.update(1)
        raise RuntimeError("a rank failed")
    assert box.children == ()


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_dashboard_shows_its_loading_bar_inside_and_none_once_open(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A multi-rank sample parsed afresh (empty cache): its bar appears in the
    dashboard's progress box while loading; once open the box is empty and nothing was
    displayed outside the panel."""
    from perfkit.widgets.dashboard import Dashboard

    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_progress, "in_notebook", lambda: True)
    import IPython.display

    shown: list[object] = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.append(a))
    board = Dashboard()  # opens nothing before the observer below is in place
    seen: list[str] = []

    def watch(change: dict) -> None:
        for row in change["new"]:
            seen.append(row.children[1].value)

    board.progress.observe(watch, names="children")
    assert board.load_profile("simulated/slow-rank")
    assert any(text.startswith("perfkit: loading 4 ranks: 0/4") for text in seen), seen
    assert board.progress.children == () and shown == []
    assert board.progress in board.children  # under the picker, not above the panel
    assert board.children.index(board.progress) < board.children.index(board.status)
