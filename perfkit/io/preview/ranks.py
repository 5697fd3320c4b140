"""One rank's steps for :mod:`perfkit.io.preview.steps`, by its format.

:func:`_rank_steps` reads an Ascend text export's ``step_trace_time.csv`` with the full
load's own reader (:func:`perfkit.io.ascend.text.read_step_trace`) and hands a Kineto trace to
:mod:`perfkit.io.preview.kineto`; :func:`_cluster_output_steps` reads the rank rows of an
msprof-analyze ``cluster_step_trace_time.csv``. Other formats have no quick step reading.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import file_boundary
from ...profile import Cluster, Profile, ProfileMeta
from .._common import collecting_notes
from ..ascend import rank as ascend
from ..detect.sources import RankSource, cluster_meta
from ..readers import reader_for

__all__ = ["FINAL_STEPS", "ascend_text_steps"]


#: ``meta.extra`` key of a rank's steps-only Profile whose steps are the full load's table
#: (not an approximation): :attr:`~perfkit.io.preview.steps.Preview.steps_final` holds when every
#: rank has it.
FINAL_STEPS = "preview_steps_final"


def _rank_steps(source: RankSource, device: bool = True, why: list[str] | None = None,
                scan: bool = True) -> tuple[Profile, str] | None:
    """One rank's steps-only Profile and where its steps came from, or None (``why``
    then says why, where more than the format's :data:`perfkit.io.preview.steps._NO_STEPS` can
    be said); ``scan``: whether a Kineto trace without ``ProfilerStep`` may be
    byte-scanned for its iterations (:data:`perfkit.io.preview.steps.ITERATION_SCAN_MAX_BYTES`).
    The reading is the format's own (``steps`` in :mod:`perfkit.io.readers`)."""
    reader = reader_for(source.fmt)
    steps = reader.function("steps") if reader is not None else None
    if steps is None:
        return None
    return steps(source, device, why=why, scan=scan)


def ascend_text_steps(source: RankSource, device: bool = True, why: list[str] | None = None,
                      scan: bool = True) -> tuple[Profile, str] | None:
    """An Ascend text export's steps: its ``step_trace_time.csv``, read by the full load's own
    reader (:func:`perfkit.io.ascend.text.read_step_trace`), so they are final."""
    rank_dir = ascend.rank_dir_of(Path(source.path))
    out = rank_dir / ascend.OUTPUT_DIR
    if not out.is_dir():
        out = Path(source.path)
    f = out / "step_trace_time.csv"
    if not f.is_file():
        return None
    from ..ascend.text import read_step_trace  # the Ascend reader, when a rank is one

    with file_boundary(f, "step_trace_time.csv"):
        steps = read_step_trace(f)
    meta = ProfileMeta("ascend_text", rank=source.rank, device_type="npu",
                       path=str(rank_dir), notes=[f"preview: steps of {f.name} only"],
                       extra={FINAL_STEPS: True})  # the full load's reader and file
    return Profile(meta, {"steps": steps}), "step_trace_time.csv"


def _cluster_output_steps(folder: Path) -> Cluster | None:
    """The rank steps of an msprof-analyze output (``cluster_step_trace_time.csv``)."""
    from ..ascend import cluster_output

    f = folder / "cluster_step_trace_time.csv"
    if not f.is_file():
        return None
    with collecting_notes(), file_boundary(f, "cluster_step_trace_time.csv of msprof-analyze"):
        steps, _stages = cluster_output._steps(f)
    profiles = []
    for rank, part in steps.groupby("rank", sort=True):
        meta = ProfileMeta("cluster_analysis_output", rank=int(rank), device_type="npu",
                           path=str(folder), notes=["preview: steps only"])
        profiles.append(Profile(meta, {"steps": part.drop(columns="rank")}))
    if not profiles:
        return None
    return Cluster(profiles, cluster_meta(folder, profiles, {}))
