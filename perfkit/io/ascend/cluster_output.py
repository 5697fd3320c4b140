"""msprof-analyze ``cluster_analysis_output/`` (text export of ``msprof-analyze cluster``).

Files: ``cluster_step_trace_time.csv`` (rows of ``Type`` ``rank`` -> per-rank ``steps``;
``stage`` rows, the max over a pipeline stage, go to ``meta.extra['stage_steps']``),
``cluster_communication.json`` (-> ``comm_ops`` and ``comm_bandwidth`` per rank; the
``Total Op Info`` summaries are skipped), ``cluster_communication_matrix.json`` (->
``comm_matrix``; msprof-analyze has already mapped link ranks to global ranks, and each
link is filed under its source rank) and ``communication_group.json`` (-> ``meta.groups``).
Kernels, ops and memory are not in this output.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...errors import ProfileError, file_boundary
from ...format import counted, listed, plural
from ...profile import Cluster, Profile, ProfileMeta
from .._common import (
    collecting_notes,
    counting_numbers,
    int64_series,
    note,
    read_csv,
    read_json,
    to_float,
    to_ns,
)
from ..canonical.categories import is_total_op
from ..canonical.validate import clean_tables, files_of_tables, plausible_origin
from .csv import _STEP_COLS
from .hccl import _split_key, _step_of, bandwidth_fields, link_fields, time_fields

__all__ = ["load", "parse"]


def parse(folder: Path) -> tuple[dict[int, dict[str, pd.DataFrame]], dict[str, Any]]:
    """Per-rank tables and cluster facts of a ``cluster_analysis_output`` folder."""
    per_rank: dict[int, dict[str, list[pd.DataFrame] | pd.DataFrame]] = {}
    extra: dict[str, Any] = {}
    files: dict[str, str] = {}
    f = folder / "cluster_step_trace_time.csv"
    if f.exists():
        with file_boundary(f, "cluster_step_trace_time.csv of msprof-analyze"):
            steps, stages = _steps(f)
            for r, grp in steps.groupby("rank"):
                per_rank.setdefault(int(r), {})["steps"] = grp.drop(columns="rank")
            extra["stage_steps"] = stages.to_dict(orient="records")
        files["steps"] = str(f)
    comm = folder / "cluster_communication.json"
    if comm.exists():
        with file_boundary(comm, "cluster_communication.json of msprof-analyze"):
            ops, bws = _communication(comm)
            for name, frame in (("comm_ops", ops), ("comm_bandwidth", bws)):
                if len(frame):
                    for r, grp in frame.groupby("rank"):
                        per_rank.setdefault(int(r), {})[name] = grp.drop(columns="rank")
        files["comm_ops"] = files["comm_bandwidth"] = str(comm)
    mat = folder / "cluster_communication_matrix.json"
    if mat.exists():
        with file_boundary(mat, "cluster_communication_matrix.json of msprof-analyze"):
            mx = _matrix(mat)
            if len(mx):
                for r, grp in mx.groupby("src_rank"):
                    per_rank.setdefault(int(r), {})["comm_matrix"] = grp
        files["comm_matrix"] = str(mat)
    g = folder / "communication_group.json"
    if g.exists():
        data = read_json(g, "communication_group.json of msprof-analyze")
        if not isinstance(data, dict):
            raise ProfileError(g, "expected a JSON object ({'collective': [...], 'p2p': [...], "
                               "'comm_group_parallel_info': [...]})")
        extra["communication_group"] = data
    extra["table_files"] = files
    if not per_rank:
        raise ProfileError(folder, "no rank found; expected cluster_step_trace_time.csv or "
                           "cluster_communication.json written by msprof-analyze cluster")
    return per_rank, extra  # type: ignore[return-value]


def _rank_ok(ranks: pd.Series) -> pd.Series:
    """Rank numbers that can be ranks (whole, >= 0, below a billion)."""
    r = pd.to_numeric(ranks, errors="coerce")
    return r.notna() & (r >= 0) & (r < 1e9) & (r == r.round())


def _rows_text(rows: np.ndarray, values: pd.Series, limit: int = 3) -> str:
    """``data row 3: 'abc', data row 7: 'x'`` for the first ``limit`` rows (1-based)."""
    shown = ", ".join(f"data row {int(i) + 1}: {str(v)[:30]!r}"
                      for i, v in zip(rows[:limit], values.iloc[rows[:limit]], strict=True))
    return shown + (f" and {len(rows) - limit} more" if len(rows) > limit else "")


def load(folder: Path, ranks: Iterable[int] | None = None) -> Cluster:
    """A :class:`Cluster` of the ranks in a ``cluster_analysis_output`` folder.

    Each file is its own exception boundary (a failure names it); times pass the
    plausibility checks of :mod:`perfkit.io.canonical.validate`, with notes.
    """
    with collecting_notes() as read_notes:
        per_rank, extra = parse(folder)
        groups = _groups(extra.get("communication_group", {}))
    files = extra.pop("table_files", {})
    wanted = None if ranks is None else {int(r) for r in ranks}
    if wanted is not None:
        missing = sorted(wanted - set(per_rank))
        if missing:
            raise ProfileError(folder, f"{plural(len(missing), 'rank')} {listed(missing)} "
                               "not found; ranks present: "
                               f"{sorted(per_rank)}")
    origin = extra.pop("origin_ns", None)
    profiles = []
    per_rank_notes: list[str] = []
    note = ("msprof-analyze cluster output: only steps and communication tables exist; "
            "times counted from the earliest communication start")
    origin = plausible_origin(*(t["comm_ops"]["start__ns"] for t in per_rank.values()
                                if "comm_ops" in t and len(t["comm_ops"])))
    for r, tables in sorted(per_rank.items()):
        if wanted is not None and r not in wanted:
            continue
        tables = dict(tables)
        if "comm_ops" in tables:
            ops = tables["comm_ops"].copy()
            ns = ops.pop("start__ns")
            ops["start_us"] = ((ns - origin).astype("float64") / 1000.0).to_numpy(
                np.float64, na_value=np.nan) if origin is not None else np.nan
            tables["comm_ops"] = ops
        checked = clean_tables(tables, files, str(folder))
        meta = ProfileMeta(source_format="cluster_analysis_output", framework=None, rank=r,
                           world_size=None, device_type="npu", groups=groups, origin_ns=origin,
                           path=str(folder), notes=[note, *read_notes, *checked],
                           extra={"table_files": files_of_tables(files, str(folder))})
        profiles.append(Profile(meta, tables))
        per_rank_notes += [f"rank {r}: {n}" for n in checked]
    ranks_all = sorted(per_rank)
    # the files are shared by all ranks: what was repaired in them is noted once
    cmeta = ProfileMeta(source_format="cluster_analysis_output", rank=None,
                        world_size=max(ranks_all) + 1 if ranks_all else None,
                        device_type="npu", groups=groups, origin_ns=origin, path=str(folder),
                        notes=[note, *read_notes, *per_rank_notes],
                        extra={**extra, "table_files": files_of_tables(files, str(folder))})
    return Cluster(profiles, cmeta)


def _groups(data: dict[str, Any]) -> dict[str, Any]:
    """``comm_group_parallel_info`` of ``communication_group.json``: ``{group id:
    {group_name, global_ranks}}``.

    The group id (HCCL's hash, the text after ``@`` in the communication keys) may be
    written as text or as a whole number; a group whose id is missing or not whole, or
    whose ``rank_set`` is not a list of whole numbers, is left out with a note (its
    members unknown, not guessed).
    """
    out: dict[str, Any] = {}
    infos = data.get("comm_group_parallel_info") if isinstance(data, dict) else None
    bad: list[str] = []
    if infos is not None and not isinstance(infos, list):
        bad.append("comm_group_parallel_info is not a list")
    for i, info in enumerate(infos if isinstance(infos, list) else []):
        gid = info.get("group_name") if isinstance(info, dict) else None
        if isinstance(gid, bool) or not isinstance(gid, (int, str)) or not str(gid).strip():
            bad.append(f"entry {i}: no group_name (the group id)")
            continue
        ranks = info.get("rank_set")
        good = [r for r in ranks if isinstance(r, int) and not isinstance(r, bool) and r >= 0] \
            if isinstance(ranks, list) else []
        if not isinstance(ranks, list) or len(good) < len(ranks):
            bad.append(f"group {gid}: rank_set {str(ranks)[:40]} is not a list of whole "
                       "numbers >= 0")
            good = []
        out[str(gid).strip()] = {"group_name": info.get("pg_name") or None,
                                 "global_ranks": good}
    if bad:
        note("communication_group.json: " + "; ".join(bad[:3])
             + (f" (and {len(bad) - 3} more)" if len(bad) > 3 else "")
             + ": left out (those groups' members unknown)")
    return out


def _steps(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    table = read_csv(path, "cluster_step_trace_time.csv of msprof-analyze",
                     required=[("Step",), ("Type",), ("Index",), ("Computing",)],
                     text_cols=["Step", "Type", "Index"])
    n = table.num_rows
    typ = pd.Series(table.column("Type").to_pandas(), dtype=TEXT).str.strip().str.lower()
    index = pd.Series(table.column("Index").to_pandas(), dtype=TEXT)
    cols: dict[str, Any] = {}
    named: dict[str, str] = {}
    step_text = pd.Series(table.column("Step").to_pandas(), dtype=TEXT)
    for canon, alts in _STEP_COLS.items():
        src = next((a for a in alts if a in table.column_names), None)
        if src is not None:
            named[canon] = src
            cols[canon] = _step_numbers(path, step_text) if canon == "step" else \
                to_float(table.column(src), n, label=f"{path.name} {src}")
    frame = pd.DataFrame(cols)
    is_rank = (typ == "rank").to_numpy()
    _note_empty_numbers(path, frame, named, is_rank)
    is_stage = (typ == "stage").to_numpy()
    other = np.flatnonzero(~is_rank & ~is_stage)
    if len(other):
        note(f"{path.name}: {counted(len(other), 'row')} whose Type is neither rank nor stage "
             f"({_rows_text(other, table.column('Type').to_pandas())}): left out")
    ok = _rank_ok(index).to_numpy()
    bad = np.flatnonzero(is_rank & ~ok)
    if len(bad):
        if not (is_rank & ok).any():
            raise ProfileError(path, f"no rank row has a rank number in Index "
                               f"({_rows_text(bad, index)}); expected the global rank",
                               field="Index")
        note(f"{path.name}: {counted(len(bad), 'rank row')} whose Index is not a rank number "
             f"({_rows_text(bad, index)}): left out")
    keep = is_rank & ok
    steps = frame[keep].copy()
    steps.insert(0, "rank", pd.to_numeric(index, errors="coerce").to_numpy()[keep])
    stages = frame[is_stage].copy()
    stages.insert(0, "ranks", index[is_stage].to_numpy())
    return steps, stages


_STEP_WORD = re.compile(r"^\s*step\s*[#_ ]?\s*(\d{1,9})\s*$", re.IGNORECASE)


def _step_numbers(path: Path, text: pd.Series) -> np.ndarray:
    """The Step column: numbers, or text naming one (``step2``, ``Step 2``, as the
    communication files name steps) read as that number with a note; other text is NA,
    with a note naming the rows."""
    nums = pd.to_numeric(text.str.strip(), errors="coerce").to_numpy(np.float64, na_value=np.nan)
    words = text.str.extract(_STEP_WORD, expand=False)
    named = np.flatnonzero(np.isnan(nums) & words.notna().to_numpy())
    if len(named):
        nums[named] = pd.to_numeric(words.iloc[named]).to_numpy(np.float64)
        note(f"{path.name} Step: {counted(len(named), 'row')} naming the step in words "
             f"({_rows_text(named, text)}): read as the step number")
    bad = np.flatnonzero(np.isnan(nums) & text.str.strip().fillna("").ne("").to_numpy())
    if len(bad):
        note(f"{path.name} Step: {counted(len(bad), 'row')} whose Step is not a step number "
             f"({_rows_text(bad, text)}): step unknown (NA)")
    return nums


def _note_empty_numbers(path: Path, frame: pd.DataFrame, named: dict[str, str],
                        is_rank: np.ndarray) -> None:
    """A rank row without a number in a column that other rank rows fill (an empty cell,
    or ``n/a``, ``-``, ``NaN`` read as missing): a damaged row, noted with its rows; a
    column empty in every row is one the writer did not fill, and is not noted."""
    ranks = np.flatnonzero(is_rank)
    for canon, src in named.items():
        if canon in ("step", "device_id") or canon not in frame:
            continue
        v = frame[canon].to_numpy(np.float64)[ranks]
        gone = np.isnan(v)
        if gone.any() and not gone.all():
            rows = ranks[gone]
            note(f"{path.name} {src}: {counted(len(rows), 'rank row')} without a number "
                 f"(data row{'s' if len(rows) > 1 else ''} "
                 f"{', '.join(str(int(r) + 1) for r in rows[:5])}"
                 f"{' ...' if len(rows) > 5 else ''}): left NA")


def _entries(data: dict[str, Any], skipped: list[str]
             ) -> Iterator[tuple[str, float, str, dict[str, Any]]]:
    """Walk ``{rank set: {step: {op@group: {...}}}}`` of msprof-analyze's cluster JSON files.

    Yields ``(rank_set, step, key, value)`` for every object entry that is not a total;
    where a value that should be an object is not one goes to ``skipped``.
    """
    for set_key, steps in data.items():
        if not isinstance(steps, dict):
            skipped.append(str(set_key)[:40])
            continue
        for step_key, entries in steps.items():
            if not isinstance(entries, dict):
                skipped.append(f"{set_key}.{step_key}"[:60])
                continue
            step = _step_of(str(step_key))
            for key, value in entries.items():
                if is_total_op(key):
                    continue
                if isinstance(value, dict):
                    yield str(set_key), step, str(key), value
                else:
                    skipped.append(f"{set_key}.{step_key}.{key}"[:80])


def _communication(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    data = read_json(path, "cluster_communication.json of msprof-analyze")
    if not isinstance(data, dict):
        raise ProfileError(path, "expected a JSON object keyed by rank set ('(0, 1)': ...)")
    ops: list[dict[str, Any]] = []
    bws: list[dict[str, Any]] = []
    with counting_numbers(path.name):
        skipped = _op_rows(data, ops, bws)
    if skipped:
        note(f"{path.name}: {len(skipped)} entr(ies) not keyed by a rank number or not an "
             f"object ({', '.join(skipped[:3])}{', ...' if len(skipped) > 3 else ''}): "
             "left out")
    frame = pd.DataFrame(ops)
    if len(frame):
        import pyarrow as pa

        ns = to_ns(pa.array(frame.pop("start_text"), pa.string()), len(frame),
                   label=f"{path.name} Start Timestamp(us)")
        frame["start__ns"] = int64_series(ns)
    return frame, pd.DataFrame(bws)


def _op_rows(data: dict[str, Any], ops: list[dict[str, Any]],
             bws: list[dict[str, Any]]) -> list[str]:
    """Rows of ``cluster_communication.json`` into ``ops`` and ``bws``; returns where the
    entries left out were (``"(0, 1).step2.op@g.rank x"``)."""
    skipped: list[str] = []
    for set_key, step, key, by_rank in _entries(data, skipped):
        name, group = _split_key(key)
        for rank_key, entry in by_rank.items():
            if not re.fullmatch(r"\d{1,9}", str(rank_key)) or not isinstance(entry, dict):
                skipped.append(f"{set_key}.{key}[{str(rank_key)[:20]!r}]")
                continue
            r = int(rank_key)
            t = entry.get("Communication Time Info")
            ops.append({
                "rank": r, "step": step, "group": group, "name": name,
                "rank_set": set_key,
                **time_fields(t if isinstance(t, dict) else {}),
            })
            b = entry.get("Communication Bandwidth Info")
            for transport, v in (b if isinstance(b, dict) else {}).items():
                if isinstance(v, dict):
                    bws.append({"rank": r, "step": step, "group": group, "name": name,
                                **bandwidth_fields(transport, v)})
    return skipped


def _matrix(path: Path) -> pd.DataFrame:
    data = read_json(path, "cluster_communication_matrix.json of msprof-analyze")
    if not isinstance(data, dict):
        raise ProfileError(path, "expected a JSON object keyed by rank set")
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    with counting_numbers(path.name):
        for _, step, key, links in _entries(data, skipped):
            name, group = _split_key(key)
            for link, v in links.items():
                src, _, dst = str(link).partition("-")
                if not isinstance(v, dict) or not re.fullmatch(r"\d{1,9}", src) \
                        or not re.fullmatch(r"\d{1,9}", dst):
                    skipped.append(f"{key}[{str(link)[:20]!r}]")
                    continue
                rows.append({"step": step, "group": group, "name": name,
                             "src_rank": int(src), "dst_rank": int(dst), **link_fields(v)})
    if skipped:
        note(f"{path.name}: {counted(len(skipped), 'link')} not named src-dst by rank numbers "
             f"or not an object ({', '.join(skipped[:3])}{', ...' if len(skipped) > 3 else ''}): "
             "left out")
    return pd.DataFrame(rows)
