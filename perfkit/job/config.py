"""Job values from what the user gives: config files, dicts, specs and typed values."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigFileError, InvalidArgumentError, PerfkitError
from ..format import counted
from ..io.logs.config import read_mindformers_config, read_rank_table
from ..io.logs.log_files import read_training_log
from ..specs import Hardware, ModelSpec, ParallelConfig
from .fields import (
    BOOL_FIELDS,
    CHOICES,
    FLOAT_FIELDS,
    INT_FIELDS,
    MODEL_FIELDS,
    PARALLEL_FIELDS,
    FieldValue,
    check_field,
)

__all__ = ["read_job_config", "user_values", "model_values", "parallel_values"]


def read_job_config(config: Any, job: Any = None) -> dict[str, FieldValue]:
    """Field values from a job description the user gives (source ``"config"``).

    Parameters
    ----------
    config : str, path, dict, ModelSpec, ParallelConfig or a sequence of them
        * ``*.yaml`` / ``*.yml``: a MindFormers config (:func:`perfkit.read_mindformers_config`)
          — every model and layout field, and ``runner_config.global_batch_size`` when
          present (else dp × batch × micro-batches);
        * an HCCL rank table (``*.json`` with ``server_list``,
          :func:`perfkit.io.logs.config.read_rank_table`): the world size;
        * ``*.json`` (or a folder holding ``config.json``): a Hugging Face config
          (:meth:`ModelSpec.from_hf_config`) — the model fields; its
          ``max_position_embeddings`` is the context limit, not the training length, so
          the sequence length stays the profile's;
        * any other file: a MindFormers training log (:func:`perfkit.read_training_log`)
          — the median ``per_step_time``, and the ``global_batch_size`` /
          ``seq_length`` it prints;
        * a dict: field values (as for :meth:`Job.with_overrides`), or a loaded
          MindFormers / Hugging Face config (recognised by its keys);
        * a ModelSpec or ParallelConfig: its fields.
    job : Job, optional
        The job being completed (its ``seq_length`` gives a Hugging Face config its sequence
        length). Typed loosely so that this module, which :mod:`perfkit.job.core` imports,
        need not import the ``Job`` class back.

    Returns
    -------
    dict
        ``{field: value with source "config" and the file and key read}``.

    Raises
    ------
    ConfigFileError
        A file that cannot be read as any of these (the message names it).
    """
    if isinstance(config, (list, tuple)):
        out: dict[str, FieldValue] = {}
        for item in config:
            out.update(read_job_config(item, job))
        return out
    if isinstance(config, ModelSpec):
        return model_values(config, "config", "a ModelSpec given as config")
    if isinstance(config, ParallelConfig):
        return parallel_values(config, "config", "a ParallelConfig given as config")
    if isinstance(config, Mapping):
        return _dict_config(config, job)
    path = Path(str(config)).expanduser()
    if not path.exists():
        raise ConfigFileError(path, "no such file; expected a MindFormers YAML, a Hugging Face "
                                    "config.json or a training log")
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        model, parallel, extras = read_mindformers_config(path)
        where = f"{path.name} (MindFormers YAML)"
        out = model_values(model, "config", where)
        out.update(parallel_values(parallel, "config", where))
        for name, said in (extras.get("notes") or {}).items():  # with the job's problems
            owner = model if hasattr(model, name) else parallel if hasattr(parallel, name) \
                else None
            if owner is None:  # a key that sets no field: said with the layout
                name, owner = "dp", parallel
            out[name] = FieldValue(getattr(owner, name), "config", f"{where}: {name}",
                                   f"{path.name}: " + "; ".join(said))
        out["seq_length"] = FieldValue(model.seq_length, "config", f"{where}: model_config."
                                                                   "seq_length")
        gbs = extras.get("global_batch_size")
        if gbs:
            out["global_batch_size"] = FieldValue(int(gbs), "config",
                                                  f"{where}: runner_config global batch")
        return out
    if suffix == ".json":
        table = read_rank_table(path)
        if table is not None:
            where = f"{path.name} (rank table)"
            return {"world_size": FieldValue(table["world_size"], "config",
                                             f"{where}: {counted(table['world_size'], 'device')}"
                                             f" on {counted(table['servers'], 'server')}")}
    if suffix == ".json" or path.is_dir():
        seq = job.seq_length if job is not None and job.seq_length else None
        model = ModelSpec.from_hf_config(path, seq_length=seq)
        where = f"{path.name} (Hugging Face config)"
        out = model_values(model, "config", where)
        if seq is None:
            out["seq_length"] = FieldValue(model.seq_length, "config",
                                           f"{where}: max_position_embeddings (the profile shows "
                                           "no sequence length)")
        return out
    return _log_values(path)


def _log_values(path: Path) -> dict[str, FieldValue]:
    try:
        log = read_training_log(path)
    except PerfkitError as exc:
        raise ConfigFileError(path, "not a MindFormers YAML (.yaml), a Hugging Face config "
                                    f"(.json) nor a training log: {exc}") from None
    where = f"{path.name} (training log)"
    out: dict[str, FieldValue] = {}
    times = log["per_step_time_ms"].dropna()
    if len(times) > 1:
        times = times.iloc[1:]  # the first step includes compilation
    if len(times):
        again = log.attrs.get("repeated_from_line")
        caveat = (f"{path.name}: steps logged again from line {again} (two runs in one "
                  "file): the median mixes them; cut the log to one run") if again else ""
        out["step_time_s"] = FieldValue(float(times.median()) / 1e3, "config",
                                        f"{where}: median per_step_time of "
                                        f"{counted(len(times), 'step line')} (the first step "
                                        "left out: it compiles)", caveat)
    for name in ("global_batch_size", "seq_length"):
        hit = log.attrs.get("settings", {}).get(name)
        if hit:
            out[name] = FieldValue(int(hit[0]), "config", f"{where}: line {hit[1]} prints "
                                                          f"{name}: {hit[0]}")
    return out


def _dict_config(config: Mapping[str, Any], job: Any) -> dict[str, FieldValue]:
    keys = set(config)
    if "model" in keys and isinstance(config.get("model"), Mapping):
        model = ModelSpec.from_mindformers_yaml(config)
        return model_values(model, "config", "a MindFormers config dict")
    if keys & {"num_hidden_layers", "n_layer", "n_embd"}:
        seq = job.seq_length if job is not None and job.seq_length else None
        model = ModelSpec.from_hf_config(config, seq_length=seq)
        return model_values(model, "config", "a Hugging Face config dict")
    return {n: FieldValue(v.value, "config", "a dict given as config")
            for n, v in user_values(config).items()}


def model_values(model: ModelSpec, source: str, where: str) -> dict[str, FieldValue]:
    """Every model field of ``model``, from ``source``, read at ``where``."""
    out = {}
    for name in MODEL_FIELDS:
        out[name] = FieldValue(getattr(model, name), source, f"{where}: {name}")
    return out


def parallel_values(parallel: ParallelConfig, source: str, where: str) -> dict[str, FieldValue]:
    """Every layout field of ``parallel`` and its world size, from ``source``."""
    out = {}
    for name in PARALLEL_FIELDS:
        if hasattr(parallel, name):
            out[name] = FieldValue(getattr(parallel, name), source, f"{where}: {name}")
    out["world_size"] = FieldValue(parallel.world_size, source, f"{where}: dp × tp × pp")
    return out


def user_values(overrides: Mapping[str, Any]) -> dict[str, FieldValue]:
    """Field values the user sets (source ``"user"``), as :meth:`Job.with_overrides` takes
    them: fields by name, ``model=`` a ModelSpec or preset name, ``parallel=`` a
    ParallelConfig; each value checked and converted to the field's type."""
    out: dict[str, FieldValue] = {}
    for name, value in overrides.items():
        if name == "model":
            if value is None:
                out.update({n: FieldValue(None, "user", "") for n in MODEL_FIELDS})
                continue
            model = ModelSpec.preset(value) if isinstance(value, str) else value
            if not isinstance(model, ModelSpec):
                raise InvalidArgumentError("model", "must be a ModelSpec or a preset name",
                                           type(value).__name__)
            where = f"preset {value}" if isinstance(value, str) else "a ModelSpec"
            out.update(model_values(model, "user", where))
            continue
        if name == "parallel":
            if not isinstance(value, ParallelConfig):
                raise InvalidArgumentError("parallel", "must be a ParallelConfig",
                                           type(value).__name__)
            out.update(parallel_values(value, "user", "a ParallelConfig"))
            continue
        check_field(name)
        out[name] = FieldValue(_coerce(name, value), "user", "set by the user")
    return out


def _coerce(name: str, value: Any) -> Any:
    """A user value in the field's type (text from a widget included)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if name == "hardware":
        if isinstance(value, Hardware):
            return value
        return Hardware.preset(str(value).strip())
    if name in INT_FIELDS:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InvalidArgumentError(name, "must be a whole number", value) from None
        if number != int(number) or number < (0 if name == "zero_stage" else 1):
            raise InvalidArgumentError(name, "must be a whole number >= 1"
                                       if name != "zero_stage" else "must be 0..3", value)
        return int(number)
    if name in FLOAT_FIELDS:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InvalidArgumentError(name, "must be a number", value) from None
        if not number > 0:
            raise InvalidArgumentError(name, "must be > 0", value)
        return number
    if name in BOOL_FIELDS:
        if isinstance(value, str):
            low = value.strip().lower()
            if low not in ("true", "false", "yes", "no", "1", "0"):
                raise InvalidArgumentError(name, "must be true or false", value)
            return low in ("true", "yes", "1")
        return bool(value)
    if name in CHOICES:
        text = str(value).strip().lower()
        if text not in CHOICES[name]:
            raise InvalidArgumentError(name, "must be one of " + ", ".join(CHOICES[name]),
                                       value)
        return text
    if name == "recompute_layers":
        if isinstance(value, str):
            parts = [p for p in value.replace("[", "").replace("]", "").split(",")
                     if p.strip()]
            try:
                nums = tuple(int(p) for p in parts)
            except ValueError:
                raise InvalidArgumentError(name, "must be a number or numbers per stage "
                                           "(e.g. 4,0)", value) from None
            return nums[0] if len(nums) == 1 else nums
        return tuple(value) if isinstance(value, (list, tuple)) else value
    if name == "name":
        return str(value)
    return value
