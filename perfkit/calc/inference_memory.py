"""Memory of a forward-only step (inference or evaluation) on the most loaded device.

A step without a backward pass keeps no gradients, no optimizer state and no activations
for a backward: under ``torch.no_grad``/``torch.inference_mode`` each layer's
intermediate tensors are freed as soon as the next one no longer needs them. What the
device holds at the step's peak is then

``M = W + KV + max(layer working set, logits)``

* ``W = N · e`` — the weights at the run's element size ``e`` (2 bytes in bf16/fp16,
  4 in fp32), ``N`` the parameters of the most loaded pipeline stage, split ``tp`` ways
  (:func:`perfkit.calc.memory.stage_parameters`). The output head counts only where the
  step runs one over the vocabulary and it is not tied to the embedding
  (``output_head``): a model loaded without its head (Hugging Face ``AutoModel``) holds
  none.
* ``KV = 2 · L · b · s · (g·d / tp) · e`` — the key/value cache a causal LM's forward
  returns (Hugging Face's ``past_key_values`` when ``use_cache``, the default of their
  configs): the keys and values of every layer of the stage (``L``), every sequence
  (``b``) and token (``s``), ``g`` key/value heads of ``d`` each. They stay allocated
  until the step ends. ``kv_cache=False`` for a forward that returns none (an encoder,
  ``use_cache=False``), or a server whose cache is a pool sized apart from the step
  (vLLM's ``gpu_memory_utilization``).
* the working set of one layer, per token, the larger of its two steps, with
  ``T = b·s`` tokens, ``q = a·d`` the query width, ``f`` the MLP width (``k·f_e`` plus
  the shared experts' width for a mixture of experts; ``q``, ``kv`` and ``f`` split
  ``tp`` ways):

  - attention: the layer's input (which the caller still holds) and its normed copy,
    the query projection and the attention output, ``2·h + 2·q`` (plus ``2·kv`` for
    the keys and values when no cache already counts them);
  - MLP: the layer's input, the residual after attention and its normed copy, and the
    MLP's intermediates — gated (SwiGLU): ``act(gate)``, ``up`` and their product,
    ``3·f``; otherwise the first projection and its activation, ``2·f``:
    ``3·h + 3·f`` or ``3·h + 2·f``;

  ``T · max(attention, MLP) · e`` bytes. Activations of earlier layers are gone.
* the logits, after the last layer, so in place of a layer's working set, not on top:
  ``R · (V / tp) · c + R · h · e`` for ``R`` rows of logits at ``c`` bytes each (the
  output layer's type; a Hugging Face model that upcasts its logits to fp32 holds the
  16-bit logits and their fp32 copy at once, ``c = 2 + 4``) and the hidden states the
  head reads. 0 where the step runs no output layer.

Sources: the static terms are the training schemes' weights alone
(:mod:`perfkit.calc.memory`); the KV cache's size is
``2 · layers · batch · sequence · kv_heads · head_dim · bytes``: Hugging Face
transformers' ``DynamicCache.update`` (``src/transformers/cache_utils.py``) appends one key
and one value tensor ``(b, g, s, d)`` per layer and keeps them (the Qwen trace below
records that function called once per layer); the working set follows
the tensors Hugging Face's eager decoder layer (``Qwen2DecoderLayer``, ``LlamaMLP``:
``down_proj(act_fn(gate_proj(x)) * up_proj(x))``) holds. Checked against the allocator's
peak of a Qwen1.5-0.5B-Chat forward on an H100 (AMD-AGI/TraceLens' test trace,
``tests/test_inference_memory.py``): the theory is 96 % of the measured peak, the
rest held before the step began (54 MiB beyond the weights: among them cuBLAS's
workspace, which PyTorch allocates through its caching allocator, and what the warm-up
steps left) and the embedding output the model's forward keeps to its end (one ``b·s·h``
tensor). The CUDA context is not in
the allocator's figures, so neither side counts it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..errors import InvalidArgumentError, check_non_negative
from ..specs import ModelSpec, ParallelConfig
from .memory import stage_parameters

__all__ = ["InferenceMemory", "ELEMENT_BYTES", "element_bytes", "kv_cache_bytes",
           "layer_working_bytes", "logits_working_bytes", "inference_memory"]

#: Bytes per element of the run's types (weights, activations, cache).
ELEMENT_BYTES = {"fp32": 4.0, "tf32": 4.0, "hf32": 4.0, "bf16": 2.0, "fp16": 2.0,
                 "fp8": 1.0, "int8": 1.0}


def element_bytes(dtype: str | None) -> float:
    """Bytes per element of the run's type ``dtype`` (:data:`ELEMENT_BYTES`); 2 (a 16-bit
    run) where it is None."""
    if dtype is None:
        return 2.0
    key = str(dtype).lower()
    if key not in ELEMENT_BYTES:
        raise InvalidArgumentError("dtype", f"must be one of {', '.join(ELEMENT_BYTES)}",
                                   dtype)
    return ELEMENT_BYTES[key]


@dataclass(frozen=True)
class InferenceMemory:
    """Memory of a forward-only step on the most loaded device, in bytes (module docstring).

    ``parameters`` (the stage's, split ``tp`` ways), ``weights_bytes``,
    ``kv_cache_bytes``, ``layer_bytes`` (one layer's working set), ``logits_bytes``
    (the logits and the head's input; 0 without an output layer), ``working_bytes``
    (the larger of the two) and ``total_bytes`` (weights + cache + working set).
    """

    parameters: float
    weights_bytes: float
    kv_cache_bytes: float
    layer_bytes: float
    logits_bytes: float

    @property
    def working_bytes(self) -> float:
        """The step's transient peak: one layer's working set or the logits, the larger."""
        return max(self.layer_bytes, self.logits_bytes)

    @property
    def total_bytes(self) -> float:
        """``weights + KV cache + max(layer working set, logits)``."""
        return self.weights_bytes + self.kv_cache_bytes + self.working_bytes

    def to_frame(self) -> pd.DataFrame:
        """One row per component (``weights``, ``KV cache``, and the working set named by
        what it is: ``one layer's working set`` or ``logits``), with ``bytes`` and
        ``GiB``."""
        working = "logits" if self.logits_bytes > self.layer_bytes else \
            "one layer's working set"
        rows = {"weights": self.weights_bytes, "KV cache": self.kv_cache_bytes,
                working: self.working_bytes}
        frame = pd.DataFrame({"component": list(rows),
                              "bytes": [float(v) for v in rows.values()]})
        frame["GiB"] = frame["bytes"] / 2**30
        return frame


def _mlp_width(model: ModelSpec) -> int:
    """Intermediate width a token goes through: ``f``, or ``k·f_e`` plus the shared
    experts' width for a mixture of experts."""
    if not model.is_moe:
        return model.ffn_hidden_size
    return model.moe_top_k * model.moe_ffn_hidden_size \
        + model.num_shared_experts * model.shared_ffn_hidden_size


def _tokens(batch: int, seq: int) -> int:
    for name, value in (("batch", batch), ("seq", seq)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(name, "must be an integer of at least 1", value)
    return batch * seq


def kv_cache_bytes(model: ModelSpec, batch: int, seq: int, element: float = 2.0,
                   tp: int = 1, layers: int | None = None) -> float:
    """``2 · L · b · s · (g·d / tp) · e``: the keys and values of ``layers`` layers
    (default all of the model's), ``batch`` sequences of ``seq`` tokens, ``g·d`` the
    key/value width (:attr:`~perfkit.ModelSpec.kv_width`), split ``tp`` ways.

    Hugging Face ``DynamicCache.update``: one key and one value tensor per layer (module
    docstring).
    """
    tokens = _tokens(batch, seq)
    n = model.num_layers if layers is None else layers
    return 2.0 * n * tokens * model.kv_width / tp * check_non_negative("element", element)


def layer_working_bytes(model: ModelSpec, batch: int, seq: int, element: float = 2.0,
                        tp: int = 1, kv_cache: bool = True) -> tuple[float, float]:
    """The working set of one layer's forward as (attention step, MLP step), in bytes.

    ``T · (2·h + 2·q [+ 2·kv without a cache]) · e`` and ``T · (3·h + (3 if gated else
    2)·f) · e`` with ``T = b·s`` and ``q``, ``kv``, ``f`` split ``tp`` ways (module
    docstring).
    """
    tokens = _tokens(batch, seq)
    e = check_non_negative("element", element)
    h = model.hidden_size
    q, kv, f = model.attention_width / tp, model.kv_width / tp, _mlp_width(model) / tp
    attention = 2.0 * h + 2.0 * q + (0.0 if kv_cache else 2.0 * kv)
    mlp = 3.0 * h + (3.0 if model.mlp == "gated" else 2.0) * f
    return tokens * attention * e, tokens * mlp * e


def logits_working_bytes(model: ModelSpec, rows: int, logit_bytes: float,
                         element: float = 2.0, tp: int = 1) -> float:
    """``R · (V / tp) · c + R · h · e``: ``rows`` rows of logits at ``logit_bytes`` each
    and the hidden states the output layer reads; 0 for no rows."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise InvalidArgumentError("rows", "must be an integer of at least 0", rows)
    c = check_non_negative("logit_bytes", logit_bytes)
    return rows * (model.vocab_size / tp * c + model.hidden_size
                   * check_non_negative("element", element))


def inference_memory(model: ModelSpec, parallel: ParallelConfig, *, batch: int | None = None,
                     seq: int | None = None, dtype: str | None = None,
                     kv_cache: bool = True, logits_rows: int = 0,
                     logit_bytes: float | None = None,
                     output_head: bool | None = None) -> InferenceMemory:
    """Memory of a forward-only step on the most loaded device (module docstring).

    Parameters
    ----------
    model : ModelSpec
    parallel : ParallelConfig
        ``tp`` splits the weights, the cache and the widths; ``pp`` the layers (the
        fullest stage counts, :func:`perfkit.calc.memory.stage_parameters`).
    batch, seq : int, optional
        Sequences in the step and their length; default the micro-batch size and the
        model's ``seq_length``.
    dtype : str, optional
        The run's type (:data:`ELEMENT_BYTES`); default a 16-bit run.
    kv_cache : bool
        Whether the forward keeps a key/value cache (default True, a causal LM's).
    logits_rows : int
        Rows the output layer turns into logits (0: the step runs no output layer).
    logit_bytes : float, optional
        Bytes held per logit; default the element size (no upcast).
    output_head : bool, optional
        Whether the device holds an untied output head; default: when the step computes
        logits (``logits_rows > 0``).

    Returns
    -------
    InferenceMemory
    """
    if not isinstance(model, ModelSpec):
        raise InvalidArgumentError("model", "must be a ModelSpec", type(model).__name__)
    if not isinstance(parallel, ParallelConfig):
        raise InvalidArgumentError("parallel", "must be a ParallelConfig",
                                   type(parallel).__name__)
    b = parallel.micro_batch_size if batch is None else batch
    s = model.seq_length if seq is None else seq
    e = element_bytes(dtype)
    c = e if logit_bytes is None else logit_bytes
    head = logits_rows > 0 if output_head is None else bool(output_head)
    stages = stage_parameters(model, parallel)
    layers = parallel.layers_per_stage(model)
    if not head and not model.tied_embeddings:
        # stage_parameters gives the last stage the output head: a model without one
        # holds none
        stages[-1] = dict(stages[-1], total=stages[-1]["total"]
                          - model.parameter_breakdown()["output"] / parallel.tp)
    fullest = max(range(len(stages)), key=lambda i: stages[i]["total"])
    n = stages[fullest]["total"]
    cache = kv_cache_bytes(model, b, s, e, parallel.tp, max(layers)) if kv_cache else 0.0
    layer = max(layer_working_bytes(model, b, s, e, parallel.tp, kv_cache))
    logits = logits_working_bytes(model, logits_rows, c, e, parallel.tp)
    return InferenceMemory(n, n * e, cache, layer, logits)
