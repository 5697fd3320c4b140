"""perfkit's operator efficiency against TraceLens's reports: FLOPs and time per call.

TraceLens (AMD-AGI/TraceLens) writes one CSV per operator category (``GEMM.csv``,
``SDPA_fwd.csv``, ``CONV_fwd.csv``, ``CONV_bwd.csv``): one row per operator name and
arguments, with ``GFLOPS_first`` (per call), ``Kernel Time (µs)_mean`` (the kernels of one
call, summed) and ``name_count`` (calls). This script reads those CSVs, finds perfkit's
row for the same operator and shapes in :func:`perfkit.analysis.operator_efficiency`, and
counts the rows that agree (FLOPs within ``--rtol``, the same calls, time per call within
``--rtol``).

perfkit names a row after the operator that *launched* the kernels, TraceLens after the
operator it models: ``aten::convolution`` is priced through its cuDNN / MIOpen launcher
(same input and weight), ``aten::_scaled_dot_product_flash_attention`` through
``aten::_flash_attention_forward`` (q, k, v as ``(b, s, h, d)`` instead of ``(b, h, s, d)``).

Usage (TraceLens's reports made with its own CLI, or the ones it publishes)::

    TraceLens_generate_perf_report_pytorch --profile_json_path TRACE --output_csvs_dir DIR
    python benchmarks/tracelens_efficiency.py TRACE DIR [TRACE DIR ...] [--rows]
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import pandas as pd

import perfkit as pk

#: TraceLens categories compared, and the kind perfkit gives them.
CATEGORIES = {"GEMM": "gemm", "SDPA_fwd": "attention", "SDPA_bwd": "attention",
              "CONV_fwd": "conv", "CONV_bwd": "conv"}

#: The operators whose kernels perfkit prices for a TraceLens operator, and how the
#: tensor arguments map (None: the same order and shapes).
LAUNCHERS: dict[str, list[tuple[str, object]]] = {
    "aten::convolution": [("aten::cudnn_convolution", None), ("aten::miopen_convolution", None),
                          ("aten::mkldnn_convolution", None), ("aten::convolution", None),
                          ("aten::_convolution", None)],
    "aten::_scaled_dot_product_flash_attention": [
        ("aten::_flash_attention_forward", (0, 2, 1, 3)),
        ("aten::_scaled_dot_product_flash_attention", None)],
    "aten::_scaled_dot_product_efficient_attention": [
        ("aten::_efficient_attention_forward", (0, 2, 1, 3)),
        ("aten::_scaled_dot_product_efficient_attention", None)],
    "aten::_scaled_dot_product_flash_attention_backward": [
        ("aten::_flash_attention_backward", (0, 2, 1, 3)),
        ("aten::_scaled_dot_product_flash_attention_backward", None)],
}


def _dims(text: str) -> list[tuple[int, ...]]:
    """TraceLens's ``Input Dims`` (``"[[4, 64], [], [64]]"``) as tuples."""
    return [tuple(d) for d in ast.literal_eval(text)]


def _ours_dims(text: object) -> list[tuple[int, ...]]:
    """perfkit's ``input_shapes`` (``"4,64;;64"``) as tuples (``()`` for a non-tensor)."""
    if not isinstance(text, str):
        return []
    return [tuple(int(x) for x in part.split(",") if x) for part in text.split(";")]


def _tensors(dims: list[tuple[int, ...]], n: int) -> list[tuple[int, ...]]:
    return [d for d in dims if d][:n]


def find_row(ours: pd.DataFrame, name: str, dims: list[tuple[int, ...]]) -> pd.Series | None:
    """perfkit's row for TraceLens's operator ``name`` with input dims ``dims``."""
    # a convolution's bias is not an argument of cuDNN's launcher: input and weight decide
    want = _tensors(dims, 2 if name == "aten::convolution" else 3)
    for key, perm in LAUNCHERS.get(name, [(name, None)]):
        rows = ours[ours["key"] == key]
        for _, r in rows.iterrows():
            have = _tensors(_ours_dims(r["input_shapes"]), len(want))
            if perm is not None:
                have = [tuple(t[i] for i in perm) if len(t) == len(perm) else t for t in have]
            if have == want:
                return r
    return None


def compare(trace: str | Path, csv_dir: str | Path, rtol: float = 1e-3) -> pd.DataFrame:
    """One row per TraceLens row of :data:`CATEGORIES`: its figures, perfkit's, agreement."""
    profile = pk.load(trace, cache=False)
    ours = pk.analysis.operator_efficiency(profile)
    out = []
    for cat, kind in CATEGORIES.items():
        path = Path(csv_dir) / f"{cat}.csv"
        if not path.exists():
            continue
        tl = pd.read_csv(path)
        for _, t in tl.iterrows():
            dims = _dims(t["Input Dims_first"])
            r = find_row(ours, t["name"], dims)
            row = {"trace": Path(trace).name, "kind": kind, "tracelens": t["name"],
                   "dims": str(_tensors(dims, 3)), "tl_gflops": t["GFLOPS_first"],
                   "tl_us": t["Kernel Time (µs)_mean"], "tl_calls": int(t["name_count"]),
                   "key": None, "gflops": None, "us": None, "calls": None}
            if r is not None:
                row.update(key=r["key"], gflops=r["flops"] / 1e9, us=r["mean_us"],
                           calls=int(r["count"]))
            out.append(row)
    frame = pd.DataFrame(out)
    if frame.empty:
        return frame
    gf = pd.to_numeric(frame["gflops"], errors="coerce")
    us = pd.to_numeric(frame["us"], errors="coerce")
    frame["flops_ok"] = (gf - frame["tl_gflops"]).abs() <= rtol * frame["tl_gflops"].abs()
    frame["time_ok"] = ((us - frame["tl_us"]).abs() <= rtol * frame["tl_us"].abs()) \
        & (frame["calls"] == frame["tl_calls"])
    return frame


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", help="TRACE CSV_DIR pairs")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--rows", action="store_true", help="print every row")
    args = ap.parse_args(argv)
    if len(args.pairs) % 2:
        ap.error("give TRACE CSV_DIR pairs")
    frames = [compare(args.pairs[i], args.pairs[i + 1], args.rtol)
              for i in range(0, len(args.pairs), 2)]
    allrows = pd.concat([f for f in frames if not f.empty], ignore_index=True)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_colwidth", 60)
    if args.rows:
        print(allrows.to_string())
    summary = allrows.groupby("kind").agg(rows=("kind", "size"), flops=("flops_ok", "sum"),
                                          time_per_call=("time_ok", "sum"))
    print(summary.to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
