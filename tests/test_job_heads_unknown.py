"""A model whose attention heads cannot be read is not dropped whole (issue 67 pt 3).

A 4-layer Llama-shaped job simulated here (torch_npu layout): its FlashAttentionScore
takes 3-D (B, S, H) inputs, so the query width shows but not how it splits into heads; the
rotary kernels' ``(b, s, heads, d)`` inputs are what give the heads away. With them
removed from ``kernel_details.csv`` and ``trace_view.json`` (checked below with :mod:`csv`
and :mod:`json`), ``infer_job`` keeps every other field, equal to the simulated model's,
and says why the heads are unknown.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.cli import main

MODEL = pk.ModelSpec(num_layers=4, hidden_size=256, num_attention_heads=8, seq_length=128,
                     vocab_size=1000, ffn_hidden_size=688, num_kv_heads=8, mlp="gated")
PAR = pk.ParallelConfig(micro_batch_size=1, num_micro_batches=1)


def _kernels(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def headless(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = pk.simulate(MODEL, PAR, pk.Hardware.preset("ascend-910b"), steps=2, seed=1,
                      out=tmp_path_factory.mktemp("sim") / "p", aic_metrics=None)
    rank = next(Path(out).iterdir()) / "ASCEND_PROFILER_OUTPUT"
    kd = rank / "kernel_details.csv"
    lines = kd.read_text().splitlines(keepends=True)
    kd.write_text("".join(ln for i, ln in enumerate(lines) if i == 0 or "Rotary" not in ln))
    tv = rank / "trace_view.json"
    events = json.loads(tv.read_text())
    tv.write_text(json.dumps([e for e in events if "Rotary" not in str(e.get("name", ""))]))
    return Path(out)


def test_the_premise(headless: Path) -> None:
    """No kernel left shows the heads: no rotary kernel, and the attention's query is 3-D
    with the hidden width (read with csv)."""
    rows = _kernels(next(headless.rglob("kernel_details.csv")))
    assert not [r for r in rows if "Rotary" in r["Name"]]
    fa = [r for r in rows if r["Type"] == "FlashAttentionScore"]
    assert len(fa) == 2 * MODEL.num_layers  # 4 layers × 2 steps
    query = fa[0]["Input Shapes"].strip('"').split(";")[0]
    assert [int(x) for x in query.split(",")] == [1, MODEL.seq_length, MODEL.hidden_size]


def test_every_other_field_is_kept(headless: Path) -> None:
    job = pk.infer_job(pk.load(headless, cache=False))
    assert job.model is None
    for name in ("num_layers", "hidden_size", "ffn_hidden_size", "vocab_size", "mlp",
                 "seq_length"):
        assert job.value(name) == getattr(MODEL, name), name
        assert job.source(name) == "profile"
    assert job.value("micro_batch_size") == PAR.micro_batch_size
    assert job.value("num_micro_batches") == PAR.num_micro_batches
    for name in ("num_attention_heads", "num_kv_heads", "head_dim"):
        assert job.value(name) is None
        assert "not how it splits into heads" in job.detail(name), job.detail(name)
    kept = job.partial_model()
    assert kept["attention_width"] == MODEL.hidden_size  # 8 heads × 32, read as a width
    assert job.missing_model_fields() == ["num_attention_heads", "num_kv_heads"]
    assert "model read in part (4 layers, h 256, heads unknown, FFN 688 gated, vocab 1000)" \
        in job.describe()
    full = job.with_overrides(num_attention_heads=8, num_kv_heads=8)
    assert full.model == pk.ModelSpec(**{**MODEL.__dict__, "name": full.model.name})


def test_perfkit_info_shows_the_fields_read(headless: Path,
                                            capsys: pytest.CaptureFixture) -> None:
    assert main(["info", str(headless), "--findings", "0"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("model "))
    # in the words info gives a whole model ("hidden 256", not the job line's "h 256")
    assert "read in part: 4 layers, hidden 256, heads unknown, FFN 688 gated, vocab 1000" \
        in line
