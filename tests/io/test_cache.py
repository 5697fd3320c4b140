"""Parquet cache: outside the user's folder, keyed by path, size, mtime, inode and ctime,
env switches; entries checked on read, a damaged one is a miss that heals."""

from __future__ import annotations

import json
import os
from pathlib import Path

import arrow_text
import pandas as pd
import pytest
from shared_samples import PT_GPT3_OLD, PT_LEVEL1, sample, shared_sample, writable_copy

import perfkit.io.engines.local as detect
from perfkit.errors import ProfileError
from perfkit.io.cache import store as cache

LEVEL1 = sample(PT_LEVEL1)
RANK0 = LEVEL1 / "rank0_ascend_pt"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(d))
    monkeypatch.delenv("PERFKIT_CACHE", raising=False)
    return d


def _no_parse(monkeypatch):
    def boom(source):
        raise AssertionError(f"parsed {source.path} again instead of using the cache")

    monkeypatch.setattr(detect, "parse_source", boom)


@pytest.mark.shared_samples
def test_second_load_comes_from_cache(cache_dir, monkeypatch):
    first = detect.load(RANK0)
    entries = [p for p in cache_dir.iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1
    assert {f.name for f in entries[0].iterdir()} >= {"meta.json", "kernels.parquet"}
    _no_parse(monkeypatch)
    second = detect.load(RANK0)
    assert second.meta == first.meta
    for name in ("kernels", "ops", "steps", "comm_ops", "comm_bandwidth", "comm_matrix",
                 "memory", "op_memory"):
        pd.testing.assert_frame_equal(getattr(second, name), getattr(first, name))


@pytest.mark.shared_samples
def test_cluster_cache_per_rank(cache_dir, monkeypatch):
    first = detect.load(LEVEL1)
    _no_parse(monkeypatch)
    second = detect.load(LEVEL1)
    pd.testing.assert_frame_equal(second.steps, first.steps)


@pytest.mark.shared_samples
def test_changed_file_is_reparsed(cache_dir, tmp_path):
    user = writable_copy(RANK0, tmp_path / "user" / "rank0_ascend_pt")
    a = detect.load(user)
    st = user / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    st.write_text(st.read_text().replace("8873.756000000001", "9000.5"))
    os.utime(st, ns=(st.stat().st_atime_ns, st.stat().st_mtime_ns + 10**9))
    b = detect.load(user)
    assert a.steps["computing_us"].iloc[0] != b.steps["computing_us"].iloc[0]
    assert b.steps["computing_us"].iloc[0] == 9000.5


@pytest.mark.shared_samples
def test_env_disables_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    detect.load(RANK0)
    assert not cache_dir.exists()
    monkeypatch.setenv("PERFKIT_CACHE", "1")
    detect.load(RANK0, cache=False)
    assert not cache_dir.exists()


@pytest.mark.shared_samples
def test_cache_never_inside_the_profile_folder(tmp_path, monkeypatch):
    user = writable_copy(RANK0, tmp_path / "user" / "rank0_ascend_pt")
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(user / "cache_here"))
    before = sorted(p.name for p in user.rglob("*"))
    detect.load(user)
    assert sorted(p.name for p in user.rglob("*")) == before


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.delenv("PERFKIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_root() == tmp_path / "xdg" / "perfkit"


# ----------------------------------------------------------------------------- self-check

SMALL = sample(PT_GPT3_OLD) / "test_rank_0"


def _entries(cache_dir: Path) -> list[Path]:
    return [p for p in cache_dir.iterdir() if not p.name.startswith(".")]


def _counting(monkeypatch) -> list[str]:
    parsed: list[str] = []
    real = detect.parse_source

    def spy(source):
        parsed.append(source.path)
        return real(source)

    monkeypatch.setattr(detect, "parse_source", spy)
    return parsed


@pytest.fixture
def cached(cache_dir, tmp_path):
    """A private copy of a small rank, loaded once (so its entry exists), and its tables."""
    user = writable_copy(shared_sample(PT_GPT3_OLD) / "test_rank_0",
                         tmp_path / "user" / "rank0_ascend_pt")
    first = detect.load(user)
    tables = {n: getattr(first, n) for n in ("kernels", "steps", "memory", "op_memory")}
    (entry,) = _entries(cache_dir)
    return user, entry, tables


def _same(profile, tables) -> None:
    for name, frame in tables.items():
        pd.testing.assert_frame_equal(getattr(profile, name), frame)


@pytest.mark.parametrize("damage", ["truncate_parquet", "garbage_parquet", "delete_table",
                                    "meta_not_json", "meta_wrong_types", "meta_missing_table",
                                    "empty_meta", "table_is_folder"])
def test_damaged_entry_is_a_miss_removed_and_rewritten(cached, monkeypatch, damage):
    user, entry, tables = cached
    kernels = entry / "kernels.parquet"
    meta = entry / "meta.json"
    if damage == "truncate_parquet":
        kernels.write_bytes(kernels.read_bytes()[:100])
    elif damage == "garbage_parquet":
        kernels.write_bytes(b"\x00garbage" * (kernels.stat().st_size // 8))
    elif damage == "delete_table":
        (entry / "steps.parquet").unlink()
    elif damage == "meta_not_json":
        meta.write_text("{not json")
    elif damage == "meta_wrong_types":
        doc = json.loads(meta.read_text())
        doc["meta"]["notes"] = "not a list"
        meta.write_text(json.dumps(doc))
    elif damage == "meta_missing_table":
        doc = json.loads(meta.read_text())
        del doc["tables"]["op_memory"]
        meta.write_text(json.dumps(doc))
    elif damage == "empty_meta":
        meta.write_bytes(b"")
    elif damage == "table_is_folder":
        kernels.unlink()
        kernels.mkdir()
    assert cache.check_entry(entry)[0] is None
    parsed = _counting(monkeypatch)
    again = detect.load(user)
    assert len(parsed) == 1, "a damaged entry must be a miss (parsed again)"
    _same(again, tables)
    # rewritten: valid, and the next load is a hit again
    assert cache.check_entry(entry)[0] is not None
    _same(detect.load(user), tables)
    assert len(parsed) == 1


def _last_page_byte(column) -> int:
    """The offset of the last byte of a column chunk: the end of its last data page's
    (compressed) values, which the page's CRC covers. The middle of a small chunk may fall
    in a page header instead (its statistics, not covered by the CRC), depending on how
    the installed pyarrow lays pages out."""
    start = column.dictionary_page_offset if column.has_dictionary_page \
        else column.data_page_offset
    return start + column.total_compressed_size - 1


def test_data_page_damaged_past_the_footer_heals_when_read(cached, monkeypatch):
    """Every page has a CRC; a flipped byte inside a data page is found when the table is
    read (after the entry passed its footer check), and the table comes from a fresh parse."""
    import pyarrow.parquet as pq

    user, entry, tables = cached
    f = entry / "kernels.parquet"
    md = pq.read_metadata(f).row_group(0)
    names = [md.column(i).path_in_schema for i in range(md.num_columns)]
    data = bytearray(f.read_bytes())
    data[_last_page_byte(md.column(names.index("dur_us")))] ^= 0xFF
    f.write_bytes(bytes(data))
    assert cache.check_entry(entry)[0] is not None  # same size, footer intact
    parsed = _counting(monkeypatch)
    again = detect.load(user)
    assert parsed == []  # a hit, so far
    _same(again, tables)  # the damaged table: re-parsed, right numbers
    assert len(parsed) == 1
    assert cache.check_entry(entry)[0] is not None
    pd.testing.assert_frame_equal(arrow_text.read_parquet(f), tables["kernels"])


def test_damaged_page_without_reparse_names_the_file(cached):
    _, entry, _ = cached
    f = entry / "steps.parquet"
    import pyarrow.parquet as pq

    data = bytearray(f.read_bytes())
    data[_last_page_byte(pq.read_metadata(f).row_group(0).column(1))] ^= 0xFF
    f.write_bytes(bytes(data))
    prof = cache.read_entry(entry)
    with pytest.raises(ProfileError, match="steps.parquet"):
        _ = prof.steps


def test_edit_with_size_and_mtime_restored_is_reparsed(cached, monkeypatch):
    user, _, tables = cached
    st = user / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    before = st.stat()
    text = st.read_text()
    edited = text.replace("75174.57464453117", "75999.57464453117")
    assert len(edited) == len(text) and edited != text
    st.write_text(edited)
    os.utime(st, ns=(before.st_atime_ns, before.st_mtime_ns))  # what `touch -r` would do
    assert (st.stat().st_size, st.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    parsed = _counting(monkeypatch)
    again = detect.load(user)
    assert len(parsed) == 1
    assert again.steps["computing_us"].iloc[0] == 75999.57464453117


def test_replaced_through_rename_is_reparsed(cached, monkeypatch):
    user, _, _ = cached
    kd = user / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    before = kd.stat()
    tmp = kd.with_name("kernel_details.csv.new")
    tmp.write_bytes(kd.read_bytes())
    os.utime(tmp, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(tmp, kd)
    assert kd.stat().st_ino != before.st_ino
    parsed = _counting(monkeypatch)
    detect.load(user)
    assert len(parsed) == 1


def test_key_includes_inode_and_ctime(tmp_path):
    f = tmp_path / "a.csv"
    f.write_text("x\n")
    key = cache.entry_key("kineto", tmp_path, [f])
    os.chmod(f, 0o600)  # changes ctime only
    assert cache.entry_key("kineto", tmp_path, [f]) != key


def test_a_changed_loader_does_not_reuse_entries(tmp_path, monkeypatch):
    # entries written by another version of the parsing code are never served
    f = tmp_path / "a.csv"
    f.write_text("x\n")
    key = cache.entry_key("kineto", tmp_path, [f])
    monkeypatch.setattr(cache, "code_fingerprint", lambda: "another-loader")
    assert cache.entry_key("kineto", tmp_path, [f]) != key


def _load_in_child(args):
    path, cache_dir = args
    os.environ["PERFKIT_CACHE_DIR"] = cache_dir
    prof = detect.load(path)
    return {n: getattr(prof, n) for n in ("kernels", "steps", "comm_ops")}


@pytest.mark.shared_samples
def test_concurrent_loads_of_one_folder_stay_correct(tmp_path, monkeypatch):
    """Several processes load the same rank at once into one empty cache: every one gets the
    same tables as a cache-less load, and exactly one valid entry is left."""
    import multiprocessing

    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(cache_dir))
    expected = detect.load(SMALL, cache=False)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(4) as pool:
        results = pool.map(_load_in_child, [(str(SMALL), str(cache_dir))] * 8)
    for got in results:
        for name, frame in got.items():
            pd.testing.assert_frame_equal(frame, getattr(expected, name))
    entries = _entries(cache_dir)
    assert len(entries) == 1 and cache.check_entry(entries[0])[0] is not None
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(".")]


def test_the_code_fingerprint_reads_the_parsing_code():
    # every part of the parsing code named is a real file or folder of the package (the
    # cache moved into io/cache/ once and hashed nothing: an edited loader reused entries)
    import perfkit

    root = Path(perfkit.__file__).parent
    for part in cache._PARSING_CODE:
        assert (root / part).exists(), part
    # the hash is of the files' bytes: a tree of only names gives another one
    assert cache.source_hash(("io",)) != cache.source_hash(("no-such-folder",))
    assert cache.source_hash(("errors.py",)) != cache.source_hash(("profile.py",))
