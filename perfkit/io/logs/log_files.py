"""MindFormers training logs and MindSpore memory summaries -> DataFrames.

Two readers share one way of telling processes apart:

* a rank marker at the start of a line — ``[rank3]:``, ``[rank 3]``, ``rank 3:``,
  ``[RANK 3]`` or Open MPI's ``[1,3]<stdout>:`` — gives that line's rank;
* otherwise a rank in the file name (``worker_3.log``, ``rank_3``, ``rank3``) gives the
  whole file's rank;
* a MindSpore glog prefix ``[WARNING] DEVICE(4321,7f...,python):...`` gives a process id.

Lines are read one at a time, each with a length limit; the logs may be large and full of
unrelated output. A damaged or still-growing log is read as far as it is text and complete:
the last line is not parsed when the file does not end with a newline (a line cut mid-number
would give ``loss 9.0`` for ``9.002117``), and reading stops at the first NUL byte (a
zero-padded tail after a crash). What was left out is said in ``frame.attrs["notes"]``.
Formats: ``reference/formats.md`` §3.1 (``MS_MEMORY_STATISTIC``) and §3.2 (MFLossMonitor and
the newer trainer's loss callback).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from ...errors import ProfileError, boundary

__all__ = ["read_training_log", "read_memory_log", "TRAINING_COLUMNS", "MEMORY_COLUMNS",
           "MIB", "MAX_LINE_BYTES"]

MAX_LINE_BYTES = 1 << 20
"""Longer lines are skipped unread (a log record is far shorter); memory stays bounded."""

#: Bytes in the "M" that MindSpore prints after memory sizes (``kMBToByte``).
MIB = 2**20

TRAINING_COLUMNS = (
    "rank", "format", "epoch", "epochs", "step", "steps", "loss", "loss_mean",
    "per_step_time_ms", "lr", "overflow", "loss_scale", "global_norm",
    "train_throughput_per_npu_tflops", "throughput_tflops", "samples_per_second_per_device",
    "lm_loss", "load_balancing_loss", "mtp_loss", "indexer_loss", "line",
)

MEMORY_COLUMNS = (
    "rank", "pid", "kind", "memory_type", "device_memory_bytes", "used_memory_bytes",
    "peak_used_bytes", "peak_actual_bytes", "base_address", "total_static_bytes",
    "total_dynamic_bytes", "graph_dynamic_bytes", "pool", "pool_total_bytes",
    "pool_peak_used_bytes", "pool_actual_peak_bytes", "pool_in_use_bytes",
    "pool_idle_bytes", "pool_eager_free_bytes", "weight_bytes", "constant_value_bytes",
    "kernel_output_bytes", "other_bytes", "line",
)

_RANK_MARK = re.compile(
    r"^\s*(?:\[\s*rank\s*(\d{1,9})\s*\]:?|rank\s*(\d{1,9})\s*:|\[\d+,(\d{1,9})\]<std(?:out|err)>:)"
    r"\s?",
    re.IGNORECASE)
_FILE_RANK = re.compile(r"(?:worker|rank|device)[_-]?(\d{1,9})(?!\d)", re.IGNORECASE)
_GLOG = re.compile(r"^\[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\] \w+\((\d{1,10})[,:]")

_NUM = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+|nan|inf)"
# a number ends there: "1O.2x" (an O for a 0) is no number, not the 1 before it
_END = r"(?![\w.])"
_STEP_START = re.compile(r"\{\s*(?:Epoch|step)\s*:")
_EPOCH = re.compile(r"Epoch:\s*\[\s*(\d+)\s*/\s*(\d+)\s*\]")
_STEP = re.compile(r"\bstep:\s*\[\s*(\d+)\s*/\s*(\d+)\s*\]")
_LOSS = re.compile(rf"\bloss:\s*(?:\[\s*({_NUM})\s*/\s*({_NUM})\s*\]|({_NUM}){_END}|(N/A))",
                   re.IGNORECASE)
_STEP_TIME = re.compile(r"per_step_time:\s*(\d+(?:\.\d+)?)\s*ms")
_LR = re.compile(rf"\blr:\s*\[?\s*({_NUM}){_END}")
_OVERFLOW = re.compile(r"overflow cond:\s*(True|False)")
_LOSS_SCALE = re.compile(rf"loss_scale:\s*\[?\s*({_NUM}){_END}")
_NORM = re.compile(rf"\b(?:global_norm|grad_norm):\s*\[?\s*({_NUM}){_END}")
_TP_NPU = re.compile(rf"train_throughput_per_npu:\s*({_NUM})\s*T")
_TP_NEW = re.compile(rf"(?<![\w])throughput:\s*({_NUM})\s*T")
_SAMPLES = re.compile(rf"({_NUM})\s*samples/s/p")
_SETTING = re.compile(r"(?<![\w.])(global_batch_size|seq_length|micro_batch_num|batch_size)"
                      r"['\"]?\s*[:=]\s*(\d+)\b")
_EXTRA_LOSS = re.compile(
    rf"\b(lm_loss|load_balancing_loss|mtp_loss|indexer_loss):\s*({_NUM}){_END}")

_DEVICE_SIZE = re.compile(r"Device (HBM|MOC) memory size:\s*([^\sM]+)(M?)")
_MEM_ITEMS = (
    (re.compile(r"MindSpore Used memory size:\s*([^\sM]+)(M?)"), "used_memory_bytes"),
    (re.compile(r"Used peak memory usage \(without fragments\):\s*([^\sM]+)(M?)"),
     "peak_used_bytes"),
    (re.compile(r"Actual peak memory usage \(with fragments\):\s*([^\sM]+)(M?)"),
     "peak_actual_bytes"),
    (re.compile(r"Total Static Memory size:\s*([^\sM]+)(M?)"), "total_static_bytes"),
    (re.compile(r"Total Dynamic memory size:\s*([^\sM]+)(M?)"), "total_dynamic_bytes"),
    (re.compile(r"Dynamic memory size of this graph:\s*([^\sM]+)(M?)"), "graph_dynamic_bytes"),
)
_BASE = re.compile(r"MindSpore memory base address:\s*(\S+)")
_POOL_TOTAL = re.compile(r"The dynamic memory pool total allocated mem:\s*(\d+)M")
_POOL_INFO = re.compile(r"(\w+) (?:mem )?pool info: Total allocated mem:\s*(\d+)M")
_POOL_FIELDS = (
    (re.compile(r"(?<!actual )peak used mem:\s*(\d+)M"), "pool_peak_used_bytes"),
    (re.compile(r"actual peak used mem:\s*(\d+)M"), "pool_actual_peak_bytes"),
    (re.compile(r"in used mem:\s*(\d+)M"), "pool_in_use_bytes"),
    (re.compile(r"total idle mem:\s*(\d+)M"), "pool_idle_bytes"),
    (re.compile(r"total eager free mem:\s*(\d+)M"), "pool_eager_free_bytes"),
    (re.compile(r"Weight used size:\s*(\d+)M"), "weight_bytes"),
    (re.compile(r"constant value used size:\s*(\d+)M"), "constant_value_bytes"),
    (re.compile(r"kernel output used size:\s*(\d+)M"), "kernel_output_bytes"),
    (re.compile(r"other used size:\s*(\d+)M"), "other_bytes"),
)


# --------------------------------------------------------------------------------------
# shared: reading lines and telling processes apart
# --------------------------------------------------------------------------------------

def _file_rank(path: Path) -> int | None:
    for part in reversed(path.parts):
        m = _FILE_RANK.search(part)
        if m:
            return int(m.group(1))
    return None


_TRIGGERS = ("step", "Epoch", "emory", "mem:")


def _read_lines(path: Path, notes: list[str]) -> Iterator[tuple[int, str]]:
    """Lines of a log, decoded one by one.

    A line that is not UTF-8 is an error only when it looks like one of the records read
    here; elsewhere (progress bars, binary noise) it is decoded with replacement characters.
    The last line is left out (with a note) when the file does not end with a newline, a
    line longer than :data:`MAX_LINE_BYTES` is skipped, and reading stops at the first NUL
    byte (with a note; a file that starts with binary data is refused).
    """
    if path.is_dir():
        raise ProfileError(path, "is a folder; expected a log file")
    if not path.is_file():
        raise ProfileError(path, "no such file")
    try:
        with open(path, "rb") as fh:
            lineno = 0
            while True:
                raw = fh.readline(MAX_LINE_BYTES)
                if not raw:
                    return
                lineno += 1
                nul = raw.find(b"\x00")
                if nul >= 0:
                    if lineno == 1 and raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
                        raise ProfileError(path, "is UTF-16 text; expected a log as UTF-8 text "
                                           "(convert it to UTF-8)", line=1)
                    if lineno == 1 and nul < 16:
                        raise ProfileError(path, "binary data where a text log was expected",
                                           line=1)
                    notes.append(f"line {lineno}: binary data (NUL bytes) from here on "
                                 "(a zero-padded or damaged file): the rest was not read")
                    return
                if not raw.endswith(b"\n"):
                    if len(raw) >= MAX_LINE_BYTES:
                        while raw and not raw.endswith(b"\n"):  # skip the rest of it
                            raw = fh.readline(MAX_LINE_BYTES)
                        notes.append(f"line {lineno}: longer than {MAX_LINE_BYTES >> 20} MiB: "
                                     "skipped")
                        continue
                    notes.append(f"line {lineno}: the file ends mid-line (no newline): the "
                                 "last line was not parsed (cut short, or still being written)")
                    return
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    text = raw.decode("utf-8", errors="replace")
                    if any(t in text for t in _TRIGGERS):
                        raise ProfileError(path, f"not UTF-8 text ({exc.reason})",
                                           line=lineno) from exc
                if lineno == 1:
                    text = text.removeprefix("\ufeff")
                yield lineno, text.rstrip("\r\n")
    except OSError as exc:
        raise ProfileError(path, f"cannot read: {exc.strerror or exc}") from exc


def _split_rank(line: str, default: int | None) -> tuple[int | None, str]:
    m = _RANK_MARK.match(line)
    if m is None:
        return default, line
    value = next(g for g in m.groups() if g is not None)
    return int(value), line[m.end():]


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


# --------------------------------------------------------------------------------------
# training log
# --------------------------------------------------------------------------------------

def _parse_step(text: str, path: Path, lineno: int) -> dict[str, Any]:
    step = _STEP.search(text)
    if step is None:  # the line opens like a step record, so its counters are broken
        raise ProfileError(path, f"expected 'step:[ cur/ total]', found {text.strip()[:120]!r}",
                           line=lineno, field="step")
    if max(len(step.group(1)), len(step.group(2))) > 12:
        raise ProfileError(path, f"step number too large: {step.group(0)[:60]!r}", line=lineno,
                           field="step")
    row: dict[str, Any] = {"step": int(step.group(1)), "steps": int(step.group(2))}
    epoch = _EPOCH.search(text)
    row["format"] = "old" if epoch else "new"
    if epoch and max(len(epoch.group(1)), len(epoch.group(2))) <= 12:
        row["epoch"], row["epochs"] = int(epoch.group(1)), int(epoch.group(2))
    loss = _LOSS.search(text)
    if loss is None and "loss" in text:
        at = text[text.index("loss"):].strip()[:60]  # the field, not the line's opening
        raise ProfileError(path, f"expected 'loss: <number>', found {at!r}", line=lineno,
                           field="loss")
    if loss is not None:
        row["loss"] = _num(loss.group(1) or loss.group(3))
        row["loss_mean"] = _num(loss.group(2))
    time_ms = _STEP_TIME.search(text)
    if time_ms is None and "per_step_time" in text:
        raise ProfileError(path, f"expected 'per_step_time: <int>ms' in {text.strip()[:120]!r}",
                           line=lineno, field="per_step_time")
    row["per_step_time_ms"] = _num(time_ms.group(1)) if time_ms else None
    for regex, key in ((_LR, "lr"), (_LOSS_SCALE, "loss_scale"), (_NORM, "global_norm"),
                       (_TP_NPU, "train_throughput_per_npu_tflops"),
                       (_TP_NEW, "throughput_tflops")):
        m = regex.search(text)
        row[key] = _num(m.group(1)) if m else None
    overflow = _OVERFLOW.search(text)
    row["overflow"] = None if overflow is None else overflow.group(1) == "True"
    for key, value in _EXTRA_LOSS.findall(text):
        row[key] = _num(value)
    samples = _SAMPLES.search(text)
    if samples:
        row["samples_per_second_per_device"] = _num(samples.group(1))
    row["line"] = lineno
    return row


@boundary(ProfileError, path_arg="path", what="a training log")
def read_training_log(path: str | Path) -> pd.DataFrame:
    """One row per training step from a MindFormers log.

    Parameters
    ----------
    path : str or Path
        A log holding MFLossMonitor lines (``{ Epoch:[  1/  2], step:[    2/   19], loss:
        ...}``, MindFormers r0.7 to 1.x and the 1.7+ variants) or the newer trainer's lines
        (``{ step:[    2/   10], loss:  11.755612, per_step_time:    710ms, ...}``). Any
        other text is skipped.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`TRAINING_COLUMNS`: ``rank`` (from a line marker or the file name;
        NA when unknown), ``format`` ("old" with an Epoch field, "new" without),
        ``epoch``, ``epochs``, ``step``, ``steps``, ``loss`` (NA on non-last pipeline
        stages, which print ``N/A``), ``loss_mean`` (second value of the non-sink form
        ``loss:[cur/mean]``), ``per_step_time_ms``, ``lr``, ``overflow``, ``loss_scale``,
        ``global_norm`` (also ``grad_norm``), ``train_throughput_per_npu_tflops``,
        ``throughput_tflops``, ``samples_per_second_per_device`` (from the progress line
        ``... 12.34567 samples/s/p`` that follows a step line of the same rank), the extra
        losses when printed, and ``line`` (1-based line of the step). ``attrs["notes"]``
        lists what was left unread (a last line cut short, a zero-padded tail).
        ``frame.attrs["settings"]`` holds the run settings the log prints besides the
        steps (MindFormers' trainer logs ``global_batch_size: 32`` when training starts;
        a printed config has ``seq_length: 4096``): ``{name: (value, line)}`` for
        ``global_batch_size``, ``seq_length``, ``micro_batch_num``, ``batch_size``,
        the first value of each.

    Raises
    ------
    perfkit.ProfileError
        Missing or non-text file, no step line at all, or a step line whose step, loss or
        step time cannot be read; the message names the file and the line.
    """
    path = Path(path)
    default_rank = _file_rank(path)
    rows: list[dict[str, Any]] = []
    last: dict[int | None, dict[str, Any]] = {}
    notes: list[str] = []
    settings: dict[str, tuple[int, int]] = {}
    for lineno, raw in _read_lines(path, notes):
        rank, line = _split_rank(raw, default_rank)
        if ":" in line and not _STEP_START.search(line):
            for m in _SETTING.finditer(line):
                settings.setdefault(m.group(1), (int(m.group(2)), lineno))
        if _STEP_START.search(line):
            row = _parse_step(line, path, lineno)
            row["rank"] = rank
            rows.append(row)
            last[rank] = row
        elif "samples/s/p" in line:
            target = last.get(rank)
            samples = _SAMPLES.search(line)
            if target is not None and samples and "samples_per_second_per_device" not in target:
                target["samples_per_second_per_device"] = _num(samples.group(1))
    if not rows:
        raise ProfileError(path, "no training step line ('step:[ n/ total]') found"
                           + (f" ({'; '.join(notes)})" if notes else ""))
    frame = pd.DataFrame([{c: r.get(c) for c in TRAINING_COLUMNS} for r in rows],
                         columns=list(TRAINING_COLUMNS))
    for col in ("rank", "epoch", "epochs", "step", "steps", "line"):
        frame[col] = frame[col].astype("Int64")
    for col in TRAINING_COLUMNS:
        if col not in ("rank", "format", "epoch", "epochs", "step", "steps", "line",
                       "overflow"):
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    frame["overflow"] = frame["overflow"].astype("boolean")
    again = _steps_again(frame)
    if again is not None:
        frame.attrs["repeated_from_line"] = again
        notes.append(f"line {again}: steps already logged appear again (a run restarted "
                     "and appended to this file, or two runs writing one file): every step "
                     "line is kept, so figures over the steps mix the runs; cut the log at "
                     f"line {again} to read one")
    frame.attrs["notes"] = notes
    frame.attrs["settings"] = settings
    return frame


def _steps_again(frame: pd.DataFrame) -> int | None:
    """The line of the first step line whose (rank, epoch, step) an earlier line logged,
    or None. One rank logs each step once; a log of several ranks logs it once per rank."""
    key = frame[["rank", "epoch", "step"]].astype("string").fillna("-").agg("/".join, axis=1)
    twice = key.duplicated(keep="first") & frame["step"].notna()
    if not twice.any():
        return None
    return int(frame.loc[twice, "line"].iloc[0])


# --------------------------------------------------------------------------------------
# memory summaries
# --------------------------------------------------------------------------------------

def _size(value: str, unit: str, path: Path, lineno: int, field: str) -> int:
    if not value.isdigit():
        raise ProfileError(path, f"expected a whole number followed by 'M', found {value!r}",
                           line=lineno, field=field)
    return _mib(value, path, lineno, field, MIB if unit == "M" else 1)  # old: raw bytes


def _mib(value: str, path: Path, lineno: int, field: str, unit: int = MIB) -> int:
    """``int(value) * unit``, refusing a number too large to be a memory size (> 2**62)."""
    if len(value) > 18 or int(value) * unit >= 2**62:
        raise ProfileError(path, f"memory size {value[:30]} is too large to be real",
                           line=lineno, field=field)
    return int(value) * unit


class _MemoryReader:
    """Collects device-memory blocks and pool lines, one open block per (rank, pid)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        self.open: dict[tuple[int | None, int | None], dict[str, Any]] = {}
        self.last_pid: dict[int | None, int | None] = {}

    def feed(self, lineno: int, raw: str, default_rank: int | None) -> None:
        rank, line = _split_rank(raw, default_rank)
        glog = _GLOG.match(line)
        if glog:
            self.last_pid[rank] = int(glog.group(1))
        pid = self.last_pid.get(rank)
        if "emory" not in line and "mem" not in line:
            return
        device = _DEVICE_SIZE.search(line)
        if device:
            block = {"rank": rank, "pid": pid, "kind": "device", "memory_type": device.group(1),
                     "device_memory_bytes": _size(device.group(2), device.group(3), self.path,
                                                  lineno, "Device memory size"),
                     "line": lineno}
            self.rows.append(block)
            self.open[(rank, pid)] = block
            return
        for regex, key in _MEM_ITEMS:
            m = regex.search(line)
            if m:
                self._block(rank, pid, lineno)[key] = _size(m.group(1), m.group(2), self.path,
                                                            lineno, key)
                return
        base = _BASE.search(line)
        if base:
            self._block(rank, pid, lineno)["base_address"] = base.group(1)
            return
        self._pool(line, rank, pid, lineno)

    def _block(self, rank: int | None, pid: int | None, lineno: int) -> dict[str, Any]:
        block = self.open.get((rank, pid))
        if block is None:  # a summary whose first line is missing: start a block anyway
            block = {"rank": rank, "pid": pid, "kind": "device", "line": lineno}
            self.rows.append(block)
            self.open[(rank, pid)] = block
        return block

    def _pool(self, line: str, rank: int | None, pid: int | None, lineno: int) -> None:
        total = _POOL_TOTAL.search(line)
        info = _POOL_INFO.search(line) if total is None else None
        if total is None and info is None:
            return
        row: dict[str, Any] = {"rank": rank, "pid": pid, "kind": "memory_pool", "line": lineno}
        if total is not None:
            row["pool"] = "all"
            row["pool_total_bytes"] = _mib(total.group(1), self.path, lineno, "pool total")
        else:
            row["pool"] = info.group(1)
            row["pool_total_bytes"] = _mib(info.group(2), self.path, lineno, "pool total")
        for regex, key in _POOL_FIELDS:
            m = regex.search(line)
            if m:
                row[key] = _mib(m.group(1), self.path, lineno, key)
        self.rows.append(row)


@boundary(ProfileError, path_arg="path", what="a MindSpore log")
def read_memory_log(path: str | Path) -> pd.DataFrame:
    """Memory summaries from a MindSpore / MindFormers log.

    Parameters
    ----------
    path : str or Path
        Any log, however noisy, holding the ``MS_MEMORY_STATISTIC=1`` summary
        (``Device HBM memory size: 62432M`` in MindSpore <= 2.3, ``Device MOC memory size``
        later, followed by the used size, base address and the two peaks) and/or the
        dynamic memory pool lines (``The dynamic memory pool total allocated mem:...`` and
        ``Common mem pool info: Total allocated mem:...``, printed at INFO level or with
        memory statistics on; on the CPU build they describe the host pool).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`MEMORY_COLUMNS`, one row per summary block (``kind="device"``) or per
        pool line (``kind="memory_pool"``; ``pool`` is ``"all"`` for the total line, else
        the pool's name such as ``Common`` or ``Persistent``). Sizes are bytes
        (the log's "M" is 2**20 bytes); ``memory_type`` is "HBM" or "MOC";
        ``peak_used_bytes`` is the peak without fragments, ``peak_actual_bytes`` the peak
        with fragments. ``rank`` comes from a line marker or the file name, ``pid`` from the
        MindSpore log prefix last seen for that rank; blocks of different (rank, pid) are
        kept apart even when their lines interleave. ``line`` is where a block starts.
        ``attrs["notes"]`` lists what was left unread (a last line cut short, a
        zero-padded tail).

    Raises
    ------
    perfkit.ProfileError
        Missing or non-text file, or a size that is not a whole number; the message names
        the file and the line. A log with no summary gives an empty table.
    """
    path = Path(path)
    reader = _MemoryReader(path)
    default_rank = _file_rank(path)
    notes: list[str] = []
    for lineno, raw in _read_lines(path, notes):
        reader.feed(lineno, raw, default_rank)
    frame = pd.DataFrame([{c: r.get(c) for c in MEMORY_COLUMNS} for r in reader.rows],
                         columns=list(MEMORY_COLUMNS))
    for col in MEMORY_COLUMNS:
        if col.endswith("_bytes") or col in ("rank", "pid", "line"):
            frame[col] = frame[col].astype("Int64")
    frame.attrs["notes"] = notes
    return frame
