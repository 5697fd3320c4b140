"""read_training_log / read_memory_log; expected values are grepped from the logs here."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from perfkit.errors import ProfileError
from perfkit.io.logs.log_files import MIB, read_memory_log, read_training_log

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"


def _lines(name: str) -> list[str]:
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


def test_old_format_sink_mode() -> None:
    lines = _lines("mf_old_sink.log")
    steps = [line for line in lines if "{ Epoch:[" in line]
    df = read_training_log(LOGS / "mf_old_sink.log")
    assert len(df) == len(steps) == 4
    assert set(df["format"]) == {"old"}
    assert list(df["step"]) == [int(re.search(r"step:\[\s*(\d+)/", s).group(1)) for s in steps]
    assert list(df["steps"]) == [19] * 4 and list(df["epochs"]) == [2] * 4
    assert list(df["per_step_time_ms"]) == [
        float(re.search(r"per_step_time: (\d+)ms", s).group(1)) for s in steps]
    assert list(df["loss"]) == [float(re.search(r"loss: ([\d.]+),", s).group(1)) for s in steps]
    assert list(df["samples_per_second_per_device"]) == [
        float(m) for line in lines for m in re.findall(r"([\d.]+) samples/s/p", line)]
    assert int(df["overflow"].sum()) == sum("overflow cond: True" in s for s in steps)
    assert list(df["train_throughput_per_npu_tflops"]) == [
        float(re.search(r"train_throughput_per_npu: ([\d.]+)T", s).group(1)) for s in steps]
    assert list(df["loss_scale"]) == [
        float(re.search(r"loss_scale: ([\d.]+)", s).group(1)) for s in steps]
    assert df["global_norm"].iloc[2] == float("inf")
    assert df["rank"].isna().all()
    assert list(df["line"]) == [i for i, line in enumerate(lines, 1) if "{ Epoch:[" in line]


def test_old_format_non_sink_file_logger() -> None:
    steps = [line for line in _lines("mf_old_nonsink_file.log") if "{ Epoch:[" in line]
    df = read_training_log(LOGS / "mf_old_nonsink_file.log")
    pairs = [re.search(r"loss:\[([\w.]+)/([\w.]+)\]", s).groups() for s in steps]
    assert len(df) == len(pairs) == 3
    for (cur, mean), got_cur, got_mean in zip(pairs, df["loss"], df["loss_mean"], strict=True):
        assert got_cur == pytest.approx(float(cur), nan_ok=True)
        assert got_mean == pytest.approx(float(mean), nan_ok=True)
    assert list(df["global_norm"].iloc[:2]) == [
        float(re.search(r"global_norm: ([\d.]+)", s).group(1)) for s in steps[:2]]


def test_new_trainer_with_ranks() -> None:
    lines = _lines("mf_new_trainer_pp.log")
    df = read_training_log(LOGS / "mf_new_trainer_pp.log")
    assert set(df["format"]) == {"new"} and df["epoch"].isna().all()
    for rank in (0, 1):
        mine = [line for line in lines if line.startswith(f"[rank {rank}]:") and "step:[" in line]
        got = df[df["rank"] == rank]
        assert len(got) == len(mine)
        assert list(got["per_step_time_ms"]) == [
            float(re.search(r"per_step_time:\s*(\d+)ms", s).group(1)) for s in mine]
        assert list(got["throughput_tflops"]) == [
            float(re.search(r"throughput:\s*([\d.]+)T", s).group(1)) for s in mine]
        assert got["loss"].isna().sum() == sum("loss: N/A" in s for s in mine)
    last_stage = df[df["rank"] == 1]
    assert list(last_stage["load_balancing_loss"]) == [
        float(m) for line in lines
        for m in re.findall(r"load_balancing_loss:\s*([\d.]+)", line)]
    assert list(last_stage["global_norm"]) == [
        float(re.search(r"grad_norm:\s*([\d.]+)", s).group(1)) for s in lines
        if s.startswith("[rank 1]:") and "step:[" in s]


def test_rank_from_file_name(tmp_path: Path) -> None:
    target = tmp_path / "worker_3.log"
    shutil.copy(LOGS / "mf_old_sink.log", target)
    assert set(read_training_log(target)["rank"]) == {3}


def test_memory_hbm_and_moc_kept_apart_by_rank() -> None:
    lines = _lines("memory_ranks.log")
    df = read_memory_log(LOGS / "memory_ranks.log")
    device = df[df["kind"] == "device"].set_index("rank")
    assert len(device) == sum(bool(re.search(r"Device (HBM|MOC) memory size", x)) for x in lines)
    for rank in (0, 1, 2):
        mine = [x for x in lines if x.startswith(f"[rank {rank}]:")]

        def grab(label: str, mine: list[str] = mine) -> int | None:
            found = [int(m.group(1)) for x in mine for m in [re.search(label + r"\s*(\d+)M", x)]
                     if m]
            return found[0] * MIB if found else None

        row = device.loc[rank]
        assert row["memory_type"] in {"HBM", "MOC"}
        assert row["device_memory_bytes"] == grab(r"Device (?:HBM|MOC) memory size:")
        assert row["used_memory_bytes"] == grab(r"MindSpore Used memory size:")
        peak = grab(r"\(without fragments\):")
        actual = grab(r"\(with fragments\):")
        assert (row["peak_used_bytes"] if peak else None) == peak
        assert (row["peak_actual_bytes"] if actual else None) == actual
        pids = {int(m.group(1)) for x in mine for m in [re.search(r"DEVICE\((\d+),", x)] if m}
        assert {int(row["pid"])} == pids
    assert device.loc[1, "memory_type"] == "MOC" and device.loc[0, "memory_type"] == "HBM"
    assert device.loc[2, "total_static_bytes"] == grab_any(lines, r"Total Static Memory size:")


def grab_any(lines: list[str], label: str) -> int:
    return int(next(re.search(label + r"\s*(\d+)M", x).group(1) for x in lines
                    if re.search(label, x))) * MIB


def test_cpu_pool_lines_from_a_real_noisy_log() -> None:
    lines = _lines("ms210_cpu_info_tail.log")
    df = read_memory_log(LOGS / "ms210_cpu_info_tail.log")
    pool_lines = [x for x in lines if "pool info: Total allocated mem" in x
                  or "The dynamic memory pool total allocated mem" in x]
    assert len(df) == len(pool_lines) == 2
    assert set(df["kind"]) == {"memory_pool"}
    totals = [int(re.search(r"otal allocated mem:\s*(\d+)M", x).group(1)) * MIB
              for x in pool_lines]
    assert list(df["pool_total_bytes"]) == totals
    idle = [int(re.search(r"total idle mem:\s*(\d+)M", x).group(1)) * MIB for x in pool_lines]
    assert list(df["pool_idle_bytes"]) == idle
    pids = {int(re.search(r"\((\d+),", x).group(1)) for x in pool_lines}
    assert set(df["pid"]) == pids


@pytest.mark.parametrize(("text", "bad_line", "reader"), [
    ("noise\n{ Epoch:[  1/  2], step:[ x/ 19], loss: 1.0, per_step_time: 5ms\n", 2,
     read_training_log),
    ("{ step:[    1/   10], loss:  1.0, per_step_time: fastms, lr: 0.1 }\n", 1,
     read_training_log),
    ("{ step:[    1/   10], loss: ???, per_step_time: 5ms }\n", 1, read_training_log),
    # a walk: an O for a 0 read as loss 1.0, its first digit
    ("{ step:[    1/   10], loss: 2.5, per_step_time: 5ms }\n"
     "{ step:[    2/   10], loss: 1O.2x 10.3, per_step_time: 5ms }\n", 2, read_training_log),
    ("x\ny\nDevice HBM memory size: 12.5M\n", 3, read_memory_log),
    ("Device MOC memory size: 100M\nMindSpore Used memory size: lotsM\n", 2, read_memory_log),
])
def test_malformed_lines_name_file_and_line(tmp_path: Path, text: str, bad_line: int,
                                            reader) -> None:
    path = tmp_path / "bad.log"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProfileError) as err:
        reader(path)
    assert err.value.line == bad_line and str(path) in str(err.value)


def test_unreadable_and_empty_logs(tmp_path: Path) -> None:
    binary = tmp_path / "bin.log"
    binary.write_bytes(b"ok line\n\xff\xfe noise\n{ step:[ \xff 1/ 10], loss: 1.0 }\n")
    with pytest.raises(ProfileError) as err:
        read_training_log(binary)
    assert err.value.line == 3  # the noise line before it is skipped
    empty = tmp_path / "empty.log"
    empty.write_text("nothing to see\n", encoding="utf-8")
    with pytest.raises(ProfileError, match="no training step"):
        read_training_log(empty)
    assert read_memory_log(empty).empty
    with pytest.raises(ProfileError, match="no such file"):
        read_memory_log(tmp_path / "missing.log")


def test_a_garbled_number_is_not_read_as_its_first_digits(tmp_path: Path) -> None:
    """Fields perfkit reads as numbers end at a delimiter: an lr or a norm garbled inside
    (``1.2O00e-05``) is NA, not 1.2; the loss is refused with its own text."""
    path = tmp_path / "garbled.log"
    path.write_text("{ step:[    1/   10], loss: 2.5, per_step_time: 5ms, lr: 1.2O00e-05, "
                    "global_norm: [3.5x] }\n", encoding="utf-8")
    row = read_training_log(path).iloc[0]
    assert row["loss"] == 2.5 and row["per_step_time_ms"] == 5
    assert pd.isna(row["lr"]) and pd.isna(row["global_norm"])
    path.write_text("{ step:[    1/   10], loss: 1O.2x, per_step_time: 5ms }\n",
                    encoding="utf-8")
    with pytest.raises(ProfileError, match="found 'loss: 1O.2x, per_step_time: 5ms"):
        read_training_log(path)
