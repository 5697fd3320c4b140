"""Every note of loading a profile, in one list: :func:`every_note`.

The loaders record what they dropped, repaired or could not read in ``meta.notes``; a
:class:`~perfkit.profile.Cluster` gathers its ranks' notes into its own (``"rank 1: …"``)
and lists the ranks that did not load in ``Cluster.failed``. A note a rank records after
that (a table built later, on first use) or a failed rank whose note was not written would
be missed by a reader of the cluster's notes alone: ``perfkit info``, the report and the
dashboard's "What was opened" read this list instead, so that they show every note the API
holds.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["every_note", "runs_apart"]


def every_note(profile: Any) -> list[str]:
    """The notes of ``profile`` (a Profile or Cluster): its ``meta.notes``, then each rank
    in ``failed`` not said there (``"rank 1 not loaded: …"``), then each loaded rank's note
    not said there (``"rank 0: …"``), in that order, each once.

    Parameters
    ----------
    profile : Profile or Cluster
        From :func:`perfkit.load`.

    Returns
    -------
    list of str
    """
    meta = getattr(profile, "meta", None)
    out = [str(n) for n in (getattr(meta, "notes", None) or [])]
    failed = getattr(profile, "failed", None) or {}
    for rank, why in failed.items():
        if not any(n.startswith(f"rank {rank} not loaded") for n in out):
            out.append(f"rank {rank} not loaded: {why}")
    if not hasattr(profile, "ranks") or getattr(meta, "rank", None) is not None:
        return out
    for rank in list(getattr(profile, "ranks", None) or []):
        try:
            notes = profile[rank].meta.notes or []
        except Exception:  # noqa: BLE001 - a rank that cannot be reached says nothing here
            continue
        for n in map(str, notes):
            if not _said(n, rank, out):
                out.append(f"rank {rank}: {n}")
    return out


def _said(note: str, rank: int, notes: list[str]) -> bool:
    """Whether ``note`` of ``rank`` is among ``notes`` (as it is, led by its rank, or led
    by the ranks it was gathered with: ``"ranks [0, 1]: …"``), also where the gathering
    wrote the rank in its file names as ``{rank}`` (``…_2_4_{rank}.csv`` for ``…_2_4_0.csv``)."""
    if any(n.endswith(note) for n in notes):
        return True
    number = str(rank)
    if "{rank}" not in "".join(notes) or number not in note:
        return False
    pattern = re.compile("(?:" + re.escape(note).replace(
        re.escape(number), r"(?:\{rank\}|" + number + ")") + ")$")
    return any(pattern.search(n) for n in notes)


def runs_apart(profile: Any) -> str:
    """A sentence when the loaded ranks look like separate runs (no common step number or
    time: the loader's ``meta.extra["apart"]``), else ``""``: figures fitted or summed
    over them mix runs. The dashboard's warning (:func:`perfkit.widgets.dashboard_open.
    apart_warning`), the Planner's fit and ``perfkit plan`` say it in these words."""
    apart = getattr(getattr(profile, "meta", None), "extra", {}).get("apart")
    if not apart:
        return ""
    from .format import listed

    groups = "; ".join(f"rank{'s' if len(g) > 1 else ''} {listed(g)}" for g in apart)
    return (f"These ranks look like {len(apart)} separate runs ({groups}): they share no "
            "step number and no time, so figures over them mix runs. Open each run's "
            "folder or file on its own, or load them apart with "
            "perfkit.load(path, ranks=[...]).")
