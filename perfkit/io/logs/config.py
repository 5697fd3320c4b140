"""MindFormers training YAML -> ``(ModelSpec, ParallelConfig, extras)``.

The model part is read by :meth:`perfkit.ModelSpec.from_mindformers_yaml`; this module reads
the rest: ``parallel_config`` and ``parallel``, ``recompute_config``, ``runner_config``,
``context`` and the profiler switches. Any value of the wrong kind raises
:class:`perfkit.ConfigFileError` naming the file, the line and the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..._values import MAX_WHOLE, parse_bool, read_config_text
from ...errors import ConfigFileError, InvalidArgumentError, boundary
from ...format import share_text
from ...specs import ModelSpec, ParallelConfig
from ...specs.model_config import MINDFORMERS_KEYS
from .yaml_keys import duplicate_keys, field_of

__all__ = ["read_mindformers_config", "read_rank_table", "parse_memory_size", "PROFILE_KEYS"]

#: Top-level profiler switches copied into ``extras["profile"]`` when present.
PROFILE_KEYS = ("profile", "profile_start_step", "profile_stop_step", "init_start_profile",
                "profile_communication", "profile_memory", "profile_level", "profiler_level",
                "profile_rank_ids", "profile_pipeline", "with_stack", "data_simplification",
                "mstx", "profile_output")

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.IGNORECASE)
_UNIT = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_memory_size(text: str | int | float) -> float:
    """Bytes in a MindSpore memory size such as ``"58GB"`` or ``"57.2GB"`` (binary units).

    MindSpore reads ``max_device_memory`` in units of 1024**3 bytes per "GB".
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text) * 2**30
    m = _SIZE.match(str(text))
    if m is None:
        raise InvalidArgumentError("max_device_memory", "expected a size like '58GB'", text)
    return float(m.group(1)) * _UNIT[m.group(2).upper()]


class _Doc:
    """A loaded YAML document that remembers the line of every mapping key."""

    def __init__(self, path: Path) -> None:
        import yaml

        self.path = path
        text = read_config_text(path)
        try:
            self.data = yaml.safe_load(text)
            node = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}: " if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ConfigFileError(path, f"{where}not valid YAML: {problem}") from exc
        if not isinstance(self.data, Mapping):
            raise ConfigFileError(path, "expected a YAML mapping at the top, found "
                                  f"{type(self.data).__name__}")
        self.lines: dict[tuple[str, ...], int] = {}
        self._index(node, ())
        #: keys given twice with different values (the last is read, as PyYAML keeps it)
        self.duplicates = duplicate_keys(node)

    def _index(self, node: Any, prefix: tuple[str, ...]) -> None:
        import yaml

        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                path = (*prefix, str(key.value))
                self.lines[path] = key.start_mark.line + 1
                self._index(value, path)

    def get(self, *keys: str, default: Any = None) -> Any:
        """``data[k1][k2]...`` or ``default`` when a level is missing."""
        cur: Any = self.data
        for key in keys:
            if not isinstance(cur, Mapping) or key not in cur:
                return default
            cur = cur[key]
        return default if cur is None else cur

    def error(self, keys: Sequence[str], problem: str) -> ConfigFileError:
        """A ConfigFileError naming the line of ``keys`` (or of its nearest parent)."""
        keys = tuple(keys)
        while keys and keys not in self.lines:
            keys = keys[:-1]
        line = self.lines.get(keys)
        where = f"line {line}: " if line else ""
        return ConfigFileError(self.path, f"{where}{problem}")

    def section(self, key: str) -> Mapping[str, Any]:
        value = self.get(key, default={})
        if not isinstance(value, Mapping):
            raise self.error((key,), f"{key}: expected a mapping, found {value!r}")
        return value


def _model_key(doc: _Doc, problem: str) -> tuple[str, ...]:
    """The ``model_config`` key a model error names (``num_attention_heads: must divide
    ...`` is ``num_heads``'s line), else the section itself."""
    section = ("model", "model_config")
    named = re.findall(r"\b([a-z_]+): ", problem)
    for field in named:  # a field's keys, or the key itself (intermediate_size, head_dim)
        for key in MINDFORMERS_KEYS.get(field, (field,)):
            if (*section, key) in doc.lines:
                return (*section, key)
    return section


def _int(doc: _Doc, keys: Sequence[str], default: int, *, minimum: int = 1) -> int:
    value = doc.get(*keys, default=default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum \
            or value > MAX_WHOLE:
        raise doc.error(keys, f"{'.'.join(keys)}: expected a whole number >= {minimum}, "
                        f"found {value!r}")
    return value


def _bool(doc: _Doc, keys: Sequence[str], default: bool = False) -> bool:
    """A switch: YAML booleans, 0/1 and the words true/false, yes/no, on/off (any case)."""
    value = doc.get(*keys, default=default)
    try:
        return parse_bool(value, ".".join(keys), doc.path)
    except ConfigFileError as exc:
        raise doc.error(keys, exc.problem) from None


def _first(doc: _Doc, candidates: Sequence[Sequence[str]]) -> Sequence[str]:
    for keys in candidates:
        if doc.get(*keys) is not None:
            return keys
    return candidates[0]


# --------------------------------------------------------------------------------------
# recompute_config
# --------------------------------------------------------------------------------------

def _per_stage(doc: _Doc, keys: Sequence[str], value: Any, pp: int) -> tuple[int, ...]:
    """Per-stage counts from an int list or a list of per-chunk lists (summed per stage)."""
    where = ".".join(keys)
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise doc.error(keys, f"{where}: expected a list of per-stage layer counts")
    if all(isinstance(v, Sequence) and not isinstance(v, str) for v in value):
        chunks = [list(v) for v in value]
        if any(len(c) != pp for c in chunks):
            raise doc.error(keys, f"{where}: each chunk needs one entry per stage (pp={pp})")
        value = [sum(c[s] for c in chunks) for s in range(pp)]
    if len(value) != pp or any(isinstance(v, bool) or not isinstance(v, int) or v < 0
                               for v in value):
        raise doc.error(keys, f"{where}: expected {pp} whole numbers >= 0 (one per pipeline "
                        f"stage), found {value!r}")
    return tuple(value)


def _patterns(doc: _Doc, key: str, pp: int) -> Any:
    """``select_recompute`` style value: False, True, list of patterns or pattern -> counts."""
    keys = ("recompute_config", key)
    value = doc.get(*keys, default=False)
    if isinstance(value, bool):
        return value
    if isinstance(value, Sequence) and not isinstance(value, str):
        if all(isinstance(v, str) for v in value):
            return list(value)
        return _per_stage(doc, keys, value, pp)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for pattern, counts in value.items():
            sub = (*keys, str(pattern))
            if isinstance(counts, bool):
                out[str(pattern)] = counts
            else:
                out[str(pattern)] = list(_per_stage(doc, sub, counts, pp))
        return out
    raise doc.error(keys, f"recompute_config.{key}: expected true/false, a list of patterns "
                    f"or a mapping pattern -> per-stage counts, found {value!r}")


def _selected_per_stage(value: Any, pp: int) -> tuple[bool, tuple[int, ...] | None]:
    """Whether a ``select_recompute`` style value (:func:`_patterns`) selects anything, and
    on how many layers of each stage where it counts them (None: every layer). Per-stage
    counts of zero select nothing (``[0, 0]``); a mapping's patterns count per stage as
    the most of any pattern, a pattern set ``true`` as every layer."""
    if isinstance(value, bool):
        return value, None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return bool(value), None
    if isinstance(value, tuple):
        return any(value), value
    if isinstance(value, Mapping):
        if any(v is True for v in value.values()):
            return True, None
        counts = [tuple(v) for v in value.values() if not isinstance(v, bool)]
        most = tuple(max((c[s] for c in counts), default=0) for s in range(pp))
        return any(most), most
    return bool(value), None


def _recompute(doc: _Doc, pp: int, per_stage: Sequence[int]
               ) -> tuple[str, tuple[int, ...] | None, dict[str, Any], list[str]]:
    """The recompute kind, the fully recomputed layers per stage, the section as read, and
    notes on what :class:`~perfkit.specs.ParallelConfig` cannot hold (``per_stage``: the
    model's layers on each stage)."""
    raw = doc.get("recompute_config", "recompute", default=False)
    keys = ("recompute_config", "recompute")
    layers: tuple[int, ...] | None = None
    if isinstance(raw, bool):
        full = raw
    elif isinstance(raw, Sequence) and not isinstance(raw, str):
        layers = _per_stage(doc, keys, raw, pp)
        full = False
    else:
        raise doc.error(keys, f"recompute_config.recompute: expected true/false or per-stage "
                        f"layer counts, found {raw!r}")
    select = _patterns(doc, "select_recompute", pp)
    comm = _patterns(doc, "select_comm_recompute", pp)
    notes: list[str] = []
    chosen = [(k, *_selected_per_stage(v, pp)) for k, v in
              (("select_recompute", select), ("select_comm_recompute", comm))]
    if full:
        kind = "full"
    elif any(on for _, on, _ in chosen):
        kind = "selective"
        for key, on, counts in chosen:
            if on and counts is not None and any(
                    c < n for c, n in zip(counts, per_stage, strict=True)):
                notes.append(
                    f"recompute_config.{key} selects {list(counts)} layers per stage of "
                    f"{list(per_stage)}: perfkit has no per-stage count for selective "
                    "recompute and counts every layer selective, so the activation memory of "
                    "the layers the config does not select is underestimated (set recompute "
                    "none and compare, for the other bound)")
    else:
        kind = "none"
    config = {"recompute": raw if isinstance(raw, bool) else list(layers or ()),
              "select_recompute": select, "select_comm_recompute": comm}
    for key in ("parallel_optimizer_comm_recompute", "mp_comm_recompute",
                "recompute_slice_activation", "select_recompute_exclude",
                "select_comm_recompute_exclude"):
        if doc.get("recompute_config", key) is not None:
            config[key] = doc.get("recompute_config", key)
    return kind, layers, config, notes


# --------------------------------------------------------------------------------------
# the reader
# --------------------------------------------------------------------------------------

@boundary(ConfigFileError, path_arg="path", what="a MindFormers YAML")
def read_mindformers_config(path: str | Path) -> tuple[ModelSpec, ParallelConfig, dict[str, Any]]:
    """Read a MindFormers training YAML.

    Parameters
    ----------
    path : str or Path
        A MindFormers config such as ``pretrain_llama2_13b.yaml``.

    Returns
    -------
    model : ModelSpec
        From ``model: model_config:`` (:meth:`ModelSpec.from_mindformers_yaml`).
    parallel : ParallelConfig
        ``dp`` = ``parallel_config.data_parallel``; ``tp`` = ``model_parallel``;
        ``pp`` = ``pipeline_stage``; ``vpp`` = ``model_config.pp_interleave_num`` when
        ``parallel.pipeline_config.pipeline_interleave`` is on; ``micro_batch_size`` =
        ``runner_config.batch_size``; ``num_micro_batches`` = ``micro_batch_num`` (only
        when ``pp > 1``) times ``runner_config.gradient_accumulation_steps``;
        ``sequence_parallel`` = ``use_seq_parallel`` and ``tp > 1``; ``optimizer_shard``
        = ``parallel_optimizer_config.optimizer_weight_shard_size`` (or ``dp`` when it is
        unset or -1) when ``parallel.enable_parallel_optimizer`` (or the older
        ``parallel_config.optimizer_shard``) is on, else 1; ``recompute`` = "full" for
        ``recompute: true``, "selective" when ``select_recompute`` or
        ``select_comm_recompute`` selects something (per-stage counts of zero, ``[0, 0]``,
        select nothing), else "none"; ``recompute_layers`` = the per-stage
        list of ``recompute: [4, 0]`` (lists of per-chunk lists are summed per stage).
    extras : dict
        ``recompute_config`` (``recompute``, ``select_recompute`` as a list or a dict
        pattern -> per-stage counts, ``select_comm_recompute`` and any other key given),
        ``max_device_memory`` (text), ``max_device_memory_bytes`` (binary units),
        ``batch_size``, ``global_batch_size``, ``micro_batch_num``,
        ``gradient_accumulation_steps``, ``micro_batch_interleave_num``,
        ``use_seq_parallel`` (as written), ``context_parallel``, ``parallel_mode``,
        ``jit_level``, ``save_graphs``, ``profile`` (dict of the switches present among
        :data:`PROFILE_KEYS`), ``path`` and ``notes`` (by layout or model field, what the
        YAML says that the layout cannot hold or that a run would regret: per-stage counts
        of selective recompute, which perfkit applies to every layer; fewer micro-batches
        than pipeline stages; a key given twice with different values, whose last is read:
        :func:`~perfkit.io.logs.yaml_keys.duplicate_keys`, under ``"config"`` when it
        sets no field).

    Raises
    ------
    perfkit.ConfigFileError
        Unreadable file, invalid YAML, a missing model section, or a value of the wrong
        kind; the message names the file and the line.
    """
    path = Path(path)
    doc = _Doc(path)
    try:
        model = ModelSpec.from_mindformers_yaml(doc.data)
    except ConfigFileError as exc:  # name the line of the key, else of the model section
        raise doc.error(_model_key(doc, exc.problem), exc.problem) from exc
    for key in ("parallel_config", "parallel", "runner_config", "context", "recompute_config"):
        doc.section(key)
    pp = _int(doc, ("parallel_config", "pipeline_stage"), 1)
    base, extra = divmod(model.num_layers, pp)
    per_stage = [base + (s < extra) for s in range(pp)]
    kind, layers, recompute_config, notes = _recompute(doc, pp, per_stage)
    parallel, extras = _parallel(doc, pp, kind, layers)
    extras["recompute_config"] = recompute_config
    extras["notes"] = {"recompute": notes} if notes else {}
    if 1 < pp and extras["micro_batch_num"] < pp:  # runs, but mostly idle: said
        m = extras["micro_batch_num"]
        extras["notes"]["num_micro_batches"] = [
            f"parallel_config.micro_batch_num {m} is below pipeline_stage {pp}: each "
            f"stage idles {share_text((pp - 1) / (m + pp - 1), 0)} of the step in the "
            "schedule's bubble, (pp − 1) / (m + pp − 1); pipelines are run with several "
            "micro-batches per stage"]
    for keys, first, last in doc.duplicates:  # the last is read, as MindFormers reads it
        field = field_of(keys) or "config"
        extras["notes"].setdefault(field, []).append(
            f"line {last}: {'.'.join(keys)} is given twice (lines {first} and {last}); the "
            "last is read, as YAML loaders (and MindFormers) keep it: check which one ran")
    extras.update(_context(doc))
    extras["profile"] = {k: doc.get(k) for k in PROFILE_KEYS if doc.get(k) is not None}
    extras["path"] = str(path)
    return model, parallel, extras


def _parallel(doc: _Doc, pp: int, kind: str,
              layers: tuple[int, ...] | None) -> tuple[ParallelConfig, dict[str, Any]]:
    dp = _int(doc, ("parallel_config", "data_parallel"), 1)
    tp_keys = _first(doc, [("parallel_config", "model_parallel"),
                           ("parallel_config", "tensor_model_parallel_size")])
    tp = _int(doc, tp_keys, 1)
    micro_num = _int(doc, ("parallel_config", "micro_batch_num"), 1)
    accum = _int(doc, ("runner_config", "gradient_accumulation_steps"), 1)
    batch = _int(doc, ("runner_config", "batch_size"), 1)
    interleave = _bool(doc, ("parallel", "pipeline_config", "pipeline_interleave"), False)
    vpp = _int(doc, ("model", "model_config", "pp_interleave_num"), 1) if interleave else 1
    seq_par = _bool(doc, ("parallel_config", "use_seq_parallel"), False)
    shard = _optimizer_shard(doc, dp)
    try:
        parallel = ParallelConfig(
            dp=dp, tp=tp, pp=pp, vpp=vpp, micro_batch_size=batch,
            num_micro_batches=(micro_num if pp > 1 else 1) * accum,
            sequence_parallel=seq_par and tp > 1, optimizer_shard=shard,
            recompute=kind, recompute_layers=layers)
    except InvalidArgumentError as exc:
        keys = {"num_micro_batches": ("parallel_config", "micro_batch_num"),
                "optimizer_shard": ("parallel", "parallel_optimizer_config"),
                "vpp": ("model", "model_config", "pp_interleave_num"),
                "recompute_layers": ("recompute_config", "recompute")}.get(
                    exc.parameter, ("parallel_config",))
        raise doc.error(keys, f"inconsistent parallel settings: {exc}") from exc
    extras = {"batch_size": batch, "micro_batch_num": micro_num,
              "gradient_accumulation_steps": accum,
              "micro_batch_interleave_num": _int(doc, ("micro_batch_interleave_num",), 1),
              "global_batch_size": parallel.global_batch_size,
              "use_seq_parallel": seq_par,
              "context_parallel": _int(doc, ("parallel_config", "context_parallel"), 1),
              "parallel_mode": doc.get("parallel", "parallel_mode")}
    return parallel, extras


def _optimizer_shard(doc: _Doc, dp: int) -> int:
    keys = ("parallel", "enable_parallel_optimizer")
    if doc.get(*keys) is None:
        keys = ("parallel_config", "optimizer_shard")
    if not _bool(doc, keys, False):
        return 1
    keys = ("parallel", "parallel_optimizer_config", "optimizer_weight_shard_size")
    size = doc.get(*keys, default=-1)
    if isinstance(size, bool) or not isinstance(size, int) or size == 0 or size < -1:
        raise doc.error(keys, f"optimizer_weight_shard_size: expected -1 or a whole number "
                        f">= 1, found {size!r}")
    return dp if size == -1 else size


def _context(doc: _Doc) -> dict[str, Any]:
    out: dict[str, Any] = {}
    memory = doc.get("context", "max_device_memory")
    out["max_device_memory"] = memory
    if memory is not None:
        try:
            out["max_device_memory_bytes"] = parse_memory_size(memory)
        except InvalidArgumentError as exc:
            raise doc.error(("context", "max_device_memory"),
                            f"context.max_device_memory: {exc.rule}, found {memory!r}") from exc
    else:
        out["max_device_memory_bytes"] = None
    jit = doc.get("context", "jit_config", default={})
    out["jit_level"] = jit.get("jit_level") if isinstance(jit, Mapping) else None
    out["save_graphs"] = doc.get("context", "save_graphs")
    return out


def read_rank_table(path: str | Path) -> dict[str, Any] | None:
    """The world size of an HCCL rank table (``RANK_TABLE_FILE``), or None for other JSON.

    A rank table lists the servers of an Ascend job and their devices::

        {"version": "1.0", "server_count": "2",
         "server_list": [{"server_id": "...", "device": [{"device_id": "0",
                          "device_ip": "...", "rank_id": "0"}, ...]}, ...],
         "status": "completed"}

    Returns
    -------
    dict or None
        ``world_size`` (devices listed), ``servers`` and ``devices_per_server`` (the most
        common count); None when the file is JSON but not a rank table.

    Raises
    ------
    ConfigFileError
        Unreadable file, invalid JSON, or a ``server_list`` whose entries are not servers.
    """
    import json

    p = Path(path)
    try:  # UTF-8 or UTF-16 text; binary or undecodable bytes say so (ConfigFileError)
        data = json.loads(read_config_text(p))
    except json.JSONDecodeError as exc:
        raise ConfigFileError(p, f"not valid JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(data, dict) or "server_list" not in data:
        return None
    servers = data["server_list"]
    if not isinstance(servers, list) or not all(
            isinstance(s, dict) and isinstance(s.get("device"), list) for s in servers):
        raise ConfigFileError(p, "server_list must be a list of servers with a 'device' list")
    counts = [len(s["device"]) for s in servers]
    return {"world_size": sum(counts), "servers": len(servers),
            "devices_per_server": max(set(counts), key=counts.count) if counts else 0}
