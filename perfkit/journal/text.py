"""The journal for people: terminal tables and HTML (``perfkit journal list|compare``, the
History panel).

Pure formatting of :meth:`perfkit.journal.Journal.runs` and
:class:`~perfkit.journal.compare.RunComparison` frames: times in the unit that fits,
shares as percentages, a figure a guard flagged as its "⚠ not plausible" text, never a
plain number. The HTML is self-contained (one inline stylesheet, no script).
"""

from __future__ import annotations

import html
import math
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from ..format import bytes_text, time_text
from ..tables.parts import STEP_PART_LABELS
from .compare import MINUS, RunComparison
from .record import perfkit_version

__all__ = ["runs_text", "comparison_text", "runs_html", "comparison_html",
           "config_diff_html", "time_diff_html", "comparison_page", "fmt_ms", "fmt_share",
           "fmt_pct", "STYLE"]

#: The stylesheet of the HTML tables (class ``pk-journal``).
STYLE = (
    "<style>"
    ".pk-journal{font-family:system-ui,sans-serif;font-size:13px}"
    ".pk-journal table{border-collapse:collapse;margin:4px 0 12px}"
    ".pk-journal td,.pk-journal th{padding:3px 10px;border-bottom:1px solid #ddd;"
    "text-align:left;vertical-align:top}"
    ".pk-journal td.num{text-align:right;white-space:nowrap}"
    ".pk-journal td{max-width:360px}"
    ".pk-journal ul.note{margin:0 0 10px;padding-left:18px;max-width:900px}"
    ".pk-journal .changed td{background:#fff7e0}"
    ".pk-journal .sentence{font-size:15px;font-weight:600;margin:6px 0 10px}"
    ".pk-journal .note{color:#555;font-size:12px}"
    ".pk-journal .warn{color:#a94442}"
    ".pk-journal h3{margin:14px 0 4px;font-size:14px}"
    "</style>"
)
#: The job's step and its parts as the comparison names them (:data:`BREAKDOWN_NOTE`).
_PART_LABELS = {**STEP_PART_LABELS, "wall_us": "step (the job's, as the metrics give it)",
                "step_us": "device span (part of the step)"}
#: What the shares of the comparison's step breakdown add up to.
BREAKDOWN_NOTE = ("Computing, communication (not overlapped), free and the wait before the "
                  "first device task add up to the step, and their shares to 100 %; the "
                  "device span is the step less that wait, and a row marked \"part of\" is "
                  "inside the row it names.")


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def fmt_ms(us: Any) -> str:
    """Microseconds in the unit that fits, 3 significant digits (``1.23 s``, ``45.6 ms``)."""
    if not _finite(us):
        return "–"
    return time_text(us).replace("-", MINUS)


def fmt_share(x: Any) -> str:
    """A fraction as a percentage (``12.5 %``)."""
    return f"{100 * float(x):.1f} %" if _finite(x) else "–"


def fmt_pct(x: Any, points: bool = False) -> str:
    """A signed change in percent (``+5.3 %``, ``−14 %``); ``points``: percentage points."""
    if not _finite(x):
        return "–"
    v = float(x)
    digits = 1 if abs(v) < 10 else 0
    text = f"{abs(v):.{digits}f}"
    sign = "±" if float(text) == 0 else "+" if v > 0 else MINUS
    return f"{sign}{text} {'pts' if points else '%'}"


def _signed_ms(us: Any) -> str:
    text = fmt_ms(us)
    return "+" + text if _finite(us) and float(us) > 0 else text


def _number(x: Any, fmt: str = "{:,.0f}") -> str:
    return fmt.format(float(x)) if _finite(x) else "–"


def _table_text(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _runs_rows(frame: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = ["id", "label", "added (UTC)", "layout", "step", "tok/s/device", "tok/s/p",
              "MFU", "HFU", "peak mem", "bubble", "top finding"]
    rows = []
    for r in frame.itertuples(index=False):
        layout = f"dp{r.dp} tp{r.tp} pp{r.pp}" + (f" vpp{r.vpp}" if r.vpp and r.vpp > 1
                                                  else "")
        layout += f" m{r.num_micro_batches} {r.recompute}"
        if isinstance(r.recompute_layers, list):
            layout += str(r.recompute_layers).replace(" ", "")
        rows.append([str(r.id), str(r.label), str(r.added_utc).replace("T", " ").rstrip("Z"),
                     layout, fmt_ms(r.step_time_s * 1e6) if _finite(r.step_time_s) else "–",
                     _number(r.tokens_per_s_per_device), _number(r.tokens_per_s_per_p),
                     str(r.mfu_text or "–"), str(r.hfu_text or "–"),
                     bytes_text(r.peak_memory_gib * 2**30) if _finite(r.peak_memory_gib)
                     else "–", fmt_share(r.bubble_share),
                     str(r.top_finding or "–")])
    return header, rows


def runs_text(frame: pd.DataFrame, width: int = 60) -> str:
    """``perfkit journal list``: one line per run (:meth:`Journal.runs` frame).

    Parameters
    ----------
    frame : pandas.DataFrame
    width : int
        Longest top-finding text shown (cut with "…").
    """
    if frame.empty:
        return "The journal has no run yet (perfkit journal add PROFILE)."
    header, rows = _runs_rows(frame)
    for r in rows:
        if len(r[-1]) > width:
            r[-1] = r[-1][:width - 1] + "…"
    lines = _table_text(header, rows, right={0, 4, 5, 6, 7, 8, 9, 10})
    notes = [f"run {r.id}: {r.note}" for r in frame.itertuples(index=False)
             if isinstance(r.note, str) and r.note]
    return "\n".join(lines + ([""] + notes if notes else []))


def comparison_text(cmp: RunComparison, n_operators: int = 10, n_findings: int = 10) -> str:
    """``perfkit journal compare``: the sentence, the config diff, then the time diff.

    Sections: what changed in the job (fields that differ, with their sources), the
    metrics, the step breakdown (the job's step), the operators that moved most, and the
    findings that appeared or disappeared.
    """
    out = [f"{cmp.base_label} → {cmp.new_label}: {cmp.sentence()}", ""]
    ch = cmp.job_changes
    out.append("The job (what changed):")
    if ch.empty:
        out.append("  no setting changed")
    else:
        out += ["  " + s for s in _table_text(
            ["field", cmp.base_label, cmp.new_label, "sources"],
            [[r.field, r.base, r.new, f"{r.base_source} / {r.new_source}"]
             for r in ch.itertuples(index=False)], right=set())]
    out += ["", "Metrics:"]
    out += ["  " + s for s in _table_text(
        ["metric", cmp.base_label, cmp.new_label, "change"],
        [[r.metric, str(r.base_text), str(r.new_text), fmt_pct(r.delta_pct)]
         for r in cmp.metrics.itertuples(index=False)], right={1, 2, 3})]
    warnings = [w for w in cmp.metrics["warning"] if isinstance(w, str) and w]
    out += [f"  warning: {w}" for w in warnings]
    out += ["", "Step breakdown (the job's step, split over every rank and step):"]
    if cmp.breakdown.empty:
        out.append("  neither run has a step breakdown")
    else:
        out += ["  " + s for s in _table_text(
            ["part", cmp.base_label, "share", cmp.new_label, "share", "change", "share"],
            [[_PART_LABELS.get(r.part, r.part), fmt_ms(r.base_us), fmt_share(r.base_share),
              fmt_ms(r.new_us), fmt_share(r.new_share), fmt_pct(r.delta_pct),
              fmt_pct(100 * r.delta_share, points=True)]
             for r in cmp.breakdown.itertuples(index=False)], right={1, 2, 3, 4, 5, 6})]
        out.append(f"  {BREAKDOWN_NOTE}")
        out += [f"  {note}" for note in cmp.breakdown.attrs.get("notes", [])]
    ops = cmp.operators.head(n_operators)
    out += ["", f"Operators that moved most (per rank and step; {cmp.operators_source}):"]
    if ops.empty:
        out.append("  no device tasks in either run")
    else:
        out += ["  " + s for s in _table_text(
            ["operators", cmp.base_label, cmp.new_label, "change", "change %"],
            [[str(r.key), fmt_ms(r.base_us), fmt_ms(r.new_us), _signed_ms(r.delta_us),
              fmt_pct(r.delta_pct)] for r in ops.itertuples(index=False)],
            right={1, 2, 3, 4})]
    out += ["", "Findings (advisor):"]
    f = cmp.findings[cmp.findings["status"] != "kept"].head(n_findings)
    if f.empty:
        out.append("  none appeared or disappeared")
    for r in f.itertuples(index=False):
        title = r.new_title if r.status == "appeared" else r.base_title
        ms = r.new_ms_per_step if r.status == "appeared" else r.base_ms_per_step
        stake = f", {fmt_ms(ms * 1e3)} per step" if _finite(ms) else ""
        out.append(f"  {r.status}: [{r.severity}] {title} ({r.rule}{stake})")
    kept = (cmp.findings["status"] == "kept").sum()
    if kept:
        out.append(f"  {kept} kept (in both runs)")
    return "\n".join(out)


# --------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------

def _esc(x: Any) -> str:
    return html.escape("–" if x is None or (isinstance(x, float) and math.isnan(x))
                       else str(x))


def _html_table(header: list[str], rows: list[list[str]], right: set[int],
                classes: list[str] | None = None) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = []
    for i, r in enumerate(rows):
        cls = f" class='{classes[i]}'" if classes and classes[i] else ""
        cells = "".join(f"<td class='num'>{_esc(c)}</td>" if j in right else f"<td>{_esc(c)}</td>"
                        for j, c in enumerate(r))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def runs_html(frame: pd.DataFrame) -> str:
    """The table of runs as HTML (a ``<div class='pk-journal'>`` with its stylesheet), the
    runs' notes listed below it."""
    if frame.empty:
        return STYLE + "<div class='pk-journal'><p>The journal has no run yet.</p></div>"
    header, rows = _runs_rows(frame)
    notes = "".join(f"<li><b>{_esc(r.label)}</b>: {_esc(r.note)}</li>"
                    for r in frame.itertuples(index=False)
                    if isinstance(r.note, str) and r.note)
    return (STYLE + "<div class='pk-journal'>"
            + _html_table(header, rows, right={0, 4, 5, 6, 7, 8, 9, 10})
            + (f"<ul class='note'>{notes}</ul>" if notes else "") + "</div>")


def config_diff_html(cmp: RunComparison) -> str:
    """The top of a comparison: the sentence and the job fields that changed (HTML)."""
    b, w = cmp.base_label, cmp.new_label
    parts = [STYLE, "<div class='pk-journal'>",
             f"<div class='sentence'>{_esc(b)} → {_esc(w)}: {_esc(cmp.sentence())}</div>",
             "<h3>The job: what changed</h3>"]
    ch = cmp.job_changes
    if ch.empty:
        parts.append("<p>No setting changed.</p>")
    else:
        parts.append(_html_table(["field", b, w, "sources"],
                                 [[r.field, r.base, r.new, f"{r.base_source} / {r.new_source}"]
                                  for r in ch.itertuples(index=False)], right=set()))
    parts.append("</div>")
    return "".join(parts)


def _finding_title(r: Any, base_label: str, new_label: str) -> str:
    """A compared finding's title: the run's own where it is in one run only; both where
    the two runs word it differently (its figures are the run's: "the full recompute",
    "stage 1 takes 5.0 % longer")."""
    base = r.base_title if isinstance(r.base_title, str) else ""
    new = r.new_title if isinstance(r.new_title, str) else ""
    if base and new and base != new:
        return f"{new_label}: {new} / {base_label}: {base}"
    return new or base


def time_diff_html(cmp: RunComparison, n_operators: int = 12) -> str:
    """The rest of a comparison (HTML): the metrics, where the time went (the job's step),
    the operators that moved most and the findings."""
    b, w = cmp.base_label, cmp.new_label
    parts = [STYLE, "<div class='pk-journal'>", "<h3>Metrics</h3>"]
    parts.append(_html_table(
        ["metric", b, w, "change"],
        [[r.metric, r.base_text, r.new_text, fmt_pct(r.delta_pct)]
         for r in cmp.metrics.itertuples(index=False)], right={1, 2, 3}))
    for warning in (x for x in cmp.metrics["warning"] if isinstance(x, str) and x):
        parts.append(f"<p class='warn'>⚠ {_esc(warning)}</p>")
    parts.append("<h3>Where the time went (the job's step, split over every rank and step)</h3>")
    if cmp.breakdown.empty:
        parts.append("<p>Neither run has a step breakdown.</p>")
    else:
        parts.append(_html_table(
            ["part", b, "share", w, "share", "change", "share change"],
            [[_PART_LABELS.get(r.part, r.part), fmt_ms(r.base_us), fmt_share(r.base_share),
              fmt_ms(r.new_us), fmt_share(r.new_share), fmt_pct(r.delta_pct),
              fmt_pct(100 * r.delta_share, points=True)]
             for r in cmp.breakdown.itertuples(index=False)], right={1, 2, 3, 4, 5, 6}))
        parts.append(f"<p class='note'>{_esc(BREAKDOWN_NOTE)}</p>")
        parts += [f"<p class='note'>{_esc(note)}</p>"
                  for note in cmp.breakdown.attrs.get("notes", [])]
    parts.append("<h3>Operators that moved most (per rank and step)</h3>")
    ops = cmp.operators.head(n_operators)
    if ops.empty:
        parts.append("<p>No device tasks in either run.</p>")
    else:
        parts.append(_html_table(
            ["operators", b, w, "change", "change %"],
            [[r.key, fmt_ms(r.base_us), fmt_ms(r.new_us), _signed_ms(r.delta_us),
              fmt_pct(r.delta_pct)] for r in ops.itertuples(index=False)],
            right={1, 2, 3, 4}))
    notes = cmp.operators.attrs.get("notes", [])
    if notes:
        parts.append(f"<p class='note'>{_esc('; '.join(notes))}</p>")
    parts.append("<h3>Findings (advisor)</h3>")
    f = cmp.findings
    if f.empty:
        parts.append("<p>Neither run has a finding.</p>")
    else:
        parts.append(_html_table(
            ["status", "finding", "rule", f"ms/step {b}", f"ms/step {w}"],
            [[r.status, _finding_title(r, b, w), r.rule,
              _number(r.base_ms_per_step, "{:,.1f}"), _number(r.new_ms_per_step, "{:,.1f}")]
             for r in f.itertuples(index=False)], right={3, 4},
            classes=["changed" if s != "kept" else "" for s in f["status"]]))
    parts.append("</div>")
    return "".join(parts)


def comparison_html(cmp: RunComparison, n_operators: int = 12) -> str:
    """The comparison as an HTML fragment: the config diff on top
    (:func:`config_diff_html`), the time diff below (:func:`time_diff_html`)."""
    return config_diff_html(cmp) + time_diff_html(cmp, n_operators)


def comparison_page(cmp: RunComparison, journal_path: str = "") -> str:
    """``perfkit journal compare A B --html FILE``: a self-contained HTML page (no script,
    no link to any server)."""
    title = f"{cmp.base_label} → {cmp.new_label}"
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    source = f" from {_esc(journal_path)}" if journal_path else ""
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{_esc(title)}</title></head><body>"
            f"<h2 style='font-family:system-ui,sans-serif'>Tuning journal: {_esc(title)}</h2>"
            + comparison_html(cmp)
            + f"<p style='color:#777;font-size:11px;font-family:system-ui,sans-serif'>"
              f"perfkit {perfkit_version()}{source}, {made}</p></body></html>")
