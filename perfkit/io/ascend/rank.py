"""The rank folder of an Ascend text export and what its two JSON side files say.

The one job of this module: find the rank folder (``*_ascend_pt`` / ``*_ascend_ms`` and its
``ASCEND_PROFILER_OUTPUT/``, :func:`rank_dir_of`, :func:`is_rank_dir`,
:func:`is_bare_output`) and read the facts of ``profiler_info[_{rank}].json`` (the rank,
:func:`read_rank_id`; the framework; the profiler level) and of
``profiler_metadata.json`` (the communication groups of ``parallel_group_info``, the world
size they imply, :data:`WORLD_FROM_GROUPS`; the scheme of a simulated rank).
:mod:`perfkit.io.ascend.text` parses the rank and re-exports the public names.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...errors import ProfileError
from .._common import read_json

__all__ = ["OUTPUT_DIR", "is_rank_dir", "is_bare_output", "rank_dir_of", "read_rank_id",
           "WORLD_FROM_GROUPS", "metadata_notes"]

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"


def rank_dir_of(path: Path) -> Path:
    """The rank folder of ``path`` (the folder itself, or the parent of its output dir)."""
    return path.parent if path.name == OUTPUT_DIR else path


def is_rank_dir(path: Path) -> bool:
    """True when ``path`` is an Ascend text-export rank folder (or its output folder)."""
    rank_dir = rank_dir_of(path)
    out = rank_dir / OUTPUT_DIR
    if not out.is_dir():
        return False
    names = {p.name for p in out.iterdir()}
    known = {"kernel_details.csv", "step_trace_time.csv", "trace_view.json",
             "communication.json", "op_statistic.csv", "memory_record.csv",
             "operator_memory.csv", "npu_module_mem.csv", "communication_matrix.json"}
    return bool(names & known)


def is_bare_output(path: Path) -> bool:
    """A folder holding ``kernel_details.csv`` itself, outside any rank folder: a copied or
    renamed ``ASCEND_PROFILER_OUTPUT`` (or a lone ``kernel_details.csv``)."""
    return path.is_dir() and path.name != OUTPUT_DIR and \
        (path / "kernel_details.csv").is_file()


def _level_said(level: str | None) -> str:
    """This profile's profiler level, after a file written from a level on was not found."""
    return f"this profile's level is {level}" if level else "this profile's level is not known"


def _info_files(rank_dir: Path) -> list[Path]:
    return sorted(rank_dir.glob("profiler_info*.json"))


def read_rank_id(rank_dir: Path) -> int | None:
    """Rank from ``profiler_info_{rank}.json`` (file name, then ``rank_id`` key), else None."""
    for f in _info_files(rank_dir):
        m = re.fullmatch(r"profiler_info_(\d+)\.json", f.name)
        if m:
            return int(m.group(1))
    for f in _info_files(rank_dir):
        try:
            info = read_json(f, "profiler_info JSON")
        except ProfileError:
            continue
        rid = _rank_key(info)
        if rid is not None:
            return rid
    return None


def _rank_key(info: Any) -> int | None:
    if not isinstance(info, dict):
        return None
    for cand in (info.get("rank_id"), (info.get("ms_profiler_info") or {}).get("rank_id")
                 if isinstance(info.get("ms_profiler_info"), dict) else None):
        if isinstance(cand, bool) or not isinstance(cand, (int, str)):
            continue  # a float, list or object is not a rank
        text = str(cand).strip()
        if text.isdigit() and len(text) < 10:
            return int(text)
    return None


def _dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else ``{}`` (a field of the wrong type is ignored)."""
    return value if isinstance(value, dict) else {}


def _framework(rank_dir: Path, info: dict[str, Any]) -> str | None:
    name = rank_dir.name.lower()
    if name.endswith("_ascend_ms") or "ms_profiler_info" in info or "ms_version" in info:
        return "mindspore"
    if name.endswith("_ascend_pt") or "config" in info:
        return "pytorch"
    return None


def _level(info: dict[str, Any]) -> str | None:
    exp = _dict(_dict(info.get("config")).get("experimental_config"))
    level = exp.get("_profiler_level") or exp.get("profiler_level")
    if level is None:
        level = _dict(info.get("profiler_parameters")).get("profiler_level")
    if level is None or isinstance(level, (dict, list)):
        return None
    return str(level).replace("ProfilerLevel.", "")



def _json_kind(value: Any) -> str:
    """What a JSON value is, in words ("a list", "text", ...)."""
    if isinstance(value, bool) or value is None:
        return "null" if value is None else str(value).lower()
    return {dict: "an object", list: "a list", str: "text", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def _simulated_scheme(metadata: dict[str, Any]) -> dict[str, str]:
    """``{"simulated_static_scheme": scheme}`` for a rank that :func:`perfkit.simulate.
    simulate` wrote (``perfkit_simulation.settings.static_scheme`` of its metadata: the
    static-memory scheme its memory records were made with), else nothing."""
    settings = _dict(_dict(metadata.get("perfkit_simulation")).get("settings"))
    scheme = settings.get("static_scheme")
    return {"simulated_static_scheme": scheme} if isinstance(scheme, str) and scheme else {}


def _groups(metadata: dict[str, Any], notes: list[str] | None = None) -> dict[str, Any]:
    """``parallel_group_info`` of ``profiler_metadata.json``: ``{group id: {group_name,
    group_rank, global_ranks}}``. Entries or ranks of the wrong type are left out, with a
    note in ``notes`` (the groups they would give are unknown, not guessed); a group name
    that is not text, or a group rank that is no position in the group, is read as unknown
    (None), with a note."""
    info = metadata.get("parallel_group_info")
    bad: list[str] = []
    odd: list[str] = []
    if info is not None and not isinstance(info, dict):
        bad.append(f"parallel_group_info is {_json_kind(info)}, not an object")
    groups: dict[str, Any] = {}
    for key, g in (info.items() if isinstance(info, dict) else ()):
        if not isinstance(g, dict):
            bad.append(f"group {key!s} is {_json_kind(g)}, not an object")
            continue
        ranks = g.get("global_ranks")
        good = [r for r in ranks if isinstance(r, int) and not isinstance(r, bool)
                and r >= 0] if isinstance(ranks, list) else []
        if ranks is not None and (not isinstance(ranks, list) or len(good) < len(ranks)):
            bad.append(f"group {key!s} global_ranks {str(ranks)[:40]} are not all whole "
                       "numbers >= 0")
            good = []
        name, own = g.get("group_name"), g.get("group_rank")
        if name is not None and not isinstance(name, str):
            odd.append(f"group {key!s} group_name {str(name)[:40]} is {_json_kind(name)}, "
                       "not text")
            name = None
        if own is not None and (not isinstance(own, int) or isinstance(own, bool) or own < 0
                                or (good and own >= len(good))):
            odd.append(f"group {key!s} group_rank {str(own)[:40]} is not a position in its "
                       f"{len(good)} global_ranks")
            own = None
        groups[str(key)] = {"group_name": name, "group_rank": own, "global_ranks": good}
    if bad and notes is not None:
        notes.append("profiler_metadata.json parallel_group_info: " + "; ".join(bad[:3])
                     + (f" (and {len(bad) - 3} more)" if len(bad) > 3 else "")
                     + ": left out (those groups' members unknown)")
    if odd and notes is not None:
        notes.append("profiler_metadata.json parallel_group_info: " + "; ".join(odd[:3])
                     + (f" (and {len(odd) - 3} more)" if len(odd) > 3 else "")
                     + ": read as unknown (the members kept)")
    return groups


def metadata_notes(metadata: dict[str, Any], notes: list[str]) -> None:
    """Notes on the fields of ``profiler_metadata.json`` other than its groups
    (:func:`_groups`) that are of the wrong type: ``ENV_VARIABLES`` not an object, or with
    values that are not text; ``perfkit_simulation`` not an object. Such a field is read
    as empty, said so, never silently."""
    bad = []
    env = metadata.get("ENV_VARIABLES")
    if env is not None and not isinstance(env, dict):
        bad.append(f"ENV_VARIABLES is {_json_kind(env)}, not an object: the environment "
                   "is unknown")
    elif isinstance(env, dict):
        odd = [str(k) for k, v in env.items() if not isinstance(v, str)]
        if odd:
            bad.append(f"ENV_VARIABLES {', '.join(odd[:3])}"
                       + (f" (and {len(odd) - 3} more)" if len(odd) > 3 else "")
                       + " not text: read as written")
    sim = metadata.get("perfkit_simulation")
    if sim is not None and not isinstance(sim, dict):
        bad.append(f"perfkit_simulation is {_json_kind(sim)}, not an object: ignored")
    if bad:
        notes.append("profiler_metadata.json: " + "; ".join(bad))


def _world_size(groups: dict[str, Any]) -> int | None:
    """The highest global rank of a rank's communication groups, plus one: at least the
    job's world size, which the export does not record (:data:`WORLD_FROM_GROUPS`)."""
    ranks = {r for g in groups.values() for r in g.get("global_ranks", [])}
    return max(ranks) + 1 if ranks else None


#: ``meta.extra`` of a rank whose ``world_size`` is :func:`_world_size`: a rank lists only
#: its own groups (rank 0 of dp 2 × pp 2 is in dp {0, 1} and pp {0, 2}: 3), so ranks of one
#: job may disagree on it, and it does not tell runs apart (:mod:`perfkit.io.detect.runs`).
WORLD_FROM_GROUPS = {"world_size_from": "groups"}
