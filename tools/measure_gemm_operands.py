"""Time a training step's GEMMs on their real operands against random operands of the same shape.

A GPU held at its power limit runs a product faster when its operands toggle fewer bits:
the same 8192³ bf16 product runs about 13 % faster on zeros than on random normal data on
an H100. ``tools/measure_kernel_rates.py`` times products on random normal operands; this
script measures how far real training operands differ from them, on the shapes of
``tests/data/kineto_llama_wide_tp_h100`` (Llama 2 7B's layer, micro-batch 4, sequence 2,048):

1. trains the wide Llama of ``tools/make_kineto_llama_layouts.py --wide`` (2 layers) for
   ``--steps`` steps on random tokens (AdamW, bf16 autocast), as the recorded runs do;
2. on one more step, keeps each linear layer's operands in bf16 (input ``x``, weight ``W``,
   output gradient ``dy``) of the first decoder layer and of the output head;
3. times each of their three products (forward ``x·Wᵀ``, input gradient ``dy·W``, weight
   gradient ``dyᵀ·x``) by replaying a CUDA graph, on the real operands, on random normal
   operands of the same shapes and on zeros, the three alternating ``--rounds`` times so
   that a drift of the clock falls on all of them.

Run on a machine with a CUDA GPU and PyTorch, from the repository's root::

    python tools/measure_gemm_operands.py --out gemm_operands_h100.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_kineto_llama_layouts as layouts  # noqa: E402
from measure_kernel_rates import environment, time_graph  # noqa: E402


def capture(model: torch.nn.Module, opt: torch.optim.Optimizer,
            tokens: torch.Tensor) -> dict[str, dict[str, torch.Tensor]]:
    """bf16 copies of the operands of layer 0's linears and the head on one step."""
    kept: dict[str, dict[str, torch.Tensor]] = {}
    modules = {f"layer0.{n}": m for n, m in model.layers[0].named_children()
               if isinstance(m, torch.nn.Linear)}
    modules["head"] = model.head
    hooks = []
    for name, module in modules.items():
        def forward_hook(mod, args, _out, name=name):
            kept.setdefault(name, {})["x"] = args[0].detach().to(torch.bfloat16) \
                .reshape(-1, args[0].shape[-1]).contiguous()
            kept[name]["w"] = mod.weight.detach().to(torch.bfloat16).contiguous()

        def backward_hook(_mod, _grad_in, grad_out, name=name):
            g = grad_out[0]
            kept[name]["dy"] = g.detach().to(torch.bfloat16).reshape(-1, g.shape[-1]) \
                .contiguous()

        hooks += [module.register_forward_hook(forward_hook),
                  module.register_full_backward_hook(backward_hook)]
    layouts.train_step(model, opt, tokens)
    if tokens.is_cuda:
        torch.cuda.synchronize()
    for hook in hooks:
        hook.remove()
    return kept


def stats(t: torch.Tensor) -> dict:
    f = t.float()
    return {"std": float(f.std()), "zero_share": float((f == 0).float().mean())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, any device")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.smoke:
        layouts.HIDDEN, layouts.HEADS, layouts.FFN, layouts.VOCAB = 256, 4, 512, 1000
        seq = 128
    else:
        layouts.HIDDEN, layouts.HEADS = layouts.WIDE["hidden"], layouts.WIDE["heads"]
        layouts.FFN = layouts.WIDE["ffn"]
        seq = layouts.SEQ
    torch.manual_seed(0)
    model = layouts.Llama(recompute=False, layers=2).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    started = time.monotonic()

    def batch() -> torch.Tensor:
        return torch.randint(0, layouts.VOCAB, (args.micro_batch, seq + 1), device=device)

    for _ in range(args.steps):
        layouts.train_step(model, opt, batch())
    kept = capture(model, opt, batch())
    rows = []
    for name, ops in kept.items():
        x, w, dy = ops["x"], ops["w"], ops["dy"]
        m, k = x.shape
        n = w.shape[0]
        for layout, fn_of in (("fwd_nt", lambda a, b, c: (lambda: a @ b.t())),
                              ("dgrad_nn", lambda a, b, c: (lambda: c @ b)),
                              ("wgrad_tn", lambda a, b, c: (lambda: c.t() @ a))):
            kinds = {"real": (x, w, dy),
                     "randn": tuple(torch.randn_like(t) for t in (x, w, dy)),
                     "zeros": tuple(torch.zeros_like(t) for t in (x, w, dy))}
            times: dict[str, list[float]] = {kind: [] for kind in kinds}
            flops = 2.0 * m * n * k
            reps = int(min(200, max(3, 2e-3 / max(flops / 7e14, 1e-7))))
            for _ in range(args.rounds):
                for kind, operands in kinds.items():
                    ms, _ = time_graph(fn_of(*operands), device, reps, 5)
                    times[kind].append(ms)
            rows.append({"gemm": name, "layout": layout, "m": m, "n": n, "k": k,
                         **{f"{kind}_ms": round(statistics.median(v), 6)
                            for kind, v in times.items()},
                         "rounds": {kind: [round(t, 6) for t in v] for kind, v in times.items()},
                         "operands": {"x": stats(x), "w": stats(w), "dy": stats(dy)}})
        print(f"{name}: {rows[-1]['real_ms']:.4f} ms real, {rows[-1]['randn_ms']:.4f} random",
              flush=True)
    result = {"environment": environment(device), "script": "tools/measure_gemm_operands.py",
              "model": {"hidden": layouts.HIDDEN, "heads": layouts.HEADS, "ffn": layouts.FFN,
                        "layers": 2, "seq": seq, "micro_batch": args.micro_batch,
                        "vocab": layouts.VOCAB, "steps_before": args.steps},
              "seconds": round(time.monotonic() - started, 1), "gemms": rows}
    Path(args.out).write_text(json.dumps(result, indent=0) + "\n", encoding="utf-8")
    ratio = [r["randn_ms"] / r["real_ms"] for r in rows]
    print(f"wrote {args.out}: random / real, median {statistics.median(ratio):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
