"""Tables for people: one unit per column, stated in the header; ranks aggregated.

perfkit's frames carry their units in their column names (``total_us``, ``peak_bytes``,
``computing_share``, ``bandwidth_gbps``; see ``docs/schema.md``). :func:`table` reads those
names and writes every cell with :mod:`perfkit.format`: a time column in the one unit that
fits it (``"total (ms)"``), shares as percentages, bytes in KiB/MiB/GiB, and no number in
scientific notation. Long text (GPU kernel names) is shortened in the cell and kept whole in
the cell's tooltip (``title`` attribute). What a figure is per (per rank, per step, summed
over ranks) goes into the header through ``scope``.

:func:`over_ranks` is the default view of a per-rank frame: one row per key with the
median, the smallest and the largest value over the ranks and the rank that has the largest
(the worst rank), instead of the same row repeated once per rank.

Nothing here computes a metric; the functions rename, aggregate and format frames that
:mod:`perfkit.analysis` computed.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .errors import InvalidArgumentError
from .format import (
    MISSING,
    WARNING_MARK,
    bytes_text,
    bytes_unit,
    count_text,
    is_missing,
    number_text,
    share_text,
    sig,
    time_text,
    time_unit,
)

__all__ = ["Column", "Table", "column_format", "table", "table_html", "over_ranks",
           "shorten", "with_values", "TABLE_CSS", "SPREAD_STATS"]

#: What :func:`over_ranks` writes for each value column, in order.
SPREAD_STATS = ("median", "min", "max")

#: Style of :func:`table_html` tables (one ``<style>`` element; class ``pk-table``).
TABLE_CSS = (
    "<style>"
    ".pk-table{margin:4px 0 10px 0;max-width:100%;overflow-x:auto}"
    ".pk-table table{border-collapse:collapse;font-size:12px;line-height:1.35}"
    ".pk-table caption{text-align:left;font-weight:600;padding:6px 0 3px 0;"
    "white-space:normal}"
    ".pk-table th{text-align:right;padding:2px 8px;border-bottom:2px solid #bbb;"
    "vertical-align:bottom;font-weight:600;white-space:normal;max-width:14em}"
    ".pk-table td{text-align:right;padding:2px 8px;border-bottom:1px solid #e3e3e3;"
    "white-space:nowrap;font-variant-numeric:tabular-nums}"
    ".pk-table td.pk-text,.pk-table th.pk-text{text-align:left}"
    ".pk-table td.pk-wrap{white-space:normal;min-width:16em;max-width:38em}"
    ".pk-table tr.pk-hot td{background:#fdf2e9}"
    ".pk-table .pk-more{color:#555;font-size:12px;margin:2px 0}"
    ".pk-warn{color:#8a6d3b;background:#fcf8e3;border:1px solid #faebcc;padding:4px 8px;"
    "border-radius:4px;font-size:12px;margin:4px 0}"
    "</style>")

_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("_us", "time"), ("_ms", "time_ms"), ("_s", "time_s"), ("_share", "share"),
    ("_fraction", "share"), ("_pct", "pct"), ("_bytes", "bytes"), ("_gib", "gib"),
    ("_GiB", "gib"), ("_gbps", "gbps"), ("_tflops", "tflops"),
)
_SHARES = {"share", "mfu", "hfu", "efficiency", "fraction", "overlap_share",
           "exposed_share", "recompute_share", "score"}
_COUNTS = {"count", "samples", "ranks", "steps", "occurrences", "kernels", "forward",
           "backward", "rank", "src_rank", "dst_rank", "worst_rank", "step", "layers",
           "devices", "dp", "tp", "pp", "vpp", "micro_batch_size", "num_micro_batches",
           "stage", "chunk", "check_order", "calls"}
_LABELS = {"gbps": "GB/s", "tflops": "TFLOP/s", "gib": "GiB", "pct": "%"}
_SPREAD = re.compile(r"^(?P<stem>.*)_(?P<stat>median|min|max|mean|total)(?P<suffix>_[A-Za-z]+)?$")


def shorten(text: Any, limit: int = 48) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis in the middle (both ends of a
    kernel name say most about it)."""
    s = "" if text is None else str(text)
    if limit < 5 or len(s) <= limit:
        return s
    keep = limit - 1
    head = (keep + 1) // 2
    return s[:head] + "…" + s[len(s) - (keep - head):]


@dataclass(frozen=True)
class Column:
    """How one column of :func:`table` is written.

    Attributes
    ----------
    name : str
        The column of the frame.
    header : str
        Its header, unit included (``"total (ms)"``).
    kind : str
        ``time``, ``share``, ``bytes``, ``count``, ``number``, ``text`` or ``bool``.
    unit : str
        The unit every cell of the column is written in (``"ms"``, ``"GiB"``, ``"%"``),
        empty for counts, text and plain numbers.
    """

    name: str
    header: str
    kind: str
    unit: str = ""


def _kind(name: str, series: pd.Series) -> tuple[str, str]:
    """(kind, stem) of a column from its name and dtype."""
    base = name
    for suffix, kind in _SUFFIXES:
        if base.endswith(suffix) and len(base) > len(suffix):
            return kind, base[: -len(suffix)]
    if base in _SHARES:
        return "share", base
    if pd.api.types.is_bool_dtype(series.dtype):
        return "bool", base
    if pd.api.types.is_integer_dtype(series.dtype) or base in _COUNTS \
            or _is_count_rate(base):
        if pd.api.types.is_numeric_dtype(series.dtype):
            return "count", base
    if pd.api.types.is_numeric_dtype(series.dtype):
        return "number", base
    return "text", base


def _is_count_rate(name: str) -> bool:
    """A count per step or per rank (``calls_per_step``): whole numbers are written without
    decimals (``"4"``, not ``"4.00"``), a fraction with 3 significant digits."""
    stem, sep, per = name.rpartition("_per_")
    return bool(sep) and per in ("step", "rank") and stem in _COUNTS


_ACRONYMS = {"mfu": "MFU", "hfu": "HFU", "ai": "AI", "cpu": "CPU", "npu": "NPU",
             "gpu": "GPU", "dp": "dp", "id": "ID"}


def _words(stem: str) -> str:
    return " ".join(_ACRONYMS.get(w, w) for w in stem.replace("_", " ").split())


def column_format(frame: pd.DataFrame, name: str, scope: str | None = None,
                  unit: str | None = None) -> Column:
    """The :class:`Column` for ``frame[name]``: kind from the name's suffix, one unit fitted
    to the column (its median), the unit and ``scope`` in the header.

    Parameters
    ----------
    frame : pandas.DataFrame
    name : str
    scope : str, optional
        What the figures are per (``"per step, per rank"``), appended to the header.
    unit : str, optional
        Force the unit of a time or bytes column.
    """
    series = frame[name]
    kind, stem = _kind(name, series)
    words = _words(stem)
    extra = f", {scope}" if scope else ""
    if kind in ("time", "time_ms", "time_s"):
        factor = {"time": 1.0, "time_ms": 1e3, "time_s": 1e6}[kind]
        fitted = unit or time_unit(series.astype("float64") * factor)[0]
        return Column(name, f"{words} ({fitted}{extra})", "time", fitted)
    if kind == "bytes":
        fitted = unit or bytes_unit(series.astype("float64"))[0]
        return Column(name, f"{words} ({fitted}{extra})", "bytes", fitted)
    if kind == "share":
        return Column(name, f"{words} (%{extra})", "share", "%")
    if kind in _LABELS:
        return Column(name, f"{words} ({_LABELS[kind]}{extra})", kind, _LABELS[kind])
    header = f"{words} ({scope})" if scope else words
    return Column(name, header, kind)


def _in_unit(in_column: str, own: str, other_unit: bool) -> str:
    """A cell's number in its column's unit (the unit is in the header), or, for a value
    a thousand times too small for that unit (64 B in a GiB column: ``0.0000000596``),
    the value with its own unit (``64 B``)."""
    number = in_column.rsplit(" ", 1)[0]
    try:
        tiny = other_unit and 0 < abs(float(number.replace(",", ""))) < 1e-3
    except ValueError:
        tiny = False
    return own if tiny else number


def _in_own_units(col: Column, cells: list[str]) -> Column:
    """``col``, or, where one of its ``cells`` keeps its own unit (``64 B`` in a GiB
    column, :func:`_in_unit`), the column with every cell in its own unit and no unit in
    its header: a header's unit is the unit of every cell under it."""
    if col.kind not in ("time", "bytes") or not col.unit or not any(" " in c for c in cells):
        return col
    header = col.header.replace(f" ({col.unit})", "").replace(f" ({col.unit}, ", " (")
    return Column(col.name, header, col.kind, "")


def _cell(value: Any, col: Column) -> str:
    if col.kind == "text":
        return MISSING if value is None or (not isinstance(value, str) and is_missing(value)) \
            else str(value)
    if col.kind == "bool":
        if value is None or value is pd.NA or (isinstance(value, float) and value != value):
            return MISSING
        return "yes" if bool(value) else "no"
    if is_missing(value):
        return MISSING
    v = float(value)
    if col.kind == "time":
        factor = 1.0
        if col.name.endswith("_ms"):
            factor = 1e3
        elif col.name.endswith("_s"):
            factor = 1e6
        if not col.unit:  # each cell in its own unit (:func:`_in_own_units`)
            return time_text(v * factor)
        return _in_unit(time_text(v * factor, col.unit), time_text(v * factor),
                        time_unit([abs(v * factor)])[0] != col.unit)
    if col.kind == "bytes":
        if not col.unit:
            return bytes_text(v)
        return _in_unit(bytes_text(v, col.unit), bytes_text(v),
                        bytes_unit([abs(v)])[0] != col.unit)
    if col.kind == "share":
        return share_text(v).removesuffix(" %")
    if col.kind == "pct":
        return f"{v:,.1f}"
    if col.kind == "gib":
        return sig(v)
    if col.kind == "count":
        return count_text(v) if float(v).is_integer() else sig(v)
    return number_text(v)


@dataclass
class Table:
    """A frame written for people (:func:`table`); shows as HTML in notebooks.

    Attributes
    ----------
    text : pandas.DataFrame
        The cells as strings, headers with their units.
    full : pandas.DataFrame
        The whole text of each cell (same shape): the tooltip of a shortened cell.
    columns : list of Column
    caption : str or None
    hidden_rows : int
        Rows of the frame left out by ``max_rows``.
    hot : list of bool
        Rows to highlight (e.g. the worst rank), one per row of ``text``.
    warnings : tuple of str
        Figures of the frame that cannot be right (``frame.attrs["warnings"]``, set by
        the analyses): shown above the table, never dropped.
    notes : tuple of str
        What the analysis says about the frame (``frame.attrs["notes"]``): an empty table
        says the first one, so that "nothing" comes with its reason.
    """

    text: pd.DataFrame
    full: pd.DataFrame
    columns: list[Column]
    caption: str | None = None
    hidden_rows: int = 0
    hot: list[bool] = field(default_factory=list)
    wrap: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def html(self) -> str:
        """The table as HTML (text escaped; a shortened cell carries its whole text in
        its ``title``); a note when it is empty."""
        return table_html(self)

    def _repr_html_(self) -> str:
        return TABLE_CSS + self.html()

    def __repr__(self) -> str:
        return self.text.to_string(index=False)


def _with_bracket(words: str, inside: str) -> str:
    """``words (inside)``, one bracket: the words' own becomes a clause after a comma, or
    a colon where it holds a comma (``"free (device idle)"``, ``"%"`` → ``"free, device
    idle (%)"``, not ``"free (device idle) (%)"``)."""
    if not inside:
        return words
    words = re.sub(r"\s*\(([^()]*)\)",
                   lambda m: (": " if "," in m[1] else ", ") + m[1], words)
    return f"{words} ({inside})"


def table(frame: pd.DataFrame, columns: Sequence[str] | None = None, *,
          caption: str | None = None, scope: Mapping[str, str] | None = None,
          headers: Mapping[str, str] | None = None, units: Mapping[str, str] | None = None,
          shorten_text: Mapping[str, int] | int | None = 48, max_rows: int | None = 20,
          hot: Iterable[bool] | None = None, wrap: Sequence[str] = ()) -> Table:
    """``frame`` written for people: one unit per column, stated in the header.

    A time or size column with a value a thousand times too small for the unit that fits
    the column (64 B among GiB) writes each cell in its own unit instead, and its header
    names no unit.

    Parameters
    ----------
    frame : pandas.DataFrame
        Columns named with perfkit's unit suffixes (``_us``, ``_ms``, ``_s``, ``_bytes``,
        ``_share``, ``_pct``, ``_gbps``, ``_tflops``, ``_GiB``); other numeric columns are
        written with 3 significant digits, integers as counts.
    columns : sequence of str, optional
        Columns to keep, in order (default: all).
    caption : str, optional
    scope : mapping, optional
        Column → what its figures are per (``{"total_us": "summed over ranks"}``).
    headers : mapping, optional
        Column → header to use instead of the one made from its name (the unit is still
        appended for times, bytes and shares, and the column's ``scope`` after it:
        ``"time (ms, summed over steps)"``).
    units : mapping, optional
        Column → unit to force (``{"step_median_us": "ms"}``). Columns of one spread (the
        ``_median``, ``_min`` and ``_max`` columns of :func:`over_ranks`) share the unit of
        their median.
    shorten_text : int or mapping, optional
        Longest text cell (characters) before it is shortened (the whole text stays in the
        cell's tooltip); a mapping per column; None keeps every text whole.
    max_rows : int, optional
        Rows kept (the first ones); the table says how many were left out.
    hot : iterable of bool, optional
        Rows to highlight.
    wrap : sequence of str
        Text columns allowed to wrap over several lines (sentences, not names).

    Returns
    -------
    Table
    """
    if not isinstance(frame, pd.DataFrame):
        raise InvalidArgumentError("frame", "must be a pandas DataFrame", type(frame).__name__)
    names = list(frame.columns if columns is None else columns)
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise InvalidArgumentError("columns", "not in the frame: " + ", ".join(missing))
    scope = dict(scope or {})
    headers = dict(headers or {})
    forced = dict(units or {})
    # the columns of one spread share the unit fitted to their median
    for name in names:
        m = _SPREAD.match(name)
        if m and m.group("stat") == "median" and name not in forced:
            kind = _kind(name, frame[name])[0]
            if kind in ("time", "bytes"):
                ref = column_format(frame, name).unit
                for stat in ("min", "max", "mean", "total"):
                    sibling = f"{m.group('stem')}_{stat}{m.group('suffix') or ''}"
                    if sibling in frame.columns:
                        forced.setdefault(sibling, ref)
                forced.setdefault(name, ref)
    cols = []
    for name in names:
        col = column_format(frame, name, scope.get(name), forced.get(name))
        if name in headers:  # its own words, then its unit and its scope, as made above
            inside = ", ".join(x for x in (col.unit, scope.get(name)) if x)
            col = Column(name, _with_bracket(headers[name], inside), col.kind, col.unit)
        cols.append(col)
    shown = frame if max_rows is None else frame.head(max_rows)
    cols = [_in_own_units(c, [_cell(v, c) for v in shown[c.name]]) for c in cols]
    full = pd.DataFrame({c.header: [_cell(v, c) for v in shown[c.name]] for c in cols},
                        index=range(len(shown)))
    text = full.copy()
    for c in cols:
        if c.kind != "text" or c.name in wrap:
            continue
        limit = shorten_text.get(c.name) if isinstance(shorten_text, Mapping) else shorten_text
        if limit:
            text[c.header] = [shorten(v, limit) for v in full[c.header]]
    flags = list(hot) if hot is not None else []
    flags = (flags + [False] * len(shown))[: len(shown)]
    hidden = 0 if max_rows is None else max(0, len(frame) - max_rows)
    warnings = tuple(str(w) for w in frame.attrs.get("warnings", ()))
    notes = tuple(str(n) for n in frame.attrs.get("notes", ()) if str(n).strip())
    return Table(text, full, cols, caption, hidden, flags, tuple(wrap), warnings, notes)


def table_html(tab: Table) -> str:
    """HTML of a :class:`Table`: text escaped, numbers right-aligned, text left-aligned.

    A shortened cell carries its whole text in a ``title`` attribute (the browser shows it
    on hover). Use with :data:`TABLE_CSS`.
    """
    caption = f"<caption>{html.escape(tab.caption)}</caption>" if tab.caption else ""
    if tab.text.empty:
        title = f"<b>{html.escape(tab.caption)}</b>: " if tab.caption else ""
        if tab.notes:
            return (f"<p class='pk-note'>{title}nothing to show "
                    f"({html.escape(tab.notes[0].rstrip('.'))}).</p>")
        return f"<p class='pk-note'>{title}nothing in this profile.</p>"
    kinds = {c.header: c for c in tab.columns}

    def cls(header: str) -> str:
        col = kinds[header]
        if col.kind == "text":
            return " class='pk-text pk-wrap'" if col.name in tab.wrap else " class='pk-text'"
        return ""

    head = "".join(f"<th{cls(h)}>{html.escape(h)}</th>" for h in tab.text.columns)
    rows = []
    for i in range(len(tab.text)):
        cells = []
        for h in tab.text.columns:
            shown, whole = tab.text.iloc[i][h], tab.full.iloc[i][h]
            title = f" title='{html.escape(whole, quote=True)}'" if shown != whole else ""
            cells.append(f"<td{cls(h)}{title}>{html.escape(shown)}</td>")
        hot = " class='pk-hot'" if tab.hot and tab.hot[i] else ""
        rows.append(f"<tr{hot}>{''.join(cells)}</tr>")
    more = (f"<p class='pk-more'>{tab.hidden_rows:,} more rows not shown.</p>"
            if tab.hidden_rows else "")
    flagged = "".join(f"<p class='pk-warn'>{WARNING_MARK} {html.escape(w)}</p>"
                      for w in tab.warnings)
    return (f"{flagged}<div class='pk-table'><table>{caption}<thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>{more}</div>")


_UNIT_SUFFIX = re.compile(r"_(?:us|ms|s|bytes|share|pct|gbps|tflops)$")


def _split_unit(name: str) -> tuple[str, str]:
    """``"step_us"`` → ``("step", "_us")``; a name without a unit suffix → ``(name, "")``."""
    m = _UNIT_SUFFIX.search(name)
    return (name[: m.start()], m.group(0)) if m else (name, "")


def with_values(frame: pd.DataFrame, columns: Iterable[str] | None = None) -> list[str]:
    """The ``columns`` of ``frame`` (default: all) that hold a value in some row.

    A page leaves the others out and says once what the profile does not record, rather
    than show a column of dashes. All of them when the frame has no row (its empty table
    says so itself).
    """
    names = list(frame.columns if columns is None else columns)
    if frame.empty:
        return names
    return [c for c in names if bool(frame[c].notna().any())]


def over_ranks(frame: pd.DataFrame, by: Sequence[str], values: Sequence[str],
               keep: Mapping[str, str] | None = None, rank: str = "rank",
               worst: str = "max", sort: bool = True) -> pd.DataFrame:
    """One row per key instead of one per (key, rank): median, min and max over the ranks
    and the rank with the worst value.

    Parameters
    ----------
    frame : pandas.DataFrame
        A per-rank frame (e.g. :func:`perfkit.analysis.step_breakdown`,
        :func:`~perfkit.analysis.unfused_patterns`, :func:`~perfkit.analysis.memory_peaks`)
        with a ``rank`` column.
    by : sequence of str
        The key columns (``["step"]``, ``["pattern"]``, ``["component"]``); empty for one
        row over all ranks.
    values : sequence of str
        Numeric columns to spread. Several rows of one (key, rank) are summed first. The
        first value column decides the worst rank and the order.
    keep : mapping, optional
        Other columns and how to reduce them over the ranks: ``"first"``, ``"median"``,
        ``"sum"``, ``"max"`` or ``"min"``.
    rank : str
        The rank column (a frame without one counts as one rank, 0).
    worst : {"max", "min"}
        Whether the worst rank has the largest value of the first value column (a time, the
        default) or the smallest (a bandwidth).
    sort : bool
        Sort by the median of the first value column, worst first.

    Returns
    -------
    pandas.DataFrame
        The ``by`` columns, then for each value ``v`` with unit suffix ``_u`` (e.g.
        ``step_us``): ``v_median_u``, ``v_min_u``, ``v_max_u`` (``step_median_us`` ...),
        then ``worst_rank`` and ``ranks`` (how many ranks have the key), then the ``keep``
        columns.
    """
    by, values, keep = list(by), list(values), dict(keep or {})
    if worst not in ("max", "min"):
        raise InvalidArgumentError("worst", "must be 'max' or 'min'", worst)
    if not values:
        raise InvalidArgumentError("values", "needs at least one column")
    for c in [*by, *values, *keep]:
        if c not in frame.columns:
            raise InvalidArgumentError("frame", f"has no column {c}")
    for how in keep.values():
        if how not in ("first", "median", "sum", "max", "min"):
            raise InvalidArgumentError("keep", "ways are first, median, sum, max, min", how)
    data = frame.assign(**{rank: 0}) if rank not in frame.columns else \
        frame[frame[rank].notna()]
    keys = by or ["_all"]
    data = data.assign(_all=0) if not by else data
    per_rank = data.groupby([*keys, rank], dropna=False, sort=False, as_index=False)[
        values].sum(min_count=1)
    groups = per_rank.groupby(keys, dropna=False, sort=False)
    out = pd.DataFrame(index=groups.size().index)
    for v in values:
        stem, suffix = _split_unit(v)
        for stat in SPREAD_STATS:
            out[f"{stem}_{stat}{suffix}"] = getattr(groups[v], stat)()
    first = per_rank[values[0]]
    order = first.fillna(-float("inf") if worst == "max" else float("inf"))
    pick = per_rank.loc[(order.groupby([per_rank[k] for k in keys], dropna=False, sort=False)
                         .idxmax() if worst == "max" else
                         order.groupby([per_rank[k] for k in keys], dropna=False, sort=False)
                         .idxmin()).to_numpy()]
    has_value = first.notna().groupby([per_rank[k] for k in keys], dropna=False,
                                      sort=False).any()
    worst_rank = pd.Series(pick[rank].to_numpy(), index=out.index).astype("Int64")
    out["worst_rank"] = worst_rank.where(has_value.reindex(out.index).to_numpy())
    out["ranks"] = groups[rank].nunique()
    kept = data.groupby(keys, dropna=False, sort=False)
    for c, how in keep.items():
        out[c] = getattr(kept[c], how)()
    out = out.reset_index()
    if not by:
        out = out.drop(columns="_all")
    if sort and len(out):
        stem, suffix = _split_unit(values[0])
        out = out.sort_values(f"{stem}_median{suffix}", ascending=(worst == "min"),
                              kind="mergesort", na_position="last")
    return out.reset_index(drop=True)
