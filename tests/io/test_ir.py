"""load_ir on real MindSpore 2.10 CPU dumps (tests/data/ir, made by tools/make_ir_fixtures.py).

Expected values are derived from the files in the tests themselves (line counting and
simple regular expressions), never pasted from the parser's output.
"""

from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from shared_samples import shared_root

from perfkit.errors import PerfkitError, ProfileError
from perfkit.io.ir.graph import COMMUNICATION_OPS, IRGraph, load_ir

DATA = Path(__file__).resolve().parents[1] / "data" / "ir"
#: The dumps that ship with perfkit (the notebooks' defaults) live in the bundled data.
BUNDLED = Path(__file__).resolve().parents[2] / "data" / "ir"
SILU_MUL = BUNDLED / "silu_mul.ir"
COMM = DATA / "comm_dp2_rank0.ir"
NODE_LINE = re.compile(r"^  (%\d+\(|Return\()")


def _text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return fh.read()
    return path.read_text(encoding="utf-8")


def _node_lines(path: Path) -> list[str]:
    return [line for line in _text(path).splitlines() if NODE_LINE.match(line)]


@pytest.fixture(scope="module")
def graph() -> IRGraph:
    return load_ir(SILU_MUL)


@pytest.mark.parametrize("path", [SILU_MUL, BUNDLED / "silu_mul_reshape.ir.gz",
                                  BUNDLED / "control.ir.gz", DATA / "comm_dp2_rank0.ir"],
                         ids=lambda p: p.name)
def test_one_row_per_cnode(path: Path) -> None:
    g = load_ir(path)
    assert len(g.nodes) == len(_node_lines(path))
    assert g.nodes["node_id"].is_unique


def test_op_names_strip_primfunc(graph: IRGraph) -> None:
    text = _text(SILU_MUL)
    for op in ("Mul", "MatMul", "Reshape", "SiLU", "SiLUGrad"):
        expected = len(re.findall(rf"^  %\d+\([^)]*\) = PrimFunc_{op}\(", text, re.M))
        assert expected > 0
        assert (graph.nodes["op"] == op).sum() == expected
    assert not graph.nodes["op"].str.startswith("PrimFunc_").any()


def test_scope_and_type_lines_belong_to_their_node(graph: IRGraph) -> None:
    lines = _text(SILU_MUL).splitlines()
    for row in graph.nodes.itertuples():
        assert NODE_LINE.match(lines[row.line - 1])
        assert lines[row.line].startswith("      : (")
        assert lines[row.line + 1] == f"      # Fullname with scope: ({row.scope})"


def test_recompute_attributes_counted_from_the_text(graph: IRGraph) -> None:
    nodes = _node_lines(SILU_MUL)
    dup = sum("duplicated: Bool(1)" in n for n in nodes)
    cnode_on = sum(bool(re.search(r"cnode_attrs: \{[^}]*\brecompute: Bool\(1\)", n))
                   for n in nodes)
    cnode_off = sum(bool(re.search(r"cnode_attrs: \{[^}]*\brecompute: Bool\(0\)", n))
                    for n in nodes)
    prim_on = sum(bool(re.search(r"primitive_attrs: \{[^}]*\brecompute: Bool\(1\)", n))
                  for n in nodes)
    assert dup > 0 and cnode_on > 0 and cnode_off > 0 and prim_on > 0
    n = graph.nodes
    assert int(n["duplicated"].fillna(False).sum()) == dup
    assert int(n["cnode_recompute"].fillna(False).sum()) == cnode_on
    assert int((n["cnode_recompute"] == False).fillna(False).sum()) == cnode_off  # noqa: E712
    assert int(n["prim_recompute"].fillna(False).sum()) == prim_on
    ids = [int(m) for line in nodes for m in re.findall(r"recompute_id: I64\((\d+)\)", line)]
    assert sorted(n["recompute_id"].dropna().astype(int)) == sorted(ids)


def test_clones_and_forward_twins_share_recompute_ids(graph: IRGraph) -> None:
    nodes = _node_lines(SILU_MUL)
    clone_ids = {int(m.group(1)) for line in nodes if "duplicated: Bool(1)" in line
                 for m in [re.search(r"recompute_id: I64\((\d+)\)", line)] if m}
    forward_ids = {int(m.group(1)) for line in nodes if "duplicated" not in line
                   for m in [re.search(r"recompute_id: I64\((\d+)\)", line)] if m}
    # nearly every clone has its forward twin (CSE may merge an identical forward Reshape)
    assert len(clone_ids & forward_ids) >= len(clone_ids) - 2
    n = graph.nodes
    clones = n[n["duplicated"].fillna(False)]
    twins = n[~n["duplicated"].fillna(False) & n["recompute_id"].notna()]
    assert set(clones["recompute_id"].astype(int)) == clone_ids
    assert set(twins["recompute_id"].astype(int)) == forward_ids


def test_silu_mul_chain_of_layer_one(graph: IRGraph) -> None:
    """The seed's chain: SiLU -> Reshape -> Mul <- Reshape(w3); Mul -> Reshape -> MatMul."""
    lines = _text(SILU_MUL).splitlines()
    scope_of = {}
    for i, line in enumerate(lines):
        m = re.match(r"^  (%\d+)\(", line)
        if m:
            scope_of[m.group(1)] = lines[i + 2]
    mul_line = next(i for i, line in enumerate(lines) if "PrimFunc_Mul(" in line
                    and "1-LLamaDecodeLayer/feed_forward-FeedForward/Mul-op0)" in lines[i + 2])
    left, right = re.search(r"PrimFunc_Mul\((%\d+), (%\d+)\)", lines[mul_line]).groups()
    assert scope_of[left].endswith("w1-Linear/Reshape-op1)")
    assert scope_of[right].endswith("w3-Linear/Reshape-op0)")
    mul_id = re.match(r"^  (%\d+)", lines[mul_line]).group(1)
    mul = graph.node(mul_id)
    assert mul["op"] == "Mul" and mul["inputs"] == (left, right)
    shape = re.search(r"-> \(<Tensor\[(\w+)\], \(([\d, ]+)\)>\)", lines[mul_line + 1])
    assert mul["output_dtypes"] == (shape.group(1),)
    assert mul["output_shapes"] == (tuple(int(x) for x in shape.group(2).split(", ")),)
    assert mul["recompute"] and mul["duplicated"] is not True
    assert graph.node(left)["inputs"][0] in {
        nid for nid, sc in scope_of.items() if "activation-SiLU/SiLU-op0)" in sc
        and "1-LLamaDecodeLayer" in sc}


def test_parameters_with_shapes(graph: IRGraph) -> None:
    text = _text(SILU_MUL)
    total = int(re.search(r"# Total params: (\d+)", text).group(1))
    assert len(graph.parameters) == total == len(re.findall(r"^%para\d+_", text, re.M))
    m = re.search(r"^%para\d+_(model\.layers\.1\.feed_forward\.w2\.weight): "
                  r"<Ref\[Tensor\[(\w+)\]\], \(([\d, ]+)\)", text, re.M)
    row = graph.parameters.set_index("name").loc[m.group(1)]
    assert row["dtype"] == m.group(2)
    assert row["shape"] == tuple(int(x) for x in m.group(3).split(", "))
    assert row["is_parameter"] and row["has_default"]
    # Loads name the parameter they read
    loads = graph.nodes[graph.nodes["op"] == "Load"]
    assert all(len(p) == 1 for p in loads["params"])


def test_communication_nodes_with_group() -> None:
    text = _text(COMM)
    comm_lines = [line for line in text.splitlines() if NODE_LINE.match(line)
                  and re.search(r"= (AllReduce|AllGather|ReduceScatter)\(", line)]
    g = load_ir(COMM)
    comm = g.communication
    assert len(comm) == len(comm_lines) == 5
    assert set(comm["op"]) <= COMMUNICATION_OPS
    groups = [re.search(r'group: "([^"]+)"', line).group(1) for line in comm_lines]
    assert list(comm["group"]) == groups
    sizes = [int(m.group(1)) if (m := re.search(r"rank_size: I64\((\d+)\)", line)) else None
             for line in comm_lines]
    assert [None if pd.isna(v) else int(v) for v in comm["rank_size"]] == sizes
    # the CPU dump names groups but prints no ranks; the caller can supply them
    assert comm["rank_list"].isna().all()
    named = load_ir(COMM, groups={"pair_group": [0, 1]}).communication
    expected = [(0, 1) if grp == "pair_group" else None for grp in groups]
    assert list(named["rank_list"]) == expected


def test_rank_list_printed_in_the_dump(tmp_path: Path) -> None:
    """Dumps that print the ranks (form assumed: group_ranks "0-8" or rank_list (..))."""
    path = tmp_path / "ranks.ir"
    path.write_text(
        "subgraph @g() {\n"
        '  %1(x) = AllGather(%0) {instance name: ag} primitive_attrs: {group: "g4", '
        'group_ranks: "0-8-16-24", rank_size: I64(4)}\n'
        '  %2(y) = ReduceScatter(%1) primitive_attrs: {group: "g2", rank_list: (1, 9)}\n'
        "}\n", encoding="utf-8")
    comm = load_ir(path).communication
    assert list(comm["rank_list"]) == [(0, 8, 16, 24), (1, 9)]
    assert list(comm["group"]) == ["g4", "g2"]




#: The guide (in ``shared/seeds/``, beside the samples) that quotes an Ascend dump's nodes.
SEED_WITH_IR = "000_0e186d8fd73a3779.txt"
#: The nodes it quotes: four of a Llama attention block and a duplicated (recomputed) Cast.
SEED_NODES = ("%13", "%14", "%15", "%16", "%1834")


def _seed_excerpt(tmp_path: Path) -> Path:
    """The node blocks the tuning guide quotes (a node line and its type and scope lines),
    wrapped in a ``subgraph`` so that they parse as a file. The guide is another project's
    text: it stays in ``shared/seeds`` and is read from there, never copied here."""
    seed = shared_root().parent / "seeds" / SEED_WITH_IR
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in seed.read_text(encoding="utf-8").splitlines():
        node = re.match(r"\s*(%\d+)\(", line)
        if node:
            current = blocks.setdefault(node.group(1), []) if node.group(1) in SEED_NODES \
                else None
            if current is not None:
                current.append("  " + line.strip())
        elif current is not None and re.match(r"\s+[:#]", line):
            current.append(line)
        else:
            current = None
    assert set(blocks) == set(SEED_NODES), f"{seed.name} quotes {sorted(blocks)}"
    path = tmp_path / "seed_excerpt.ir"
    body = [line for node in SEED_NODES for line in blocks[node]]
    path.write_text("\n".join(["subgraph @seed_graph() {", *body, "}"]) + "\n",
                    encoding="utf-8")
    return path


@pytest.mark.shared_samples
def test_seed_excerpt_attributes(tmp_path: Path) -> None:
    """The attribute layout of an Ascend semi-auto-parallel dump (lines from the guide)."""
    g = load_ir(_seed_excerpt(tmp_path))
    n = g.nodes.set_index("node_id")
    assert list(n.index) == ["%13", "%14", "%15", "%16", "%1834"]
    assert n.loc["%16", "in_strategy"] == "((1, 1, 8, 1))" and n.loc["%16", "op"] == "Transpose"
    assert n.loc["%13", "params"] == ("model.layers.0.attention.wq.weight",)
    assert n.loc["%14", "op"] == "MatMul" and n.loc["%14", "instance_name"] == "matmul"
    assert n.loc["%14", "in_strategy"] == "((1, 1), (8, 1))"
    assert n.loc["%14", "inputs"] == ("%12", "%13")
    assert n.loc["%14", "unique_id"] == "782146" and n.loc["%14", "micro"] == 0
    assert n.loc["%15", "forward_comm_node_unique_id"] == "729440"
    assert n.loc["%15", "output_shapes"] == ((1, 4096, 4, 128),)
    cast = n.loc["%1834"]
    assert cast["recompute"] and cast["prim_recompute"] and cast["duplicated"]
    assert cast["recompute_sub_graph"] == 64 and cast["recompute_id"] == 65
    assert cast["output_dtypes"] == ("Float32",)
    assert pd.isna(cast["scope"])


def test_gzip_and_plain_agree(tmp_path: Path) -> None:
    packed = tmp_path / "silu_mul.ir.gz"
    with open(SILU_MUL, "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    a, b = load_ir(SILU_MUL).nodes, load_ir(packed).nodes
    assert a.drop(columns="graph").equals(b.drop(columns="graph"))


def test_early_pass_dump_with_many_subgraphs_and_calls() -> None:
    path = DATA / "comm_dp2_rank0_type_inference.ir.gz"
    text = _text(path)
    g = load_ir(path)
    assert len(g.nodes) == len(_node_lines(path))
    subgraphs = re.findall(r"^subgraph @([^\s(]+)", text, re.M)
    assert len(subgraphs) > 1
    assert set(g.nodes["graph"].astype(str)) <= set(subgraphs)
    calls = re.findall(r"^  %\d+\([^)]*\) = call (@[^\s(]+)\(", text, re.M)
    assert len(calls) > 0
    assert sorted(g.nodes.loc[g.nodes["op"].astype(str).str.startswith("@"), "op"]
                  .astype(str)) == sorted(calls)


def test_cell_scope_lines_of_early_passes() -> None:
    path = DATA / "silu_mul_add_recomputation.ir.gz"
    lines = _text(path).splitlines()
    g = load_ir(path)
    scopes = [lines[i + 2].split(": (", 1)[1][:-1] for i, line in enumerate(lines)
              if NODE_LINE.match(line) and lines[i + 2].startswith("      # Scope: (")]
    assert len(scopes) == len(g.nodes)
    assert list(g.nodes["scope"]) == scopes


def test_kernel_graph_keeps_the_first_type_line() -> None:
    path = DATA / "silu_mul_kernel_graph.ir.gz"
    lines = _text(path).splitlines()
    g = load_ir(path)
    firsts = [lines[i + 1] for i, line in enumerate(lines) if NODE_LINE.match(line)]
    assert len(firsts) == len(g.nodes)
    extra = sum(1 for i, line in enumerate(lines)
                if line.startswith("      : (") and lines[i - 1].startswith("      : ("))
    assert extra > 0  # the device-format lines this test is about
    tuples = 0
    for first, dtypes in zip(firsts, g.nodes["output_dtypes"], strict=True):
        out = first.rpartition(") -> (")[2]
        packed = re.search(r"Tuple\[Tensor\[(\w+)\](?:\*(\d+))?\]", out)
        if packed:  # <Tuple[Tensor[Float32]*21], TupleShape(...)>
            tuples += 1
            assert list(dtypes) == [packed.group(1)] * int(packed.group(2) or 1)
        else:
            assert list(dtypes) == re.findall(r"<(?:Ref\[)?Tensor\[(\w+)\]", out)
    assert tuples > 0


@pytest.mark.parametrize(("text", "bad_line"), [
    ("  %1(x) = PrimFunc_Add(%0, %0)\n", 1),                      # before any subgraph
    ("subgraph @g() {\n  %1(x) = PrimFunc_Add(%0, %0)\n      : broken\n}\n", 3),
    ("subgraph @g() {\n  %1(x) PrimFunc_Add %0\n}\n", 2),            # no call syntax
    ("subgraph @g() {\n      : (<Tensor[Float32], ()>) -> (<Tensor[Float32], ()>)\n}\n", 2),
])
def test_malformed_lines_name_file_and_line(tmp_path: Path, text: str, bad_line: int) -> None:
    path = tmp_path / "bad.ir"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProfileError) as err:
        load_ir(path)
    assert err.value.line == bad_line
    assert str(path) in str(err.value) and f":{bad_line}:" in str(err.value)


def test_a_shape_that_is_not_numbers_is_said_so(tmp_path: Path) -> None:
    """A walk: a garbled dimension gave Python's "invalid literal for int() with base
    10: '12x8'"; the message now says a shape was expected."""
    path = tmp_path / "bad.ir"
    path.write_text("subgraph @g() {\n  %1(x) = PrimFunc_Add(%0, %0)\n"
                    "      : (<Tensor[Float32], (4, 64)>) -> (<Tensor[Float32], (12x8, 64)>)\n"
                    "}\n", encoding="utf-8")
    with pytest.raises(ProfileError, match=r"expected a shape of whole numbers, found "
                                           r"\(12x8, 64\)") as err:
        load_ir(path)
    assert err.value.line == 3 and "invalid literal" not in str(err.value)


def test_not_an_ir_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.ir"
    path.write_text("hello\nworld\n", encoding="utf-8")
    with pytest.raises(PerfkitError, match="no 'subgraph"):
        load_ir(path)
    with pytest.raises(ProfileError, match="no such file"):
        load_ir(tmp_path / "missing.ir")


def test_binary_garbage_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bin.ir"
    path.write_bytes(b"subgraph @g() {\n}\n\xff\xfe\x00\n")
    with pytest.raises(ProfileError) as err:
        load_ir(path)
    assert err.value.line == 3


@pytest.mark.slow
def test_memory_does_not_grow_with_comment_lines(tmp_path: Path) -> None:
    """Streaming: '# In file' lines cost time to skip but no memory."""
    import tracemalloc

    text = _text(SILU_MUL)
    start = text.index("subgraph @")
    end = text.index("\n}\n", start) + 3
    head, body = text[:start], text[start:end]
    comment = "      # In file /x/cell.py:700, 8~40/        return self.construct(*a)/\n" * 40
    noisy = "".join(line + (comment if line.startswith("      # Fullname") else "")
                    for line in body.splitlines(keepends=True))
    paths = []
    for name, block in (("plain.ir", body), ("noisy.ir", noisy)):
        paths.append(tmp_path / name)
        paths[-1].write_text(head + block * 10, encoding="utf-8")
        load_ir(paths[-1])  # warm up: lazy imports and caches are not what is measured
    peaks = []
    for path in paths:
        tracemalloc.start()
        g = load_ir(path)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert len(g.nodes) == 10 * len(_node_lines(SILU_MUL))
    noisy_size = (tmp_path / "noisy.ir").stat().st_size
    plain_size = (tmp_path / "plain.ir").stat().st_size
    assert noisy_size > 5 * plain_size
    assert peaks[1] < 1.2 * peaks[0]
    # the comment lines are streamed past: the peak grows by a small part of the bytes
    # they add (a bound on the whole file, noisy_size / 4, sat within 0.3 % of the peak:
    # the parse of the plain file alone takes 1.5 times that file's size)
    assert peaks[1] - peaks[0] < 0.1 * (noisy_size - plain_size)
