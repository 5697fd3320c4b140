"""The labels of a timeline's events.

:func:`short_label` shortens an event name for a text mark; a rank's longest kernels and
collectives are the events labelled.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

__all__ = ["short_label"]

_TEMPLATE = re.compile(r"<[^<>]*>")


def short_label(name: str, type_: str | None = None, max_len: int = 28) -> str:
    """A short label for an event name (for a text mark; the tooltip shows the whole name).

    The operator type is used when the name contains it and is not a C++ signature (Ascend:
    ``aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore`` →
    ``FlashAttentionScore``); a collective keeps its HCCL/NCCL kind
    (``hcom_allReduce__586_0_1`` → ``hcom_allReduce``); a C++ kernel loses its template
    arguments, parameters, return type and namespaces
    (``void at::native::elementwise_kernel<128, 4, ...>(int, ...)`` →
    ``elementwise_kernel``; ``(anonymous namespace)`` is no parameter list); a runtime
    task's own words stay (``Memcpy DtoD (Device -> Device)`` → ``Memcpy DtoD``). Longer
    results are cut to ``max_len`` characters with ``…``.
    """
    text = str(name).strip()
    t = str(type_).strip().rstrip("_") if type_ is not None and not pd.isna(type_) else ""
    cxx = any(ch in text for ch in "(<:")  # a C++ signature: its type is a generic category
    if t and not cxx and t in text and len(t) >= 3:
        text = t
    else:
        text = text.replace("(anonymous namespace)::", "")
        signature = "::" in text or "<" in text or text.startswith("void ")
        prev = None
        while prev != text:
            prev, text = text, _TEMPLATE.sub("", text)
        text = text.split("(", 1)[0].strip()
        if signature:  # a return type before the function's name
            text = text.split(" ")[-1] if " " in text else text
        text = text.rsplit("::", 1)[-1] or text
        text = re.sub(r"__\d+(?:_\d+)*$", "", text)
    text = text or str(name)
    return text if len(text) <= max_len else text[: max_len - 1] + "…"


def _labels_of(ev: pd.DataFrame) -> np.ndarray:
    """:func:`short_label` of every event, computed once per distinct (name, type)."""
    pairs = ev[["name", "type"]].astype(object).where(ev[["name", "type"]].notna(), None)
    key = list(zip(pairs["name"], pairs["type"], strict=True))
    done = {k: short_label(k[0], k[1]) for k in dict.fromkeys(key)}
    return np.array([done[k] for k in key], dtype=object)


def _labels(part: pd.DataFrame, n: int) -> np.ndarray:
    """The ``n`` longest compute and ``n`` longest communication events of one rank."""
    out = np.zeros(len(part), dtype=bool)
    if not n or part.empty:
        return out
    dev = (part["_src"] == "device").to_numpy(bool)
    pool = dev if dev.any() else np.ones(len(part), dtype=bool)
    comm = (part["category"] == "communication").to_numpy(bool)
    dur = part["dur_us"].to_numpy(float)
    for mask in (pool & ~comm, pool & comm):
        idx = np.flatnonzero(mask & (dur > 0))
        top = idx[np.argsort(-dur[idx], kind="mergesort")[:n]]
        out[top] = True
    return out
