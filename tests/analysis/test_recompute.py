"""recompute_check on the real MindSpore dumps of tools/make_ir_fixtures.py.

The fixtures: layer 0 fully recomputed (``cell.recompute()``); layer 1 with MindFormers-style
select patterns. ``silu_mul`` selects ``feed_forward\\.mul`` and ``feed_forward\\.w1\\.activation``
only (the guide's failing case), ``silu_mul_reshape`` adds the two Reshapes (the guide's fix),
``control`` has no recompute. Expected values come from grepping the files here.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from perfkit.analysis import match_pattern, recompute_check
from perfkit.errors import InvalidArgumentError
from perfkit.io.ir.graph import load_ir
from perfkit.io.logs.config import read_mindformers_config

DATA = Path(__file__).resolve().parents[1] / "data"
#: The real MindSpore dumps of the SiLU/Mul case ship with perfkit, in the bundled data.
IR = Path(__file__).resolve().parents[2] / "data" / "ir"
SELECT = [r"feed_forward\.mul", r"feed_forward\.w1\.activation"]
# the guide's corrected select_recompute list for the SiLU/Mul case
SEED_FIX = [r"feed_forward\.mul", r"feed_forward\.w1\.activation",
            r"feed_forward\.w1\.reshape", r"feed_forward\.w2\.reshape"]
FULL_LAYER0 = {"recompute": [1], "select_recompute": SELECT}


def _blocks(name: str) -> list[tuple[str, str]]:
    """(node line, scope line) pairs read straight from a fixture."""
    path = IR / name
    text = (gzip.open(path, "rt", encoding="utf-8").read() if path.suffix == ".gz"
            else path.read_text(encoding="utf-8"))
    lines = text.splitlines()
    return [(line, lines[i + 2]) for i, line in enumerate(lines)
            if re.match(r"^  %\d+\(", line)]


def _forward(blocks: list[tuple[str, str]], layer: int, tail: str) -> list[str]:
    """Forward (not cloned, not gradient) node lines of ``layer`` whose scope ends in tail."""
    return [node for node, scope in blocks
            if f"/{layer}-LLamaDecodeLayer/" in scope and re.search(tail, scope)
            and "Gradients/" not in scope and "duplicated: Bool(1)" not in node]


def _clone_ids(blocks: list[tuple[str, str]]) -> set[int]:
    return {int(m.group(1)) for node, _ in blocks if "duplicated: Bool(1)" in node
            for m in [re.search(r"recompute_id: I64\((\d+)\)", node)] if m}


@pytest.fixture(scope="module")
def silu_mul():
    return recompute_check(load_ir(IR / "silu_mul.ir"), FULL_LAYER0)


def test_pattern_rows_match_the_file(silu_mul) -> None:
    blocks = _blocks("silu_mul.ir")
    muls = _forward(blocks, 1, r"feed_forward-FeedForward/Mul-op\d+\)$")
    silus = _forward(blocks, 1, r"activation-SiLU/SiLU-op\d+\)$")
    assert len(muls) == len(silus) == 1
    marked_mul = sum("cnode_attrs: {recompute: Bool(1)" in n for n in muls)
    marked_silu = sum(bool(re.search(r"cnode_attrs: \{[^}]*\brecompute: Bool\(1\)", n))
                      for n in silus)
    rows = silu_mul.patterns.set_index("pattern")
    assert rows.loc[SELECT[0], "layers"] == (1,)  # layer 0 is fully recomputed instead
    assert rows.loc[SELECT[0], "matched"] == len(muls)
    assert rows.loc[SELECT[0], "marked"] == marked_mul == 1
    assert rows.loc[SELECT[1], "matched"] == len(silus)
    assert rows.loc[SELECT[1], "marked"] == marked_silu == 0
    # nothing of layer 1's MLP was cloned in this run
    clones = _clone_ids(blocks)
    mul_id = re.search(r"recompute_id: I64\((\d+)\)", muls[0])
    assert mul_id is None or int(mul_id.group(1)) not in clones
    assert rows.loc[SELECT[0], "duplicated"] == 0
    assert rows.loc[SELECT[0], "marked_not_duplicated"] == 1


def test_diagnosis_suggests_the_guides_reshapes(silu_mul) -> None:
    diag = silu_mul.diagnosis
    stuck = diag[diag["problem"] == "neighbour_not_recomputed"]
    assert set(stuck["neighbour_op"]) == {"Reshape"}
    suggested = set(stuck["suggested_pattern"])
    assert suggested == set(SEED_FIX) - set(SELECT)
    assert set(stuck["direction"]) == {"input", "output"}
    # the SiLU matched but was left unmarked: reported as such
    unmarked = diag[diag["problem"] == "not_marked"]
    assert list(unmarked["op"]) == ["SiLU"]
    assert all("Bool(0)" in text for text in unmarked["explanation"])


def test_the_fix_makes_mul_cloned() -> None:
    blocks = _blocks("silu_mul_reshape.ir.gz")
    muls = _forward(blocks, 1, r"feed_forward-FeedForward/Mul-op\d+\)$")
    mul_id = int(re.search(r"recompute_id: I64\((\d+)\)", muls[0]).group(1))
    assert mul_id in _clone_ids(blocks)
    check = recompute_check(load_ir(IR / "silu_mul_reshape.ir.gz"),
                            {"recompute": [1], "select_recompute": SEED_FIX})
    rows = check.patterns.set_index("pattern")
    assert rows.loc[SEED_FIX[0], "duplicated"] == 1
    reshapes = len(_forward(blocks, 1, r"/w[12]-Linear/Reshape-op\d+\)$"))
    assert rows.loc[SEED_FIX[2], "matched"] + rows.loc[SEED_FIX[3], "matched"] == reshapes
    assert (check.diagnosis["problem"] == "neighbour_not_recomputed").sum() == 0


def test_layer_summary_full_vs_selective(silu_mul) -> None:
    blocks = _blocks("silu_mul.ir")
    layers = silu_mul.layers.set_index("layer")
    for layer in (0, 1):
        clones = sum(f"/{layer}-LLamaDecodeLayer/" in scope for node, scope in blocks
                     if "duplicated: Bool(1)" in node)
        assert layers.loc[layer, "clones"] == clones
    in_cell = [n for n, s in blocks if "(recompute_Default/" in s
               and "/0-LLamaDecodeLayer/" in s and "duplicated" not in n]
    assert layers.loc[0, "recompute_scope_ops"] <= len(in_cell)
    assert layers.loc[0, "observed"] == "full" and layers.loc[0, "configured"] == "full"
    assert layers.loc[1, "observed"] == "selective"
    assert layers.loc[1, "configured"] == "selective"


def test_control_run_has_nothing_recomputed() -> None:
    blocks = _blocks("control.ir.gz")
    assert not _clone_ids(blocks)
    assert not any("recompute: Bool(1)" in node for node, _ in blocks)
    check = recompute_check(load_ir(IR / "control.ir.gz"), FULL_LAYER0)
    assert set(check.layers["observed"]) == {"none"}
    assert list(check.layers["configured"]) == ["full", "selective"]
    assert check.patterns["marked"].sum() == 0
    assert set(check.diagnosis["problem"]) == {"not_marked"}


def test_config_from_yaml_drives_the_check() -> None:
    _, _, extras = read_mindformers_config(DATA / "configs" / "llama2_13b_pp2_select.yaml")
    graph = load_ir(IR / "silu_mul_reshape.ir.gz")
    # stage 0 has recompute 4 >= the 2 layers of this graph: everything full, no select
    stage0 = recompute_check(graph, extras["recompute_config"], stage=0)
    assert set(stage0.layers["configured"]) == {"full"}
    assert stage0.patterns["matched"].sum() == 0
    # stage 1 has none fully recomputed: the select patterns apply to both layers
    stage1 = recompute_check(graph, extras["recompute_config"], stage=1)
    sel = stage1.patterns[stage1.patterns["kind"] == "select"]
    assert set(sel["layers"]) == {(0, 1)}
    assert list(stage1.patterns["kind"]).count("comm") == 1


def test_per_stage_dict_counts() -> None:
    graph = load_ir(IR / "silu_mul.ir")
    check = recompute_check(graph, {r"feed_forward\.mul": [1, 0]}, stage=0)
    assert check.patterns.loc[0, "layers"] == (0,)
    check = recompute_check(graph, {r"feed_forward\.mul": [1, 0]}, stage=1)
    assert check.patterns.loc[0, "layers"] == ()
    with pytest.raises(InvalidArgumentError):
        recompute_check(graph, {r"feed_forward\.mul": [1, 0]}, stage=2)


@pytest.mark.parametrize(("pattern", "cells", "names", "expected"), [
    (r"feed_forward\.mul", ["feed_forward"], ["mul"], True),
    (r"feed_forward\.mul", ["feed_forward", "w1"], ["mul"], False),   # mul is not a cell
    (r"feed_forward\.mu", ["feed_forward"], ["mul"], False),          # fullmatch, not search
    (r"feed_forward\.w1\.activation", ["feed_forward", "w1", "activation"], ["silu"], True),
    (r"feed_forward", ["feed_forward", "w2"], ["matmul"], True),      # a whole cell
    (r"add", [], ["add"], True),
    (r"add", ["attention"], ["add"], False),
    (r".*\.norm", ["ffn_norm", "norm"], ["cast"], True),
    (r"attention\.w[qkv]\.reshape", ["attention", "wk"], ["reshape_flat", "reshape"], True),
])
def test_match_pattern_follows_mindformers(pattern, cells, names, expected) -> None:
    assert match_pattern(pattern, cells, names) is expected


def test_bad_regex_is_an_argument_error() -> None:
    with pytest.raises(InvalidArgumentError, match="regular expression"):
        recompute_check(load_ir(IR / "silu_mul.ir"), ["feed_forward\\.(mul"])


def test_true_means_mindformers_default_patterns() -> None:
    graph = load_ir(IR / "silu_mul.ir")
    check = recompute_check(graph, {"select_recompute": True, "select_comm_recompute": [1]})
    assert list(check.patterns["pattern"]) == [
        r"feed_forward\.mul", r"feed_forward\.w1\.activation\.silu", r".*\.norm"]
    assert list(check.patterns["kind"]) == ["select", "select", "comm"]
    assert check.patterns["layers"].iloc[2] == (0,)  # first layer of stage 0 only
    silus = [node for node, scope in _blocks("silu_mul.ir")
             if re.search(r"/\d-LLamaDecodeLayer/.*activation-SiLU/SiLU-op\d+\)$", scope)
             and "Gradients/" not in scope and "duplicated: Bool(1)" not in node]
    assert check.patterns["matched"].iloc[1] == len(silus) == 2


def test_uneven_layers_are_said() -> None:
    """A walk: on a MindSpore 2.10 dump of two identical blocks, layer 0 counted 32
    forward operators and layer 1 18 (cell reuse names a reused block's operators after
    layer 0); the summary now says its layers are uneven. The bundled dump's two layers
    hold 42 each (counted in its layer table) and get no such note."""
    from perfkit.analysis.recompute.check import _annotate, _as_spec, _layer_summary

    even = recompute_check(load_ir(IR / "silu_mul.ir")).layers
    assert even["forward_ops"].nunique() == 1 and not even.attrs.get("notes")
    # the same summary with layer 1's operators cut to 18 of 42, as the dump showed
    ann = _annotate(load_ir(IR / "silu_mul.ir"))
    fwd1 = ann.index[ann["forward"] & (ann["layer"] == 1)]
    cut = ann.drop(index=fwd1[18:])
    layers = _layer_summary(cut, [0, 1], _as_spec(None), set(), 0)
    assert layers["forward_ops"].tolist() == [42, 18]
    (note,) = layers.attrs["notes"]
    assert note.startswith("the layers hold unequal numbers of forward operators "
                           "(layer 0: 42, layer 1: 18)")


def test_an_empty_diagnosis_says_what_was_looked_at() -> None:
    """A report on a dump with nothing marked showed the diagnosis as "nothing in this
    profile"; the empty table now says what the check found."""
    none = recompute_check(load_ir(IR / "control.ir.gz")).diagnosis
    assert none.empty and none.attrs["notes"] == [
        "no problem found in the graph: no operator is marked for recompute, and no "
        "pattern given matches one"]
    fixed = recompute_check(load_ir(IR / "silu_mul_reshape.ir.gz"), SEED_FIX).diagnosis
    assert len(fixed) and not fixed.attrs.get("notes")  # rows: no note
