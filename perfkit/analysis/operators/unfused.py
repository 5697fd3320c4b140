"""Known unfused operator sequences and the time fusing them could save.

:func:`unfused_patterns` writes each (rank, stream)'s tokens as one string and finds each
of :data:`PATTERNS` in it with a regular expression (:func:`_find`); the saving is
``sum - max`` of an occurrence's durations (a copy's whole duration). A lazy cluster is
searched rank by rank on the workers (:func:`_lazy_unfused`).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from typing import Any

import numpy as np
import pandas as pd

from ..._text_codes import first_rows
from ..._text_dtype import TEXT
from .._cluster_steps import in_cluster_steps, per_rank_in_steps
from .._frames import aggregate, is_lazy, transform
from .._util import empty_frame, nan_as_zero, noted_no_step, ranks_noted_no_step, table, typed
from .attention_spans import attention_rows
from .scope import _LANES, _by_rank, _lanes, _scope
from .tokens import _token_codes
from .unfused_casts import _CAST_CHECKS, _cast_fields, _undoing_casts, _unrecorded_casts

try:  # the parser of :mod:`re` (Python 3.11 on); ``sre_parse`` before
    from re import _parser as _re_parser
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _re_parser

__all__ = ["unfused_patterns", "PATTERNS", "UNFUSED_COLUMNS"]


#: Unfused patterns: name -> (regex over tokens, fused replacement, saving rule).
PATTERNS: dict[str, tuple[str, str, str]] = {
    "rmsnorm_decomposed": (r"C*P[C]*R[C]*A[C]*(?:S[C]*D|Q)[C]*M(?:[C]*M)?",
                           "a fused RmsNorm kernel", "chain"),
    "rotary_small_ops": (r"L{1,2}[C]*N[C]*K[C]*M[C]*M?[C]*A|M[C]*L{1,2}[C]*N[C]*K[C]*M[C]*A",
                         "a fused rotary position embedding kernel", "chain"),
    "silu_mul_not_swiglu": (r"(?:W|G[C]*M)[C]*M", "a fused SwiGLU kernel", "chain"),
    "softmax_dropout_matmul": (r"B[CMDA]{0,3}F[CO]{0,3}B", "flash attention", "chain"),
    "cast_chain": (r"C{2,}", "one cast (or none)", "chain"),
    "cast_run": (r"C{2,}", "one cast (or none), if they convert one tensor back and forth",
                 "chain"),
    "copies": (r"T", "in-place / stride-aware operators", "all"),
}

#: The pattern of unfused attention: its occurrences are the chains of
#: :func:`~.attention_spans.attention_spans` (:func:`~.attention_spans.attention_rows`), as
#: the advisor's.
_ATTENTION = "softmax_dropout_matmul"

UNFUSED_COLUMNS: dict[str, str | pd.StringDtype] = {
    "rank": "Int64", "pattern": TEXT, "occurrences": "int64", "kernels": "int64",
    "total_us": "float64", "saving_us": "float64", "saving_share": "float64",
    "example": TEXT, "fused_replacement": TEXT,
}


def _find(text: str, regex: str) -> tuple[np.ndarray, np.ndarray]:
    """Start/end positions (end exclusive) of non-overlapping matches in the token text.

    A pattern of one literal character (``"T"``, the copies) matches at every position
    holding it: found with numpy, since such tokens can be a large share of a trace. A
    pattern that needs a letter the text lacks (:func:`_needed_letters`: a profile runs
    the tokens of its own framework only) is not searched: it cannot match.
    """
    if any(not any(c in text for c in clause) for clause in _needed_letters(regex)):
        return np.empty(0, int), np.empty(0, int)
    if len(regex) == 1 and regex.isascii() and regex.isalnum() and text.isascii():
        starts = np.flatnonzero(np.frombuffer(text.encode("ascii"), np.uint8) == ord(regex))
        return starts.astype(int), starts.astype(int) + 1
    spans = [m.span() for m in re.finditer(regex, text)]
    if not spans:
        return np.empty(0, int), np.empty(0, int)
    arr = np.asarray(spans, dtype=int)
    return arr[:, 0], arr[:, 1]


@functools.lru_cache(maxsize=64)
def _needed_letters(regex: str) -> tuple[frozenset[str], ...]:
    """Sets of letters of which every match of ``regex`` holds at least one (each set).

    Read from the parsed pattern (:mod:`re`'s own parser): a literal is needed, and so is
    one of a set of literals, where it is not optional (a repeat of at least one, not one
    alternative of a branch); a branch needs, for each way of picking one set from each
    alternative, their union. Whatever else a pattern holds needs nothing here, and a
    pattern that ignores case, or that this cannot read, needs none: the text is then
    searched as before. Checking ``letter in text`` costs microseconds where a regular
    expression that finds nothing still reads the whole text (5-13 ms per pattern on
    a million tasks, holding the interpreter lock).
    """
    try:
        parsed = _re_parser.parse(regex)
        if parsed.state.flags & re.IGNORECASE:
            return ()
        return tuple(_needs(list(parsed)))
    except Exception:  # noqa: BLE001 - no shortcut, the search itself decides
        return ()


def _needs(items: list[Any]) -> set[frozenset[str]]:
    """:func:`_needed_letters` of a sequence of parsed pattern items."""
    out: set[frozenset[str]] = set()
    for op, arg in items:
        name = getattr(op, "name", "")
        if name == "LITERAL":
            out.add(frozenset(chr(arg)))
        elif name == "IN" and arg and all(str(o) == "LITERAL" for o, _ in arg):
            out.add(frozenset(chr(a) for _, a in arg))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") and arg[0] >= 1:
            out |= _needs(list(arg[2]))
        elif name == "SUBPATTERN":
            if arg[1] or arg[2]:  # flags set or cleared inside the group: none kept
                continue
            out |= _needs(list(arg[3]))
        elif name == "BRANCH":
            ways = [_needs(list(alt)) for alt in arg[1]]  # an alternative needing none:
            if math.prod(len(w) for w in ways) <= 64:  # no pick, the branch needs none
                out |= {frozenset().union(*pick) for pick in itertools.product(*ways)}
    return out


#: A pattern of token letters, quantifiers, (non-capturing) groups, sets and alternatives
#: only: it matches no character it does not spell out (no ``.``, escape, anchor or
#: negated set).
_PLAIN = re.compile(r"[A-Za-z0-9*+?{},:()|\[\]]*")


def _searched(chars: np.ndarray, regexes: list[str]) -> tuple[str, np.ndarray | None]:
    """The token text to search and, when shortened, where each of its characters is.

    A token that no pattern spells (``"."``, most tasks of a trace) can be in no match:
    like the block separator, it only divides the text. Each run of such characters is
    cut to one, which leaves every match the same and the regular expressions two fifths of
    the text to read; the positions found map back through the returned index. Kept
    whole where a pattern could match other characters or the empty text.
    """
    text_of = lambda a: a.tobytes().decode("ascii")  # noqa: E731 - one-letter tokens
    if not regexes or not all(_PLAIN.fullmatch(rx) and re.fullmatch(rx, "") is None
                              for rx in regexes):
        return text_of(chars), None
    spelled = sorted({c for rx in regexes for c in rx if c.isalnum()})
    other = ~np.isin(chars, np.frombuffer("".join(spelled).encode("ascii"), np.uint8))
    keep = ~other
    keep[1:] |= ~other[:-1]  # the first of each run of other characters stays
    keep[0] = True
    if keep.sum() > 0.8 * len(chars):
        return text_of(chars), None
    return text_of(chars[keep]), np.flatnonzero(keep)


class _RowOfChar:
    """The row of each character of the token text, one letter per row: ``row[p]`` is ``p``
    less the block separators at or before ``p`` (their places ``seps``, sorted)."""

    def __init__(self, seps: np.ndarray) -> None:
        self.seps = seps

    def __getitem__(self, pos: np.ndarray) -> np.ndarray:
        pos = np.asarray(pos)
        return pos - np.searchsorted(self.seps, pos, side="right")


class _Taken:
    """``values`` in lane order (``pos``, None: the same order), looked up row by row when
    indexed instead of reordered whole."""

    def __init__(self, values: np.ndarray, pos: np.ndarray | None) -> None:
        self.values, self.pos = values, pos

    def __getitem__(self, idx: Any) -> np.ndarray:
        return self.values[idx if self.pos is None else self.pos[idx]]


class _Names:
    """``k["name"].astype(str).to_numpy()`` by code: rows are looked up when indexed.

    ``codes`` are in table order; ``pos`` (the stream order's positions, None: the same
    order) maps the rows asked for, which are in stream order, to them: only the rows
    looked up are reordered, not a million codes.
    """

    def __init__(self, codes: np.ndarray, text: np.ndarray, pos: np.ndarray | None = None
                 ) -> None:
        self.codes, self.text, self.pos = codes, text, pos

    def __getitem__(self, idx: Any) -> np.ndarray:
        rows = idx if self.pos is None else self.pos[idx]
        return self.text[self.codes[rows]]


def _summed_per_rank(rank: np.ndarray, first: np.ndarray, counts: np.ndarray,
                     tot: np.ndarray, saving: np.ndarray, pattern: str, fused: str
                     ) -> pd.DataFrame:
    """The occurrences of one pattern summed per rank, ranks in order of first occurrence
    (a missing rank a group of its own): the summary's rows of the pattern, as
    ``groupby(["rank", "pattern"], sort=False, dropna=False)`` of the occurrences gives
    them (sums with NaN left out; ``_occurrence``: each rank's first occurrence)."""
    code, ranks = pd.factorize(rank, use_na_sentinel=False)
    n = len(ranks)
    at = first_rows(code)

    def total(values: np.ndarray) -> np.ndarray:  # one rank: numpy's pairwise sum
        values = nan_as_zero(values)
        return np.array([values.sum()]) if n == 1 else np.bincount(code, values, n)

    return pd.DataFrame({
        "rank": ranks, "pattern": pattern, "occurrences": np.bincount(code, minlength=n),
        "kernels": total(counts.astype(np.float64)).astype(np.int64),  # exact below 2**53
        "total_us": total(tot), "saving_us": total(saving), "_occurrence": at,
        "fused_replacement": fused})


def _chain_names(names: _Names, idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``"a > b > c"`` per occurrence: the names of its rows ``idx`` (the occurrences' rows
    one after another, ``counts`` each, at least one), joined per occurrence.

    One ``str.join`` per occurrence, over the names read once as text: a handful of
    examples for the summary (numpy's string functions would first import ``numpy.char``,
    about 5 ms in a process's first ``advise``), one string per occurrence in detail.
    """
    texts = names[idx].astype(str).tolist()
    ends = np.cumsum(counts).tolist()
    out = np.empty(len(ends), dtype=object)
    at = 0
    for i, end in enumerate(ends):
        out[i] = " > ".join(texts[at:end])
        at = end
    return out


def unfused_patterns(profile: Any, detail: bool = False,
                     patterns: dict[str, tuple[str, str, str]] | None = None) -> pd.DataFrame:
    """Known unfused operator sequences and the time a fused kernel could save.

    Parameters
    ----------
    profile : Profile or Cluster
    detail : bool
        Return one row per occurrence (``rank``, ``stream``, ``pattern``, ``first_row``:
        the occurrence's first task, a position among the tasks in scope in (rank,
        stream, start) order; ``kernels``, ``total_us``, ``saving_us``, ``names``)
        instead of the summary.
    patterns : dict, optional
        Replace :data:`PATTERNS` (name -> (token regex, fused replacement, saving rule
        ``"chain"`` or ``"all"``)).

    Returns
    -------
    DataFrame
        Summary per (rank, pattern) (:data:`UNFUSED_COLUMNS`): ``occurrences``,
        ``kernels`` matched, ``total_us`` of the matched tasks, ``saving_us`` (rule
        ``"chain"``: sum - max per occurrence; ``"all"``: the whole duration),
        ``saving_share`` of the rank's device time, an ``example`` of the names and the
        ``fused_replacement``. Sorted by ``saving_us``. A flash-attention task anywhere on
        a rank suppresses ``softmax_dropout_matmul`` there.

        The tasks searched are those in scope (:func:`~perfkit.analysis._tasks.scope_rows`:
        a duration, not communication, and a step where other tasks have one), so that
        the sums are over the steps' own tasks, as the step breakdown and
        :func:`~perfkit.analysis.top_operators` count them; a task of no step (launched
        before the trace began) is left out, and a note says how many. The positions
        (``first_row``) and the sequences are of those tasks alone.
    """
    pats = PATTERNS if patterns is None else patterns
    if is_lazy(profile):  # every rank decides about its tasks of no step as the cluster
        return _lazy_unfused(in_cluster_steps(profile), detail, pats)
    kernels = table(profile, "kernels")
    k = _scope(kernels, include_communication=False, columns=_LANES)
    if k.empty or "start_us" not in k.columns:
        return empty_frame(UNFUSED_COLUMNS, "the profile has no device tasks (kernels table)")
    # the columns read below (the type and name give the tokens)
    # tokens and names coded on the tasks in scope (codes other analyses share), then
    # put in stream order with the columns read below
    tokens, code, name_code, name_uniq = _token_codes(k)
    lanes = _lanes(kernels)  # the tasks of each (rank, stream) in start order
    pos = lanes.positions
    tokens = tokens.astype(str)
    # one separator between (rank, stream) blocks so that no match spans two streams
    new_block = lanes.lane_start(len(k))
    # the token text, "|" before each block, and the row of each of its characters
    if all(len(t) == 1 and t.isascii() for t in tokens):  # one letter per row (TOKENS')
        # each row's letter, then put in stream order: one byte per row moved, not a code
        letters = np.frombuffer("".join(tokens).encode("ascii"), np.uint8)[code]
        if pos is not None:
            letters = letters[pos]
        blocks = np.flatnonzero(new_block)
        chars = np.insert(letters, blocks, ord("|"))
        text, where = _searched(chars, [rx for rx, _, _ in pats.values()])
        # the separators' places in the text: the character at p is row p - (separators
        # up to p), read for the matches only
        seps = blocks + np.arange(len(blocks))
        row_of_char = _RowOfChar(seps)
        is_flash, copy_row = letters == ord("Z"), letters == ord("T")
    else:
        tok = tokens[code if pos is None else code[pos]]
        spelled = np.char.add(np.where(new_block, "|", ""), tok)
        row_of_char = np.repeat(np.arange(len(k)), np.char.str_len(spelled))
        text, where = "".join(spelled.tolist()), None
        is_flash, copy_row = tok == "Z", tok == "T"
    dur = lanes.take(k["dur_us"].to_numpy(np.float64, na_value=np.nan))
    rank_arr = _Taken(k["rank"].to_numpy(), pos)  # looked up for the matches only
    stream_arr = _Taken(k["stream"].to_numpy() if "stream" in k.columns
                        else np.full(len(k), pd.NA, dtype=object), pos)
    flash_ranks = set(pd.Series(rank_arr[np.flatnonzero(is_flash)]).dropna().tolist())
    rows = []
    names = _Names(name_code, name_uniq.astype(str), pos)
    for pname, (regex, fused, rule) in pats.items():
        starts, ends = _find(text, regex)
        # as attention_chains: a softmax somewhere, on a rank without fused attention
        attention = pname == _ATTENTION and "F" in text and not (
            flash_ranks and flash_ranks >= set(pd.unique(k["rank"].dropna())))
        if not len(starts) and not attention:
            continue
        if where is not None and len(starts):  # back to places in the whole token text
            starts, ends = where[starts], where[ends - 1] + 1
        first = row_of_char[starts]
        last = row_of_char[ends - 1]  # patterns hold no "|", so matches end on a token
        foreign = None
        if attention:  # the chains attention_chains counts, where the tasks have shapes
            first, last, foreign = attention_rows(kernels, lanes, new_block, first, last)
            if not len(first):
                continue
        counts = last - first + 1
        if pname in _CAST_CHECKS:  # the runs of casts, checked on their dtypes and shapes
            runs = np.repeat(first, counts) + (np.arange(counts.sum())
                                               - np.repeat(np.cumsum(counts) - counts, counts))
            check = _undoing_casts if pname == "cast_chain" else _unrecorded_casts
            first, counts = check(first, counts, _cast_fields(kernels, k, pos, runs))
            if not len(first):
                continue
        rank_of = rank_arr[first]
        if pname == _ATTENTION and flash_ranks:
            kept = ~pd.Series(rank_of).isin(flash_ranks).to_numpy(bool)
            rank_of, first, counts = rank_of[kept], first[kept], counts[kept]
            if not len(first):
                continue
        idx = np.repeat(first, counts) + (np.arange(counts.sum())
                                          - np.repeat(np.cumsum(counts) - counts, counts))
        if pname == _ATTENTION:  # its copies (.contiguous() of v) are the copies' time
            own = ~copy_row[idx]
            if foreign is not None and len(foreign):  # nor are another operator's rows
                own &= ~np.isin(idx, foreign)
            counts = np.add.reduceat(own.astype(np.int64), np.cumsum(counts) - counts)
            idx = idx[own]
        # the occurrences' rows lie in runs, one after another: sums and maxima per run
        at = np.cumsum(counts) - counts
        d = dur[idx]
        tot = np.add.reduceat(np.nan_to_num(d, nan=0.0), at)
        mx = np.fmax.reduceat(d, at)  # NaN only where every duration is, as max() skips
        saving = tot if rule == "all" else tot - mx
        if detail:
            rows.append(pd.DataFrame({"rank": rank_of, "stream": stream_arr[first],
                                      "pattern": pname, "first_row": first,
                                      "kernels": counts, "total_us": tot,
                                      "saving_us": saving,
                                      "names": _chain_names(names, idx, counts),
                                      "fused_replacement": fused}))
        else:
            part = _summed_per_rank(rank_of, first, counts, tot, saving, pname, fused)
            one = part.pop("_occurrence").to_numpy()  # each rank's first occurrence
            part["example"] = _chain_names(names, np.concatenate(
                [idx[at[o]:at[o] + counts[o]] for o in one]), counts[one])
            rows.append(part)
    det_cols = {"rank": "Int64", "stream": "Int64", "pattern": TEXT, "first_row": "int64",
                "kernels": "int64", "total_us": "float64", "saving_us": "float64",
                "names": TEXT, "fused_replacement": TEXT}
    if not rows:
        return noted_no_step(empty_frame(det_cols if detail else UNFUSED_COLUMNS,
                                         "no known unfused pattern found"), kernels)
    # the occurrences (detail), else their sums per rank and pattern
    found = pd.concat(rows, ignore_index=True)
    if detail:
        return noted_no_step(typed(found, det_cols), kernels)
    by_rank = _by_rank(k, lanes)  # each rank's device time (as a groupby's sum, NaN left out)
    device = pd.Series(by_rank.sum(dur), index=by_rank.index)
    out = found
    out["saving_share"] = out["saving_us"] / out["rank"].map(device).astype("float64")
    out = out.sort_values("saving_us", ascending=False, kind="mergesort")
    return noted_no_step(typed(out, UNFUSED_COLUMNS).reset_index(drop=True), kernels)


def _lazy_unfused(profile: Any, detail: bool,
                  pats: dict[str, tuple[str, str, str]]) -> pd.DataFrame:
    """:func:`unfused_patterns` of a lazy cluster: each rank searched on its worker.

    Streams never span ranks, so the per-rank matches are the cluster's; ``first_row`` of
    the detail is shifted by the rows of the ranks before, and the summary is put in the
    eager order (pattern, then rank, then largest saving first).
    """
    out = per_rank_in_steps(profile, unfused_patterns, detail, pats, noted=True)
    notes = list(out.attrs.get("notes", [])) if out.empty else []
    if detail:
        cols = ["rank", "stream", "pattern", "first_row", "kernels", "total_us", "saving_us",
                "names", "fused_replacement"]
        if len(out):
            rows = aggregate(transform(table(profile, "kernels"),
                                       lambda f: _scope(f, include_communication=False,
                                                         columns=_LANES)),
                             ["rank"], {"dur_us": ["size"]})
            before = rows["dur_us_size"].cumsum() - rows["dur_us_size"]
            shift = out["rank"].astype("float64").map(
                pd.Series(before.to_numpy(), index=rows["rank"].astype("float64")))
            out["first_row"] = (out["first_row"] + shift.fillna(0).astype("int64"))
            order = out["pattern"].map({p: i for i, p in enumerate(pats)})
            out = out.assign(_o=order).sort_values(["_o", "first_row"], kind="mergesort")
            out = out.drop(columns="_o").reset_index(drop=True)
        out = out[cols].astype(dict(out[cols].dtypes))
    elif len(out):
        order = out["pattern"].map({p: i for i, p in enumerate(pats)})
        out = out.assign(_o=order).sort_values(["_o", "rank"], kind="mergesort")
        out = out.sort_values("saving_us", ascending=False, kind="mergesort")
        out = typed(out, UNFUSED_COLUMNS).reset_index(drop=True)
    out.attrs["notes"] = notes
    kernels = table(profile, "kernels")
    # the tasks of no step left out, over every rank, as the eager search notes them
    return ranks_noted_no_step(out, kernels) if out.empty else noted_no_step(out, kernels)
