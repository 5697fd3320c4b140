"""Text fast paths of ``pk.advise`` give the results of their plain versions.

:func:`text_matches` searches the distinct texts with :mod:`re` (pandas' search of text
held in Python) instead of Arrow's; the unfused patterns' example names are joined with
``str.join`` instead of numpy's string functions. Each is checked here against the
pandas or numpy computation it replaced, written out (benchmarks/README.md, session 10).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis import host_sync
from perfkit.analysis._util import text_matches
from perfkit.analysis.operators import unfused


def test_text_matches_are_pandas_search_of_each_row() -> None:
    names = pd.Series(["aten::item", "Item", "cudaStreamSynchronize", None, "x.item()",
                       "aten::itemize", "naïve::item", "aten::equal"] * 50, dtype="string")
    for pattern in (host_sync.SYNC_PATTERN, r"(?i)determin", r"item\b", "[unclosed"):
        try:
            want = names.str.contains(pattern, regex=True).fillna(False).tolist()
        except Exception as exc:  # noqa: BLE001 - the same error either way
            with pytest.raises(type(exc)):
                text_matches(names, pattern)
            continue
        assert text_matches(names, pattern).tolist() == want
        ascii_only = names[~names.fillna("").str.contains("ï")]
        assert text_matches(ascii_only, pattern).tolist() == \
            ascii_only.str.contains(pattern, regex=True).fillna(False).tolist()


def test_a_look_behind_on_non_ascii_names_is_searched_as_python_reads_it() -> None:
    # pandas 2 sends any pattern on Arrow text to Arrow's RE2, which has no look-behind
    names = pd.Series(["softmax_kernel", "log_softmax_fwd", "naïve_softmax", None,
                       "LogSoftmax"] * 20, dtype=pd.StringDtype("pyarrow"))
    pattern = r"(?i)(?<!log)(?<!log_)softmax"
    want = [isinstance(v, str) and re.search(pattern, v) is not None
            for v in names.astype(object).where(names.notna(), None)]
    assert text_matches(names, pattern).tolist() == want
    assert want[:5] == [True, False, True, False, False]



def _plain_chain_names(text: np.ndarray, idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The numpy version: a separator before each name but an occurrence's first, the
    names concatenated per occurrence by a groupby."""
    occ = np.repeat(np.arange(len(counts)), counts)
    sep = np.where(np.r_[True, occ[1:] != occ[:-1]], "", " > ")
    joined = pd.Series(np.char.add(sep.astype(str), text[idx].astype(str)))
    return joined.groupby(occ).sum().to_numpy(dtype=object)


@pytest.mark.parametrize("seed", range(4))
def test_chain_names_are_the_names_joined(seed: int) -> None:
    rng = np.random.default_rng(seed)
    text = np.array(["Cast", "Mul", "aclnnAdd_AddAiCore_Add", "RmsNorm", "ä"])
    codes = rng.integers(0, len(text), 200)
    pos = rng.permutation(200)
    counts = rng.integers(1, 6, 20)
    idx = rng.integers(0, 200, int(counts.sum()))
    names = unfused._Names(codes, text, pos)
    got = unfused._chain_names(names, idx, counts)
    assert got.tolist() == _plain_chain_names(text[codes[pos]], idx, counts).tolist()
    assert got.tolist()[0].count(" > ") == counts[0] - 1


@pytest.mark.parametrize("seed", range(3))
def test_class_codes_are_each_rows_own_class(seed: int) -> None:
    from perfkit.analysis.compare import _class_of_pairs, class_codes

    rng = np.random.default_rng(seed)
    names = np.array(["MatMulV2", "FlashAttentionScore", "Cast", "aclnnSoftmax_x", "Mul",
                      "void at::native::vectorized_elementwise_kernel<4, silu_kernel>",
                      "HcomAllReduce", "ampere_sgemm_128x64_nn"])
    types = np.array(["MatMulV2", "FlashAttentionScore", "Cast", "SoftmaxV2", "Mul",
                      "kernel", ""])
    n = 3000
    which = rng.integers(0, len(names), n)  # two types per name: most pairs never occur
    name = pd.Series(names[which], dtype="string")
    typ = pd.Series(types[(which + rng.integers(0, 2, n)) % len(types)], dtype="string")
    cat = pd.Series(np.where(rng.random(n) < 0.1, "communication", "compute"), dtype="string")
    labels, row = class_codes(name, typ, cat)
    want = _class_of_pairs(name, typ).to_numpy(dtype=object).copy()
    want[cat.eq("communication").to_numpy(bool)] = "communication"
    assert labels[row].tolist() == want.tolist()
    assert len(set(want.tolist())) > 3
