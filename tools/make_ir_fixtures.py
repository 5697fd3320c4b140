"""Make the MindSpore IR fixtures under ``tests/data/ir/`` with the real MindSpore CPU build.

Run it with an interpreter that has MindSpore (it needs ``numpy<2``), not with perfkit's::

    python3 -m venv /tmp/venvs/ms
    /tmp/venvs/ms/bin/pip install "numpy<2" mindspore
    /tmp/venvs/ms/bin/python tools/make_ir_fixtures.py --work /tmp/irwork --out tests/data/ir

The three dumps the notebooks and the dashboard open (:data:`BUNDLED`) ship with perfkit, so
they live in ``data/ir/`` (``--bundled-out``), not in ``tests/data/ir/``; each folder gets a
``MANIFEST.txt`` for the files it holds.

The network is a two-layer Llama-shaped decoder whose cell and operator attribute names follow
MindFormers' legacy Llama (``layers.N.attention.wq.matmul``, ``feed_forward.w1.activation``,
``feed_forward.w1.reshape``, ``feed_forward.mul`` ...). Linear layers reshape their 3-D input
to 2-D around the MatMul, so a Reshape sits between the SiLU and the Mul and between the Mul
and the down-projection MatMul: the layout of the "recompute of SiLU and Mul does not save
memory" case in the tuning guide.

Each scenario trains one step in GRAPH mode with ``MS_DEV_SAVE_GRAPHS=2``:

``control``
    no recompute at all.
``silu_mul``
    layer 0: whole layer recomputed (``cell.recompute()``); layer 1: select-recompute with the
    patterns ``feed_forward\\.mul`` and ``feed_forward\\.w1\\.activation`` only.
``silu_mul_reshape``
    as ``silu_mul`` with ``feed_forward\\.w1\\.reshape`` and ``feed_forward\\.w2\\.reshape`` added.
``comm``
    two CPU workers started with ``msrun`` in data-parallel mode, with an explicit AllGather
    and ReduceScatter in a two-rank group; rank 0's dumps are kept.

From ``silu_mul`` two more dumps of the same compile are kept for their layouts (the output
of the ``add_recomputation`` pass, the backend kernel graph), and from ``comm`` the first
(type inference) dump, which has many subgraphs and ``call @`` nodes.

Patterns are applied the way MindFormers' ``LayerSetting.set_pattern_recompute`` does:
split on the two characters ``\\.``, every piece but the last is ``re.fullmatch``-ed against
child cell names, the last one against operator attributes and child cells of the cell
reached. The main dump of each scenario is its ``*_validate_*.ir`` file (after the recompute
and CSE passes). Every kept dump loses its ``# In file`` source-location lines and nothing
else; most are gzip-compressed. ``MANIFEST.txt`` records the MindSpore version, the source
dump of each file and the settings.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

SCENARIOS = {
    "control": {"full_layers": [], "select": []},
    "silu_mul": {"full_layers": [0],
                 "select": [r"feed_forward\.mul", r"feed_forward\.w1\.activation"]},
    "silu_mul_reshape": {"full_layers": [0],
                         "select": [r"feed_forward\.mul", r"feed_forward\.w1\.activation",
                                    r"feed_forward\.w1\.reshape", r"feed_forward\.w2\.reshape"]},
}

#: Further dumps of the ``silu_mul`` compile kept for their layouts: an early pass (cell-only
#: ``# Scope:`` lines) and the backend kernel graph (several type lines per node).
EXTRA_DUMPS = {"opt_pass_19_add_recomputation_*.ir": "silu_mul_add_recomputation.ir.gz",
               "graph_build_*.ir": "silu_mul_kernel_graph.ir.gz"}

#: Dumps written to ``--bundled-out`` (``data/ir``, package data) instead of ``--out``.
BUNDLED = ("control.ir.gz", "silu_mul.ir", "silu_mul_reshape.ir.gz")

HIDDEN, HEADS, FFN, SEQ, BATCH, VOCAB, LAYERS = 32, 4, 64, 16, 2, 64, 2


def build_and_train(scenario: str) -> None:
    """Build the network, apply the scenario's recompute settings and train one step."""
    import mindspore as ms
    import numpy as np
    from mindspore import Parameter, Tensor, nn, ops
    from mindspore.common.initializer import Normal, initializer
    from mindspore.ops.auto_generate.gen_ops_prim import SiLU as SiLUPrim

    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    ms.set_seed(0)

    class SiLU(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.silu = SiLUPrim()

        def construct(self, x):
            return self.silu(x)

    class Linear(nn.Cell):
        def __init__(self, in_ch: int, out_ch: int, act: bool = False) -> None:
            super().__init__()
            self.in_ch, self.out_ch = in_ch, out_ch
            self.weight = Parameter(initializer(Normal(0.02), (out_ch, in_ch), ms.float32),
                                    name="weight")
            self.matmul = ops.MatMul(transpose_b=True)
            self.reshape = ops.Reshape()
            self.activation = SiLU() if act else None

        def construct(self, x):
            out_shape = x.shape[:-1] + (self.out_ch,)
            x = self.reshape(x, (-1, self.in_ch))
            x = self.matmul(x, self.weight)
            if self.activation is not None:
                x = self.activation(x)
            return self.reshape(x, out_shape)

    class RMSNorm(nn.Cell):
        def __init__(self, dim: int) -> None:
            super().__init__()
            self.weight = Parameter(initializer("ones", (dim,), ms.float32), name="weight")
            self.square = ops.Square()
            self.mean = ops.ReduceMean(keep_dims=True)
            self.add = ops.Add()
            self.rsqrt = ops.Rsqrt()
            self.mul = ops.Mul()
            self.mul2 = ops.Mul()
            self.cast = ops.Cast()
            self.rcast = ops.Cast()

        def construct(self, x):
            x32 = self.cast(x, ms.float32)
            norm = self.rsqrt(self.add(self.mean(self.square(x32), -1), 1e-6))
            return self.rcast(self.mul2(self.mul(x32, norm), self.weight), ms.float32)

    class Attention(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.head_dim = HIDDEN // HEADS
            self.wq = Linear(HIDDEN, HIDDEN)
            self.wk = Linear(HIDDEN, HIDDEN)
            self.wv = Linear(HIDDEN, HIDDEN)
            self.wo = Linear(HIDDEN, HIDDEN)
            self.reshape = ops.Reshape()
            self.transpose = ops.Transpose()
            self.merger_head_transpose = ops.Transpose()
            self.batch_matmul = ops.BatchMatMul()
            self.batch_matmul_q_k = ops.BatchMatMul(transpose_b=True)
            self.mul = ops.Mul()
            self.softmax = ops.Softmax()

        def construct(self, x):
            bs, seq, _ = x.shape
            shape = (bs, seq, HEADS, self.head_dim)
            q = self.transpose(self.reshape(self.wq(x), shape), (0, 2, 1, 3))
            k = self.transpose(self.reshape(self.wk(x), shape), (0, 2, 1, 3))
            v = self.transpose(self.reshape(self.wv(x), shape), (0, 2, 1, 3))
            score = self.mul(self.batch_matmul_q_k(q, k), 1.0 / self.head_dim ** 0.5)
            ctx = self.batch_matmul(self.softmax(score), v)
            ctx = self.reshape(self.merger_head_transpose(ctx, (0, 2, 1, 3)), (bs, seq, HIDDEN))
            return self.wo(ctx)

    class FeedForward(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = Linear(HIDDEN, FFN, act=True)
            self.w3 = Linear(HIDDEN, FFN)
            self.w2 = Linear(FFN, HIDDEN)
            self.mul = ops.Mul()

        def construct(self, x):
            return self.w2(self.mul(self.w1(x), self.w3(x)))

    class LLamaDecodeLayer(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.attention_norm = RMSNorm(HIDDEN)
            self.attention = Attention()
            self.ffn_norm = RMSNorm(HIDDEN)
            self.feed_forward = FeedForward()
            self.add = ops.Add()

        def construct(self, x):
            h = self.add(x, self.attention(self.attention_norm(x)))
            return self.add(h, self.feed_forward(self.ffn_norm(h)))

    class LlamaModel(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.tok_embeddings = nn.Embedding(VOCAB, HIDDEN)
            self.layers = nn.CellList([LLamaDecodeLayer() for _ in range(LAYERS)])
            self.norm_out = RMSNorm(HIDDEN)

        def construct(self, tokens):
            h = self.tok_embeddings(tokens)
            for layer in self.layers:
                h = layer(h)
            return self.norm_out(h)

    class LlamaForCausalLM(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.model = LlamaModel()
            self.lm_head = Linear(HIDDEN, VOCAB)
            self.loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
            self.reshape = ops.Reshape()

        def construct(self, tokens, labels):
            logits = self.lm_head(self.model(tokens))
            return self.loss(self.reshape(logits, (-1, VOCAB)), self.reshape(labels, (-1,)))

    net = LlamaForCausalLM()
    settings = SCENARIOS[scenario]
    for layer_id, layer in enumerate(net.model.layers):
        if layer_id in settings["full_layers"]:
            layer.recompute()
        else:
            for pattern in settings["select"]:
                set_pattern_recompute(layer, pattern.split(r"\."))
    opt = nn.AdamWeightDecay(net.trainable_params(), learning_rate=1e-3)
    train = nn.TrainOneStepCell(net, opt)
    train.set_train()
    rng = np.random.default_rng(0)
    tokens = Tensor(rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int32))
    labels = Tensor(rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int32))
    loss = train(tokens, labels)
    print(f"{scenario}: loss {float(loss.asnumpy()):.4f}")


def build_comm_and_train() -> None:
    """Data-parallel net with explicit AllGather / ReduceScatter in a two-rank group.

    Run under ``msrun`` with two local workers. The CPU kernels lack ReduceScatter, so the
    run stops after the graph is compiled and dumped: the dump is all we need.
    """
    import mindspore as ms
    import numpy as np
    from mindspore import Parameter, Tensor, nn, ops
    from mindspore.communication import create_group, init

    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    init()
    create_group("pair_group", [0, 1])
    ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)

    class Net(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.w = Parameter(Tensor(np.ones((8, 8), np.float32)), name="w")
            self.matmul = ops.MatMul()
            self.all_gather = ops.AllGather(group="pair_group")
            self.reduce_scatter = ops.ReduceScatter(group="pair_group")
            self.relu = ops.ReLU()

        def construct(self, x):
            y = self.all_gather(self.matmul(x, self.w))
            return self.relu(self.reduce_scatter(y)).sum()

    net = Net()
    train = nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), 0.1))
    print(train(Tensor(np.ones((4, 8), np.float32))))


def run_comm(work: Path) -> Path:
    """Run the two-rank data-parallel job with ``msrun``; return rank 0's validate dump."""
    folder = work / "comm"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    bindir = str(Path(sys.executable).parent)
    env = dict(os.environ, MS_DEV_SAVE_GRAPHS="2", MS_DEV_SAVE_GRAPHS_PATH=str(folder / "g"),
               PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    subprocess.run([str(Path(bindir) / "msrun"), "--worker_num=2", "--local_worker_num=2",
                    "--master_port=8140", f"--log_dir={folder / 'log'}", "--join=True",
                    __file__, "--comm-child"], env=env, cwd=folder, check=False)
    return sorted((folder / "g" / "rank_0").glob("*_validate_*.ir"))[-1]


def write_excerpt(source: Path, target: Path) -> None:
    """Copy an IR dump without its ``# In file`` source-location comment lines."""
    import gzip

    with open(source, encoding="utf-8") as fin:
        kept = [line for line in fin if not line.lstrip().startswith("# In file ")]
    text = "".join(kept)
    if target.suffix == ".gz":
        with gzip.open(target, "wt", encoding="utf-8") as fout:
            fout.write(text)
    else:
        target.write_text(text, encoding="utf-8")


def set_pattern_recompute(cell, pieces: list[str]) -> None:
    """Mark operators or cells below ``cell`` whose names fully match the pattern pieces."""
    head, rest = pieces[0], pieces[1:]
    if rest:
        for name, child in cell._cells.items():  # noqa: SLF001  (what MindFormers walks)
            if child is not None and re.fullmatch(head, name):
                set_pattern_recompute(child, rest)
        return
    for attr in dir(cell):
        if re.fullmatch(head, attr):
            op = getattr(cell, attr, None)
            if op is not None and hasattr(op, "recompute") and not hasattr(op, "_cells"):
                op.recompute()
    for name, child in cell._cells.items():  # noqa: SLF001
        if child is not None and re.fullmatch(head, name):
            child.recompute()


def run_scenario(scenario: str, work: Path) -> Path:
    """Train one scenario in a subprocess with graph saving on; return its graph folder."""
    folder = work / scenario
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env = dict(os.environ, MS_DEV_SAVE_GRAPHS="2", MS_DEV_SAVE_GRAPHS_PATH=str(folder / "graphs"),
               GLOG_v="3")
    subprocess.run([sys.executable, __file__, "--child", scenario], env=env, cwd=folder,
                   check=True)
    return folder / "graphs"


def pick_graph(graphs: Path) -> Path:
    """The last dumped IR of the training graph that carries the recompute attributes."""
    files = sorted(glob.glob(str(graphs / "**" / "*.ir"), recursive=True),
                   key=lambda p: os.path.getmtime(p))
    with_attrs = [f for f in files if "Fullname with scope" in Path(f).read_text(errors="replace")
                  and "recompute" in Path(f).read_text(errors="replace")]
    return Path((with_attrs or files)[-1])


def main() -> None:
    """Command line: make every scenario and copy the chosen dumps to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/irwork")
    parser.add_argument("--out", default="tests/data/ir")
    parser.add_argument("--bundled-out", default="data/ir",
                        help="folder for the dumps that ship with perfkit (%(default)s)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--comm-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--keep", default="_validate_", help="IR file name pattern to keep")
    args = parser.parse_args()
    if args.child:
        build_and_train(args.child)
        return
    if args.comm_child:
        build_comm_and_train()
        return
    import mindspore as ms

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"mindspore {ms.__version__} (CPU build, PyPI), python {sys.version.split()[0]}",
             f"net: hidden {HIDDEN}, heads {HEADS}, ffn {FFN}, seq {SEQ}, batch {BATCH}, "
             f"vocab {VOCAB}, layers {LAYERS}", "env: MS_DEV_SAVE_GRAPHS=2"]
    lines.append("excerpts: the dump chosen, minus its '# In file' source-location lines")
    for scenario, settings in SCENARIOS.items():
        graphs = run_scenario(scenario, Path(args.work))
        chosen = pick_graph(graphs) if not args.keep else sorted(
            p for p in graphs.rglob("*.ir") if re.search(args.keep, p.name))[-1]
        name = f"{scenario}.ir" + ("" if scenario == "silu_mul" else ".gz")
        write_excerpt(chosen, out / name)
        lines.append(f"{name} <- {chosen.name}; full_layers={settings['full_layers']} "
                     f"select_recompute={settings['select']}")
        if scenario == "silu_mul":  # other dump layouts of the same compile
            for pattern, target in EXTRA_DUMPS.items():
                extra = sorted(graphs.glob(pattern))[-1]
                write_excerpt(extra, out / target)
                lines.append(f"{target} <- {extra.name} (same run)")
    chosen = run_comm(Path(args.work))
    write_excerpt(chosen, out / "comm_dp2_rank0.ir")
    lines.append(f"comm_dp2_rank0.ir <- rank_0/{chosen.name}; msrun 2 workers, data_parallel, "
                 "AllGather + ReduceScatter in group 'pair_group' (run stops after the dump)")
    early = sorted(chosen.parent.glob("01_type_inference_*.ir"))[-1]
    write_excerpt(early, out / "comm_dp2_rank0_type_inference.ir.gz")
    lines.append(f"comm_dp2_rank0_type_inference.ir.gz <- rank_0/{early.name} (same run)")
    bundled_out = Path(args.bundled_out)
    bundled_out.mkdir(parents=True, exist_ok=True)
    for name in BUNDLED:
        (out / name).replace(bundled_out / name)
    header, files = lines[:4], lines[4:]
    for folder, keep in ((out, lambda f: f.split()[0] not in BUNDLED),
                         (bundled_out, lambda f: f.split()[0] in BUNDLED)):
        (folder / "MANIFEST.txt").write_text("\n".join(header + [f for f in files if keep(f)])
                                             + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
