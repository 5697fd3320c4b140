"""What a widget tree shows as HTML, for the dashboard tests (imported like shared_samples)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["html_values", "panel_html", "panel_words"]


def html_values(widgets: Iterable[Any]) -> Iterator[str]:
    """Every ``HTML`` widget's value in ``widgets`` and their children, depth first."""
    for w in widgets:
        value = getattr(w, "value", None)
        if isinstance(value, str) and type(w).__name__ == "HTML":
            yield value
        yield from html_values(getattr(w, "children", ()) or ())


def panel_html(panel: Any) -> str:
    """Every HTML value in a tab's body (nested boxes included), or in a box's children."""
    return "".join(html_values(getattr(panel, "body", panel).children))


def panel_words(panel: Any) -> str:
    """The words a tab shows under its message, styles and tags taken out, entities
    decoded, each table cell ended by `` | ``."""
    text = re.sub(r"<style.*?</style>", "", panel.message.value + panel_html(panel),
                  flags=re.S)
    text = re.sub(r"</t[hd]>", " | ", text)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())
