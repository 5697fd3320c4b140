"""Record a real MindSpore CPU profile of a tiny Llama-style training loop (bundled sample).

Pinned environment: **mindspore==2.10.0 (CPU build) with numpy<2**, in its own virtual
environment, not the project's (perfkit does not depend on MindSpore)::

    python3 -m venv /tmp/venv-ms
    /tmp/venv-ms/bin/pip install "numpy<2" mindspore==2.10.0
    /tmp/venv-ms/bin/python tools/make_mindspore_cpu_profile.py \\
        --out data/mindspore-cpu-tiny-llama

What it does: trains a 2-layer Llama-style decoder (RMSNorm, grouped-query attention with 4
query heads and 2 key/value heads of size 16, SwiGLU MLP of width 160; hidden 64, sequence
24, vocabulary 96, batch 2: every width differs from the 48 tokens of a micro-batch, so the
shapes read back unambiguously) on random tokens with AdamWeightDecay, in graph mode
(``mindspore.jit``) on the CPU. ``mindspore.profiler.profile`` records CPU activity with
shapes and memory on steps 2 and 3 (schedule wait=1, warmup=1, active=2) and writes its
``*_ascend_ms`` folder. The copy kept as the bundled sample ``mindspore-cpu-tiny-llama``
(its README.md, written by hand, says all this) drops the profiler's own ``logs/`` folder
(host names, paths and timings of the analysis, nothing perfkit reads); every other file is
kept byte for byte. Remove the old ``*_ascend_ms`` folder before recording again: the name
holds the host, process id and time, so a new recording lands beside it.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops
from mindspore.profiler import ProfilerActivity, schedule, tensorboard_trace_handler

PINNED_MINDSPORE = "2.10.0"
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN = 64, 4, 2, 16, 160
LAYERS, SEQ, VOCAB, BATCH = 2, 24, 96, 2


class RMSNorm(nn.Cell):
    """Root-mean-square layer norm (Llama)."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = ms.Parameter(ops.ones(dim, ms.float32))
        self.eps = eps

    def construct(self, x: Tensor) -> Tensor:
        return x * ops.rsqrt(x.pow(2).mean(-1, keep_dims=True) + self.eps) * self.weight


class Attention(nn.Cell):
    """Grouped-query attention: separate q, k, v projections, k/v heads repeated."""

    def __init__(self) -> None:
        super().__init__()
        self.wq = nn.Dense(HIDDEN, HEADS * HEAD_DIM, has_bias=False)
        self.wk = nn.Dense(HIDDEN, KV_HEADS * HEAD_DIM, has_bias=False)
        self.wv = nn.Dense(HIDDEN, KV_HEADS * HEAD_DIM, has_bias=False)
        self.wo = nn.Dense(HEADS * HEAD_DIM, HIDDEN, has_bias=False)
        mask = np.triu(np.full((SEQ, SEQ), -1e9, dtype=np.float32), k=1)
        self.mask = Tensor(mask)
        self.scale = 1.0 / float(np.sqrt(HEAD_DIM))

    def construct(self, x: Tensor) -> Tensor:
        b, s, _ = x.shape
        q = self.wq(x).reshape(b, s, HEADS, HEAD_DIM).transpose(0, 2, 1, 3)
        k = self.wk(x).reshape(b, s, KV_HEADS, HEAD_DIM).transpose(0, 2, 1, 3)
        v = self.wv(x).reshape(b, s, KV_HEADS, HEAD_DIM).transpose(0, 2, 1, 3)
        k = ops.repeat_interleave(k, HEADS // KV_HEADS, axis=1)
        v = ops.repeat_interleave(v, HEADS // KV_HEADS, axis=1)
        scores = ops.matmul(q, k.transpose(0, 1, 3, 2)) * self.scale + self.mask
        out = ops.matmul(ops.softmax(scores, -1), v)
        return self.wo(out.transpose(0, 2, 1, 3).reshape(b, s, HEADS * HEAD_DIM))


class Block(nn.Cell):
    """One decoder layer: attention and SwiGLU MLP with pre-norms and residuals."""

    def __init__(self) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(HIDDEN)
        self.attention = Attention()
        self.ffn_norm = RMSNorm(HIDDEN)
        self.w1 = nn.Dense(HIDDEN, FFN, has_bias=False)
        self.w3 = nn.Dense(HIDDEN, FFN, has_bias=False)
        self.w2 = nn.Dense(FFN, HIDDEN, has_bias=False)

    def construct(self, x: Tensor) -> Tensor:
        x = x + self.attention(self.attention_norm(x))
        h = self.ffn_norm(x)
        return x + self.w2(ops.silu(self.w1(h)) * self.w3(h))


class TinyLlama(nn.Cell):
    """Embedding, decoder layers, final norm and output head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.CellList([Block() for _ in range(LAYERS)])
        self.norm = RMSNorm(HIDDEN)
        self.head = nn.Dense(HIDDEN, VOCAB, has_bias=False)

    def construct(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


class _Flat(nn.Cell):
    """The model with its logits flattened to (tokens, vocabulary) for the loss cell."""

    def __init__(self, net: nn.Cell) -> None:
        super().__init__()
        self.net = net

    def construct(self, tokens: Tensor) -> Tensor:
        return self.net(tokens).reshape(-1, VOCAB)


def record(out: Path, recompute: bool = False) -> Path:
    """Train four steps, profile steps 2 and 3; return the ``*_ascend_ms`` folder.

    ``recompute``: the first decoder layer is recomputed (``Cell.recompute()``), so its
    operators run under a ``recompute_`` scope and again before its backward.
    """
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    ms.set_seed(0)
    net = TinyLlama()
    if recompute:
        net.layers[0].recompute()
    loss_fn = nn.CrossEntropyLoss()
    opt = nn.AdamWeightDecay(net.trainable_params(), 1e-3)

    def forward(tokens: Tensor, labels: Tensor) -> Tensor:
        logits = net(tokens)
        return loss_fn(logits.reshape(-1, VOCAB), labels.reshape(-1))

    if recompute:
        # the training cell wrappers give every operator its cell scope
        # (Default/network-WithLossCell/_backbone-TinyLlama/layers-CellList/0-Block/...)
        train_step = nn.TrainOneStepCell(nn.WithLossCell(_Flat(net), loss_fn), opt)
    else:
        grad_fn = ms.value_and_grad(forward, None, opt.parameters)

        @ms.jit
        def train_step(tokens: Tensor, labels: Tensor) -> Tensor:
            loss, grads = grad_fn(tokens, labels)
            opt(grads)
            return loss

    rng = np.random.default_rng(0)
    with ms.profiler.profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                             profile_memory=True,
                             schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                             on_trace_ready=tensorboard_trace_handler(str(out))) as prof:
        for _ in range(4):
            data = rng.integers(0, VOCAB, (BATCH, SEQ + 1))
            labels = data[:, 1:].reshape(-1) if recompute else data[:, 1:]
            train_step(Tensor(data[:, :-1], ms.int32), Tensor(labels, ms.int32))
            prof.step()
    found = sorted(out.glob("*_ascend_ms"))
    if len(found) != 1:
        raise SystemExit(f"expected one *_ascend_ms folder in {out}, found {found}")
    return found[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("data/mindspore-cpu-tiny-llama"))
    ap.add_argument("--recompute", action="store_true",
                    help="recompute the first decoder layer (Cell.recompute())")
    args = ap.parse_args()
    if ms.__version__ != PINNED_MINDSPORE:
        print(f"warning: the fixture was made with mindspore {PINNED_MINDSPORE}, "
              f"this is {ms.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = record(Path(tmp), recompute=args.recompute)
        shutil.rmtree(folder / "logs", ignore_errors=True)
        args.out.mkdir(parents=True, exist_ok=True)
        target = args.out / folder.name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(folder, target)
    for f in sorted(target.rglob("*")):
        if f.is_file():
            print(f.relative_to(args.out), f.stat().st_size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
