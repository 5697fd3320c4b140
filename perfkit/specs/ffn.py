"""FFN sizes as Meta's Llama code and MindFormers derive them from the hidden size."""

from __future__ import annotations

from ..errors import check_positive, check_positive_int

__all__ = ["llama_ffn_hidden_size", "mindformers_ffn_hidden_size"]


def llama_ffn_hidden_size(hidden_size: int, multiple_of: int = 256,
                          ffn_dim_multiplier: float | None = None) -> int:
    """FFN size as Meta's Llama reference code derives it.

    ``f = int(2 * 4h / 3)``; then ``f = int(ffn_dim_multiplier * f)`` if a multiplier is
    given; then ``f`` is rounded up to a multiple of ``multiple_of``.
    Source: facebookresearch/llama ``model.py`` (``FeedForward.__init__``).
    """
    check_positive_int("hidden_size", hidden_size)
    check_positive_int("multiple_of", multiple_of)
    f = int(2 * 4 * hidden_size / 3)
    if ffn_dim_multiplier is not None:
        f = int(check_positive("ffn_dim_multiplier", ffn_dim_multiplier) * f)
    return multiple_of * ((f + multiple_of - 1) // multiple_of)


def mindformers_ffn_hidden_size(hidden_size: int, multiple_of: int = 256,
                                ffn_dim_multiplier: float | None = None,
                                intermediate_size: int | None = None) -> int:
    """FFN size as MindFormers derives it for Llama-style models.

    MindFormers (``LlamaFeedForward.__init__`` and ``convert_model_config``) differs from
    Meta's code: the multiplier is applied to ``4h`` *before* the 2/3 and is bumped by
    0.01::

        f = 4h
        if intermediate_size: f = intermediate_size           (and nothing else)
        else:
            if ffn_dim_multiplier: f = int((ffn_dim_multiplier + 0.01) * f)
            f = int(2 * f / 3)
            f = multiple_of * ceil(f / multiple_of)

    For the published Llama shapes both rules give the same result (13B: 13824,
    70B: 28672 with multiplier 1.3 and multiple_of 4096).
    """
    if intermediate_size is not None:
        return check_positive_int("intermediate_size", intermediate_size)
    check_positive_int("hidden_size", hidden_size)
    check_positive_int("multiple_of", multiple_of)
    f = 4 * hidden_size
    if ffn_dim_multiplier is not None:
        f = int((check_positive("ffn_dim_multiplier", ffn_dim_multiplier) + 0.01) * f)
    f = int(2 * f / 3)
    return multiple_of * ((f + multiple_of - 1) // multiple_of)
