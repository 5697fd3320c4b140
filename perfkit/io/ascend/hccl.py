"""The HCCL files of an Ascend text export: ``communication.json`` and
``communication_matrix.json``.

The one job of this module: walk their ``{step: {kind: {op@group: {...}}}}`` objects into
the ``comm_ops`` and ``comm_bandwidth`` tables (:func:`_communication`) and the
``comm_matrix`` table (:func:`_matrix`, local link ranks mapped to global ranks through the
groups of ``profiler_metadata.json``), with HCCL's hashed group ids replaced by the group
names (:func:`_name_groups`). The field readers (:func:`time_fields`,
:func:`bandwidth_fields`, :func:`link_fields`: ms to µs, MB to bytes) are shared with
msprof-analyze's cluster output (:mod:`perfkit.io.ascend.cluster_output`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ...errors import ProfileError
from .._common import (
    counting_numbers,
    hccl_group_hash,
    int64_series,
    json_number,
    read_json,
    to_ns,
)
from ..canonical.categories import is_total_op

__all__ = ["time_fields", "bandwidth_fields", "link_fields"]

def _name_groups(frame: pd.DataFrame, groups: dict[str, Any]) -> pd.DataFrame:
    """Replace HCCL's hashed group ids (after ``@``) by the group names of the metadata.

    Communication keys carry ``hccl_group_hash(name)``; ``parallel_group_info`` is keyed by
    the name. Ids that match no known group are kept as they are.
    """
    if not len(frame) or "group" not in frame or not groups:
        return frame
    aliases = {hccl_group_hash(name): name for name in groups}
    frame["group"] = frame["group"].map(lambda g: aliases.get(g, g))
    return frame


def _split_key(key: str) -> tuple[str, str | None]:
    name, sep, group = key.rpartition("@")
    return (name, group) if sep else (key, None)


def _step_of(key: str) -> float:
    m = re.fullmatch(r"step(\d+)", key)
    return float(m.group(1)) if m else np.nan


def _hccl_entries(path: Path, data: dict[str, Any]
                  ) -> Iterator[tuple[str, float, str, str, dict[str, Any]]]:
    """Walk ``{step: {kind: {op@group: {...}}}}`` of a rank's HCCL JSON files.

    Yields ``(step_key, step, kind, key, entry)`` for every object entry but the step's
    ``Total Op Info`` summary (:func:`is_total_op`); a step whose value is not an object is
    an error naming it.
    """
    for step_key, kinds in data.items():
        if not isinstance(kinds, dict):
            raise ProfileError(path, "expected {'collective': {...}, 'p2p': {...}}",
                               field=str(step_key))
        step = _step_of(str(step_key))
        for kind, entries in kinds.items():
            if isinstance(entries, dict):
                for key, entry in entries.items():
                    if isinstance(entry, dict) and not is_total_op(key):
                        yield str(step_key), step, kind, str(key), entry


def _communication(path: Path, ns: dict[str, pa.Array]) -> tuple[pd.DataFrame, pd.DataFrame]:
    data = read_json(path, "communication.json (HCCL op times of the Ascend profiler)")
    if not isinstance(data, dict):
        raise ProfileError(path, "expected a JSON object keyed by step ('step50': {...})")
    ops: list[dict[str, Any]] = []
    bws: list[dict[str, Any]] = []
    with counting_numbers(path.name):
        _hccl_rows(path, data, ops, bws)
    frame = pd.DataFrame(ops)
    if len(frame):
        start_ns = to_ns(pa.array(frame.pop("start_text"), pa.string()), len(frame),
                         label=f"{path.name} Start Timestamp(us)")
        ns["comm"] = start_ns
        frame["start__ns"] = int64_series(start_ns)
    return frame, pd.DataFrame(bws)


def _hccl_rows(path: Path, data: dict[str, Any], ops: list[dict[str, Any]],
               bws: list[dict[str, Any]]) -> None:
    """The op rows (``ops``) and bandwidth rows (``bws``) of a rank's communication.json."""
    for step_key, step, kind, key, entry in _hccl_entries(path, data):
        t = entry.get("Communication Time Info")
        if not isinstance(t, dict):
            raise ProfileError(path, "expected a 'Communication Time Info' object",
                               field=f"{step_key}.{kind}.{key}")
        name, group = _split_key(key)
        ops.append({
            "step": step, "group": group, "name": name, "kind": kind,
            **time_fields(t),
            "wait_ratio": _num(t.get("Wait Time Ratio"), "Wait Time Ratio"),
            "sync_ratio": _num(t.get("Synchronization Time Ratio"),
                               "Synchronization Time Ratio"),
        })
        b = entry.get("Communication Bandwidth Info")
        if isinstance(b, dict):
            for transport, v in b.items():
                if isinstance(v, dict):
                    bws.append({
                        "step": step, "group": group, "name": name,
                        **bandwidth_fields(transport, v),
                        "large_packet_ratio": _num(v.get("Large Packet Ratio"),
                                                   "Large Packet Ratio"),
                    })


def _num(v: Any, field: str | None = None) -> float:
    """A JSON number (NaN when missing; a value that is not one is counted under
    ``field``, see :func:`~perfkit.io._common.counting_numbers`)."""
    return json_number(v, field)


def _ms(v: Any, field: str | None = None) -> float:
    return _num(v, field) * 1000.0


def time_fields(t: dict[str, Any]) -> dict[str, Any]:
    """Columns of one HCCL op's ``Communication Time Info`` (ms -> µs; start as text).

    Shared by ``communication.json`` and msprof-analyze's ``cluster_communication.json``.
    """
    start = t.get("Start Timestamp(us)")
    return {
        "start_text": None if start is None else repr(start) if isinstance(start, float)
        else str(start),
        **{col: _ms(t.get(key), key) for col, key in _TIME_KEYS},
    }


_TIME_KEYS = (("elapse_us", "Elapse Time(ms)"), ("transit_us", "Transit Time(ms)"),
              ("wait_us", "Wait Time(ms)"), ("sync_us", "Synchronization Time(ms)"),
              ("idle_us", "Idle Time(ms)"))


def bandwidth_fields(transport: object, v: dict[str, Any]) -> dict[str, Any]:
    """Columns of one transport entry of ``Communication Bandwidth Info``."""
    return {"transport": str(transport),
            "size_bytes": _num(v.get("Transit Size(MB)"), "Transit Size(MB)") * 1e6,
            "transit_us": _ms(v.get("Transit Time(ms)"), "Transit Time(ms)"),
            "bandwidth_gbps": _num(v.get("Bandwidth(GB/s)"), "Bandwidth(GB/s)")}


def link_fields(v: dict[str, Any]) -> dict[str, Any]:
    """Columns of one ``src-dst`` link of a communication matrix."""
    return {"transport": v.get("Transport Type"),
            "size_bytes": _num(v.get("Transit Size(MB)"), "Transit Size(MB)") * 1e6,
            "time_us": _ms(v.get("Transit Time(ms)"), "Transit Time(ms)"),
            "bandwidth_gbps": _num(v.get("Bandwidth(GB/s)"), "Bandwidth(GB/s)"),
            "op_name": v.get("Op Name")}


def _matrix(path: Path, rank: int | None, groups: dict[str, Any],
            notes: list[str]) -> pd.DataFrame:
    data = read_json(path, "communication_matrix.json (HCCL link matrix of the Ascend profiler)")
    if not isinstance(data, dict):
        raise ProfileError(path, "expected a JSON object keyed by step ('step50': {...})")
    rows: list[dict[str, Any]] = []
    with counting_numbers(path.name):
        for _, step, kind, key, links in _hccl_entries(path, data):
            name, group = _split_key(key)
            for link, v in links.items():
                if not isinstance(v, dict):
                    continue
                src, _, dst = str(link).partition("-")
                rows.append({
                    "step": step, "group": group, "name": name, "kind": kind,
                    "src_local": _num(src, "link (src-dst)"),
                    "dst_local": _num(dst, "link (src-dst)"), **link_fields(v),
                })
    frame = _name_groups(pd.DataFrame(rows), groups)
    if not len(frame):
        return frame
    mapped = 0
    src_g = np.full(len(frame), np.nan)
    dst_g = np.full(len(frame), np.nan)
    for gname, g in groups.items():
        ranks = g.get("global_ranks") or []
        sel = (frame["group"] == gname).to_numpy()
        if not sel.any() or not ranks:
            continue
        lut = np.array(ranks, dtype=float)
        for arr, col in ((src_g, "src_local"), (dst_g, "dst_local")):
            loc = frame.loc[sel, col].to_numpy()
            ok = (loc >= 0) & (loc < len(lut))
            vals = np.full(len(loc), np.nan)
            vals[ok] = lut[loc[ok].astype(int)]
            arr[sel] = vals
        mapped += int(sel.sum())
    frame["src_rank"] = src_g
    frame["dst_rank"] = dst_g
    if mapped < len(frame):
        notes.append("comm_matrix: link ranks are local to their communication group and "
                     "profiler_metadata.json has no parallel_group_info for "
                     f"{len(frame) - mapped} of {len(frame)} links; src_rank/dst_rank left NA "
                     "(src_local/dst_local kept)")
    return frame
