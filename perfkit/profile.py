"""Profile (one rank) and Cluster (many ranks): the canonical tables of DESIGN.md.

A :class:`Profile` holds a :class:`ProfileMeta` and nine tables (``kernels``, ``ops``,
``steps``, ``comm_ops``, ``comm_bandwidth``, ``comm_matrix``, ``memory``, ``op_memory``).
Tables are produced on first access by a provider (the parsed frames in memory, or the
Parquet files of the cache) and kept. A :class:`Cluster` exposes the same attributes,
concatenated over its ranks; its times are re-based to the cluster's earliest origin so
that ranks line up. Build them with :func:`perfkit.io.engines.local.load`; with ``wait=False`` it
returns one while a thread parses (:mod:`perfkit.io.engines.loading`): ``done``, ``wait()`` and
``loading`` say how far it is.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .format import listed, plural, world_size_text
from .io.canonical.schema import TABLE_NAMES, TABLES, conform

__all__ = ["ProfileMeta", "Profile", "Cluster", "LINK_COLUMNS", "group_rank_maps",
           "apply_group_rank_maps", "shift_times", "missing_rank"]

TableProvider = Callable[[str], pd.DataFrame]


@dataclass
class ProfileMeta:
    """What is known about one profile (or a whole cluster) besides its tables.

    Attributes
    ----------
    source_format : str
        ``"ascend_text"``, ``"ascend_db"``, ``"mindspore_legacy"``, ``"kineto"``,
        ``"mindspore_trace_view"``, ``"cluster_analysis_output"`` or ``"cluster"``.
    framework : str or None
        ``"pytorch"`` (torch_npu or PyTorch), ``"mindspore"``, or None when unknown.
    rank : int or None
        Global rank (None for a cluster).
    world_size : int or None
        Number of ranks of the job when the source records it. An Ascend export does not:
        its ranks count it from their own communication groups (``extra["world_size_from"]
        == "groups"``), so one rank's count is at least the job's, and not always all of it
        (:meth:`world_size_text`).
    device_type : str or None
        ``"npu"`` or ``"gpu"``.
    profiler_level : str or None
        Ascend ``Level0``/``Level1``/``Level2`` when recorded.
    groups : dict
        Communication groups: ``{group name: {"group_name": ..., "global_ranks": [...]}}``.
    origin_ns : int or None
        Absolute epoch nanoseconds that every ``*_us`` time is relative to.
    path : str
        The file or folder the profile was read from.
    notes : list of str
        What is missing or was lost, and why.
    extra : dict
        Source-specific facts (profiler config, versions, ...).
    """

    source_format: str
    framework: str | None = None
    rank: int | None = None
    world_size: int | None = None
    device_type: str | None = None
    profiler_level: str | None = None
    groups: dict[str, Any] = field(default_factory=dict)
    origin_ns: int | None = None
    path: str = ""
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a plain (JSON-able) dict."""
        return dataclasses.asdict(self)

    def world_size_text(self) -> str:
        """The world size as people read it: ``"4"``, ``"unknown"``, or for one rank that
        counted it from its own groups ``"at least 3 (its communication groups)"``."""
        return world_size_text(self.world_size, at_least=self.rank is not None and (
            self.extra or {}).get("world_size_from") == "groups")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProfileMeta:
        """Build from :meth:`to_dict` output (unknown keys are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def missing_rank(rank: Any, ranks: Sequence[int]) -> KeyError:
    """The error of ``cluster[rank]`` for a rank it does not hold; text that looks like a
    rank it holds (``"1"``) is said to be text."""
    if isinstance(rank, str):
        return KeyError(f"rank {rank!r} is text: give the rank as a number, "
                        f"cluster[{rank.strip()}] (ranks: {list(ranks)})")
    return KeyError(f"rank {rank} is not in this cluster (ranks: {list(ranks)})")


class _Tables:
    """Attribute access to the nine canonical tables, computed once each.

    Each table is built once even when two threads ask for it at the same time (the
    advisor computes some analyses ahead on a second thread): builds hold ``_lock``.
    """

    lazy: bool = False
    """True when the tables are lazy ``dask.dataframe`` frames (``load(engine="dask")``)."""

    _lock: threading.RLock

    loading: Any = None
    """The background parse of ``load(..., wait=False)`` (a :class:`perfkit.io.engines.loading.
    Loading`: progress, error, the loaded object); None for a profile loaded whole."""

    @property
    def done(self) -> bool:
        """True once every table and ``meta`` can be read without waiting (always, except
        while ``load(..., wait=False)`` parses; also True when that parse failed)."""
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the background parse of ``load(..., wait=False)``, if any.

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait at most (default: until the parse ends).

        Returns
        -------
        bool
            True when the profile is loaded; False when ``timeout`` passed first.

        Raises
        ------
        PerfkitError
            The parse failed: its error, as ``load(...)`` would have raised it.
        """
        return True

    def _table(self, name: str) -> pd.DataFrame:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def kernels(self) -> pd.DataFrame:
        """Device tasks (kernels, HCCL/NCCL ops, memcpy), one row each."""
        return self._table("kernels")

    @property
    def ops(self) -> pd.DataFrame:
        """Framework (host) operators, one row each."""
        return self._table("ops")

    @property
    def steps(self) -> pd.DataFrame:
        """Per-step time breakdown."""
        return self._table("steps")

    @property
    def comm_ops(self) -> pd.DataFrame:
        """Communication operators with their time split."""
        return self._table("comm_ops")

    @property
    def comm_bandwidth(self) -> pd.DataFrame:
        """Per communication operator and transport: size, time and bandwidth."""
        return self._table("comm_bandwidth")

    @property
    def comm_matrix(self) -> pd.DataFrame:
        """Link-level (source rank to destination rank) transfers."""
        return self._table("comm_matrix")

    @property
    def memory(self) -> pd.DataFrame:
        """Memory samples over time per component."""
        return self._table("memory")

    @property
    def op_memory(self) -> pd.DataFrame:
        """Individual allocations with their lifetime."""
        return self._table("op_memory")

    def tables(self) -> dict[str, pd.DataFrame]:
        """Return all nine tables as a dict (this loads every one)."""
        return {name: self._table(name) for name in TABLE_NAMES}


class Profile(_Tables):
    """One rank's profile: :attr:`meta` plus the canonical tables.

    Parameters
    ----------
    meta : ProfileMeta
        Facts about the profile.
    tables : mapping or callable
        Either a mapping ``{table name: DataFrame}`` (missing names give empty tables)
        or a function ``name -> DataFrame`` called at most once per table.
    """

    def __init__(self, meta: ProfileMeta, tables: Mapping[str, pd.DataFrame] | TableProvider):
        self.meta = meta
        self._cache: dict[str, pd.DataFrame] = {}
        self._lock = threading.RLock()
        if callable(tables):
            self._provider: TableProvider = tables
        else:
            frames = dict(tables)
            self._provider = lambda name: frames.get(name)  # type: ignore[return-value]

    @property
    def rank(self) -> int | None:
        """Global rank of this profile."""
        return self.meta.rank

    def _table(self, name: str) -> pd.DataFrame:
        with self._lock:
            if name not in self._cache:
                frame = self._provider(name)
                self._cache[name] = conform(frame, name, self.meta.rank)
            return self._cache[name]

    def __repr__(self) -> str:
        m = self.meta
        return (f"Profile(rank={m.rank}, format={m.source_format!r}, framework={m.framework!r}, "
                f"level={m.profiler_level!r}, path={m.path!r})")


class Cluster(_Tables):
    """Many ranks; the same table attributes as :class:`Profile`, concatenated.

    Parameters
    ----------
    profiles : iterable of Profile
        The ranks that loaded (sorted by rank here).
    meta : ProfileMeta
        Cluster-level facts; ``notes`` lists ranks that failed to load.
    failed : mapping, optional
        ``{rank or path: error message}`` for ranks that could not be read.

    Notes
    -----
    Times of every rank are shifted to the cluster's ``meta.origin_ns`` (the earliest
    rank origin), so the same instant has the same ``*_us`` value on every rank.
    """

    def __init__(self, profiles: list[Profile], meta: ProfileMeta,
                 failed: Mapping[Any, str] | None = None):
        self.profiles = sorted(profiles, key=lambda p: (p.meta.rank is None, p.meta.rank or 0))
        self.meta = meta
        self.failed = dict(failed or {})
        self._cache: dict[str, pd.DataFrame] = {}
        self._lock = threading.RLock()

    @property
    def ranks(self) -> list[int]:
        """Global ranks present, ascending."""
        return [p.meta.rank for p in self.profiles if p.meta.rank is not None]

    def __len__(self) -> int:
        return len(self.profiles)

    def __iter__(self) -> Iterator[Profile]:
        return iter(self.profiles)

    def __getitem__(self, rank: int) -> Profile:
        for p in self.profiles:
            if p.meta.rank == rank:
                return p
        raise missing_rank(rank, self.ranks)

    def _table(self, name: str) -> pd.DataFrame:
        with self._lock:
            return self._build(name)

    def _build(self, name: str) -> pd.DataFrame:
        if name in self._cache:
            return self._cache[name]
        parts = [shift_times(p._table(name), name,
                             _shift_us(p.meta.origin_ns, self.meta.origin_ns))
                 for p in self.profiles]
        parts = [f for f in parts if len(f)] or parts[:1]
        result = pd.concat(parts, ignore_index=True) if parts else conform(None, name)
        result = conform(result, name)
        if name == "comm_matrix":
            result = self._map_local_ranks(result)
        self._cache[name] = result
        return result

    def _map_local_ranks(self, matrix: pd.DataFrame) -> pd.DataFrame:
        """Fill NA ``src_rank``/``dst_rank`` from group-local ranks when a whole group is here.

        A group's members are the ranks whose ``comm_ops`` use it; group-local rank ``i`` is
        the ``i``-th member in ascending order (how torch.distributed and HCCL number
        sub-groups). Only groups whose every member is in the cluster are mapped; the
        others stay NA, since a partial member list would give wrong ranks.
        """
        if not len(matrix) or "src_local" not in matrix or "group" not in matrix:
            return matrix
        todo = matrix["src_rank"].isna() | matrix["dst_rank"].isna()
        if not todo.any():
            return matrix
        maps = group_rank_maps(matrix.loc[todo, list(LINK_COLUMNS)],
                               self._table("comm_ops")[["group", "rank"]])
        if maps:
            self._note_mapped(list(maps))
        return apply_group_rank_maps(matrix, maps)

    def _note_mapped(self, groups: list[str]) -> None:
        # after the ranks' own notes, which left these links' global ranks NA: this says
        # the cluster filled them, so the two do not read as a contradiction
        note = (f"comm_matrix: for {plural(len(groups), 'group')} {listed(groups)}, the "
                "group-local ranks that the ranks' files left NA are mapped to global ranks "
                "from the cluster's members of the group (ascending order)")
        if note not in self.meta.notes:
            self.meta.notes.append(note)

    def __repr__(self) -> str:
        return (f"Cluster(ranks={self.ranks}, format={self.meta.source_format!r}, "
                f"failed={sorted(map(str, self.failed))})")


_TIMESTAMP_COLS = {"start_us", "ts_us", "alloc_us", "release_us", "step_start_us"}
"""Columns holding instants (shifted when ranks are aligned); the rest are durations.

``step_start_us`` is an optional ``steps`` column (Kineto's ``ProfilerStep`` start, the
MindSpore CPU reader's step start): an instant like the others, so it moves with them."""


LINK_COLUMNS = ("group", "rank", "src_local", "dst_local")
"""Columns of ``comm_matrix`` that decide the group-local to global rank mapping."""


def group_rank_maps(links: pd.DataFrame, members: pd.DataFrame) -> dict[str, list[int]]:
    """Groups whose local ranks can be mapped to global ranks, with their member lists.

    Parameters
    ----------
    links : DataFrame
        ``group``, ``rank``, ``src_local``, ``dst_local`` of the ``comm_matrix`` rows whose
        ``src_rank`` or ``dst_rank`` is NA (duplicate rows may be dropped beforehand: only
        the distinct values matter, which lets a lazy cluster send just those).
    members : DataFrame
        ``group`` and ``rank`` of the cluster's ``comm_ops`` (duplicates allowed).

    Returns
    -------
    dict
        ``{group: ascending global ranks}`` for each group whose local ranks all lie in
        ``0 .. len(members) - 1`` and whose every rank records itself as the source at its
        own position in that list.
    """
    maps: dict[str, list[int]] = {}
    if not len(links):
        return maps
    per_group = members.dropna(subset=["group"]).groupby("group")["rank"].unique()
    group_of = links["group"]
    for group, ranks in per_group.items():
        ranks = sorted(int(r) for r in ranks)
        sel = (group_of == group).fillna(False).to_numpy()
        if not sel.any():
            continue
        local = pd.concat([links.loc[sel, "src_local"], links.loc[sel, "dst_local"]])
        if local.isna().any() or local.max() >= len(ranks) or local.min() < 0:
            continue  # members missing from this cluster
        # each rank writes its own links, so its source must be its own local rank
        own = links.loc[sel, ["rank", "src_local"]].drop_duplicates()
        if any(int(r) not in ranks or ranks.index(int(r)) != int(loc)
               for r, loc in own.itertuples(index=False)):
            continue
        maps[str(group)] = ranks
    return maps


def apply_group_rank_maps(matrix: pd.DataFrame, maps: Mapping[str, list[int]]
                          ) -> pd.DataFrame:
    """Fill NA ``src_rank``/``dst_rank`` of the groups in ``maps`` from their local ranks.

    Works on any subset of a cluster's ``comm_matrix`` rows (one rank's, for a lazy
    cluster), since each row is mapped on its own. Returns ``matrix`` itself when nothing
    changes, else a copy.
    """
    if not maps or not len(matrix) or "src_local" not in matrix or "group" not in matrix:
        return matrix
    todo = (matrix["src_rank"].isna() | matrix["dst_rank"].isna()).to_numpy()
    if not todo.any():
        return matrix
    matrix = matrix.copy()
    for group, ranks in maps.items():
        sel = (matrix["group"] == group).fillna(False).to_numpy() & todo
        if not sel.any():
            continue
        lut = pd.Series(ranks)
        for col, loc in (("src_rank", "src_local"), ("dst_rank", "dst_local")):
            matrix.loc[sel, col] = lut.reindex(
                matrix.loc[sel, loc].astype(int).to_numpy()).to_numpy()
    return matrix


def shift_times(frame: pd.DataFrame, table: str, shift_us: float) -> pd.DataFrame:
    """Add ``shift_us`` to the instant columns of one rank's ``table`` (durations stay).

    This is how a Cluster puts a rank on the cluster's origin; ``shift_us`` is the rank's
    ``origin_ns`` minus the cluster's, in microseconds. Returns ``frame`` itself when there
    is nothing to shift, else a copy.
    """
    time_cols = [c for c in (*TABLES[table], *frame.columns)
                 if c.endswith("_us") and c in _TIMESTAMP_COLS]
    time_cols = [c for c in dict.fromkeys(time_cols) if c in frame.columns]
    if shift_us and time_cols and len(frame):
        frame = frame.copy()
        for c in time_cols:
            frame[c] = frame[c] + shift_us
    return frame


def _shift_us(rank_origin: int | None, cluster_origin: int | None) -> float:
    if rank_origin is None or cluster_origin is None:
        return 0.0
    return (int(rank_origin) - int(cluster_origin)) / 1000.0
