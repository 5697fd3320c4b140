"""How a layer's saved activations are counted: :class:`ActivationModel` (a convention,
hence a parameter) and the bytes per element of each data type (:data:`ELEMENT_BYTES`).

:mod:`perfkit.calc.activation` counts the bytes with it, under the published conventions,
and re-exports both names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import (
    InvalidArgumentError,
    check_choice,
    check_non_negative,
    check_positive,
)
from ..specs._fields import optional

__all__ = ["ELEMENT_BYTES", "ActivationModel"]

#: Bytes per element of a layer's saved tensors in a run of each data type
#: (:attr:`ActivationModel.element_bytes`).
ELEMENT_BYTES: dict[str, float] = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0,
                                   "fp8": 2.0}


@dataclass(frozen=True)
class ActivationModel:
    """How activation bytes per layer are counted (a convention, hence a parameter).

    Parameters
    ----------
    accounting : {"table", "tensors"}
        ``"table"`` (default): the seed's dynamic-memory table (Korthikanti et al. 2022,
        Table 2) as printed — a GPT layer with MHA, ``4h`` MLP and dropout, whatever the
        model. ``"tensors"``: the same tensor-by-tensor accounting generalised to the
        model: GQA (K and V are ``2sbh/q`` each), the MLP width ``f`` and gated MLPs
        (gate, up, activation and product outputs: ``8sbf``), dropout on or off, norm
        input bytes, flash attention. For a GPT layer with dropout it equals the table.
    flash_attention : bool
        ``"tensors"`` only: no ``s²`` tensors are kept (flash attention recomputes them);
        the softmax statistics are, counted as one fp32 value per head and token
        (``4·a·s·b`` bytes; Ascend's FlashAttentionScore is reported to keep more, still
        about 1 % of a Llama layer).
    dropout : bool, optional
        ``"tensors"`` only: dropout masks and outputs; default True for GPT MLPs and
        False for gated ones (Llama has none).
    norm_bytes : float
        ``"tensors"`` only: bytes per element of each norm's saved input (2; 4 when the
        norm computes in fp32 after a Cast, as MindFormers' RmsNorm does).
    selective : tuple of {"attention_core", "mlp_activation"}
        What ``recompute="selective"`` drops: the attention core's ``s²`` tensors
        (Korthikanti's selective recompute) and/or the MLP activation outputs (the seed's
        SiLU/Mul ``select_recompute``). ``"table"`` supports only the first.
    element_bytes : float
        ``"tensors"`` only: bytes per element of the tensors a layer keeps (2 in a 16-bit
        run, the table's; 4 in an fp32 run). The norm inputs keep ``norm_bytes``, a
        dropout mask 1 byte per element and flash attention's softmax statistics 4,
        whatever the run's type. ``"table"`` is the printed 16-bit table: 2 only.
    unfused_norm, unfused_rotary : bool
        ``"tensors"`` only: the norm is separate operators (``x·rsqrt(mean x² + ε)·w``),
        whose weight multiply keeps ``x·rsqrt(…)`` too: ``norm_bytes`` more per element
        and norm; rotary embedding by separate operators makes new Q and K that the
        attention keeps: ``2e·(a + g)·d/h`` more per ``s·b·h`` (RoPE models).
    input_bytes : float, optional
        ``"tensors"`` only: bytes per element of a layer's input (the residual stream),
        what a fully recomputed layer keeps; default ``element_bytes``. 4 under PyTorch
        autocast, whose fp32 embedding output and residual additions stay fp32.
    logits_bytes : float
        ``"tensors"`` only: bytes per logit the last stage holds at its loss, one
        micro-batch, with its final norm's and output layer's inputs
        (:mod:`perfkit.calc.activation_output`). 0 (default): left out, as the tables
        leave it; 10 for ``F.cross_entropy`` under bf16 autocast (logits 2, fp32 copy 4,
        fp32 log-softmax 4).

    Under ``convention="llm-analysis"`` only ``flash_attention``, ``dropout`` (there:
    softmax dropout) and ``norm_bytes`` are read; :meth:`llm_analysis` gives that tool's
    defaults.
    """

    accounting: str = "table"
    flash_attention: bool = False
    dropout: bool | None = None
    norm_bytes: float = 2.0
    selective: tuple[str, ...] = ("attention_core",)
    element_bytes: float = optional(2.0)  # left out of saved settings while 2 (16-bit)
    unfused_norm: bool = optional(False)
    unfused_rotary: bool = optional(False)
    input_bytes: float | None = optional(None)
    logits_bytes: float = optional(0.0)

    def __post_init__(self) -> None:
        check_choice("accounting", self.accounting, ("table", "tensors"))
        check_non_negative("norm_bytes", self.norm_bytes)
        check_positive("element_bytes", self.element_bytes)
        if self.accounting == "table" and self.element_bytes != 2.0:
            raise InvalidArgumentError("element_bytes", "the 'table' accounting is the "
                                       "printed 16-bit table; use accounting='tensors'",
                                       self.element_bytes)
        check_non_negative("logits_bytes", self.logits_bytes)
        if self.input_bytes is not None:
            check_positive("input_bytes", self.input_bytes)
        if self.accounting == "table" and (self.unfused_norm or self.unfused_rotary
                                           or self.input_bytes is not None
                                           or self.logits_bytes):
            raise InvalidArgumentError("accounting", "unfused operators, the layer input's "
                                       "and the logits' bytes are counted tensor by tensor; "
                                       "use accounting='tensors'", self.accounting)
        parts = tuple(self.selective)
        for part in parts:
            check_choice("selective", part, ("attention_core", "mlp_activation"))
        if self.accounting == "table" and parts != ("attention_core",):
            raise InvalidArgumentError("selective", "the 'table' accounting only knows "
                                       "('attention_core',); use accounting='tensors'", parts)
        object.__setattr__(self, "selective", parts)

    def in_dtype(self, dtype: str | None) -> ActivationModel:
        """This accounting for a run whose tensors are of ``dtype``.

        ``"fp32"`` and ``"tf32"`` (fp32 tensors, TF32 matrix units) keep 4 bytes per
        element, the 16-bit types and ``"fp8"`` (whose activations are kept in 16 bits)
        2 (:data:`ELEMENT_BYTES`). Unchanged for None, another type, and the printed
        table (16-bit only): what the planner applies when it is asked for another type
        than the calibrating run's.
        """
        nbytes = ELEMENT_BYTES.get(dtype or "")
        if nbytes is None or self.accounting == "table" or nbytes == self.element_bytes:
            return self
        return replace(self, element_bytes=nbytes)

    @property
    def recomputes_attention_core(self) -> bool:
        """Whether selective recompute under this accounting runs the attention core again
        (``"attention_core"`` in ``selective``): the one selective recompute that adds
        matrix FLOPs (:func:`perfkit.hardware_flops`'s ``selective_core``). With flash
        attention too: Megatron-LM checkpoints the core attention (Transformer Engine's
        ``checkpoint_core_attention``) and runs the fused kernel's forward again in the
        backward, which the step model times (``sel_core``). HFU left those FLOPs out under
        flash, so a step charged 12 % for the rerun read HFU = MFU (Llama2-7B at 32k
        tokens: 0.490 for 0.554)."""
        return "attention_core" in self.selective

    @property
    def selective_flops_note(self) -> str:
        """How HFU counts a selectively recomputed layer under this accounting, in words
        (for a page's formula column)."""
        if self.recomputes_attention_core:
            fused = "fused " if self.flash_attention else ""
            return f"selective counted strictly ({fused}attention core re-run)"
        what = "fused attention" if self.flash_attention else "MLP activation only"
        return f"selective adds no matrix FLOPs ({what})"

    @classmethod
    def mindformers(cls) -> ActivationModel:
        """MindFormers Llama defaults: flash attention, no dropout, fp32 norm inputs,
        selective recompute of the SiLU and Mul outputs (the seed's Llama2 cases)."""
        return cls("tensors", flash_attention=True, dropout=False, norm_bytes=4.0,
                   selective=("mlp_activation",))

    @classmethod
    def llm_analysis(cls) -> ActivationModel:
        """llm-analysis 0.2.2's ``training()`` defaults: ``flash_attn=True``,
        ``softmax_dropout=False``, ``layernorm_dtype_bytes=4`` (for
        ``convention="llm-analysis"``)."""
        return cls("tensors", flash_attention=True, dropout=False, norm_bytes=4.0)
