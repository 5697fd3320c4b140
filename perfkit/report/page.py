"""An executed notebook as one self-contained HTML page, without its code (:func:`notebook_html`).

The markdown cells rendered and the code cells' outputs (HTML, SVG, PNG/JPEG as ``data:``
URIs, text) in order, one inline stylesheet, no script and no link to another server (any
such reference is removed and counted in the footer); live widgets are left out. What
perfkit noted while reading the profile comes first.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

from ..format import counted, plural
from .execute import _ANSI, _one_line

__all__ = ["notebook_html"]


_REMOTE = r"""\s*=\s*["']?\s*(?:https?:)?//"""
_REMOTE_SCRIPT = re.compile(r"<script\b[^>]*\bsrc" + _REMOTE + r"[^>]*>.*?</script\s*>",
                            re.IGNORECASE | re.DOTALL)
_REMOTE_TAG = re.compile(r"<(?:script|link|img|iframe|embed|source|audio|video)\b[^>]*\b"
                         r"(?:src|href)" + _REMOTE + r"[^>]*>", re.IGNORECASE)


_STYLE = """\
body { font-family: -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: #1f2328; max-width: 1100px; margin: 2em auto; padding: 0 1.5em;
       line-height: 1.5; }
header { border-bottom: 1px solid #d0d7de; margin-bottom: 1.5em; }
header h1 { margin-bottom: 0.2em; font-size: 1.6em; }
header p.note { color: #57606a; font-size: 0.9em; margin-top: 0.2em; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
            font-size: 0.88em; }
pre.output { background: #f6f8fa; padding: 0.6em 0.8em; overflow-x: auto;
             white-space: pre-wrap; border-radius: 4px; }
pre.stderr { background: #fff5f5; }
.output { margin: 0.8em 0; overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.88em; margin: 0.4em 0; }
th, td { border: 1px solid #d0d7de; padding: 0.25em 0.6em; text-align: right; }
thead th { background: #f6f8fa; }
tbody tr:nth-child(even) { background: #fafbfc; }
img, svg { max-width: 100%; height: auto; }
a.anchor-link { display: none; }
footer { border-top: 1px solid #d0d7de; margin-top: 2em; color: #57606a; font-size: 0.85em; }
section.reading { background: #fff8e6; border: 1px solid #eed9a6; border-radius: 4px;
                  padding: 0.2em 1em; margin-bottom: 1.5em; font-size: 0.9em; }
section.reading h2 { font-size: 1.1em; margin: 0.5em 0 0.2em; }
"""

_HTML_MIMES = ("text/html", "image/svg+xml", "image/png", "image/jpeg", "text/markdown",
               "text/plain")
_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _markdown(text: str) -> str:
    try:
        from nbconvert.filters.markdown_mistune import markdown2html_mistune
    except ImportError:  # pragma: no cover - nbconvert comes with jupyterlab and voila
        return f"<pre>{html.escape(text)}</pre>"
    return markdown2html_mistune(text)


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _output_html(out: Any) -> str:
    kind = out.get("output_type")
    if kind == "stream":
        css = "output stderr" if out.get("name") == "stderr" else "output"
        return f'<pre class="{css}">{html.escape(_ANSI.sub("", _text(out.get("text", ""))))}</pre>'
    if kind == "error":
        what = f"{out.get('ename', '')}: {out.get('evalue', '')}"
        return f'<pre class="output stderr">{html.escape(_one_line(what))}</pre>'
    data = out.get("data", {})
    mime = next((m for m in _HTML_MIMES if m in data), None)
    if mime is None or (mime == "text/plain" and _WIDGET_MIME in data):
        return _widget_note(_text(data.get("text/plain", ""))) if _WIDGET_MIME in data else ""
    value = _text(data[mime])
    if mime in ("text/html", "image/svg+xml"):
        body = value
    elif mime in ("image/png", "image/jpeg"):
        body = f'<img alt="figure" src="data:{mime};base64,{"".join(value.split())}">'
    elif mime == "text/markdown":
        body = _markdown(value)
    else:
        body = f'<pre class="output">{html.escape(_ANSI.sub("", value))}</pre>'
    return f'<div class="output">{body}</div>'


#: The class name a live widget's plain-text form begins with (``StepTimeExplorer(children=``).
_WIDGET_CLASS = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\(")


def _widget_note(plain: str) -> str:
    """What a static page shows where the notebook shows a live widget: nothing for a
    progress bar (its work is done), else that an interactive control is there, and where
    to use it, so that prose such as "slide the step time" does not point at nothing."""
    m = _WIDGET_CLASS.match(plain)
    name = m.group(1) if m else "a widget"
    if name.endswith("Progress"):
        return ""
    return ('<div class="output"><p class="widget-note"><i>Here the notebook shows an '
            f"interactive control ({html.escape(name)}): a static page cannot run it. Use "
            "it in the dashboard (<code>perfkit serve PROFILE</code>) or in Jupyter "
            "(<code>perfkit notebooks DEST</code>).</i></p></div>")


def _strip_remote(markup: str) -> tuple[str, int]:
    """Remove scripts, stylesheets and media that would be fetched from another server."""
    markup, n1 = _REMOTE_SCRIPT.subn("", markup)
    markup, n2 = _REMOTE_TAG.subn("", markup)
    return markup, n1 + n2


def _reading_html(notes: Sequence[str]) -> str:
    """The section that lists what perfkit noted while reading the profile, in the
    dashboard's words (:func:`perfkit.widgets.load_notes.plain_note`)."""
    if not notes:
        return ""
    from ..widgets.load_notes import plain_note  # the dashboard's words for them

    items = "".join(f"<li>{html.escape(plain_note(str(n)))}</li>" for n in notes)
    return ('<section class="reading">\n<h2>Read with notes</h2>\n'
            f"<p>While reading the profile perfkit noted {counted(len(notes), 'thing')} "
            "(<code>meta.notes</code> of <code>perfkit.load</code>, the names of its tables "
            "and columns said in words): how it read the files, "
            "what it repaired, left out (rows, values set to NA, ranks not loaded) or did not "
            "find. Where something was left out, the figures below are computed without it."
            f"</p>\n<ul>{items}</ul>\n</section>\n")


def notebook_html(nb: Any, title: str, note: str = "",
                  reading_notes: Sequence[str] = ()) -> str:
    """An executed notebook as one self-contained HTML page, without its code.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        Executed notebook.
    title : str
        Page title and heading (plain text).
    note : str
        A line under the heading (plain text).
    reading_notes : sequence of str
        The notes of loading the profile (``meta.notes``), listed before the notebook's
        outputs (whatever the notebook shows of them).

    Returns
    -------
    str
        The page: markdown cells rendered, code-cell outputs (HTML, SVG, PNG/JPEG as
        ``data:`` URIs, text) in order, an inline stylesheet, no script or link to
        another server.
    """
    parts = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            parts.append(f'<section class="markdown">{_markdown(cell.source)}</section>')
        elif cell.cell_type == "code":
            shown = "".join(_output_html(o) for o in cell.get("outputs", []))
            if shown:
                parts.append(f'<section class="outputs">{shown}</section>')
    body, removed = _strip_remote(_reading_html(reading_notes) + "\n".join(parts))
    footer = ("" if not removed else
              f"<p>{counted(removed, 'reference')} to files on other servers "
              f"{plural(removed, 'was', 'were')} removed.</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<meta name=\"generator\" content=\"perfkit\">\n"
            f"<title>{html.escape(title)}</title>\n<style>\n{_STYLE}</style>\n</head>\n"
            f"<body>\n<header>\n<h1>{html.escape(title)}</h1>\n"
            f"<p class=\"note\">{html.escape(note)}</p>\n</header>\n<main>\n{body}\n</main>\n"
            f"<footer>{footer}<p>{html.escape(note)}</p></footer>\n</body>\n</html>\n")
