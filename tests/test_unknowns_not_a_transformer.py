"""What perfkit could not read, on a profile that is not a transformer: the cause said
once, not once per field.

- ``wild/k_resnet50_nw0`` is a ResNet-50 trained on a V100 (PyTorch 1.9): its trace holds
  convolutions (cuDNN) and no attention kernel, both counted here from the raw file. The
  job says it is no transformer, so that the reader is not sent after a transformer's
  eight fields, which a convolutional network does not have.
- ``gpu/hta-trace_filter`` (HolisticTraceAnalysis's test data) is a recommender
  (fbgemm's embedding kernels): neither attention nor convolution, so every field of a
  transformer's shape is unknown for the same causes; they are said for the three fields
  the others are read after, not for all eight (``perfkit info`` said eight, and the
  attention reason again under the global batch).
"""

from __future__ import annotations

import gzip
import json
import re

import pytest
from shared_samples import HTA, KINETO_TRACES, sample

import perfkit as pk
from perfkit.job.unknowns import unknowns

pytestmark = pytest.mark.shared_samples

ATTENTION = re.compile(r"(?i)attn|attention|flash|sdpa|fmha")
#: cuDNN's convolution kernels in the 2021 trace, as the raw file spells them: the
#: implicit-GEMM and Winograd kernels, and im2col's, whose arguments name a
#: ``cudnnConvolutionStruct``
CUDNN_CONV = re.compile(r"convolve|scudnn|cudnnConvolution")


def _kernel_names(path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    return [e.get("name", "") for e in events if str(e.get("cat", "")).lower() == "kernel"]


def _resnet_job():
    return pk.infer_job(pk.load(sample(KINETO_TRACES["k_resnet50_nw0"]), progress=False))


def test_a_resnet_is_said_to_be_no_transformer() -> None:
    names = _kernel_names(sample(KINETO_TRACES["k_resnet50_nw0"]))
    assert names and not any(ATTENTION.search(n) for n in names)  # no attention at all
    convolutions = sum(1 for n in names if CUDNN_CONV.search(n))
    assert convolutions > 100
    by_field = {u.field: u for u in unknowns(_resnet_job())}
    model = by_field["model"]
    assert model.label == "the model (its whole shape)"
    assert model.why.startswith(f"this is not a transformer ({convolutions} convolutions "
                                "among the device kernels and no attention): ")
    assert "its measured figures (step, operators, timeline, advice) stand" in model.why
    assert "hidden size (" not in model.why  # no transformer's fields, one by one
    batch = by_field["global_batch_size"].why
    assert "micro-batch size is not known (not a transformer, above)" in batch


def test_a_recommender_says_its_whole_shape_is_unknown_once() -> None:
    job = pk.infer_job(pk.load(sample(HTA), progress=False))
    by_field = {u.field: u for u in unknowns(job)}
    model = by_field["model"]
    assert model.label == "the model (its whole shape)"
    assert model.why.startswith("none of its shape could be read from the profile: layers (no "
                                "attention kernel")
    # the three fields the others are read after, each once; not the eight of them
    assert [f for f in ("layers (", "hidden size (", "sequence length (", "FFN size",
                        "vocabulary", "MLP") if f in model.why] == [
        "layers (", "hidden size (", "sequence length ("]
    batch = by_field["global_batch_size"].why
    assert "micro-batch size is not known (as the sequence length, above)" in batch
    assert "FlashAttentionScore" not in batch  # the attention reason, said in the model's


def test_a_model_read_in_part_names_each_missing_field() -> None:
    """Where some of the shape is known (here typed by the user), the fields still missing
    are listed with their own reasons, as before."""
    job = _resnet_job().with_overrides(num_layers=4, hidden_size=256, seq_length=128)
    model = {u.field: u for u in unknowns(job)}["model"]
    assert "its whole shape" not in model.label
    assert "attention heads" in model.label and "layers" not in model.label
    assert model.why.startswith("its shape cannot be read from the profile: ")
    assert "attention heads, key/value heads (no forward attention kernel" in model.why
