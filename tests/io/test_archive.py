"""Safe extraction of uploaded zipped profiles (perfkit.io._common.archive)."""

from __future__ import annotations

import gzip
import io
import stat
import struct
import zipfile
from pathlib import Path

import pytest

import perfkit
from perfkit.errors import InvalidArgumentError, ProfileError
from perfkit.io._common.archive import DEFAULT_MAX_UPLOAD_BYTES, extract_profile_archive

ROOT = Path(__file__).resolve().parents[2]
SLOW_RANK = ROOT / "data" / "simulated" / "slow-rank"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def make_zip(entries, compression=zipfile.ZIP_DEFLATED) -> bytes:
    """A zip of ``entries``: (name or ZipInfo, content) pairs."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for info, content in entries:
            zf.writestr(info, content)
    return buf.getvalue()


def zip_folder(folder: Path, prefix: str = "") -> bytes:
    """A zip of every file under ``folder``, named ``prefix`` + its relative path."""
    return make_zip([(prefix + p.relative_to(folder).as_posix(), p.read_bytes())
                     for p in sorted(folder.rglob("*")) if p.is_file()])


def info(name: str, mode: int) -> zipfile.ZipInfo:
    zi = zipfile.ZipInfo(name)
    zi.external_attr = mode << 16
    return zi


def refused(data, dest: Path, *words: str, **kwargs) -> ProfileError:
    """Extraction fails with a ProfileError naming the archive and ``words``; dest is empty."""
    kwargs.setdefault("name", "job.zip")
    with pytest.raises(ProfileError) as caught:
        extract_profile_archive(data, dest, **kwargs)
    message = str(caught.value)
    assert message.startswith(f"{kwargs['name']}: ")
    for word in words:
        assert word in message
    assert not dest.exists() or not any(dest.iterdir())
    return caught.value


# -- the good path ---------------------------------------------------------------------------

def test_bundled_profile_round_trip(tmp_path):
    dest = tmp_path / "upload"
    folder = extract_profile_archive(zip_folder(SLOW_RANK, "slow-rank/"), dest)
    assert folder == dest / "slow-rank"
    original = perfkit.load(SLOW_RANK, cache=False, progress=False)
    loaded = perfkit.load(folder, cache=False, progress=False)
    assert len(loaded.ranks) == len(original.ranks) == 4
    assert loaded.ranks == original.ranks


def test_no_single_top_folder_returns_dest(tmp_path):
    dest = tmp_path / "upload"
    assert extract_profile_archive(zip_folder(SLOW_RANK), dest) == dest
    assert (dest / "README.md").is_file()
    assert len(perfkit.load(dest, cache=False, progress=False).ranks) == 4


def test_two_top_folders_or_a_top_file_return_dest(tmp_path):
    two = make_zip([("a/x.txt", b"1"), ("b/y.txt", b"2")])
    assert extract_profile_archive(two, tmp_path / "two") == tmp_path / "two"
    one_file = make_zip([("trace.json", b"{}")])
    assert extract_profile_archive(one_file, tmp_path / "file") == tmp_path / "file"


def test_macos_junk_is_skipped_and_ignored(tmp_path):
    data = make_zip([("prof/", b""), ("prof/a.csv", b"x"), ("prof/.DS_Store", b"junk"),
                     ("__MACOSX/prof/._a.csv", b"junk"), (".DS_Store", b"junk")])
    dest = tmp_path / "upload"
    assert extract_profile_archive(data, dest) == dest / "prof"
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == [
        "prof", "prof/a.csv"]


def test_path_input_memoryview_and_existing_empty_dest(tmp_path):
    data = make_zip([("p/a.txt", b"hello"), ("p/sub/", b"")])
    src = tmp_path / "p.zip"
    src.write_bytes(data)
    assert extract_profile_archive(src, tmp_path / "one") == tmp_path / "one" / "p"
    assert (tmp_path / "one" / "p" / "sub").is_dir()
    (tmp_path / "two").mkdir()
    out = extract_profile_archive(memoryview(data), str(tmp_path / "two"))
    assert (out / "a.txt").read_bytes() == b"hello"
    assert DEFAULT_MAX_UPLOAD_BYTES == 200 * 2**20


def test_backslash_names_become_folders(tmp_path):
    out = extract_profile_archive(make_zip([("p\\a.txt", b"1")]), tmp_path / "d")
    assert (out / "a.txt").read_bytes() == b"1"


# -- what is refused -------------------------------------------------------------------------

@pytest.mark.parametrize("member, words", [
    ("../evil", ["'../evil'", "zip slip"]),
    ("ok/../../evil", ["zip slip"]),
    ("..\\evil", ["zip slip"]),
    ("/etc/x", ["'/etc/x'", "absolute path"]),
    ("C:/evil", ["drive letter"]),
    ("C:\\evil", ["drive letter"]),
])
def test_paths_leaving_dest_are_refused(tmp_path, member, words):
    dest = tmp_path / "box" / "dest"
    data = make_zip([("fine.txt", b"ok"), (member, b"pwned")])
    refused(data, dest, *words)
    assert not (tmp_path / "box").exists()  # nothing was created at all
    assert not list(tmp_path.rglob("evil"))
    assert not (tmp_path.parent / "evil").exists()


def test_symlink_is_refused(tmp_path):
    data = make_zip([("p/a.txt", b"1"), (info("p/link", 0o120777), "/etc/passwd")])
    refused(data, tmp_path / "d", "'p/link'", "symbolic link")
    assert not (tmp_path / "d").exists()


def test_device_file_is_refused(tmp_path):
    data = make_zip([(info("p/dev", stat.S_IFCHR | 0o666), b"")])
    refused(data, tmp_path / "d", "'p/dev'", "special file")


def test_encrypted_member_is_refused(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("p/a.txt", b"secret")
        zf.infolist()[0].flag_bits |= 0x1  # written to the central directory on close
    refused(buf.getvalue(), tmp_path / "d", "'p/a.txt'", "encrypted")


def test_zip_bomb_ratio_is_refused(tmp_path):
    bomb = make_zip([("p/zeros.bin", bytes(50 * 2**20))])
    assert len(bomb) < 200_000
    refused(bomb, tmp_path / "d", "'p/zeros.bin'", "zip bomb", "limit 200")


def test_declared_total_above_limit_is_refused(tmp_path):
    data = make_zip([("p/a.bin", bytes(5000)), ("p/b.bin", bytes(5000))])
    refused(data, tmp_path / "d", "would unpack to 9.8 KB", "limit of 8 KB",
            max_uncompressed_bytes=8192)


def test_uncompressed_limit_enforced_while_streaming(tmp_path, monkeypatch):
    """Declared sizes that lie do not help: bytes actually written are counted."""
    data = make_zip([("p/a.txt", b"small"), ("p/b.txt", b"tiny")])
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda self, *a, **k: io.BytesIO(bytes(3000)))
    dest = tmp_path / "new" / "dest"
    refused(data, dest, "more than the limit of 4.9 KB", "extraction stopped",
            max_uncompressed_bytes=5000)
    assert not (tmp_path / "new").exists()  # the parents it created are gone too


def test_too_many_members_is_refused(tmp_path):
    data = make_zip([(f"p/{i}.txt", b"x") for i in range(30)])
    refused(data, tmp_path / "d", "holds 30 entries", "limit of 10", max_members=10)


def test_huge_table_of_contents_is_refused_before_parsing(tmp_path):
    data = make_zip([(f"p/{i}.txt", b"") for i in range(200)], zipfile.ZIP_STORED)
    refused(data, tmp_path / "d", "more entries than the limit of 2", "table of contents",
            max_members=2)


def test_compressed_size_limit(tmp_path):
    data = make_zip([("p/a.bin", bytes(range(256)) * 10)], zipfile.ZIP_STORED)
    refused(data, tmp_path / "d", "more than the upload limit of 1 KB",
            max_compressed_bytes=1024)


def test_duplicates_are_refused(tmp_path):
    refused(make_zip([("p/a.txt", b"1"), ("p/./a.txt", b"2")]), tmp_path / "d",
            "'p/./a.txt'", "appears twice")
    with pytest.warns(UserWarning, match="Duplicate name"):
        data = make_zip([("p/a.txt", b"1"), ("p/a.txt", b"2")])
    refused(data, tmp_path / "d", "appears twice")
    refused(make_zip([("p/a", b"1"), ("p/a/b", b"2")]), tmp_path / "d",
            "'p/a' is both a file and a folder")


@pytest.mark.parametrize("data, words", [
    (b"hello, this is not a zip", ["is not a zip file", "only .zip"]),
    (b"", ["is not a zip file"]),
    (gzip.compress(b"x" * 600, mtime=0), ["gzip", "only .zip archives"]),
])
def test_not_a_zip(tmp_path, data, words):
    refused(data, tmp_path / "d", *words)


def test_truncated_zip_is_damaged(tmp_path):
    data = zip_folder(SLOW_RANK, "slow-rank/")
    refused(data[: len(data) // 2], tmp_path / "d", "damaged or incomplete")


def test_crc_error_removes_partial_extraction(tmp_path):
    data = bytearray(make_zip([("p/a.txt", b"first file"), ("p/b.txt", b"hello world")],
                              zipfile.ZIP_STORED))
    at = data.index(b"hello world")
    data[at] ^= 0xFF
    dest = tmp_path / "d"
    dest.mkdir()
    refused(bytes(data), dest, "is damaged", "'p/b.txt'", "CRC")
    assert dest.is_dir() and not any(dest.iterdir())  # kept: it existed before the call


def test_empty_archive_is_refused(tmp_path):
    refused(make_zip([("__MACOSX/._x", b"junk"), ("p/", b"")]), tmp_path / "d",
            "contains no files")


def test_path_errors_name_the_file(tmp_path):
    missing = tmp_path / "nope.zip"
    with pytest.raises(ProfileError, match=r"nope\.zip: no such file"):
        extract_profile_archive(missing, tmp_path / "d")
    with pytest.raises(ProfileError, match="is a folder, not a zip file"):
        extract_profile_archive(tmp_path, tmp_path / "d")
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"junk")
    with pytest.raises(ProfileError, match=r"bad\.zip: is not a zip file"):
        extract_profile_archive(bad, tmp_path / "d")
    with pytest.raises(ProfileError, match=r"^upload\.zip: "):
        extract_profile_archive(b"junk", tmp_path / "d")


def test_dest_must_be_empty(tmp_path):
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    with pytest.raises(InvalidArgumentError, match="dest"):
        extract_profile_archive(make_zip([("p/a.txt", b"1")]), dest)
    assert [p.name for p in dest.iterdir()] == ["keep.txt"]
    with pytest.raises(InvalidArgumentError, match="dest"):
        extract_profile_archive(make_zip([("p/a.txt", b"1")]), dest / "keep.txt")


@pytest.mark.parametrize("kwargs", [{"max_members": 0}, {"max_ratio": -1.0},
                                    {"max_uncompressed_bytes": 1.5}])
def test_limits_must_be_positive(tmp_path, kwargs):
    with pytest.raises(InvalidArgumentError):
        extract_profile_archive(b"", tmp_path / "d", **kwargs)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_zip64_table_of_contents_is_bounded_too(tmp_path):
    """A small size in the classic end record does not hide a big zip64 one."""
    data = bytearray(make_zip([(f"p/{i}", b"") for i in range(70000)], zipfile.ZIP_STORED))
    at = data.rfind(b"PK\x05\x06")
    assert data.rfind(b"PK\x06\x06") >= 0  # zipfile wrote a zip64 end record
    struct.pack_into("<HHI", data, at + 8, 1, 1, 100)  # claim 1 entry, 100 bytes
    refused(bytes(data), tmp_path / "d", "more entries than the limit of 100",
            "table of contents", max_members=100)
