"""What the operators' input shapes say about the model that ran.

With ``record_shapes=True`` (torch_npu, Kineto) or always (Ascend ``kernel_details.csv``
from Level0 on, MindSpore's CPU ``cpu_framework`` file) every operator's input shapes are
in the profile. A transformer leaves a recognisable pattern in them:

* the **attention** kernels (``FlashAttentionScore`` in the layout the profile settles,
  :mod:`~perfkit.analysis.shapes.qkv_layout`: BSH ``b,s,a·d;b,s,g·d;b,s,g·d``, SBH
  ``s,b,a·d;...``, BNSD, BSND or TND; ``scaled_dot_product_attention`` and batched
  ``q·kᵀ`` MatMuls in ``(b, a, s, d)`` layout) give the micro-batch size ``b``, the
  sequence length ``s`` (3-D ``q·kᵀ`` bmm, softmax, ``·v`` bmm: ``s`` and ``d``, with
  ``b`` folded into the heads, :mod:`~perfkit.analysis.shapes.bmm_attention`) and, with
  a 3-D query's softmax statistics ``(b, a, s, 8)`` or the rotary kernels'
  ``(b, s, heads, d)`` inputs, the heads ``a`` and key/value heads ``g``
  held by one rank and the head size ``d``;
* the **projection GEMMs** whose rows are the micro-batch's ``n = b·s`` tokens map one
  width to another: the hidden size ``h`` is on one side of every one of them, the query
  / key-value / fused QKV widths, the FFN width ``f`` and the logits width ``V`` (once
  per micro-batch, before the loss) on the other;
* the **number of layers** is how often the layer's pattern repeats: one backward
  attention kernel per layer and micro-batch (one forward kernel more for each layer
  that is recomputed in full), so ``layers per stage = backward attention kernels per
  step / micro-batches``;
* the **micro-batches per step** are the embedding lookups per step on the first stage;
* a **gated MLP** has two up-projections ``h → f`` before its down-projection
  ``f → h`` in each forward pass, a plain MLP one.

Widths read on one rank are the tensor-parallel shards: the caller multiplies them by
``tp`` (Megatron / MindSpore split the heads, the FFN and the vocabulary over ``tp``).
:func:`read_model` does the reading and returns every value with the sentence that says
where it came from, or the reason it could not be read. It never looks at anything but the
canonical tables.

One module a job: :mod:`~perfkit.analysis.shapes.records` (the operators kept and their
shapes), :mod:`~perfkit.analysis.shapes.bmm_attention` (attention run as 3-D bmm, softmax,
bmm: :func:`bmm_attention`), :mod:`~perfkit.analysis.shapes.qkv_layout` (which layout an
Ascend attention kernel's inputs are in), :mod:`~perfkit.analysis.shapes.operators`
(attention kernels, matrix products and embeddings with their sizes),
:mod:`~perfkit.analysis.shapes.fields`
(batch, hidden size, heads and kinds, :class:`ShapeReading`),
:mod:`~perfkit.analysis.shapes.widths` (FFN and vocabulary widths, bias),
:mod:`~perfkit.analysis.shapes.counts` (layers,
micro-batches, recompute), :mod:`~perfkit.analysis.shapes.model` (:func:`read_model`) and
:mod:`~perfkit.analysis.shapes.reductions` (the all-reduces of activations in a forward
pass, which :mod:`perfkit.job.tp_reductions` reads tp from).
"""

from __future__ import annotations

from .bmm_attention import bmm_attention
from .fields import ShapeReading
from .model import read_model
from .records import ATTENTION_PATTERNS, DTYPE_NAMES, parse_shapes, shape_records

__all__ = ["ShapeReading", "shape_records", "parse_shapes", "read_model", "DTYPE_NAMES",
           "ATTENTION_PATTERNS", "bmm_attention"]
