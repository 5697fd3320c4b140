"""The tokens the advisor reads by code give what reading them task by task gives.

``elementwise_chains`` finds the copy kernels (token ``T``) on the priced rows in table
order and puts the answer in execution order (:func:`~perfkit.analysis.efficiency.chains.
_copy_rows`), instead of taking the type and name text of every task in that order; each
is checked here against the plain reading: :func:`kernel_tokens` of the rows taken in order,
compared with the letter. The unfused search's batched-product test skips the launching
operator where the tasks have no such column; checked against the same tasks with an
``op_name`` column of missing values, which goes through the operator's branch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from shared_samples import KINETO_TRACES, PT_LEVEL1, sample, shared_param

import perfkit as pk
from perfkit.analysis._tasks import tasks_in_scope
from perfkit.analysis._util import table
from perfkit.analysis.efficiency.chains import _copy_rows, _ordered
from perfkit.analysis.operators import TOKENS, kernel_tokens
from perfkit.analysis.operators.attention_spans import _batched_rows
from perfkit.analysis.operators.tokens import token_is
from perfkit.analysis.shapes.bmm_attention import is_batched

ROOT = Path(__file__).resolve().parents[2]
SIMULATED = ROOT / "data" / "simulated" / "llama2-7b-tp2"  # Ascend-like, no copy kernel

#: Profiles with copy kernels (Ascend TensorMove, PyTorch copies on GPU) and one without.
PROFILES = [SIMULATED, shared_param(PT_LEVEL1), shared_param(KINETO_TRACES["tl_qwen_h100"]),
            shared_param(KINETO_TRACES["tl_b200_eager"])]


def _ranks(path: Any) -> list[Any]:
    prof = pk.load(sample(path) if isinstance(path, str) else path, cache=False,
                   progress=False)
    return list(prof) if hasattr(prof, "ranks") else [prof]


@pytest.mark.parametrize("path", PROFILES)
def test_copy_rows_equal_the_tokens_of_the_rows_taken_in_order(path: Any) -> None:
    for p in _ranks(path):
        rows, _ = _ordered(p, ("type", "name"))  # the type and name text in execution order
        assert len(rows)
        want = (kernel_tokens(rows) == "T").to_numpy(bool)
        got = _copy_rows(p)
        assert got.dtype == bool and np.array_equal(got, want)
        if path is not SIMULATED:  # the copies are there to be found
            assert want.any()


@pytest.mark.parametrize("path", PROFILES)
def test_each_token_read_by_code_equals_the_token_of_each_task(path: Any) -> None:
    for p in _ranks(path):
        rows, _ = _ordered(p, ("type", "name"))
        tokens = kernel_tokens(rows)
        for letter in [t for t, _ in TOKENS] + ["."]:
            assert np.array_equal(token_is(rows, letter), (tokens == letter).to_numpy(bool))


@pytest.mark.parametrize("path", PROFILES)
def test_batched_products_without_an_operator_column_as_with_an_empty_one(path: Any) -> None:
    for p in _ranks(path):
        kernels = table(p, "kernels")
        scoped = tasks_in_scope(kernels, False, ("type", "name"), pmu=False)
        assert "op_name" not in scoped.columns
        empty_op = scoped.assign(op_name=pd.Series(pd.NA, index=scoped.index, dtype="string"))
        # the batched products' test, and one that some labels of every profile pass
        for test in (is_batched, lambda label: "mul" in label.lower()):
            got, want = _batched_rows(scoped, test), _batched_rows(empty_op, test)
            assert got.dtype == want.dtype == bool and np.array_equal(got, want)
        assert want.any() and not want.all()
