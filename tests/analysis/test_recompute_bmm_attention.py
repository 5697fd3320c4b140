"""Recompute evidence where attention runs as batched products (bmm, softmax, bmm).

The recorded CPU training trace ``tests/data/kineto_bmm_attention_cpu`` (its script:
``tools/make_kineto_bmm_attention.py``) runs each layer's attention as ``aten::bmm``,
``aten::softmax``, ``aten::bmm`` forward and autograd's two ``BmmBackward0`` around a
``SoftmaxBackward0`` (``aten::_softmax_backward_data``) backward. The passes are counted
here by hand from the raw json, per ``ProfilerStep``, and from the script's own model
(its layers, one forward per step, no activation checkpointing). A second trace, written
in ``tmp_path``, re-runs the first layer's forward chain (as activation checkpointing
does before that layer's backward): one recomputed layer, counted as such. The wild
samples whose attention chains are forward only say so.
"""

from __future__ import annotations

import ast
import csv
import gzip
import json
import math
import re
from html import unescape
from pathlib import Path

import pytest
from shared_samples import shared_sample

import perfkit as pk
from perfkit.analysis import recompute_evidence

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "tests" / "data" / "kineto_bmm_attention_cpu"
TRACE = FOLDER / "bmm_attention.pt.trace.json.gz"
SCRIPT = ROOT / "tools" / "make_kineto_bmm_attention.py"
_TAGS = re.compile(r"<[^>]+>")


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


def _dims(e: dict) -> list[list[int]]:
    return [d for d in e["args"]["Input Dims"] if d]


def _raw_passes(events: list[dict]) -> dict[str, tuple[int, int]]:
    """Per ``ProfilerStep``: (forward, backward) attention passes, counted by hand.

    Forward: on each thread, in start order among the ``aten::bmm`` and ``aten::softmax``
    operators, a ``(N, S, d) x (N, d, S)`` bmm, a softmax of ``N·S·S`` values, a ``(N, S, S)
    x (N, S, d)`` bmm. Backward: each ``aten::_softmax_backward_data``."""
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    out = {}
    for step in (e for e in events if e["name"].startswith("ProfilerStep#")):
        inside = [e for e in ops if step["ts"] <= e["ts"] <= step["ts"] + step["dur"]]
        forward = 0
        for tid in {e["tid"] for e in inside}:
            seq = sorted((e for e in inside if e["tid"] == tid
                          and e["name"] in ("aten::bmm", "aten::softmax")),
                         key=lambda e: e["ts"])
            for a, b, c in zip(seq, seq[1:], seq[2:], strict=False):
                if [a["name"], b["name"], c["name"]] != ["aten::bmm", "aten::softmax",
                                                         "aten::bmm"]:
                    continue
                (n, s, d), (n2, d2, s2) = _dims(a)
                if (n2, d2, s2) == (n, d, s) and math.prod(_dims(b)[0]) == n * s * s and \
                        _dims(c) == [[n, s, s], [n, s, d]]:
                    forward += 1
        backward = sum(e["name"] == "aten::_softmax_backward_data" for e in inside)
        out[step["name"]] = (forward, backward)
    return out


def _script_model() -> tuple[int, int, bool]:
    """The recording script's layers, forwards per profiled step, and whether it uses
    activation checkpointing, read from its source."""
    text = SCRIPT.read_text(encoding="utf-8")
    tree = ast.parse(text)
    layers = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            names = [t.id for t in node.targets[0].elts]
            if "LAYERS" in names:
                layers = ast.literal_eval(node.value.elts[names.index("LAYERS")])
    # the loop runs one forward (``model(x)``) and one ``loss.backward()`` per prof.step()
    loop = text[text.index("for _ in range("):]
    loop = loop[:loop.index("prof.step()")]
    return layers, loop.count("model(x)"), "checkpoint" in text


def test_bmm_attention_passes_are_counted_as_the_raw_trace_and_the_script_say() -> None:
    raw = _raw_passes(_events(TRACE))
    layers, micro_batches, checkpointing = _script_model()
    assert layers == 2 and micro_batches == 1 and not checkpointing
    assert raw == {"ProfilerStep#2": (layers * micro_batches, layers * micro_batches)}
    seen = recompute_evidence(pk.load(FOLDER, cache=False, progress=False))
    assert len(seen) == 1, seen.attrs.get("notes")
    row = seen.iloc[0]
    fwd, bwd = raw["ProfilerStep#2"]
    assert (row["forward"], row["backward"]) == (fwd, bwd)
    assert row["forward"] - row["backward"] == 0  # no layer recomputed
    assert row["ratio"] == pytest.approx(fwd / bwd) and row["recompute"] == "none"
    assert row["recompute_share"] == pytest.approx(0.0)


def _with_rerun(events: list[dict]) -> list[dict]:
    """``events`` with the first layer's forward chain run again on another thread, at the
    start of the backward (as activation checkpointing re-runs it): every operator on the
    thread from the first ``aten::matmul`` before a softmax to the end of the one after."""
    ops = sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    soft = next(e for e in ops if e["name"] == "aten::softmax")
    first = max((e for e in ops if e["name"] == "aten::matmul" and e["ts"] < soft["ts"]),
                key=lambda e: e["ts"])
    last = min((e for e in ops if e["name"] == "aten::matmul" and e["ts"] > soft["ts"]),
               key=lambda e: e["ts"])
    span = [e for e in ops if e["tid"] == first["tid"]
            and first["ts"] <= e["ts"] <= last["ts"] + last["dur"]]
    to = next(e for e in ops if e["name"] == "BmmBackward0")["ts"] - 50.0
    tid = first["tid"] + 1
    copies = [{**e, "tid": tid, "ts": e["ts"] - first["ts"] + to, "args": dict(e["args"])}
              for e in span]
    return events + copies


def test_a_forward_chain_run_again_is_a_recomputed_layer(tmp_path: Path) -> None:
    events = _with_rerun(_events(TRACE))
    folder = tmp_path / "rerun"
    folder.mkdir()
    with gzip.open(folder / "rerun.pt.trace.json.gz", "wt", encoding="utf-8") as fh:
        json.dump({"traceEvents": events}, fh)
    raw = _raw_passes(events)
    layers, micro_batches, _ = _script_model()
    assert raw == {"ProfilerStep#2": (layers * micro_batches + 1, layers * micro_batches)}
    (fwd, bwd), = raw.values()
    seen = recompute_evidence(pk.load(folder, cache=False, progress=False))
    assert len(seen) == 1, seen.attrs.get("notes")
    row = seen.iloc[0]
    assert (row["forward"], row["backward"]) == (fwd, bwd)
    assert row["forward"] - row["backward"] == 1  # the one layer recomputed
    assert row["ratio"] == pytest.approx(fwd / bwd)
    assert row["recompute"] == "partial"  # 1.2 < 3/2 < 1.8
    assert row["recompute_share"] == pytest.approx((fwd / bwd - 1) / (fwd / bwd + 2))


def test_the_recompute_tab_shows_the_bmm_passes() -> None:
    from widget_html import panel_html

    from perfkit.widgets import dashboard

    fwd, bwd = _raw_passes(_events(TRACE))["ProfilerStep#2"]
    board = dashboard(str(FOLDER), background_bytes=None)
    board.select("Recompute")
    html = re.sub(r"<style>.*?</style>", "", panel_html(board.panels["Recompute"]),
                  flags=re.S)
    text = re.sub(r"\s+", " ", unescape(_TAGS.sub(" ", html)))
    assert "no device tasks" not in text and "no attention task" not in text
    assert "attention passes forward, median" in text
    assert "attention passes backward, median" in text
    assert re.search(rf"\bnone\b.*\b{fwd}\b.*\b{bwd}\b", text)


@pytest.mark.shared_samples
def test_forward_only_bmm_attention_says_so() -> None:
    """``wild/msa_kernel_details`` (Ascend ``BatchMatMul`` chains, no backward task) and
    ``wild/tl_timesformer_h100`` (PyTorch, a forward pass only): no pair to compare,
    with the reason."""
    folder = shared_sample("wild/msa_kernel_details")
    with open(folder / "kernel_details.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    forward = 0
    for stream in {r["Stream ID"] for r in rows}:
        kinds = [r["Type"] for r in sorted((r for r in rows if r["Stream ID"] == stream),
                                           key=lambda r: float(r["Start Time(us)"]))
                 if r["Type"] in ("BatchMatMul", "ScaledMaskedSoftmax")]
        forward += sum(kinds[i - 1:i + 2] == ["BatchMatMul", "ScaledMaskedSoftmax",
                                              "BatchMatMul"] for i in range(1, len(kinds)))
    backward = sum("grad" in r["Type"].lower() or "backward" in r["Type"].lower()
                   for r in rows)
    assert forward > 0 and backward == 0
    msa = recompute_evidence(pk.load(folder, cache=False, progress=False))
    assert msa.empty
    notes = " ".join(msa.attrs.get("notes", []))
    assert "no attention task" not in notes
    assert (f"attention passes of only one direction ({forward:,} forward, {backward:,} "
            "backward)") in notes
    tsf = recompute_evidence(pk.load(shared_sample("wild/tl_timesformer_h100"),
                                     cache=False, progress=False))
    assert tsf.empty
    assert "no backward kernels" in " ".join(tsf.attrs.get("notes", []))
