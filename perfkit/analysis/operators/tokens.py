"""One letter per task for the unfused-pattern search: :data:`TOKENS`, :func:`kernel_tokens`.

A task's token comes from its operator type, or its name where the type is generic
(``kernel``); the regular expressions run once per distinct label
(:func:`_token_codes`, :func:`_tokens_of`).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._shared import shared_factorize
from .._util import take_array

__all__ = ["kernel_tokens", "token_is", "TOKENS"]


#: (token, regex on the operator type or kernel name). The first match wins. ``Z``, fused
#: attention, takes vLLM's ``unified_attention`` too: its operator
#: (``vllm::unified_attention_with_output``) and its Triton backend's kernels
#: (``kernel_unified_attention_2d`` / ``_3d``) compute attention in one kernel.
TOKENS: tuple[tuple[str, str], ...] = (
    ("Z", r"flashattention|flash_attn|fmha|fused_attention|scaled_dot_product"
          r"|unified_attention"),
    ("T", r"tensormove|contiguous|viewcopy|asstrided|^identity$|copy_kernel|direct_copy"),
    ("C", r"^cast|cast$|_to_copy|to_copy|cast_kernel"),
    ("W", r"swiglu|swish|silu"),
    ("G", r"sigmoid"),
    ("F", r"softmax"),
    ("O", r"dropout|dropoutdomask|dropoutgenmask"),
    ("B", r"batchmatmul|bmm|matmul|gemm|cutlass|xmma"),
    ("Q", r"rsqrt"),
    ("S", r"sqrt"),
    ("P", r"^pow|pow_|square"),
    ("R", r"reducemean|reduce_mean|meanops|^mean"),
    ("N", r"^neg|neg_kernel|negative"),
    ("K", r"^concat|cat_array|catarray|^cat$"),
    ("L", r"slice|split|^narrow|index_select"),
    ("D", r"^div|realdiv|div_|div_true"),
    ("M", r"^mul|mul_|mulfunctor"),
    ("A", r"^add|add_|addfunctor|cuda_add"),
)

_TOKEN_RE = [(t, re.compile(p, re.IGNORECASE)) for t, p in TOKENS]


def kernel_tokens(kernels: pd.DataFrame) -> pd.Series:
    """One-letter token per task for the pattern search (``"."`` when nothing matches).

    The operator ``type`` is tried first, then the ``name`` (GPU kernels have the generic
    type ``kernel``). The regexes run once per distinct label, not per task, and the
    tokens are spread back by code.
    """
    tokens, code, _, _ = _token_codes(kernels)
    text = pd.Series(tokens, dtype=object).astype(str)
    return pd.Series(take_array(text.array, code), index=kernels.index)


def token_is(kernels: pd.DataFrame, token: str) -> np.ndarray:
    """Whether each task's token (:func:`kernel_tokens`) is ``token``: ``(kernel_tokens(
    kernels) == token).to_numpy(bool)``, decided once per distinct label and spread back
    by code, without a text per task (a million on the benchmark rank)."""
    tokens, code, _, _ = _token_codes(kernels)
    return np.asarray(tokens == token, dtype=bool)[code]


def _token_codes(kernels: pd.DataFrame
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(token per label, label code per row, name code per row, distinct names).

    The names (missing ones as ``""``) are coded once here for callers that also need them.
    """
    typ = kernels["type"].astype(TEXT) if "type" in kernels.columns else \
        pd.Series(pd.NA, index=kernels.index, dtype=TEXT)
    t_code, t_uniq = shared_factorize(typ, use_na_sentinel=True)
    n_code, n_uniq = _name_codes(kernels["name"])
    t_uniq = pd.Series(t_uniq, dtype=TEXT)
    generic_t = t_uniq.str.lower().isin(["kernel", "gpu_memcpy", "gpu_memset", ""]).to_numpy(bool)
    # each row's label is its type, or its name where the type is generic or missing (as
    # a label code: names first, then types); read per distinct type (code -1, a missing
    # type, indexes the last entry)
    generic = np.append(generic_t, True)
    labels = pd.Series(pd.concat([pd.Series(n_uniq, dtype=TEXT), t_uniq],
                                 ignore_index=True), dtype=TEXT)
    type_label = np.append(len(n_uniq) + np.arange(len(t_uniq)), 0)
    if not generic_t.any() and not (t_code < 0).any():
        code = type_label[t_code]  # every task has a type of its own (Ascend)
    else:
        code = np.where(generic[t_code], n_code, type_label[t_code])
    return _tokens_of(labels), code, n_code, np.asarray(n_uniq, dtype=object)


def _name_codes(names: pd.Series) -> tuple[np.ndarray, Any]:
    """Codes and distinct values of the names, a missing name read as ``""``.

    Names held as a categorical (the tasks in scope of a cached table) are coded as they
    are, and a missing one joins ``""``; text is coded as ``fillna("")`` text.
    """
    if not isinstance(names.dtype, pd.CategoricalDtype):
        return shared_factorize(names.astype(TEXT).fillna(""), use_na_sentinel=True)
    code, uniq = shared_factorize(names, use_na_sentinel=True)
    if not (code < 0).any():
        return code, uniq
    text = pd.Series(uniq, dtype=TEXT)
    empty = np.flatnonzero(text.eq("").to_numpy(bool))
    if len(empty):
        return np.where(code < 0, int(empty[0]), code), uniq
    return np.where(code < 0, len(text), code), pd.Index(
        pd.concat([text, pd.Series([""], dtype=TEXT)], ignore_index=True))


def _tokens_of(labels: pd.Series) -> np.ndarray:
    """Token of each distinct label: the first of :data:`_TOKEN_RE` that matches.

    A missing label matches nothing (``"."``). The labels are distinct values (a few
    hundred to a few thousand), so a plain loop costs less than one column-wide regex
    per token.
    """
    return np.array([next((t for t, rx in _TOKEN_RE if rx.search(s)), ".")
                     if isinstance(s, str) else "." for s in labels.tolist()], dtype=object)
