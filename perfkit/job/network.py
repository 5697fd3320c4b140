"""What kind of network the profile runs, where no transformer's shape could be read.

perfkit's model (:class:`perfkit.ModelSpec`) is a transformer's: its MFU, memory theory
and planner count layers of attention and MLP. A profile whose device kernels or host
operators show convolutions and no attention (a ResNet's trace) is another network: the
job says so (:data:`NETWORK`), so that "What perfkit could not read" does not send its
reader after a transformer's fields it cannot have.
"""

from __future__ import annotations

from typing import Any

from ..analysis._frames import is_lazy, is_lazy_frame
from ..analysis._util import table
from ..analysis._util.rows import text_matches
from ..format import counted
from .fields import FieldValue

__all__ = ["NETWORK", "CONVOLUTION", "ATTENTION", "read_network"]

#: Where :func:`read_network` puts what it read (in :attr:`perfkit.Job.observed`).
NETWORK = "network"
#: A convolution kernel or operator (cuDNN's ``scudnn_winograd``/``implicit_convolve``,
#: ATen's ``aten::convolution``/``aten::conv2d``, Ascend's ``Conv2D``,
#: ``Conv2DBackpropFilter``); not any name holding "conv" (fbgemm's ``fb::convex_sum`` in
#: a recommender's trace is no convolution).
CONVOLUTION = r"(?i)convolution|convolve|conv[123]d|conv_?transpose|scudnn"
#: An attention kernel or operator, fused or written as ``attn`` (as the advisor's
#: workload axis reads it: :mod:`perfkit.advisor.workload`).
ATTENTION = r"(?i)attention|flash|fmha|sdpa|scaled_dot_product|attn"


def read_network(profile: Any, out: dict[str, Any]) -> None:
    """Put :data:`NETWORK` = ``"convolutional"`` where the device kernels (or, on a profile
    without any, the host operators) hold convolutions and no attention, with how many;
    nothing otherwise (a transformer, or a profile that cannot tell) and on a lazy
    cluster."""
    if is_lazy(profile):
        return
    for name in ("kernels", "ops"):
        t = table(profile, name)
        if t is None or is_lazy_frame(t) or t.empty or "name" not in t.columns:
            continue
        names = t["name"]
        if bool(text_matches(names, ATTENTION).any()):
            return
        n = int(text_matches(names, CONVOLUTION).sum())
        if n:
            where = "device kernels" if name == "kernels" else "host operators"
            out[NETWORK] = FieldValue("convolutional", "profile",
                                      f"{counted(n, 'convolution')} among the {where} and "
                                      "no attention")
        return  # the first table with names decides
