"""Model, parallel-configuration and hardware descriptions.

Three frozen dataclasses feed every calculator:

* :class:`ModelSpec` — the shape of a decoder-only transformer (GPT or Llama style,
  GQA, gated MLP, optional MoE, tied or untied embeddings), with an exact parameter count
  (:mod:`~perfkit.specs.model`; config readers in :mod:`~perfkit.specs.model_config`, FFN
  size rules in :mod:`~perfkit.specs.ffn`).
* :class:`ParallelConfig` — dp / tp / pp / vpp, micro-batching, sequence parallel,
  optimizer sharding, ZeRO stage and recompute; it checks its own rules
  (:mod:`~perfkit.specs.parallel`).
* :class:`Hardware` — peak FLOP/s per dtype, memory and link bandwidths of one device
  (:mod:`~perfkit.specs.hardware`).

Presets are data tables with their sources: :mod:`~perfkit.specs.model_presets` (sources in
comments) and :mod:`~perfkit.specs.hardware_presets` (one row per device with a ``source``
field); a user can always build their own.
"""

# Besides __all__, the module-level names of the former perfkit/specs.py stay importable
# from here (the ``X as X`` imports).
from .ffn import llama_ffn_hidden_size, mindformers_ffn_hidden_size
from .hardware import Hardware
from .hardware_presets import ALIASES as _HW_ALIASES  # noqa: F401 - the former name
from .hardware_presets import GB as GB
from .hardware_presets import GIB as GIB
from .hardware_presets import TB as TB
from .model import BIAS_KINDS as BIAS_KINDS
from .model import MLP_KINDS as MLP_KINDS
from .model import NORM_KINDS as NORM_KINDS
from .model import POSITION_KINDS as POSITION_KINDS
from .model import ModelSpec
from .model_config import _GATED_HF_TYPES as _GATED_HF_TYPES
from .model_config import _UNTIED_HF_TYPES as _UNTIED_HF_TYPES
from .model_config import _WHOLE_FIELDS as _WHOLE_FIELDS
from .node import Node
from .parallel import RECOMPUTE_KINDS as RECOMPUTE_KINDS
from .parallel import ParallelConfig

__all__ = ["ModelSpec", "ParallelConfig", "Hardware", "Node", "mindformers_ffn_hidden_size",
           "llama_ffn_hidden_size"]
