"""The fused attention kernel's efficiency by shape: sequence length, head dimension, causal
mask, pass and implementation, fitted to published kernel benchmarks.

A fused attention call (FlashAttention and its kin) does not run like a GEMM of the same
FLOPs: its efficiency rises with the sequence length per call (more key/value tiles per
query tile to amortise the softmax bookkeeping and the pipeline fill), the causal mask
wastes part of the diagonal tiles and leaves fewer tiles per query row, and the backward
runs below the forward. Per implementation, pass, head dimension ``d`` and mask, the
share of the 16-bit peak a call of length ``L`` gets is

    ``e(L) = e_max · L / (L + L½)``

the same hyperbola as the GEMM size curve (:mod:`perfkit.calc.rates`), here in the
sequence length. ``e_max`` and ``L½`` are fitted (least squares of ``1/e`` on ``1/L``,
i.e. on relative error) to the six sequence lengths 512-16k of each published series
(:data:`FA3_PAPER_H100`); between the published head dimensions they are interpolated
linearly in ``log2 d`` and held at the ends. A call whose query and key/value lengths
differ is placed at ``L = sqrt(L_q · L_kv)``, the square call of the same work per head.

Sources and what each case uses
-------------------------------
* **H100-class** (H100, H800, H200, H20: Hopper, which FlashAttention-3 needs), all
  figures of :data:`FA3_PAPER_H100`: Shah et al. 2024, "FlashAttention-3" (arXiv
  2407.08608), Fig. 5 (forward, BF16, head dim 64 / 128 / 256, without and with causal
  mask) and Fig. 6 (backward, BF16, head dim 64 / 128, without mask), H100 80GB SXM5,
  ``batch · L = 16k`` tokens, hidden 2048; the TFLOPs/s printed on the bars, read from the
  transcriptions of those figures on subtext.edge.nugit.net (image pages ``55f47a10``,
  ``9b7cf01f``, ``e27582d2``, ``4ec66909``, ``72bb6693``, ``662fef77``, ``40bf2854``,
  ``f60142e2``). Implementations ``"flash3"`` (FlashAttention-3), ``"flash2"``
  (FlashAttention-2 on the same H100) and ``"cudnn"`` (cuDNN 9 fused attention). FLOPs
  are counted as the paper does: ``4·b·L²·a·d`` forward, halved with the causal mask,
  backward 2.5 times the forward — as :func:`perfkit.calc.flops.layer_forward_flops`.
  Two points are left out of the fit because the two transcriptions disagree on them
  (cuDNN and FlashAttention-3 at 512, head dim 128, no mask: 497 / 467 swapped).
* **Backward with the causal mask** is not published (Fig. 6 has no mask): it is the
  unmasked backward times the forward's masked/unmasked ratio at the same ``L``. The
  backward at head dim 256 is not published either: head dim 128's curve is used.
* **Other accelerators** (A100, B200, Ascend's FlashAttentionScore, AMD): no
  per-length table was found for them (the FlashAttention-2 paper's A100 figures, Dao
  2023 arXiv 2307.08691 Fig. 4-6, could not be read as numbers here). They run the
  ``"flash2"`` series' shape, scaled so that its best case (forward, head dim 128, no
  mask, long sequences) reaches the one A100 figure that is published as a number:
  the FlashAttention-2 abstract's "50-73% of the theoretical maximum FLOPs/s on A100",
  whose upper end is taken as that best case (:data:`A100_FLASH2_BEST`). The shape is
  H100's, where FlashAttention-2 saturates later than on the smaller A100: at 512 with
  the causal mask and head dim 64 this gives 0.35 of the peak, below the abstract's 50 %
  lower end, so short causal calls off Hopper are priced on the slow side.
  ``"flash3"`` and ``"cudnn"`` (Hopper-only data) fall back to ``"flash2"`` there.
* **Older kernels** (``"flash1"``, FlashAttention 1; ``"flash-triton"``, FlashAttention in
  Triton, the kernel MPT/llm-foundry's ``attn_impl: triton`` runs): no curve of their own
  was found as numbers, but the FlashAttention-2 paper states their speed relative to
  FlashAttention-2 measured side by side on one A100 (Dao 2023, arXiv 2307.08691, §4.1,
  Fig. 4-6): FlashAttention-2 is "around 2×" faster than FlashAttention, and "around
  1.3-1.5×" faster than FlashAttention in Triton in the forward pass and "around 2×" in
  the backward pass. Each is FlashAttention-2's curve on the same device divided by
  those factors (:data:`RELATIVE_TO_FLASH2`: forward 1.4, the middle of 1.3-1.5). On
  Hopper the same ratios are applied to FlashAttention-2's H100 curve: the 2023 kernels
  use none of Hopper's new instructions either, an assumption no figure checks.
* ``"gemm"``: the former pricing, a GEMM of the same FLOPs on the GEMM size curve
  (:func:`perfkit.calc.timing_kernels.gemm_seconds` with ``attention=True``).

Occupancy: given the call's (batch, head) pairs, :func:`attention_efficiency` multiplies
the curve by the share a call of that few pairs keeps
(:mod:`perfkit.calc.attention_occupancy`, measured for perfkit on an H100).

Unfused attention (``ActivationModel.flash_attention`` False) never reaches this module:
its two batched GEMMs and softmax keep their GEMM and memory-bound pricing.
"""

from __future__ import annotations

import math
import re
from functools import cache

from ..errors import check_choice
from .attention_occupancy import multiprocessors, occupancy

__all__ = ["ATTENTION_IMPLEMENTATIONS", "FA3_PAPER_H100", "FA3_SEQ_LENGTHS", "RELATIVE_TO_FLASH2",
           "H100_BF16_PEAK", "A100_FLASH2_BEST", "fit_series", "series_parameters",
           "attention_efficiency", "is_hopper", "call_lengths", "resolve_implementation",
           "RING_BYTES_PER_ELEMENT", "ring_bookkeeping"]

#: ``implementation`` values: ``"auto"`` (:func:`resolve_implementation`), the fused kernels
#: with published curves, the older kernels priced against FlashAttention-2
#: (:data:`RELATIVE_TO_FLASH2`), and ``"gemm"`` (the former pricing: a GEMM of the same
#: FLOPs on the GEMM size curve; always last).
ATTENTION_IMPLEMENTATIONS = ("auto", "flash2", "flash3", "cudnn", "flash1", "flash-triton",
                             "gemm")

#: How many times slower than FlashAttention-2 on the same device an older kernel runs,
#: ``(forward, backward)``: Dao 2023 (arXiv 2307.08691) §4.1, measured on an A100 80GB
#: SXM4 at 512-16k tokens, head dimension 64 and 128, with and without the causal mask:
#: FlashAttention-2 "around 2×" faster than FlashAttention (``"flash1"``), "around
#: 1.3-1.5×" faster than FlashAttention in Triton forward and "around 2×" backward
#: (``"flash-triton"``; 1.4 is the middle of the forward's range).
RELATIVE_TO_FLASH2: dict[str, tuple[float, float]] = {
    "flash1": (2.0, 2.0),
    "flash-triton": (1.4, 2.0),
}

#: Sequence lengths of every series in :data:`FA3_PAPER_H100` (Shah et al. 2024 Fig. 5-6).
FA3_SEQ_LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)

#: H100 SXM5 dense BF16 peak, FLOP/s (NVIDIA datasheet; perfkit's ``"h100"`` preset):
#: what the published TFLOPs/s are divided by to get a share of the peak.
H100_BF16_PEAK = 989.5e12

#: FlashAttention-2 on A100, best case as a share of the peak: the upper end of "50-73%
#: of the theoretical maximum FLOPs/s on A100" (Dao 2023, arXiv 2307.08691, abstract).
A100_FLASH2_BEST = 0.73

#: Published TFLOPs/s on H100 SXM5, BF16, at :data:`FA3_SEQ_LENGTHS` (None: left out, see
#: the module docstring), keyed ``(implementation, pass, head_dim, causal)``. Shah et al.
#: 2024 (arXiv 2407.08608): forward Fig. 5, backward Fig. 6.
FA3_PAPER_H100: dict[tuple[str, str, int, bool], tuple[float | None, ...]] = {
    ("flash3", "fwd", 64, False): (333, 392, 460, 476, 496, 497),
    ("flash3", "fwd", 128, False): (None, 565, 625, 638, 646, 648),
    ("flash3", "fwd", 256, False): (482, 639, 707, 736, 746, 756),
    ("flash3", "fwd", 64, True): (197, 265, 371, 420, 460, 473),
    ("flash3", "fwd", 128, True): (292, 423, 521, 579, 602, 616),
    ("flash3", "fwd", 256, True): (286, 427, 537, 612, 628, 642),
    ("flash3", "bwd", 64, False): (272, 363, 422, 453, 472, 474),
    ("flash3", "bwd", 128, False): (316, 424, 501, 542, 559, 561),
    ("flash2", "fwd", 64, False): (282, 306, 318, 321, 322, 324),
    ("flash2", "fwd", 128, False): (309, 350, 362, 368, 370, 370),
    ("flash2", "fwd", 256, False): (275, 313, 321, 323, 324, 326),
    ("flash2", "fwd", 64, True): (180, 229, 262, 284, 295, 299),
    ("flash2", "fwd", 128, True): (191, 260, 298, 319, 333, 335),
    ("flash2", "fwd", 256, True): (208, 251, 278, 293, 297, 298),
    ("flash2", "bwd", 64, False): (198, 238, 264, 279, 287, 291),
    ("flash2", "bwd", 128, False): (214, 260, 291, 310, 318, 322),
    ("cudnn", "fwd", 64, False): (335, 373, 395, 408, 412, 413),
    ("cudnn", "fwd", 128, False): (None, 574, 617, 609, 600, 595),
    ("cudnn", "fwd", 256, False): (470, 546, 580, 581, 580, 581),
    ("cudnn", "fwd", 64, True): (225, 288, 334, 363, 379, 388),
    ("cudnn", "fwd", 128, True): (315, 410, 484, 518, 529, 539),
    ("cudnn", "fwd", 256, True): (308, 391, 450, 483, 497, 509),
    ("cudnn", "bwd", 64, False): (266, 348, 395, 417, 432, 433),
    ("cudnn", "bwd", 128, False): (305, 408, 465, 499, 518, 516),
}

_HOPPER = re.compile(r"^(gh200|h100|h800|h200|h20)(\b|[-_ ])", re.IGNORECASE)


def is_hopper(hardware_name: str) -> bool:
    """Whether ``hardware_name`` (a perfkit preset name such as ``"h100"``, ``"h800"``,
    ``"h200"``, ``"h20"``) is a Hopper GPU, where the H100 figures apply directly."""
    return bool(_HOPPER.match(str(hardware_name).strip()))


def resolve_implementation(implementation: str, hardware_name: str) -> str:
    """The kernel ``"auto"`` stands for: ``"cudnn"`` on Hopper, ``"flash2"`` elsewhere.

    PyTorch's ``scaled_dot_product_attention`` runs cuDNN's fused attention on H100 (the
    bundled H100 Llama profiles, ``tests/data/kineto_llama_*_h100``, launch
    ``cudnn_generated_fort_native_sdpa_sm90_flash_fprop`` / ``_bprop`` kernels, and their
    times meet the cuDNN curve: ``tests/plan/test_attention_shape.py``); on other GPUs
    its flash backend is FlashAttention-2, and Ascend's FlashAttentionScore shares
    FlashAttention-2's curve. Any other value is returned as given.

    That holds for the PyTorch of now, not for every release: after 2.5.0 cuDNN was made
    opt-in (pytorch/pytorch#138522), and SDPA chose FlashAttention-2 on H100 until the
    cuDNN PyTorch bundles passed its preference threshold (about 2.11, as
    huggingface/transformers#48163 reads ``check_prefer_cudnn_attention``). A profile's
    kernel names say which ran (:attr:`perfkit.Job.attention_implementation`, which
    :func:`perfkit.plan.calibrate` uses); without one, set the implementation.
    """
    if implementation != "auto":
        return implementation
    return "cudnn" if is_hopper(hardware_name) else "flash2"


def fit_series(lengths: tuple[float, ...], tflops: tuple[float | None, ...],
               peak: float = H100_BF16_PEAK) -> tuple[float, float]:
    """``(e_max, L½)`` of ``e(L) = e_max·L/(L + L½)`` through one published series.

    ``1/e = 1/e_max + (L½/e_max)·(1/L)`` is a line in ``1/L``; it is fitted by least
    squares (errors in ``1/e``: relative errors), points given as None skipped. ``L½`` is
    held at >= 0 (a flat series gives its mean).
    """
    pts = [(float(n), float(t) * 1e12 / peak) for n, t in zip(lengths, tflops, strict=True)
           if t is not None]
    x = [1.0 / n for n, _ in pts]
    y = [1.0 / e for _, e in pts]
    # The normal equations in closed form, summed exactly (math.fsum): the same bits on
    # every numpy and BLAS, which the simulator's byte-identical bundled files rely on
    # (np.polyfit's LAPACK solve differed in the last bit between numpy 1.24 and 2.x).
    mx, my = math.fsum(x) / len(x), math.fsum(y) / len(y)
    sxx = math.fsum((u - mx) ** 2 for u in x)
    slope = math.fsum((u - mx) * (v - my) for u, v in zip(x, y, strict=True)) / sxx
    intercept = my - slope * mx
    if slope <= 0:
        e = math.fsum(e for _, e in pts) / len(pts)
        return e, 0.0
    e_max = 1.0 / intercept
    return float(e_max), float(slope * e_max)


@cache
def series_parameters() -> dict[tuple[str, str, int, bool], tuple[float, float]]:
    """``(e_max, L½)`` of every series of :data:`FA3_PAPER_H100`, same keys."""
    return {key: fit_series(FA3_SEQ_LENGTHS, values)
            for key, values in FA3_PAPER_H100.items()}


def _curve(impl: str, pass_: str, d: int, causal: bool, length: float) -> float:
    e_max, half = series_parameters()[(impl, pass_, d, causal)]
    return e_max * length / (length + half)


def _at_head_dim(impl: str, pass_: str, head_dim: float, causal: bool,
                 length: float) -> float:
    """The published curve at ``head_dim``, interpolated in ``log2 d`` between the
    published head dimensions (held at the ends)."""
    dims = sorted(d for (i, p, d, c) in FA3_PAPER_H100 if (i, p, c) == (impl, pass_, causal))
    d = min(max(float(head_dim), dims[0]), dims[-1])
    lo = max(x for x in dims if x <= d)
    hi = min(x for x in dims if x >= d)
    e_lo = _curve(impl, pass_, lo, causal, length)
    if hi == lo:
        return e_lo
    w = (math.log2(d) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
    return (1 - w) * e_lo + w * _curve(impl, pass_, hi, causal, length)


def _h100(impl: str, length: float, head_dim: float, causal: bool, backward: bool) -> float:
    if not backward:
        return _at_head_dim(impl, "fwd", head_dim, causal, length)
    e = _at_head_dim(impl, "bwd", head_dim, False, length)
    if causal:  # no published masked backward: the forward's masked/unmasked ratio
        e *= _at_head_dim(impl, "fwd", head_dim, True, length) \
            / _at_head_dim(impl, "fwd", head_dim, False, length)
    return e


def attention_efficiency(seq_q: float, seq_kv: float, head_dim: float, causal: bool,
                         backward: bool, implementation: str = "auto",
                         hardware_name: str = "h100", pairs: float | None = None,
                         multiprocessor_count: int | None = None) -> float:
    """Share of the 16-bit peak one fused attention call gets (see the module docstring).

    Parameters
    ----------
    seq_q, seq_kv : float
        Query and key/value lengths of the call (after the context-parallel split);
        the curve is read at ``sqrt(seq_q · seq_kv)``.
    head_dim : float
        Query/key head dimension.
    causal : bool
        Causal mask (FLOPs counted as half the unmasked call's, as the papers do).
    backward : bool
        The backward kernel (FLOPs 2.5 times the forward's).
    implementation : {"auto", "flash2", "flash3", "cudnn", "flash1", "flash-triton"}
        ``"auto"``: :func:`resolve_implementation`; ``"flash3"`` and ``"cudnn"`` off
        Hopper fall back to ``"flash2"``; ``"flash1"`` and ``"flash-triton"`` are
        ``"flash2"`` slowed by :data:`RELATIVE_TO_FLASH2`.
    hardware_name : str
        The hardware preset's name: Hopper uses the H100 figures as published, anything
        else FlashAttention-2's shape scaled to its A100 best case.
    pairs : float, optional
        (batch, head) pairs of the call (micro-batch × the rank's heads): fewer than the
        published measurements' lower the rate
        (:func:`perfkit.calc.attention_occupancy.occupancy`, on the GPU's
        multiprocessors). None (default): the published curve as it is.
    multiprocessor_count : int, optional
        The device's multiprocessors (a trace's ``numSms``); None (default): the
        datasheet count for ``hardware_name``
        (:func:`perfkit.calc.attention_occupancy.multiprocessors`).

    Returns
    -------
    float
        ``e`` such that the call lasts ``FLOPs / (e · peak16)``.
    """
    check_choice("implementation", implementation, ATTENTION_IMPLEMENTATIONS[:-1])
    implementation = resolve_implementation(implementation, hardware_name)
    slower = RELATIVE_TO_FLASH2.get(implementation)
    if slower is not None:
        return attention_efficiency(seq_q, seq_kv, head_dim, causal, backward, "flash2",
                                    hardware_name, pairs, multiprocessor_count) \
            / slower[1 if backward else 0]
    length = math.sqrt(max(float(seq_q), 1.0) * max(float(seq_kv), 1.0))
    if is_hopper(hardware_name):
        e = _h100(implementation, length, head_dim, causal, backward)
    else:
        implementation = "flash2"
        best = series_parameters()[("flash2", "fwd", 128, False)][0]
        e = _h100("flash2", length, head_dim, causal, backward) * A100_FLASH2_BEST / best
    if pairs is None:
        return e
    tiled = float(seq_kv if backward else seq_q)  # keys per tile backward, queries forward
    sms = multiprocessor_count if multiprocessor_count is not None \
        else multiprocessors(hardware_name)
    return e * occupancy(pairs, tiled, head_dim, causal, backward, implementation, sms)


def call_lengths(seq_length: float, cp: int, causal: bool
                 ) -> tuple[tuple[float, float, float, bool], ...]:
    """The attention calls of one rank's layer under context parallelism, as
    ``(share of the FLOPs, L_q, L_kv, causal)``.

    ``cp == 1``: one call over the whole sequence. ``cp > 1`` with the causal mask
    (Megatron-LM's load-balanced ring, each rank holding two chunks of ``s/(2cp)``): of
    the ``cp`` ring steps, the diagonal one is a masked call of ``s/cp`` by ``s/cp``
    (``1/cp`` of the rank's work), the other ``cp − 1`` unmasked calls of ``s/cp`` by
    ``s/(2cp)`` (or the transpose). Without the mask every step is an unmasked call of
    ``s/cp`` by ``s/cp``.
    """
    s = float(seq_length)
    if cp <= 1:
        return ((1.0, s, s, causal),)
    chunk = s / cp
    if not causal:
        return ((1.0, chunk, chunk, False),)
    return ((1.0 / cp, chunk, chunk, True), ((cp - 1.0) / cp, chunk, chunk / 2.0, False))


#: Bytes per element the ring's float32 bookkeeping moves (read + write), as PyTorch's
#: load-balanced ring does it (``_SDPAMerger`` with ``convert_to_f32``; the backward's
#: float32 gradient accumulators): ``"convert"`` a 16-bit block to float32 or back (2 + 4),
#: ``"merge"`` one later block into the running output (the block's conversion, then
#: ``out − sigmoid(lse_b − lse)·(out − block)`` in three float32 passes: 6 + 12 + 8 + 12),
#: ``"accumulate"`` a 16-bit gradient added into a float32 one (4 + 2 + 4).
RING_BYTES_PER_ELEMENT = {"convert": 6.0, "merge": 38.0, "accumulate": 10.0}


def ring_bookkeeping(q_elements: float, kv_elements: float, cp: int
                     ) -> tuple[tuple[tuple[float, float], ...], tuple[tuple[float, float], ...]]:
    """The memory-bound work a context-parallel ring does around its attention calls, in
    one layer of one rank, as ``(forward, backward)``, each a tuple of
    ``(bytes per kernel, kernels)``; both empty when ``cp <= 1``.

    Counted on the ring's slowest rank (the last: after the first step every call holds
    all of its queries and the first half of the keys), with
    :data:`RING_BYTES_PER_ELEMENT`: forward, the first block converted to float32, each
    of the ``cp − 1`` later blocks merged into the running output, the result cast back
    to 16 bits; backward, the first step's query, key and value gradients converted to
    float32 accumulators, each later step's query gradient (all queries) and key and value
    gradients (half the keys) added into them, and the three cast back. ``q_elements`` is
    the rank's query (and output) elements ``b·s/cp·heads·d``, ``kv_elements`` one of its
    key or value blocks'. The byte count is the least the arithmetic needs (a framework
    that concatenates or clones its accumulators moves more): on an H100 the emulated
    ring's merges ran at 0.82-0.84 of the device's measured element-wise bandwidth, its
    backward's strided accumulations at about half of it
    (``tests/data/kernel_rates_h100/ring_attention.json.gz``,
    ``tests/test_ring_attention_measured.py``).
    """
    if cp <= 1:
        return (), ()
    b = RING_BYTES_PER_ELEMENT
    forward = ((b["convert"] * q_elements, 2.0), (b["merge"] * q_elements, cp - 1.0))
    backward = ((b["convert"] * (q_elements + 2.0 * kv_elements), 2.0),
                (b["accumulate"] * (q_elements + kv_elements), cp - 1.0))
    return forward, backward
