"""The reader's contract: what a format package gives the rest of perfkit, and the registry.

Every profiler format perfkit reads is one package of :mod:`perfkit.io` (``kineto/``,
``ascend/``, ``cann/``, ``mindspore/`` ...) and one :class:`Reader` line in :data:`READERS`.
The plumbing packages (``detect/``, ``engines/``, ``preview/``, ``cache/``, ``canonical/``,
``_common/``) know formats only through this registry, so a new format touches nothing but
its own folder and one line here.

A format package provides, as functions named in its :class:`Reader`:

``read(source) -> (ProfileMeta, {table name: DataFrame})``
    Read one rank (:class:`~perfkit.io.detect.sources.RankSource`: the format's code, the
    path, the rank if known, its files). A pure function: it runs in worker processes and
    as a Dask task. The tables follow the canonical schema (:mod:`perfkit.io.canonical.
    schema`); a column the format does not record is absent, and ``meta.notes`` says why.
    Whatever goes wrong raises a :class:`~perfkit.errors.ProfileError` naming the file.
    Its notes: repairs are reported with :func:`perfkit.io._common.note` inside
    :func:`perfkit.io._common.collecting_notes` and end up in ``meta.notes``.
``claim(path, head) -> list[RankSource] | None`` (optional)
    Whether a lone file or folder is this format: its rank sources, or None. ``head`` is
    the first bytes of a JSON file (None for a folder and other files), read once by the
    detection for every format. Claims are asked in registry order, before the built-in
    detection of the Ascend and Kineto layouts falls back to a Kineto trace.
``steps(source, ...) -> (Profile, where) | None`` (optional)
    The rank's steps, read in a fraction of its load: the dashboard's first answer
    (:mod:`perfkit.io.preview`).

Functions are named as ``"module:function"`` relative to :mod:`perfkit.io` and imported
only when called, so that detecting a folder does not import every reader.
The smallest complete reader is ``cann/`` (:mod:`perfkit.io.cann.reader`): copy its
folder to start a new format (docs/loading.md, "Adding a format").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Reader", "READERS", "reader_for", "format_codes"]


@dataclass(frozen=True)
class Reader:
    """One format's entry in the registry.

    Parameters
    ----------
    fmt : str
        The format's code: ``RankSource.fmt`` and ``meta.source_format``.
    words : str
        The format in words, for the pages ("a PyTorch (Kineto) trace").
    read : str
        ``"module:function"`` (relative to :mod:`perfkit.io`) reading one rank.
    claim : str or None
        ``"module:function"`` telling a lone file or folder of this format, or None when the
        built-in detection finds it (the Ascend and Kineto layouts).
    steps : str or None
        ``"module:function"`` reading the rank's steps early, or None (no first answer
        before the load).
    """

    fmt: str
    words: str
    read: str
    claim: str | None = None
    steps: str | None = None

    def function(self, role: str) -> Callable[..., Any] | None:
        """The function named for ``role`` (``"read"``, ``"claim"``, ``"steps"``),
        imported now; None when the format has none."""
        spec = getattr(self, role)
        if spec is None:
            return None
        module, _, name = spec.partition(":")
        return getattr(importlib.import_module(f"perfkit.io.{module}"), name)


#: Every format perfkit reads, in the order their claims are asked.
READERS: tuple[Reader, ...] = (
    Reader("cann_raw", "raw CANN profiler output (PROF_ folder)",
           read="cann.reader:read_rank", claim="cann.reader:claim"),
    Reader("ascend_text", "an Ascend text export", read="ascend.reader:read_text_rank",
           steps="preview.ranks:ascend_text_steps"),
    Reader("ascend_db", "an Ascend DB export", read="ascend.reader:read_db_rank"),
    Reader("trace_view", "a trace_view.json", read="ascend.reader:read_trace_view_rank"),
    Reader("kineto", "a PyTorch (Kineto) trace", read="kineto.reader:read_rank",
           steps="preview.kineto:kineto_rank_steps"),
    Reader("mindspore_legacy", "legacy MindSpore profiler output",
           read="mindspore.reader:read_legacy_rank"),
)

_BY_FMT = {r.fmt: r for r in READERS}


def reader_for(fmt: str | None) -> Reader | None:
    """The registered reader of a format code, or None."""
    return _BY_FMT.get(str(fmt or ""))


def format_codes() -> tuple[str, ...]:
    """The codes of every registered format, in registry order."""
    return tuple(_BY_FMT)
