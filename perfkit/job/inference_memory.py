"""The memory theory of an inference step: what the Memory tab, the job's figures and
``perfkit info`` hold against the measured peak of a profile without a backward pass.

A profile that runs no training step (:meth:`perfkit.Job.training_step` False) keeps no
gradients, no optimizer state and no activations for a backward pass, so a training
step's theory (weights + gradients + optimizer + saved activations) overstates its
memory many times. :func:`inference_memory_of` counts the forward-only step instead
(:func:`perfkit.calc.inference_memory.inference_memory`): the weights at the run's
type, the key/value cache and the larger of one layer's working set and the logits,
with the job's model, split, batch, sequence length and type, and from the profile's
operators the rows of logits and their bytes (:data:`perfkit.job.inference.LOGITS_ROWS`,
:data:`~perfkit.job.inference.LOGIT_BYTES`).

The KV cache is counted for a step whose sequences the trace shows (a Hugging Face
forward, whose ``past_key_values`` keep every layer's keys and values to its end), not
for a packed step (vLLM, :func:`perfkit.job.inference_mfu.packed_step`), whose cache is a
pool sized by the server (``gpu_memory_utilization``), not by the step's tokens, and not
in the trace: the words say so.
"""

from __future__ import annotations

from typing import Any

from ..calc.inference_memory import InferenceMemory, element_bytes, inference_memory
from ..errors import InvalidArgumentError
from ..format import bytes_text, counted, number_text
from .inference import LOGIT_BYTES, LOGITS_ROWS
from .inference_mfu import packed_step

__all__ = ["INFERENCE_THEORY", "inference_memory_of", "inference_memory_words"]

#: What the theory of an inference step is called on a page (the label says which theory).
INFERENCE_THEORY = "inference theory (forward only)"


def inference_memory_of(job: Any, parallel: Any = None,
                        dtype: str | None = None) -> InferenceMemory:
    """The forward-only step's memory on the most loaded device for ``job`` (module
    docstring); ``parallel`` and ``dtype`` replace the job's own.

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        Where the job has no model, or its type is not one the calculator knows.
    """
    if job.model is None:
        raise InvalidArgumentError("job", "has no model: the inference theory needs one")
    layout = job.parallel if parallel is None else parallel
    rows = job.observed.get(LOGITS_ROWS, (None, ""))[0]
    logit = job.observed.get(LOGIT_BYTES, (None, ""))[0]
    return inference_memory(job.model, layout, batch=int(layout.micro_batch_size),
                            seq=int(job.model.seq_length), dtype=dtype or job.dtype,
                            kv_cache=not packed_step(job), logits_rows=int(rows or 0),
                            logit_bytes=logit)


def inference_memory_words(job: Any, memory: InferenceMemory, parallel: Any = None,
                           dtype: str | None = None) -> str:
    """How :func:`inference_memory_of` counted ``memory``, in one sentence for a page
    (every term with its figure and where its inputs come from)."""
    layout = job.parallel if parallel is None else parallel
    model = job.model
    kind = dtype or job.dtype or "a 16-bit type"
    e = element_bytes(dtype or job.dtype)
    b, s = int(layout.micro_batch_size), int(model.seq_length)
    head = ("with the output head" if memory.logits_bytes and not model.tied_embeddings
            else "no output head: the step runs no output layer over the vocabulary"
            if not memory.logits_bytes else "the output head tied to the embedding")
    parts = [f"weights {bytes_text(memory.weights_bytes)} "
             f"({number_text(memory.parameters / 1e6)} M parameters in {kind}, {head})"]
    if memory.kv_cache_bytes:
        parts.append(f"KV cache {bytes_text(memory.kv_cache_bytes)} (2 × "
                     f"{counted(max(layout.layers_per_stage(model)), 'layer')} × "
                     f"{counted(b, 'sequence')} × {s} tokens × "
                     f"{model.kv_width // layout.tp:,} wide × {e:g} B)")
    else:
        parts.append("no KV cache counted (the step packs its tokens: the server's cache "
                     "pool is sized apart from the step and not in the trace)")
    gated = "3" if model.mlp == "gated" else "2"
    layer = (f"one layer's working set {bytes_text(memory.layer_bytes)} ({b * s:,} tokens "
             f"× the larger of attention 2·h + 2·q and MLP 3·h + {gated}·f elements)")
    if memory.logits_bytes:
        rows = int(job.observed.get(LOGITS_ROWS, (0, ""))[0] or 0)
        logit = memory.logits_bytes
        width = (f"{model.vocab_size // layout.tp:,} (the vocabulary over tp {layout.tp})"
                 if layout.tp > 1 else f"{model.vocab_size:,}")
        logits = (f"the logits {bytes_text(logit)} ({counted(rows, 'row')} × {width}, "
                  f"{job.observed.get(LOGIT_BYTES, (e, 'the run type'))[1]})")
        parts.append(f"the larger of {layer} and {logits}")
    else:
        parts.append(layer)
    return ("weights + KV cache + the step's largest transient, no gradients, optimizer "
            "state nor saved activations: " + " + ".join(parts))
