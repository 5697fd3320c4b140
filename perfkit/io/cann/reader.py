"""Raw CANN output's contract with perfkit (:mod:`perfkit.io.readers`): claim and read.

This is the whole of what the rest of perfkit knows of the format; the modules beside it do
the work: :mod:`.paths` (what a ``PROF_*`` folder holds: its devices, ranks and timeline
files), :mod:`.events` (the timeline events decoded), :mod:`.tables` (the canonical tables of
one device) and :mod:`.raw` (one device read). A new format starts as a copy of this folder.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...errors import ProfileError
from ...profile import ProfileMeta
from ..detect.sources import RankSource
from .paths import device_rank, is_device_dir, is_prof_dir, sniff_timeline, sources_of

__all__ = ["claim", "read_rank"]

FMT = "cann_raw"


def claim(path: Path, head: bytes | None = None) -> list[RankSource] | None:
    """The rank sources of ``path`` when it is raw CANN output, else None.

    A ``PROF_*`` folder gives one source per device (:func:`.paths.sources_of`), a device
    folder or its ``timeline/`` folder that device; a JSON file whose first bytes (``head``)
    are a CANN timeline's is that one file, its rank from ``info.json`` when it sits in a
    device folder. A device without an exported timeline is a source with ``error`` set:
    reading it says how to export.
    """
    if head is not None:
        if not sniff_timeline(head):
            return None
        device = path.parent.parent if path.parent.name == "timeline" else path.parent
        rank = device_rank(device)[0] if is_device_dir(device) else None
        return [RankSource(FMT, str(path), rank, (str(path),))]
    if not path.is_dir():
        return None
    if path.name == "timeline" and is_device_dir(path.parent):
        path = path.parent
    elif not (is_prof_dir(path) or is_device_dir(path)):
        return None
    return [RankSource(FMT, folder, rank, files, error=error)
            for folder, rank, files, error in sources_of(path)]


def read_rank(source: RankSource) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """Read one device of a CANN ``PROF_*`` folder (:func:`.raw.parse`)."""
    from .raw import parse

    if source.error:
        raise ProfileError(Path(source.path), source.error)
    return parse(Path(source.path), source.files)
