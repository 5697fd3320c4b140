"""The Operators tab's unfused-attention saving is the advisor's, checked on real profiles.

The figures expected are worked out here from the raw files (csv for the Ascend
``kernel_details.csv``, gzip/json for the Kineto trace): each chain is a batched matmul,
the kernels after it up to the next batched matmul (a softmax among them) and that matmul,
less its copy kernels (counted by the copies row); its FLOPs are ``2·B·M·K·N`` of each
matmul's input shapes, and a fused kernel takes ``FLOPs / (0.7 · peak)``, the peak being
that of perfkit's hardware preset for the profiled device (a parameter, not a result).
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from typing import Any

import pytest
from shared_samples import sample

import perfkit as pk
import perfkit.analysis as A
from perfkit.advisor import ASSUMPTIONS
from perfkit.specs import Hardware

pytestmark = pytest.mark.shared_samples

MSA = sample("wild/msa_kernel_details")
TIMESFORMER = sample("wild/tl_timesformer_h100")
EFF = ASSUMPTIONS["kernel_efficiency"]


def _dims(text: str) -> list[list[int]]:
    """A ``kernel_details`` shapes cell, ``"a,b;c,d"``: the shapes of whole numbers only."""
    parts = [p.split(",") for p in text.strip('"').split(";")]
    return [[int(x) for x in p] for p in parts if p and all(x.isdigit() for x in p)]


def _flops(a: list[int], b: list[int]) -> float:
    """2·B·M·K·N of a batched product [B, M, K] × [B, K, N]."""
    return 2.0 * a[0] * a[1] * a[2] * b[2]


def _chains(tasks: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(time less copies, FLOPs) of each bmm ... softmax ... bmm run of ``tasks``, which
    are in stream order with ``bmm``, ``softmax``, ``copy``, ``dur`` and ``shapes``."""
    out = []
    at = [i for i, t in enumerate(tasks) if t["bmm"]]
    for i, j in zip(at, at[1:], strict=False):
        run = tasks[i:j + 1]
        if not any(t["softmax"] for t in run) or j - i > 6:
            continue
        a, b = tasks[i]["shapes"][:2]
        c, d = tasks[j]["shapes"][:2]
        if not (len(a) == len(b) == 3 and a[2] == b[1] and c[2] == d[1]):
            continue
        out.append((sum(t["dur"] for t in run if not t["copy"]),
                    _flops(a, b) + _flops(c, d)))
    return out


def _msa_expected() -> float:
    with open(MSA / "kernel_details.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    rows.sort(key=lambda r: (r["Stream ID"], float(r["Start Time(us)"])))
    tasks = [{"bmm": r["Type"] == "BatchMatMul", "softmax": "Softmax" in r["Type"],
              "copy": r["Type"] in ("AsStrided", "TensorMove"),
              "dur": float(r["Duration(us)"]), "shapes": _dims(r["Input Shapes"])}
             for r in rows]
    chains = _chains(tasks)
    assert len(chains) == 2
    peak = Hardware.preset("ascend-910b").peak("fp16")  # the inputs are FLOAT16
    return sum(t - f / (EFF * peak) * 1e6 for t, f in chains)


def _timesformer_expected() -> float:
    with gzip.open(TIMESFORMER / "timesformer.json.gz", "rt") as f:
        events = json.load(f)["traceEvents"]
    ops = {e["args"]["External id"]: e for e in events
           if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    kernels = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy",
                                                             "gpu_memset")),
                     key=lambda e: (e["args"].get("stream", -1), e["ts"]))
    tasks = []
    for e in kernels:
        op = ops.get(e["args"].get("External id"), {})
        name = op.get("name", "")
        tasks.append({"bmm": name == "aten::bmm", "softmax": "softmax" in name,
                      "copy": name in ("aten::copy_", "aten::clone", "aten::contiguous"),
                      "dur": float(e["dur"]),
                      "shapes": op.get("args", {}).get("Input Dims", [])})
    chains = _chains(tasks)
    assert len(chains) == 24
    assert all(re.search("BFloat16", str(o["args"].get("Input type")))
               for o in ops.values() if o["name"] == "aten::bmm")
    peak = Hardware.preset("h100").peak("bf16")
    return sum(t - f / (EFF * peak) * 1e6 for t, f in chains)


@pytest.mark.parametrize("path, expected", [
    (MSA, _msa_expected), (TIMESFORMER / "timesformer.json.gz", _timesformer_expected)],
    ids=["msa_kernel_details", "tl_timesformer_h100"])
def test_tab_and_advisor_give_one_attention_saving(path: Any, expected: Any) -> None:
    want = expected()
    prof = pk.load(path)
    table = A.unfused_savings(prof)  # what the Operators tab shows
    row = table[table["pattern"] == "softmax_dropout_matmul"]
    assert len(row) == 1
    assert float(row["saving_us"].iloc[0]) == pytest.approx(want, rel=1e-6)
    assert "roofline" in str(row["saving_rule"].iloc[0])
    (finding,) = [f for f in pk.advise(prof) if f.rule == "attention_not_fused"]
    steps = len(A.step_breakdown(prof))
    assert finding.ms_per_step * 1e3 * steps == pytest.approx(want, rel=1e-6)
    # the other patterns keep their rule, said as such
    other = table[table["pattern"] == "copies"]
    assert (other["saving_us"] == other["total_us"]).all()
    assert (other["saving_rule"] == "tasks go away").all()


def test_tab_html_says_how_each_saving_is_estimated() -> None:
    from perfkit.widgets.tabs.base import ALL_RANKS
    from perfkit.widgets.tabs.operators import OperatorsTab

    chains = pk.analysis.unfused_savings(pk.load(MSA))
    html = "".join(OperatorsTab._unfused(None, chains, ALL_RANKS))  # type: ignore[arg-type]
    row = html[html.index("<td class='pk-text'>softmax_dropout_matmul</td>"):]
    shown = float(re.findall(r"<td>([0-9.,]+)</td>", row)[0].replace(",", ""))
    assert shown == pytest.approx(_msa_expected(), abs=0.5)  # shown to 3 digits
    assert "saving assumes" in html
    assert "fused at 70 % of roofline" in html
    assert "the ascend-910b peak" in html
