"""What names say: ranks in file and folder names, HCCL ids of group names.

:func:`rank_from_name` and :func:`suffix_number` read a rank; :func:`hccl_group_hash` is the
id HCCL gives a communication group.
"""

from __future__ import annotations

import os
import re

__all__ = ["rank_from_name", "suffix_number", "hccl_group_hash"]

_RANK_WORDS = re.compile(r"(?:rank|(?:^|[^a-z])worker)[-_]?(\d{1,9})(?!\d)", re.IGNORECASE)
_NAME_SUFFIXES = (".gz", ".json", ".db", ".csv", ".pt.trace")


def _stem(name: str) -> str:
    stem = os.path.basename(name)
    changed = True
    while changed:
        changed = False
        for suffix in _NAME_SUFFIXES:
            if stem.lower().endswith(suffix):
                stem = stem[: -len(suffix)]
                changed = True
    return stem


def rank_from_name(name: str, suffix: bool = False) -> int | None:
    """Rank written in a file or folder name by an explicit pattern, or None.

    ``rank3``, ``rank_3``, ``rank-3``, ``sampled_rank-0``, ``worker3`` (PyTorch's trace
    handler names files ``{worker}.{timestamp}.pt.trace.json``: ``worker0.1623143089861``
    is worker 0). Other digits are not a rank: a process id (``host_21387``), a timestamp
    (``worker0.1623143089861``'s second part), a job id (``Model__1016005``).

    ``suffix``: also read a trailing ``_3`` (``trace_3.pt.trace.json``, ``device_3``). A
    folder of traces uses it only when those numbers are 0..n-1 over its files
    (:func:`suffix_number`), which a pid or a job id is not.
    """
    stem = _stem(name)
    m = _RANK_WORDS.search(stem)
    if m:
        return int(m.group(1))
    if suffix:
        return suffix_number(name)
    return None


def suffix_number(name: str) -> int | None:
    """The number after the last ``_`` of a name (``trace_3.pt.trace.json`` -> 3), or None."""
    m = re.search(r"(?:^|_)(\d{1,9})$", _stem(name))
    return int(m.group(1)) if m else None

def hccl_group_hash(name: str) -> str:
    """The group id HCCL writes after ``@`` in communication keys, for a group ``name``.

    Two 32-bit polynomial hashes of the communicator name (primes 29 and 131) as the high
    and low words of a 64-bit number, in decimal; msprof-analyze computes the same
    (``double_hash``) to match ``parallel_group_info`` entries to communication keys.
    """
    h0 = h1 = 0
    for ch in name:
        h0 = (h0 * 29 + ord(ch)) & 0xFFFFFFFF
        h1 = (h1 * 131 + ord(ch)) & 0xFFFFFFFF
    return str((h0 << 32) | h1)
