"""Results the analyses share within one block, each computed once (thread-safe).

:func:`shared_results` opens a block (``pk.advise`` runs its rules in one);
:func:`shared` computes a result the first time it is asked for in the block and hands the
same object to every later caller; :func:`shared_factorize` codes a text column once per
block, from the row ids a cached table was stored with where they are known
(:mod:`perfkit._text_codes`). Outside a block nothing is kept: results are the same
either way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import pandas as pd

from .. import _text_codes

__all__ = ["shared_results", "shared", "shared_factorize"]


class _Memo:
    """The results of one :func:`shared_results` block, each computed once.

    The advisor computes some analyses ahead on a second thread, so two threads may ask
    for the same result: each result has its own lock, and a thread that asks for a
    result another one is computing waits for it instead of computing it again. Results
    nest (the tasks in scope are taken inside the operator costs), and two threads could
    only wait on each other in a circle if some result needed itself, which would recurse
    forever on one thread too.
    """

    def __init__(self) -> None:
        self.results: dict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = {}
        self._locks: dict[tuple[Any, ...], threading.RLock] = {}
        self._guard = threading.Lock()

    def lock(self, key: tuple[Any, ...]) -> threading.RLock:
        """The lock of one result (made the first time it is asked for)."""
        with self._guard:
            found = self._locks.get(key)
            if found is None:
                found = self._locks[key] = threading.RLock()
            return found


_SHARED: ContextVar[_Memo | None] = ContextVar("perfkit_shared_results", default=None)


@contextmanager
def shared_results() -> Iterator[None]:
    """Within this block, intermediate tables the analyses share are computed once.

    The advisor runs a dozen analyses over the same profile; several of them start from
    the same intermediate table (the device tasks in scope, the priced operator calls).
    Inside the block each is computed the first time and served from memory afterwards;
    outside it nothing is kept (results are the same either way). A thread started
    inside the block shares it when it runs in a copy of the block's context
    (``contextvars.copy_context().run``); the block must outlive such threads.
    """
    if _SHARED.get() is not None:  # nested (pk.advise inside perfkit info): join the block
        yield
        return
    token = _SHARED.set(_Memo())
    try:
        yield
    finally:
        _SHARED.reset(token)


def shared(name: str, inputs: tuple[Any, ...], params: tuple[Any, ...],
           compute: Callable[[], Any]) -> Any:
    """``compute()``, or its result for the same ``inputs`` within :func:`shared_results`.

    ``inputs`` are the objects (profiles, tables) the result is derived from, matched by
    identity and kept alive with the result; ``params`` are compared by value. The same
    object is handed to every caller: callers must not change it in place (``assign``
    makes a new frame). Safe to call from several threads of one block.
    """
    memo = _SHARED.get()
    if memo is None:
        return compute()
    key = (name, tuple(id(o) for o in inputs), params)
    with memo.lock(key):
        hit = memo.results.get(key)
        if hit is None or any(a is not b for a, b in zip(hit[0], inputs, strict=True)):
            hit = (inputs, compute())
            memo.results[key] = hit
    return hit[1]


def shared_factorize(values: pd.Series | Any, use_na_sentinel: bool = True
                     ) -> tuple[np.ndarray, Any]:
    """``pd.factorize(values, use_na_sentinel=...)``, once per Arrow column in a block.

    Within :func:`shared_results`, an Arrow-backed column that several analyses code
    (the type and name of the tasks in scope) is hashed once: Arrow data cannot change,
    and the same data object survives column selection, ``assign``, ``reset_index`` and
    ``astype`` to its own dtype. A column whose row ids are known (a table read from the
    cache, and the rows selected from it: :mod:`perfkit._text_codes`) is coded from them
    instead of from its text, to the same result. Callers must not change the returned
    arrays in place.
    """
    arr = values.array if isinstance(values, pd.Series) else values
    if isinstance(arr, pd.Categorical) and pd.api.types.is_string_dtype(
            arr.categories.dtype):
        return _factorize_coded(values, arr, use_na_sentinel)
    data = getattr(arr, "_pa_array", None)
    if data is None:
        return pd.factorize(values, use_na_sentinel=use_na_sentinel)

    def code() -> tuple[np.ndarray, Any]:
        ids = _text_codes.ids_of(data)  # the row ids a cached table was stored with
        if ids is None:
            return pd.factorize(values, use_na_sentinel=False)
        return _text_codes.factorize(values, ids)

    codes, uniques = shared("factorize", (data,), (type(values), str(values.dtype)), code)
    if not use_na_sentinel or data.null_count == 0:
        return codes, uniques
    return _missing_as_sentinel(codes, uniques)


def _missing_as_sentinel(codes: np.ndarray, uniques: Any) -> tuple[np.ndarray, Any]:
    """``pd.factorize(use_na_sentinel=False)``'s result as with ``True``: the missing
    value's code becomes -1 and the codes after it close the gap (unchanged when no
    value is missing)."""
    missing = np.flatnonzero(pd.isna(np.asarray(uniques, dtype=object)))
    if not len(missing):
        return codes, uniques
    at = int(missing[0])
    return np.where(codes == at, -1, codes - (codes > at)), uniques.delete(at)


def _factorize_coded(values: pd.Series | Any, cat: pd.Categorical, use_na_sentinel: bool
                     ) -> tuple[np.ndarray, Any]:
    """:func:`shared_factorize` of text held as a categorical (:func:`tasks_in_scope`'s
    ``coded``): what ``pd.factorize`` gives for the same text as a text column."""
    def code() -> tuple[np.ndarray, Any]:
        n = len(cat.categories)
        raw = cat.codes
        ids = np.where(raw < 0, n, raw).astype(np.int64) if (raw < 0).any() else raw
        codes, first = _text_codes.first_appearance(ids)
        head = pd.array(cat.take(first), dtype=cat.categories.dtype)
        if isinstance(values, pd.Series):
            head = pd.Series(head)
        return codes, pd.factorize(head, use_na_sentinel=False)[1]

    # the categorical's own codes array identifies it (pandas keeps it as ``_ndarray``;
    # without it the column is coded again by each caller, to the same result)
    key = getattr(cat, "_ndarray", None)
    codes, uniques = shared("factorize", (key,), (type(values),), code) if key is not None \
        else code()
    return _missing_as_sentinel(codes, uniques) if use_na_sentinel else (codes, uniques)
