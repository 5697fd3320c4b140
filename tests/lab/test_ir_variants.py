"""Per-student IR dumps: a renaming of the real dumps changes names, never the graph."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit.errors import InvalidArgumentError
from perfkit.lab.ir import (
    BASES,
    NAMINGS,
    dump_path,
    rename_pattern,
    rename_text,
    select_patterns,
    write_variant,
)

pytestmark = pytest.mark.xdist_group("lab")

ALL_PATTERNS = (r"feed_forward\.mul", r"feed_forward\.w1\.activation",
                r"feed_forward\.w1\.reshape", r"feed_forward\.w2\.reshape")
GRAPH_COLUMNS = ["graph", "node_id", "op", "instance_name", "recompute", "duplicated",
                 "recompute_id", "inputs"]


def _text(base: str) -> str:
    raw = dump_path(base).read_bytes()
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()


@pytest.mark.parametrize("naming", [n for n in NAMINGS if n != "mindformers"])
@pytest.mark.parametrize("base", list(BASES))
def test_renaming_keeps_the_graph_and_what_takes_effect(base: str, naming: str,
                                                        tmp_path) -> None:
    original = pk.load_ir(dump_path(base))
    renamed = pk.load_ir(write_variant(base, naming, tmp_path / "v.ir.gz"))
    a, b = original.nodes, renamed.nodes
    assert len(a) == len(b)
    pd.testing.assert_frame_equal(a[GRAPH_COLUMNS].reset_index(drop=True),
                                  b[GRAPH_COLUMNS].reset_index(drop=True))
    ff = NAMINGS[naming][0]
    assert not b["scope"].astype(str).str.contains("feed_forward").any()
    assert b["scope"].astype(str).str.contains(f"/{ff}-FeedForward/").sum() == \
        a["scope"].astype(str).str.contains("/feed_forward-FeedForward/").sum() > 0
    config = {"recompute": [1], "select_recompute": list(ALL_PATTERNS)}
    renamed_config = {"recompute": [1],
                      "select_recompute": [rename_pattern(p, naming) for p in ALL_PATTERNS]}
    before = pk.analysis.recompute_check(original, config).patterns
    after = pk.analysis.recompute_check(renamed, renamed_config).patterns
    counts = ["matched", "marked", "duplicated"]
    np.testing.assert_array_equal(before[counts].to_numpy(), after[counts].to_numpy())
    assert list(after["pattern"]) == renamed_config["select_recompute"]


def test_the_mindformers_naming_is_the_dump_itself() -> None:
    for base in BASES:
        assert rename_text(_text(base), "mindformers") == _text(base)


def test_patterns_and_namings() -> None:
    assert rename_pattern(r"feed_forward\.w1\.activation", "hf") == r"mlp\.gate_proj\.activation"
    assert rename_pattern(r"feed_forward\.w2\.reshape", "short") == r"ffn\.down\.reshape"
    assert rename_pattern(r"attention\.wq", "hf") == r"attention\.wq"
    with pytest.raises(InvalidArgumentError, match="naming"):
        rename_pattern(r"feed_forward\.mul", "megatron")
    rng = np.random.default_rng(0)
    assert sorted(select_patterns("taken", "hf", rng)) == sorted(
        rename_pattern(p, "hf") for p in ALL_PATTERNS)
    assert len(select_patterns("reshape_gap", "mindformers", rng)) == 2
    assert len(select_patterns("not_applied", "short", rng)) in (2, 4)
