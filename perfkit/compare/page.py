"""A comparison (:class:`~perfkit.compare.result.Comparison`, read by its attributes)
for people: plain text for a terminal,
an HTML fragment for a notebook or the dashboard, a self-contained HTML page (inline
style, no script, no remote link) for ``perfkit compare --html``."""

from __future__ import annotations

import html
import math
import re
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from .._version import __version__
from ..format import sig, time_text
from .verdict import NOT_ONE_JOB, throughput_change_pct

__all__ = ["comparison_text", "comparison_html", "comparison_page", "verdict_html",
           "verdict_sentence"]

_MINUS = "\u2212"
_STYLE = ("<style>.pk-compare{font-family:system-ui,sans-serif;font-size:13px}"
          ".pk-compare table{border-collapse:collapse;margin:4px 0 12px}"
          ".pk-compare th,.pk-compare td{padding:2px 8px;border-bottom:1px solid #ddd;"
          "text-align:left}.pk-compare td.num{text-align:right;font-variant-numeric:"
          "tabular-nums}.pk-compare .faster{color:#1a7f37}.pk-compare .slower{color:#b42318}"
          ".pk-compare .note{color:#666}</style>")


def _ms(x: Any) -> str:
    """ms as time text in the unit that fits; "–" when missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA:
        return "–"
    return time_text(float(x) * 1e3)


def _delta(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA:
        return "–"
    x = float(x)
    sign = "+" if x > 0 else _MINUS if x < 0 else ""
    return sign + time_text(abs(x) * 1e3)


def _pct(x: Any) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return ("+" if x > 0 else _MINUS if x < 0 else "") + sig(abs(float(x))) + " %"


#: The profiler's spelling of input shapes that :func:`shape_text` rewrites.
_SHAPES = re.compile(r"[\d,;\s-]*")


def shape_text(shape: Any) -> str:
    """An operator's input shapes for people: ``";32,1024,14,14;32,256,14,14;;;"`` (the
    profiler's text: one field per input, empty where the input has none) as
    ``"[32×1024×14×14] [32×256×14×14]"``; the empty fields at either end are dropped and
    one between two shapes is ``[–]``; text of another form is shown as it is. The JSON
    keeps the profiler's text."""
    text = _str(shape)
    if text != "–" and not _SHAPES.fullmatch(text):  # another spelling: shown as it is
        return text
    fields = text.split(";") if text != "–" else []
    while fields and not fields[0].strip():
        fields.pop(0)
    while fields and not fields[-1].strip():
        fields.pop()
    if not fields:
        return "–"
    return " ".join("[" + ("×".join(d.strip() for d in f.split(",")) if f.strip() else "–")
                    + "]" for f in fields)


def _str(x: Any) -> str:
    """Text of a cell; "–" for None / NaN / NA."""
    if x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return str(x)


def verdict_sentence(v: Any, a_label: str, b_label: str, a_step_ms: float | None = None,
                     b_step_ms: float | None = None) -> str:
    """The verdict (:class:`~perfkit.compare.verdict.Verdict`) in one sentence: "B is
    28.6 % faster than A per token per device (band ±2 %: ...; step 1.21 s → 1.72 s)"."""
    per = "" if v.basis == "step" else " per token per device"
    if not math.isfinite(v.change_pct):
        return f"{b_label} cannot be compared with {a_label}: a run has no step time"
    band = (f"band ±{sig(v.threshold_pct)} %, the larger of the noise "
            f"±{sig(v.noise_pct)} % and the threshold" if v.noise_pct is not None
            else f"band ±{sig(v.threshold_pct)} %: the threshold, as the noise cannot be "
                 "measured")
    steps = ("" if a_step_ms is None or b_step_ms is None
             else f"; step {_ms(a_step_ms)} → {_ms(b_step_ms)}")
    if v.word == "no change":
        return (f"{b_label}: no change against {a_label}{per} "
                f"({_pct(v.change_pct)}, within the {band}{steps})")
    return (f"{b_label} is {sig(abs(v.change_pct))} % {v.word} than {a_label}{per} "
            f"({band}{steps})")


def _side_line(tag: str, s: Any) -> str:
    # two runs of one name are labelled "A: name" and "B: name" already (build.compare)
    label = s.label if s.label.startswith(f"{tag}: ") else f"{tag}: {s.label}"
    spread = (" (one step time: its spread is unknown)" if _ms(s.step_spread_ms) == "–"
              else f" ± {_ms(s.step_spread_ms)} over steps and ranks")
    return (f"{label} ({s.format}, {s.ranks} rank{'s' * (s.ranks != 1)}, "
            f"{s.steps} step{'s' * (s.steps != 1)}): step {_ms(s.step_ms)}{spread}  "
            f"[{s.path}]")


def _tables(cmp: Any, n_operators: int) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of each table, shared by the text and the HTML."""
    scaled = " (B at A's work per step)" if cmp.verdict.work_scale != 1.0 else ""
    out = [(f"Step parts, per step{scaled}", ["part", "A", "B", "B − A"],
            [[r.part, _ms(r.a_ms), _ms(r.b_ms), _delta(r.delta_ms)]
             for r in cmp.parts.itertuples(index=False)])]
    if not cmp.kinds.empty:
        out.append((f"Device time by kernel kind, per rank and step{scaled}",
                    ["kind", "A", "B", "B − A"],
                    [[r.kind, _ms(r.a_ms), _ms(r.b_ms), _delta(r.delta_ms)]
                     for r in cmp.kinds.itertuples(index=False)]))
    ops = cmp.operators
    if not ops.empty:
        shown = ops.head(n_operators)
        more = len(ops) - len(shown)
        out.append((f"Operators matched by name, shape and call position, largest change "
                    f"first{scaled}" + (f" ({more} more rows)" if more > 0 else ""),
                    ["operator", "shape", "A", "B", "B − A", "matched"],
                    [[r.name, shape_text(r.shape), _ms(r.a_ms), _ms(r.b_ms), _delta(r.delta_ms),
                      "yes" if r.matched else "no, only in " + ("A" if _str(r.b_ms) == "–"
                                                              else "B")]
                     for r in shown.itertuples(index=False)]))
    if not cmp.job_changes.empty:
        out.append(("What changed in the job", ["field", "A", "B"],
                    [[r.field, _str(r.a), _str(r.b)]
                     for r in cmp.job_changes.itertuples(index=False)]))
    return out


def _gate_line(cmp: Any) -> str:
    if cmp.gate_pct is None:
        return ""
    if cmp.gate_not_judged:
        return f"Gate {sig(cmp.gate_pct)} %: not judged ({cmp.gate_not_judged})"
    return (f"Gate {sig(cmp.gate_pct)} %: " + (
        "FAILED (B is slower beyond the gate and the noise)" if cmp.gate_failed
        else "passed"))


def comparison_text(cmp: Any, n_operators: int = 10) -> str:
    """What ``perfkit compare A B`` prints."""
    v = cmp.verdict
    lines = [_side_line("A", cmp.a), _side_line("B", cmp.b), "",
             f"Verdict: {v.word.upper()}. {cmp.headline()}"]
    lines += [f"  ⚠ {n}" for n in cmp.notes if n.startswith(NOT_ONE_JOB)]
    if math.isfinite(v.change_pct):
        what = "tokens/s per device" if v.basis != "step" else "steps/s"
        lines.append(f"  throughput ({what}): {_pct(throughput_change_pct(v.change_pct))}")
    lines += [f"  method: {v.method}", "  assumptions:"]
    lines += [f"    - {a}" for a in v.assumptions]
    gate = _gate_line(cmp)
    if gate:
        lines.append(gate)
    for title, header, rows in _tables(cmp, n_operators):
        lines += ["", title + ":"] + _text_table(header, rows)
    if cmp.notes:
        lines += ["", "Notes:"] + [f"  - {n}" for n in cmp.notes]
    return "\n".join(lines)


def _text_table(header: list[str], rows: list[list[str]]) -> list[str]:
    cut = [[c if len(c) <= 60 else c[:59] + "…" for c in map(str, r)] for r in [header, *rows]]
    widths = [max(len(r[i]) for r in cut) for i in range(len(header))]
    out = []
    for r in cut:
        cells = [c.ljust(w) if i == 0 or not _numeric(c) else c.rjust(w)
                 for i, (c, w) in enumerate(zip(r, widths, strict=True))]
        out.append("  " + "  ".join(cells).rstrip())
    return out


def _numeric(cell: str) -> bool:
    return bool(cell) and (cell[0].isdigit() or cell[0] in "+\u2212–")


def _esc(x: Any) -> str:
    return html.escape(str(x))


def verdict_html(cmp: Any) -> str:
    """The verdict as one HTML paragraph (the dashboard's History tab shows it)."""
    v = cmp.verdict
    cls = v.word.replace(" ", "-")
    return (f"<p class='{cls}'><b>{_esc(v.word.upper())}</b>: {_esc(cmp.headline())}</p>"
            f"<p class='note'>{_esc(v.method)}</p>")


def comparison_html(cmp: Any, n_operators: int = 20) -> str:
    """The comparison as an HTML fragment (``<div class='pk-compare'>`` with its style)."""
    parts = [f"<p>{_esc(_side_line('A', cmp.a))}<br>{_esc(_side_line('B', cmp.b))}</p>",
             verdict_html(cmp),
             "<ul class='note'>" + "".join(f"<li>{_esc(a)}</li>"
                                          for a in cmp.verdict.assumptions) + "</ul>"]
    gate = _gate_line(cmp)
    if gate:
        parts.append(f"<p><b>{_esc(gate)}</b></p>")
    for title, header, rows in _tables(cmp, n_operators):
        head = "".join(f"<th>{_esc(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(
            f"<td class='num'>{_esc(c)}</td>" if i and _numeric(c) else f"<td>{_esc(c)}</td>"
            for i, c in enumerate(r)) + "</tr>" for r in rows)
        parts.append(f"<h4>{_esc(title)}</h4><table><thead><tr>{head}</tr></thead>"
                     f"<tbody>{body}</tbody></table>")
    if cmp.notes:
        parts.append("<ul class='note'>" + "".join(f"<li>{_esc(n)}</li>" for n in cmp.notes)
                     + "</ul>")
    return _STYLE + "<div class='pk-compare'>" + "".join(parts) + "</div>"


def comparison_page(cmp: Any, n_operators: int = 20) -> str:
    """``perfkit compare A B --html FILE``: one self-contained page."""
    title = f"{cmp.a.label} → {cmp.b.label}"
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{_esc(title)}</title></head><body>"
            f"<h2 style='font-family:system-ui,sans-serif'>perfkit compare: {_esc(title)}</h2>"
            + comparison_html(cmp, n_operators)
            + "<p style='color:#777;font-size:11px;font-family:system-ui,sans-serif'>"
              f"perfkit {_esc(__version__)}, {made}</p></body></html>")
