"""One rank's recording exported twice, as text and as a database: read once.

torch_npu and MindSpore write a rank's analysed profile as text
(``ASCEND_PROFILER_OUTPUT/*.csv|json``), as a database (``ascend_*_profiler_{rank}.db``),
or both (``export_type=[text, db]``, or the raw data analysed twice). Both exports of one
recording hold the same steps, tasks and times: they are one rank of one run, never "two
profiles claiming rank 0" nor two runs. They are known for one recording by their
``profiler_info_{rank}.json``: the profiler writes the collection's ``start_info``
(``start_cnt``, ``start_monotonic``) and ``end_info`` (``collectionTimeEnd``) once per
recording, and both exports copy it. Same rank, same framework and the same non-empty
``start_info`` and ``end_info``: one recording; otherwise they stay apart (and the
folder's runs are told apart as before).

Of the two, the richer is read: the text export when it holds ``kernel_details.csv`` and
``trace_view.json`` (the device tasks with their shapes and the host operators), else the
database; the rank's notes say which was chosen and why (:attr:`RankSource.note`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from .sources import RankSource

__all__ = ["one_export_each", "text_and_db_note", "text_is_full"]

_OUT = "ASCEND_PROFILER_OUTPUT"


def _rank_dir(source: RankSource) -> Path:
    p = Path(source.path)
    if source.fmt == "ascend_db":  # .../rank_dir/ASCEND_PROFILER_OUTPUT/x.db
        return p.parent.parent if p.parent.name == _OUT else p.parent
    return p


def _recording(source: RankSource) -> tuple[str, str] | None:
    """``(start_info, end_info)`` of the rank's profiler_info JSON, as canonical text;
    None when either is missing or empty, or the file cannot be read."""
    for f in sorted(_rank_dir(source).glob("profiler_info*.json")):
        try:
            data: Any = json.loads(f.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError, UnicodeError):
            return None
        if not isinstance(data, dict):
            return None
        start, end = data.get("start_info"), data.get("end_info")
        if isinstance(start, dict) and isinstance(end, dict) and start and end:
            return json.dumps(start, sort_keys=True), json.dumps(end, sort_keys=True)
        return None
    return None


def _framework(source: RankSource) -> str:
    name = _rank_dir(source).name.lower()
    return "ms" if name.endswith("_ascend_ms") or "mindspore" in Path(source.path).name \
        else "pt"


def text_is_full(source: RankSource) -> bool:
    """Whether a text export holds kernel_details.csv and trace_view.json."""
    out = Path(source.path) / _OUT
    return (out / "kernel_details.csv").is_file() and (out / "trace_view.json").is_file()


def text_and_db_note(text: RankSource, db_name: str, why: str) -> str:
    """The note of a rank read from its text export, its DB export ``db_name`` left out."""
    full = text_is_full(text)
    return (f"rank exported twice, as text ({Path(text.path).name}) and as a database "
            f"({db_name}), {why}: one recording, read once, from the "
            + ("text export (its kernel_details.csv and trace_view.json give the device "
               "tasks with their shapes and the host operators)" if full else
               "database (the text export lacks kernel_details.csv or trace_view.json)"))


def _two(path: Path) -> str:
    """The last two parts of ``path`` (``db/rank0_ascend_pt``): enough to tell them apart."""
    return "/".join(path.parts[-2:])


def one_export_each(sources: list[RankSource]) -> list[RankSource]:
    """``sources`` with each recording exported both as text and as a database kept once
    (the richer export, its ``note`` saying which and why); everything else as it is."""
    texts = [s for s in sources if s.fmt == "ascend_text" and s.rank is not None]
    dbs = [s for s in sources if s.fmt == "ascend_db" and s.rank is not None]
    if not texts or not dbs:
        return sources
    drop: set[str] = set()
    notes: dict[str, str] = {}
    for t in texts:
        rec = _recording(t)
        if rec is None:
            continue
        for d in dbs:
            if d.path in drop or d.rank != t.rank or _framework(d) != _framework(t) \
                    or _recording(d) != rec:
                continue
            why = (f"with the same collection start and end in profiler_info "
                   f"({_two(_rank_dir(t))} and {_two(_rank_dir(d))})")
            note = text_and_db_note(t, Path(d.path).name, why)
            keep, gone = (t, d) if text_is_full(t) else (d, t)
            drop.add(gone.path)
            notes[keep.path] = note
            break
    if not drop:
        return sources
    return [dataclasses.replace(s, note=notes[s.path]) if s.path in notes else s
            for s in sources if s.path not in drop]
