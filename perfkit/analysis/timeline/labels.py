"""The labels of a timeline's events.

:func:`short_label` shortens an event name for a text mark; a rank's longest kernels and
collectives are the events labelled.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

__all__ = ["short_label", "split_top_level", "top_level"]

_OPEN, _CLOSE = "<([{", ">)]}"


def _depths(text: str) -> list[int]:
    """The bracket depth of each character of a C++ signature, counted with a stack so
    that a ``>`` inside parentheses is a comparison, not a template's end
    (``enable_if<((8)>(0)), void>``), nor is ``->`` inside a runtime task's words."""
    stack: list[str] = []
    out = []
    for ch in text:
        if ch in _OPEN:  # a bracket counts as inside what it opens or closes
            stack.append(ch)
            out.append(len(stack))
        elif ch in _CLOSE and stack and _OPEN.index(stack[-1]) == _CLOSE.index(ch):
            out.append(len(stack))
            stack.pop()
        else:
            out.append(len(stack))
    return out


def top_level(text: str) -> str:
    """``text`` without what any bracket holds: the template arguments and the parameter
    list of a C++ signature (``void ns::kernel<4, f>(int)`` → ``void ns::kernel``)."""
    return "".join(ch for ch, d in zip(text, _depths(text), strict=True) if d == 0)


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """``text`` split at the ``sep`` outside brackets, so a template's argument list
    (``kernel<4, float>``) stays one name."""
    parts, start = [], 0
    for i, (ch, d) in enumerate(zip(text, _depths(text), strict=True)):
        if ch == sep and d == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


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
        if signature:  # a return type before the function's name, brackets left out
            text = top_level(text).strip()
            text = text.split(" ")[-1] if " " in text else text
        else:  # a runtime task's own words: what its parenthesis says is left out
            text = text.split("(", 1)[0].strip()
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
