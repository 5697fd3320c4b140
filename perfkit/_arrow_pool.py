"""Which allocator Arrow uses in a perfkit process: the system one, unless the user chose.

pyarrow allocates through mimalloc by default. perfkit's loaders and analyses allocate and
free many column-sized buffers (a million rows each); mimalloc hands freed pages back to
the operating system soon after, so the next buffer of the same size faults its pages in
again. On the 2-core machines of ``benchmarks/README.md`` that cost more than the work:
loading one 865 MB Ascend rank took 8.4-8.9 s with mimalloc and 5.5-5.6 s with the system
allocator, and the first ``perfkit.advise`` after the load 1.6-1.7 s against 1.4 s (the
parsing limit, which frees little, is the same with either).

So importing perfkit makes the system allocator pyarrow's default pool, unless the
process already chose one: ``ARROW_DEFAULT_MEMORY_POOL`` set (pyarrow's own switch, kept
as it is), or ``PERFKIT_ARROW_POOL=keep`` (perfkit leaves pyarrow's default alone).
"""

from __future__ import annotations

import os

import pyarrow as pa

__all__ = ["use_system_pool", "BACKEND"]


def use_system_pool() -> str:
    """Make the system allocator pyarrow's default pool unless the process chose one.

    Returns
    -------
    str
        The backend pyarrow allocates with afterwards (``"system"``, ``"mimalloc"``, ...).
    """
    chosen = "ARROW_DEFAULT_MEMORY_POOL" in os.environ or \
        os.environ.get("PERFKIT_ARROW_POOL", "").strip().lower() == "keep"
    if not chosen:
        pa.set_memory_pool(pa.system_memory_pool())
    return pa.default_memory_pool().backend_name


#: The allocator pyarrow uses in this process, chosen when perfkit was imported.
BACKEND = use_system_pool()
