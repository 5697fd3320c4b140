"""Damaged inputs built from real samples, each with the outcome it must have.

:func:`build` copies real profiles into a folder (a pytest ``tmp_path``) and damages the
copies in every way issue 18 lists: truncated, padded with
zeros, sparse, garbled, fields of the wrong type, wrong header, odd-but-valid encodings
(BOM, CRLF, UTF-16), permissions (simulated), plus the config and log readers, the IR reader
and the zip extractor. The profiles recorded by other projects are read from
``shared/samples`` beside the checkout (``tests/shared_samples.py``; never copied into the
repository): the builders that need them are registered with :func:`shared_builder` and run
only where that folder is (``build(root, shared=False)`` leaves them out); the others use
the project's own files (``tests/data``, ``data/``). Each :class:`Case` says what must
happen:

- ``"error"``: a :class:`perfkit.errors.PerfkitError` whose message names ``file`` and holds
  ``words``;
- ``"partial"``: a :class:`perfkit.Cluster` where the ranks in ``failed`` are listed in
  ``Cluster.failed`` (with ``file`` in the message) and the others load;
- ``"repaired"``: a correct load with a note holding ``words`` (``meta.notes``, or
  ``attrs["notes"]`` for logs), then ``check`` verifies the numbers;
- ``"ok"``: a correct load (odd but valid input), then ``check`` verifies the numbers.

Checks compare with the undamaged sample loaded the same way (``refs``): a repaired file
must give the intact file's numbers except where the damage was. Nothing here imports the
code under test at module level, so the generator also works as a script
(``python tests/corpus/make_corpus.py OUT``) for manual exploration.
"""

from __future__ import annotations

import builtins
import csv
import functools
import gzip
import io
import json
import os
import shutil
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

try:
    import shared_samples as S
except ImportError:  # run as a script: tests/ is not on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import shared_samples as S

__all__ = ["Case", "build", "reference_inputs", "snapshot", "ROOT"]

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
# other projects' real profiles, in shared/samples (read by the shared_builder builders only)
L1 = S.sample(S.PT_LEVEL1)
R0 = L1 / "rank0_ascend_pt"
DB = S.sample(S.PT_DB_LEVEL1)
DB0 = DB / "rank0_ascend_pt"
KH = S.sample(S.HTA)
TV = S.sample(S.TRACE_VIEW_EXCERPT)
LEG = S.sample(S.MINDINSIGHT) / "cluster_propose"
LEG1 = S.sample(S.MINDINSIGHT) / "run_2_normal_run" / "profiler"
MI1 = S.sample("wild/mi_run1") / "profiler"  # 322 steps of MindInsight's step trace
MIP = S.sample("wild/mi_prof") / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"  # raw CANN
KD = S.sample("wild/msa_kernel_details")  # a lone torch_npu kernel_details.csv, 591 tasks
DS = S.sample(S.KINETO_TRACES["ds_train"])  # DeepEP MoE, H800: collectives on the GPU
K19 = S.sample(S.KINETO_TRACES["k_resnet50_nw0"])  # PyTorch 1.9: memory sizes only
# the project's own files
KL = ROOT / "data" / "kineto-tiny-llama"
CO = DATA / "msprof_analyze_level1" / "cluster_analysis_output"  # msprof-analyze's output
IR = DATA / "ir"
BUNDLED_IR = ROOT / "data" / "ir"  # the dumps the notebooks open ship with the package
LOGS = DATA / "logs"
CFG = DATA / "configs"

OUT = "ASCEND_PROFILER_OUTPUT"
_UNREAD = ("trace_view.json", "operator_details.csv", "api_statistic.csv", "l2_cache.csv",
           "op_statistic.csv")
GARBAGE = bytes(range(256)) * 64 + b"\x00\xff\xfe" * 100


@dataclass
class Case:
    """One damaged input and what perfkit must do with it (see the module docstring)."""

    name: str
    kind: str  # load, load_ir, training_log, memory_log, mf_config, hf_config, mf_model, zip
    path: Path
    expect: str  # error, partial, repaired, ok
    words: tuple[str, ...] = ()
    file: str | None = None
    failed: tuple[Any, ...] = ()
    ref: str | None = None
    check: Callable[[Any, Any], None] | None = None
    patch: Callable[[Any], None] | None = None
    skip: str | None = None
    shared: bool = False  # made from other projects' profiles (shared/samples)
    max_s: float = 20.0
    kwargs: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- helpers

def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """(size, mtime, mode) of every file and folder under ``root``; sparse files not read."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


def _copy_rank(src: Path, dst: Path, trace: bool = False) -> Path:
    ignore = None if trace else shutil.ignore_patterns(*_UNREAD)
    return S.writable_copy(src, dst, ignore=ignore)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _eol(line: bytes) -> bytes:
    return b"\r\n" if line.endswith(b"\r\n") else b"\n" if line.endswith(b"\n") else b""


def _cell(path: Path, row: int, column: str) -> str:
    """One cell (data row ``row``, 0-based) of a CSV, as written."""
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"))))
    return rows[row + 1][rows[0].index(column)]


def _first_steps_unplaced(n: int) -> Callable[[Any, Any], None]:
    """The first ``n`` steps' start unknown (NA), every other step as the intact one's."""
    def check(got: Any, ref: Any) -> None:
        g, r = got.steps, ref.steps
        assert g["step_start_us"].iloc[:n].isna().all()
        pd.testing.assert_series_equal(g["step_start_us"].iloc[n:], r["step_start_us"].iloc[n:])
        pd.testing.assert_series_equal(g["total_us"], r["total_us"])
    return check


def _edit_cell(path: Path, row: int, column: str, value: str) -> None:
    """Set one cell (data row ``row``, 0-based) of a CSV, leaving every other line as is."""
    lines = _lines(path)
    header = next(csv.reader([lines[0].decode("utf-8-sig")]))
    i = header.index(column)
    line = lines[row + 1]
    cells = next(csv.reader([line.decode()]))
    cells[i] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(cells)
    lines[row + 1] = buf.getvalue().encode() + _eol(line)
    path.write_bytes(b"".join(lines))


def _cut_mid_last_row(path: Path) -> None:
    data = path.read_bytes().rstrip(b"\r\n")
    start = data.rfind(b"\n") + 1
    path.write_bytes(data[:start + max(1, (len(data) - start) // 2)])


def _zero_pad(path: Path, n: int = 1 << 20) -> None:
    with open(path, "ab") as fh:
        fh.write(b"\x00" * n)


def _sparse(path: Path, size: int) -> None:
    os.truncate(path, size)


def _utf16(path: Path) -> None:
    path.write_bytes(path.read_bytes().decode("utf-8-sig").encode("utf-16"))


def _bom(path: Path) -> None:
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())


def _line_ends(path: Path) -> None:
    """CRLF line ends to LF, or LF to CRLF (whichever the file does not use)."""
    data = path.read_bytes()
    if b"\r\n" in data:
        path.write_bytes(data.replace(b"\r\n", b"\n"))
    else:
        path.write_bytes(data.replace(b"\n", b"\r\n"))


def deny_open(mp: Any, *more: Path, paths: tuple[Path, ...] = ()) -> None:
    """Make ``open`` of these files raise PermissionError, as for a file mode 000 (the
    tests run as root, whom chmod does not stop)."""
    denied = {os.fspath(p) for p in (*more, *paths)}
    real = builtins.open

    def fake(file: Any, *a: Any, **k: Any) -> Any:
        if not isinstance(file, int) and os.fspath(file) in denied:
            raise PermissionError(13, "Permission denied", os.fspath(file))
        return real(file, *a, **k)

    mp.setattr(builtins, "open", fake)
    mp.setattr(io, "open", fake)


def deny_list(mp: Any, *paths: Path) -> None:
    """Make listing these folders raise PermissionError (a folder mode 000, as non-root)."""
    denied = {os.fspath(p) for p in paths}
    real_listdir, real_scandir = os.listdir, os.scandir

    def listdir(p: Any = ".") -> Any:
        if os.fspath(p) in denied:
            raise PermissionError(13, "Permission denied", os.fspath(p))
        return real_listdir(p)

    def scandir(p: Any = ".") -> Any:
        if not isinstance(p, int) and os.fspath(p) in denied:
            raise PermissionError(13, "Permission denied", os.fspath(p))
        return real_scandir(p)

    mp.setattr(os, "listdir", listdir)
    mp.setattr(os, "scandir", scandir)


def _root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


ROOT_SKIP = "runs as root, whom chmod does not stop (the simulated case covers it)"


# ----------------------------------------------------------------------------- checks

def _tables(*names: str) -> Callable[[Any, Any], None]:
    """The tables equal the intact sample's."""
    def check(got: Any, ref: Any) -> None:
        for n in names:
            pd.testing.assert_frame_equal(getattr(got, n), getattr(ref, n), check_exact=True)
        assert got.meta.origin_ns == ref.meta.origin_ns
    return check


def _na_only(table: str, col: str, rows: list[int]) -> Callable[[Any, Any], None]:
    """``col`` is NA in ``rows`` and equal to the intact sample's elsewhere; origin kept."""
    def check(got: Any, ref: Any) -> None:
        assert got.meta.origin_ns == ref.meta.origin_ns, "one bad value moved the origin"
        g, r = getattr(got, table), getattr(ref, table)
        assert len(g) == len(r)
        v = g[col].to_numpy(np.float64)
        assert np.isnan(v[rows]).all(), v[rows]
        keep = np.ones(len(v), dtype=bool)
        keep[rows] = False
        np.testing.assert_array_equal(v[keep], r[col].to_numpy(np.float64)[keep])
        other = [c for c in ("start_us", "ts_us", "dur_us") if c in g and c != col]
        for c in other:  # every other row is on the same clock as before
            np.testing.assert_array_equal(g[c].to_numpy(np.float64)[keep],
                                          r[c].to_numpy(np.float64)[keep])
    return check


def _part(frame: pd.DataFrame, source: str | None) -> pd.DataFrame:
    if source is None:
        return frame
    return frame[frame["source"] == source].reset_index(drop=True)


def _rows(table: str, drop_last: int, source: str | None = None) -> Callable[[Any, Any], None]:
    """The table (its rows from ``source``) equals the intact one without its last rows."""
    def check(got: Any, ref: Any) -> None:
        g, r = _part(getattr(got, table), source), _part(getattr(ref, table), source)
        assert len(g) == len(r) - drop_last, (len(g), len(r))
        pd.testing.assert_frame_equal(g, r.iloc[:len(r) - drop_last].reset_index(drop=True))
    return check


def _doubled(table: str, source: str | None) -> Callable[[Any, Any], None]:
    """Two copies of the file one after the other: every row twice, in order."""
    def check(got: Any, ref: Any) -> None:
        g, r = _part(getattr(got, table), source), _part(getattr(ref, table), source)
        pd.testing.assert_frame_equal(g, pd.concat([r, r], ignore_index=True))
    return check


def _frame_equal(got: Any, ref: Any) -> None:
    pd.testing.assert_frame_equal(got, ref)


def _spec_equal(got: Any, ref: Any) -> None:
    model = got[0] if isinstance(got, tuple) else got
    ref_model = ref[0] if isinstance(ref, tuple) else ref
    assert model == ref_model
    if isinstance(got, tuple):
        assert got[1] == ref[1]


# ----------------------------------------------------------------------------- builders

Builder = Callable[[Path], list[Case]]
_BUILDERS: list[tuple[Builder, bool]] = []


def builder(func: Builder) -> Builder:
    """Register a builder that uses only the project's own files."""
    _BUILDERS.append((func, False))
    return func


def shared_builder(func: Builder) -> Builder:
    """Register a builder that damages copies of other projects' profiles (shared/samples)."""
    _BUILDERS.append((func, True))
    return func


_CSV_FILES = {  # file -> (table, a timestamp column, a duration column, its canonical name)
    "kernel_details.csv": ("kernels", "Start Time(us)", "Duration(us)", "dur_us"),
    "memory_record.csv": ("memory", "Timestamp(us)", None, None),
    "operator_memory.csv": ("op_memory", "Allocation Time(us)", "Duration(us)", "duration_us"),
    "npu_module_mem.csv": ("memory", "Timestamp(us)", None, None),
    "step_trace_time.csv": ("steps", None, "Computing", "computing_us"),
}


@shared_builder
def ascend_csv(root: Path) -> list[Case]:
    """The five CSV files of a torch_npu rank, damaged one at a time."""
    cases: list[Case] = []
    for fname, (table, ts_col, dur_col, dur_canon) in _CSV_FILES.items():
        stem = fname.split(".")[0]

        def rank(tag: str, fname: str = fname, stem: str = stem) -> tuple[Path, Path]:
            d = _copy_rank(R0, root / f"{stem}-{tag}" / "rank0_ascend_pt")
            return d, d / OUT / fname

        d, f = rank("empty")
        f.write_bytes(b"")
        cases.append(Case(f"{stem}-empty", "load", d, "error", ("empty",), fname))
        d, f = rank("garbage")
        f.write_bytes(GARBAGE)
        cases.append(Case(f"{stem}-garbage", "load", d, "error", ("binary",), fname))
        d, f = rank("zeropad")
        _zero_pad(f)
        cases.append(Case(f"{stem}-zeropad", "load", d, "error", ("zero-padded",), fname))
        d, f = rank("sparse")
        _sparse(f, f.stat().st_size + (64 << 20))
        cases.append(Case(f"{stem}-sparse", "load", d, "error", ("hole",), fname, max_s=5))
        d, f = rank("dir")
        f.unlink()
        f.mkdir()
        cases.append(Case(f"{stem}-is-a-folder", "load", d, "error", ("folder",), fname))
        d, f = rank("header")
        f.write_text("Iteration,Busy,Idle\n1,2,3\n")
        cases.append(Case(f"{stem}-wrong-header", "load", d, "error", ("expected a header",),
                          fname))
        d, f = rank("latin1")
        data = f.read_bytes()
        cut = data.index(b"\n", data.index(b"\n") + 1)  # a byte not UTF-8 in the first row
        f.write_bytes(data[:cut] + b"\xe9" + data[cut:])
        cases.append(Case(f"{stem}-not-utf8", "load", d, "error", ("UTF-8",), fname))
        d, f = rank("longrow")
        lines = _lines(f)
        lines.insert(1, lines[1].rstrip(b"\r\n") + b",extra,cells" + _eol(lines[1]))
        f.write_bytes(b"".join(lines))
        cases.append(Case(f"{stem}-row-too-long", "load", d, "error", ("more fields",), fname))
        d, f = rank("denied")
        cases.append(Case(f"{stem}-permission-simulated", "load", d, "error",
                          ("Permission denied",), fname,
                          patch=lambda mp, f=f: deny_open(mp, f)))
        d, f = rank("denied-chmod")
        if not _root():
            os.chmod(f, 0)
        cases.append(Case(f"{stem}-permission-chmod", "load", d, "error",
                          ("Permission denied",), fname, skip=ROOT_SKIP if _root() else None))
        for enc, fn in (("utf16", _utf16), ("bom", _bom), ("line-ends", _line_ends)):
            d, f = rank(enc)
            fn(f)
            words = ("UTF-16",) if enc == "utf16" else ()
            cases.append(Case(f"{stem}-{enc}", "load", d, "repaired" if words else "ok", words,
                              ref="R0", check=_tables(table)))
        if stem != "step_trace_time":  # one data row there: these need several
            cases += _row_cases(rank, stem, table)
        if ts_col is not None and table != "memory":
            col = {"kernels": "start_us", "op_memory": "alloc_us"}[table]
            for tag, value in (("cut", "17364088"), ("neg", "-1736408883704643.212"),
                               ("huge", "9736408883704643.212"), ("1e300", "1e300"),
                               ("text", "soon")):
                d, f = rank(f"ts-{tag}")
                _edit_cell(f, 3, ts_col, value)
                cases.append(Case(f"{stem}-timestamp-{tag}", "load", d, "repaired",
                                  ("outside",) if tag in ("cut", "neg") else ("not readable",),
                                  ref="R0", check=_na_only(table, col, [3])))
        if dur_col is not None:
            row = 0 if stem == "step_trace_time" else 2
            for tag, value, word in (("neg", "-5.5", "negative"),
                                     ("absurd", "1e25", "implausibly"),
                                     ("text", "n/a!", "not readable"),
                                     ("inf", "inf", "implausibly" if stem != "operator_memory"
                                      else "not readable")):  # text there: not a number
                d, f = rank(f"dur-{tag}")
                _edit_cell(f, row, dur_col, value)
                cases.append(Case(f"{stem}-duration-{tag}", "load", d, "repaired", (word,),
                                  ref="R0", check=_na_only(table, dur_canon, [row])))
    # memory_record / npu_module_mem both feed "memory": a bad timestamp in one
    d = _copy_rank(R0, root / "memory-ts" / "rank0_ascend_pt")
    _edit_cell(d / OUT / "memory_record.csv", 2, "Timestamp(us)", "17364088")
    cases.append(Case("memory_record-timestamp-cut", "load", d, "repaired", ("outside",),
                      ref="R0", check=_na_only("memory", "ts_us", [2])))
    d = _copy_rank(R0, root / "steps-neg" / "rank0_ascend_pt")
    _edit_cell(d / OUT / "step_trace_time.csv", 0, "Free", "-25744.05")
    cases.append(Case("step_trace_time-free-negative", "load", d, "repaired", ("negative",),
                      ref="R0", check=_na_only("steps", "free_us", [0])))
    return cases


def _row_cases(rank: Callable[[str], tuple[Path, Path]], stem: str, table: str) -> list[Case]:
    """A CSV cut mid-row, with a short last row, with its header repeated."""
    source = {"memory_record": "memory_record", "npu_module_mem": "npu_module_mem"}.get(stem)
    rows = _rows(table, 1, source)
    d, f = rank("cut")
    _cut_mid_last_row(f)
    cases = [Case(f"{stem}-cut-mid-row", "load", d, "repaired", ("ends mid-row",), ref="R0",
                  check=rows)]
    d, f = rank("short")
    lines = _lines(f)
    lines[-1] = b",".join(lines[-1].split(b",")[:2]) + _eol(lines[-1])
    f.write_bytes(b"".join(lines))
    cases.append(Case(f"{stem}-last-row-short", "load", d, "repaired", ("too few fields",),
                      ref="R0", check=rows))
    d, f = rank("header2")
    lines = _lines(f)
    lines.insert(4, lines[0])
    f.write_bytes(b"".join(lines))
    cases.append(Case(f"{stem}-repeated-header", "load", d, "repaired", ("the header (files",),
                      ref="R0", check=_tables(table)))
    d, f = rank("twice")
    f.write_bytes(f.read_bytes() * 2)
    if stem == "kernel_details":  # a device task written twice is one task (io.repeated_tasks)
        cases.append(Case(f"{stem}-concatenated-twice", "load", d, "repaired",
                          ("the header (files", "more than once"), ref="R0",
                          check=_tables(table)))
    else:
        cases.append(Case(f"{stem}-concatenated-twice", "load", d, "repaired",
                          ("the header (files",), ref="R0", check=_doubled(table, source)))
    return cases


_JSON_FILES = {"communication.json": "comm_ops", "communication_matrix.json": "comm_matrix",
               "profiler_info_0.json": None, "profiler_metadata.json": None}


@shared_builder
def ascend_json(root: Path) -> list[Case]:
    """The JSON files of a torch_npu rank."""
    cases: list[Case] = []
    for fname, table in _JSON_FILES.items():
        stem = fname.split(".")[0]

        def rank(tag: str, fname: str = fname, stem: str = stem) -> tuple[Path, Path]:
            d = _copy_rank(R0, root / f"{stem}-{tag}" / "rank0_ascend_pt")
            f = d / fname if fname.startswith("profiler_") else d / OUT / fname
            return d, f

        d, f = rank("trunc")
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
        cases.append(Case(f"{stem}-truncated", "load", d, "error", ("truncated",), fname))
        d, f = rank("empty")
        f.write_bytes(b"")
        cases.append(Case(f"{stem}-empty", "load", d, "error", ("empty",), fname))
        d, f = rank("garbage")
        f.write_bytes(GARBAGE)
        cases.append(Case(f"{stem}-garbage", "load", d, "error", ("binary",), fname))
        d, f = rank("zeropad")
        _zero_pad(f)
        cases.append(Case(f"{stem}-zeropad", "load", d, "error", ("zero-padded",), fname))
        d, f = rank("nan")
        f.write_bytes(f.read_bytes().replace(b"{", b"{\"x\": NaN, ", 1))
        cases.append(Case(f"{stem}-nan-literal", "load", d, "error", ("invalid JSON",), fname))
        d, f = rank("dir")
        f.unlink()
        f.mkdir()
        cases.append(Case(f"{stem}-is-a-folder", "load", d, "error", ("folder",), fname))
        for enc, fn in (("utf16", _utf16), ("bom", _bom), ("line-ends", _line_ends)):
            d, f = rank(enc)
            fn(f)
            cases.append(Case(f"{stem}-{enc}", "load", d, "ok", ref="R0",
                              check=_tables(table) if table else _tables("kernels")))
        d, f = rank("denied")
        cases.append(Case(f"{stem}-permission-simulated", "load", d, "error",
                          ("Permission denied",), fname, patch=lambda mp, f=f: deny_open(mp, f)))
    # wrongly typed fields
    d = _copy_rank(R0, root / "comm-types" / "rank0_ascend_pt")
    f = d / OUT / "communication.json"
    data = json.loads(f.read_text())
    step = next(iter(data.values()))
    op = next(iter(step["collective"].values()))
    op["Communication Time Info"] = "fast"
    f.write_text(json.dumps(data))
    cases.append(Case("communication-time-info-wrong-type", "load", d, "error",
                      ("Communication Time Info",), "communication.json"))
    d = _copy_rank(R0, root / "comm-bw-types" / "rank0_ascend_pt")
    f = d / OUT / "communication.json"
    data = json.loads(f.read_text())
    for step in data.values():
        for op in step["collective"].values():
            op["Communication Bandwidth Info"] = ["HCCS", 1.0]
    f.write_text(json.dumps(data))
    cases.append(Case("communication-bandwidth-wrong-type", "load", d, "ok", ref="R0",
                      check=_tables("comm_ops")))
    d = _copy_rank(R0, root / "comm-list" / "rank0_ascend_pt")
    (d / OUT / "communication.json").write_text("[1, 2, 3]")
    cases.append(Case("communication-top-level-list", "load", d, "error",
                      ("expected a JSON object",), "communication.json"))
    d = _copy_rank(R0, root / "info-types" / "rank0_ascend_pt")
    f = d / "profiler_info_0.json"
    info = json.loads(f.read_text())
    info["config"] = "Level1"
    info["rank_id"] = "many"
    f.write_text(json.dumps(info))
    cases.append(Case("profiler_info-wrong-types", "load", d, "ok", ref="R0",
                      check=_tables("kernels", "steps", "comm_ops")))
    d = _copy_rank(R0, root / "info-list" / "rank0_ascend_pt")
    (d / "profiler_info_0.json").write_text("[]")
    cases.append(Case("profiler_info-top-level-list", "load", d, "error",
                      ("expected a JSON object",), "profiler_info_0.json"))
    d = _copy_rank(R0, root / "meta-types" / "rank0_ascend_pt")
    (d / "profiler_metadata.json").write_text(
        json.dumps({"parallel_group_info": {"g": {"global_ranks": "0,1"}}, "ENV_VARIABLES": 7}))
    cases.append(Case("profiler_metadata-wrong-types", "load", d, "ok", ref="R0",
                      check=_tables("kernels", "steps")))
    return cases


def _trace_events(path: Path) -> dict[str, Any]:
    return json.loads(path.read_bytes())


@shared_builder
def ascend_trace_view(root: Path) -> list[Case]:
    """trace_view.json inside a rank (the ops table) and standalone."""
    cases: list[Case] = []

    def rank(tag: str) -> tuple[Path, Path]:
        d = _copy_rank(R0, root / f"tv-{tag}" / "rank0_ascend_pt", trace=True)
        return d, d / OUT / "trace_view.json"

    d, f = rank("trunc")
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 3])
    cases.append(Case("trace_view-in-rank-truncated", "load", d, "error", ("truncated",),
                      "trace_view.json"))
    d, f = rank("zeropad")
    _zero_pad(f, 4 << 20)
    cases.append(Case("trace_view-in-rank-zeropad", "load", d, "error", ("zero-padded",),
                      "trace_view.json"))
    d, f = rank("ts")
    data = _trace_events(f)
    x = [e for e in data if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    x[5]["ts"] = "17364088"
    x[6]["ts"] = -5
    f.write_text(json.dumps(data))
    cases.append(Case("trace_view-in-rank-bad-ts", "load", d, "repaired", ("outside",),
                      ref="R0T", check=_origin_and_ops_count(2)))
    d, f = rank("dur")
    data = _trace_events(f)
    x = [e for e in data if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    x[3]["dur"] = -7
    x[4]["dur"] = 1e22
    del x[5]["dur"]
    f.write_text(json.dumps(data))
    cases.append(Case("trace_view-in-rank-bad-dur", "load", d, "repaired", ("negative",),
                      ref="R0T", check=_ops_dur_na(3)))
    # standalone trace_view.json (an excerpt)
    for tag, mutate, expect, words in (
            ("trunc", lambda b: b[: len(b) // 2], "error", ("truncated",)),
            ("garbage", lambda b: GARBAGE, "error", ("binary",)),
            ("empty-list", lambda b: b"[]", "error", ("no complete events",)),
            ("bom", lambda b: b"\xef\xbb\xbf" + b, "ok", ()),
            ("utf16", lambda b: b.decode().encode("utf-16"), "ok", ()),
            ("not-json", lambda b: b"hello, world\n", "error", ("expected",))):
        f = root / f"tvx-{tag}" / "trace_view.json"
        f.parent.mkdir(parents=True)
        f.write_bytes(mutate(TV.read_bytes()))
        cases.append(Case(f"trace_view-standalone-{tag}", "load", f, expect, words,
                          "trace_view.json", ref="TV" if expect == "ok" else None,
                          check=_tables("kernels", "ops", "steps") if expect == "ok" else None))
    f = root / "tvx-ts" / "trace_view.json"
    f.parent.mkdir(parents=True)
    data = _trace_events(TV)
    xs = [e for e in data if e.get("ph") == "X"]
    xs[0]["ts"] = "1e300"
    xs[1]["ts"] = "17"
    f.write_text(json.dumps(data))
    cases.append(Case("trace_view-standalone-bad-ts", "load", f, "repaired", ("outside",),
                      ref="TV", check=_origin_same))
    return cases


def _origin_same(got: Any, ref: Any) -> None:
    assert got.meta.origin_ns == ref.meta.origin_ns


def _origin_and_ops_count(n_na: int) -> Callable[[Any, Any], None]:
    def check(got: Any, ref: Any) -> None:
        assert got.meta.origin_ns == ref.meta.origin_ns
        assert len(got.ops) == len(ref.ops)
        assert int(got.ops["start_us"].isna().sum()) == n_na
        ok = got.ops["start_us"].notna().to_numpy()
        np.testing.assert_array_equal(got.ops["start_us"].to_numpy()[ok],
                                      ref.ops["start_us"].to_numpy()[ok])
        pd.testing.assert_frame_equal(got.kernels, ref.kernels)
    return check


def _ops_dur_na(n_na: int) -> Callable[[Any, Any], None]:
    def check(got: Any, ref: Any) -> None:
        assert got.meta.origin_ns == ref.meta.origin_ns
        assert int(got.ops["dur_us"].isna().sum()) == n_na
        assert float(got.ops["dur_us"].max()) <= float(ref.ops["dur_us"].max())
        assert (got.ops["dur_us"].dropna() >= 0).all()
    return check


@shared_builder
def ascend_db(root: Path) -> list[Case]:
    """The SQLite export."""
    cases: list[Case] = []
    for fname in ("ascend_pytorch_profiler_0.db", "analysis.db"):
        stem = fname.split(".")[0]
        for tag in ("trunc", "garbage-body", "zeros-body", "empty", "magic", "dir", "denied"):
            d = root / f"db-{stem}-{tag}" / "rank0_ascend_pt"
            S.writable_copy(DB0, d)
            f = d / OUT / fname
            data = f.read_bytes()
            expect, words, patch = "error", ("SQLite",), None
            if tag == "trunc":
                f.write_bytes(data[: len(data) // 3])
                words = ("damaged",)
            elif tag == "garbage-body":
                f.write_bytes(data[:100] + GARBAGE * (len(data) // len(GARBAGE) + 1))
                words = ("damaged",)
            elif tag == "zeros-body":
                f.write_bytes(data[:100] + bytes(len(data) - 100))
                words = ("damaged",)
            elif tag == "empty":
                f.write_bytes(b"")
                words = ("empty",)
            elif tag == "magic":
                f.write_bytes(b"PK\x03\x04" + data[4:])
                words = ("not an SQLite",)
            elif tag == "dir":
                f.unlink()
                f.mkdir()
                words = ("folder",)
            else:
                words = ("Permission denied",)
                patch = functools.partial(deny_open, paths=(f,))
            cases.append(Case(f"db-{stem}-{tag}", "load", d, expect, words, fname, patch=patch))
    return cases


def _kineto_comm_named_unsized(got: Any, ref: Any) -> None:
    """The collectives keep the names their host events give (as in the intact trace) and
    no size or group size comes from args of the wrong type."""
    assert list(got.comm_ops["name"]) == list(ref.comm_ops["name"])
    assert set(got.comm_ops["named_by"]) == {"host"}
    for col in ("size_bytes", "group_size"):
        assert col not in got.comm_ops.columns or got.comm_ops[col].isna().all()


def _kineto_json(src: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(src.read_bytes()))


@shared_builder
def kineto(root: Path) -> list[Case]:
    """PyTorch (Kineto) traces: the HTA GPU sample (kernels, steps) and the CPU Llama one."""
    cases: list[Case] = []
    src = KH / "sampled_rank-0.json.gz"

    def trace(tag: str, data: bytes, name: str = "rank0.json") -> Path:
        f = root / f"kineto-{tag}" / name
        f.parent.mkdir(parents=True)
        f.write_bytes(data)
        return f

    raw = gzip.decompress(src.read_bytes())
    f = trace("gz-trunc", src.read_bytes()[:5000], "rank0.json.gz")
    cases.append(Case("kineto-gzip-truncated", "load", f, "error", ("gzip",), "rank0.json.gz"))
    f = trace("gz-of-trunc", gzip.compress(raw[: len(raw) // 2]), "rank0.json.gz")
    cases.append(Case("kineto-gzip-of-truncated-json", "load", f, "error", ("truncated",),
                      "rank0.json.gz"))
    f = trace("gz-bomb", gzip.compress(raw[:1000] + bytes(100 << 20), 1), "rank0.json.gz")
    cases.append(Case("kineto-gzip-of-zeros", "load", f, "error", ("NUL",), "rank0.json.gz",
                      max_s=5))
    f = trace("gz-sparse", src.read_bytes(), "rank0.json.gz")
    _sparse(f, 2 << 30)
    cases.append(Case("kineto-gzip-2GB-sparse", "load", f, "error", ("hole",), "rank0.json.gz",
                      max_s=5))
    f = trace("gz-zeropad", src.read_bytes(), "rank0.json.gz")
    _zero_pad(f, 4 << 20)
    cases.append(Case("kineto-gzip-zero-padded", "load", f, "error", ("zero-padded",),
                      "rank0.json.gz"))
    # a trace inflating past one 16 MiB chunk, then bytes after its gzip stream: the last
    # chunk's leftover input was fed to zlib again for ever (a walk's hang)
    big = gzip.compress(raw + b" " * (17 << 20))
    f = trace("gz-then-newline", big + b"\n", "rank0.json.gz")
    cases.append(Case("kineto-gzip-then-a-newline", "load", f, "error",
                      ("1 byte after the end of the gzip stream",), "rank0.json.gz", max_s=20))
    f = trace("gz-then-zeros", big + bytes(4096), "rank0.json.gz")
    cases.append(Case("kineto-gzip-then-4k-zeros", "load", f, "ok", ref="KH", max_s=20,
                      check=_tables("kernels", "ops", "steps")))
    f = trace("trunc", raw[: len(raw) // 2])
    cases.append(Case("kineto-truncated", "load", f, "error", ("truncated",), "rank0.json"))
    f = trace("empty", b"")
    cases.append(Case("kineto-empty", "load", f, "error", ("empty",), "rank0.json"))
    f = trace("garbage", GARBAGE)
    cases.append(Case("kineto-garbage", "load", f, "error", ("binary",), "rank0.json"))
    f = trace("text", b"this is not a trace\n")
    cases.append(Case("kineto-not-json", "load", f, "error", ("expected",), "rank0.json"))
    f = trace("zeropad", raw)
    _zero_pad(f, 8 << 20)
    cases.append(Case("kineto-zero-padded", "load", f, "error", ("zero-padded",), "rank0.json"))
    f = trace("sparse", raw)
    _sparse(f, 2 << 30)
    cases.append(Case("kineto-2GB-sparse", "load", f, "error", ("hole",), "rank0.json",
                      max_s=5))
    f = trace("bom", b"\xef\xbb\xbf" + raw)
    cases.append(Case("kineto-bom", "load", f, "ok", ref="KH",
                      check=_tables("kernels", "ops", "steps")))
    f = trace("utf16", raw.decode().encode("utf-16"))
    cases.append(Case("kineto-utf16", "load", f, "ok", ref="KH",
                      check=_tables("kernels", "ops", "steps")))
    f = trace("crlf", raw.replace(b"\n", b"\r\n"))
    cases.append(Case("kineto-crlf", "load", f, "ok", ref="KH",
                      check=_tables("kernels", "ops", "steps")))

    def mutated(tag: str, fn: Callable[[dict[str, Any]], None], src: Path = src) -> Path:
        data = _kineto_json(src)
        fn(data)
        return trace(tag, json.dumps(data).encode())

    def kernels_of(d: dict[str, Any]) -> list[dict[str, Any]]:
        return [e for e in d["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]

    def drop_dur(d: dict[str, Any]) -> None:
        for e in kernels_of(d)[::50]:
            del e["dur"]

    f = mutated("nodur", drop_dur)
    cases.append(Case("kineto-kernel-without-dur", "load", f, "repaired", ("without a duration",),
                      ref="KH", check=_steps_unknown))

    def bad_ts(value: Any) -> Callable[[dict[str, Any]], None]:
        def fn(d: dict[str, Any]) -> None:
            kernels_of(d)[7]["ts"] = value
        return fn

    for tag, value in (("cut", 17364088), ("negative", -1), ("1e300", 1e300),
                       ("huge-int", 10**30), ("text", "later")):
        f = mutated(f"ts-{tag}", bad_ts(value))
        cases.append(Case(f"kineto-timestamp-{tag}", "load", f, "repaired", ("timestamp",),
                          ref="KH", check=_kineto_one_kernel_ts_na))

    def in_nanoseconds(d: dict[str, Any]) -> None:  # a writer that puts ns in ts and dur
        for e in d["traceEvents"]:
            for key in ("ts", "dur"):
                if isinstance(e.get(key), (int, float)):
                    e[key] = int(round(e[key] * 1000))
        d["displayTimeUnit"] = "ns"

    f = mutated("ts-nanoseconds", in_nanoseconds)
    cases.append(Case("kineto-every-timestamp-in-nanoseconds", "load", f, "error",
                      ("none with a readable timestamp", "nanoseconds", "divide them by 1,000"),
                      "rank0.json"))

    def no_ts(d: dict[str, Any]) -> None:
        for e in d["traceEvents"]:
            e.pop("ts", None)

    f = mutated("ts-none", no_ts)
    cases.append(Case("kineto-no-event-has-ts", "load", f, "error",
                      ("none with a readable timestamp", "missing"), "rank0.json"))

    def bad_dur(value: Any) -> Callable[[dict[str, Any]], None]:
        def fn(d: dict[str, Any]) -> None:
            kernels_of(d)[9]["dur"] = value
        return fn

    for tag, value, word in (("negative", -3, "negative"), ("absurd", 1e30, "implausibly"),
                             ("huge-int", 10**25, "implausibly")):
        f = mutated(f"dur-{tag}", bad_dur(value))
        cases.append(Case(f"kineto-duration-{tag}", "load", f, "repaired", (word,), ref="KH",
                          check=_kineto_one_kernel_dur_na))

    def events_dict(d: dict[str, Any]) -> None:
        d["traceEvents"] = {"0": d["traceEvents"][0]}

    f = mutated("events-dict", events_dict)
    cases.append(Case("kineto-traceEvents-not-a-list", "load", f, "error", ("traceEvents",),
                      "rank0.json"))

    def junk_events(d: dict[str, Any]) -> None:
        d["traceEvents"] = ["junk", 5, None, *d["traceEvents"]]

    f = mutated("junk-events", junk_events)
    cases.append(Case("kineto-junk-items-in-events", "load", f, "ok", ref="KH",
                      check=_tables("kernels", "ops", "steps")))

    def wrong_args(d: dict[str, Any]) -> None:
        for e in d["traceEvents"][:50]:
            e["args"] = "none"

    f = mutated("args", wrong_args)
    cases.append(Case("kineto-args-wrong-type", "load", f, "ok", ref="KH", check=_origin_same))

    def comm_args_garbled(d: dict[str, Any]) -> None:
        # record_param_comms with collective args of the wrong types: the kernels are still
        # named by their host annotation, and no size is made up
        for e in d["traceEvents"]:
            if isinstance(e, dict) and e.get("name") == "record_param_comms":
                e.setdefault("args", {}).update({
                    "Group size": "eight", "In msg nelems": [1, 2], "Out msg nelems": "many",
                    "dtype": 42, "Process Group Ranks": {"not": "a list"}})

    f = mutated("comm-args", comm_args_garbled)
    cases.append(Case("kineto-collective-args-wrong-type", "load", f, "ok", ref="KH",
                      check=_kineto_comm_named_unsized))

    def dist_wrong(d: dict[str, Any]) -> None:
        d["distributedInfo"] = "rank zero"

    f = mutated("dist", dist_wrong)
    cases.append(Case("kineto-distributedInfo-wrong-type", "load", f, "ok", ref="KH",
                      check=_tables("kernels", "steps")))

    def dist_inf(d: dict[str, Any]) -> None:
        d["distributedInfo"] = {"rank": 1e300, "world_size": "x"}

    f = mutated("dist-inf", dist_inf)
    cases.append(Case("kineto-distributedInfo-rank-absurd", "load", f, "ok", ref="KH",
                      check=_tables("kernels", "steps")))

    def base_huge(d: dict[str, Any]) -> None:
        d["baseTimeNanoseconds"] = 10**30

    f = mutated("base", base_huge)
    cases.append(Case("kineto-baseTimeNanoseconds-absurd", "load", f, "repaired",
                      ("baseTimeNanoseconds",), ref="KH", check=_tables("kernels", "steps")))
    # the CPU-only Llama trace: ops without dur
    llama = KL / "rank0.pt.trace.json.gz"

    def cpu_nodur(d: dict[str, Any]) -> None:
        ops = [e for e in d["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
        for e in ops[:10]:
            del e["dur"]

    f = mutated("llama-nodur", cpu_nodur, llama)
    cases.append(Case("kineto-cpu-op-without-dur", "load", f, "repaired", ("without a duration",),
                      ref="KL", check=_ops_nodur(10)))
    d = root / "kineto-dir.json"
    d.mkdir()
    cases.append(Case("kineto-folder-named-json", "load", d, "error", ("no profile found",),
                      "kineto-dir.json"))
    return cases


def _steps_unknown(got: Any, ref: Any) -> None:
    """Steps holding a kernel without dur are NA, never computed as if it lasted 0."""
    assert got.meta.origin_ns == ref.meta.origin_ns
    k = got.kernels
    assert int(k["dur_us"].isna().sum()) > 0
    bad_steps = set(k.loc[k["dur_us"].isna(), "step"].dropna().astype(int))
    for _, row in got.steps.iterrows():
        if int(row["step"]) in bad_steps:
            assert np.isnan(row["computing_us"])
    ok = k["dur_us"].notna().to_numpy()
    np.testing.assert_array_equal(k["dur_us"].to_numpy()[ok], ref.kernels["dur_us"].to_numpy()[ok])


def _kineto_one_kernel_ts_na(got: Any, ref: Any) -> None:
    assert got.meta.origin_ns == ref.meta.origin_ns, "one bad timestamp moved the origin"
    g, r = got.kernels, ref.kernels
    assert len(g) == len(r)
    diff = ~np.isclose(g["start_us"].to_numpy(), r["start_us"].to_numpy(), equal_nan=True)
    assert int(g["start_us"].isna().sum()) == 1 and int(diff.sum()) == 1
    # every other step reads as the intact trace's; the one holding it is unknown
    bad = g.loc[g["start_us"].isna(), "step"].iloc[0]
    gs, rs = got.steps.set_index("step"), ref.steps.set_index("step")
    assert list(gs.index) == list(rs.index)
    others = [s for s in rs.index if not (s == bad or (pd.isna(s) and pd.isna(bad)))]
    pd.testing.assert_frame_equal(gs.loc[others], rs.loc[others])
    spans = [c for c in gs.columns if c.endswith("_us") and c not in ("start_us", "total_us")]
    if pd.notna(bad) and bad in gs.index:
        assert gs.loc[bad, [c for c in spans if c in ("computing_us", "free_us",
                                                       "preparing_us")]].isna().all()


def _kineto_one_kernel_dur_na(got: Any, ref: Any) -> None:
    assert got.meta.origin_ns == ref.meta.origin_ns
    g, r = got.kernels["dur_us"].to_numpy(), ref.kernels["dur_us"].to_numpy()
    assert int(np.isnan(g).sum()) == 1
    ok = ~np.isnan(g)
    np.testing.assert_array_equal(g[ok], r[ok])


def _ops_nodur(n: int) -> Callable[[Any, Any], None]:
    def check(got: Any, ref: Any) -> None:
        assert got.meta.origin_ns == ref.meta.origin_ns
        assert int(got.ops["dur_us"].isna().sum()) == n
        assert len(got.ops) == len(ref.ops)
    return check


@shared_builder
def clusters(root: Path) -> list[Case]:
    """Folders of several ranks: a bad rank is reported, the others load."""
    cases: list[Case] = []

    def two(tag: str, src: Path = L1) -> Path:
        d = root / f"cluster-{tag}"
        ign = shutil.ignore_patterns(*_UNREAD, "*.md", "LICENSE*")
        return S.writable_copy(src, d, ignore=ign)

    d = two("garbage")
    (d / "rank1_ascend_pt" / OUT / "kernel_details.csv").write_bytes(GARBAGE)
    cases.append(Case("cluster-rank1-garbage", "load", d, "partial", ("binary",),
                      "kernel_details.csv", failed=(1,), ref="L1", check=_rank0_intact))
    d = two("denied-file")
    f = d / "rank1_ascend_pt" / OUT / "kernel_details.csv"
    cases.append(Case("cluster-rank1-file-permission-simulated", "load", d, "partial",
                      ("Permission denied",), "kernel_details.csv", failed=(1,), ref="L1",
                      check=_rank0_intact, patch=lambda mp, f=f: deny_open(mp, f)))
    d = two("denied-dir")
    out = d / "rank1_ascend_pt" / OUT
    cases.append(Case("cluster-rank1-folder-permission-simulated", "load", d, "partial",
                      ("Permission denied",), "rank1_ascend_pt", failed=(1,), ref="L1",
                      check=_rank0_intact, patch=lambda mp, out=out: deny_list(mp, out)))
    d = two("denied-dir-cached")
    out = d / "rank1_ascend_pt" / OUT
    cases.append(Case("cluster-rank1-folder-permission-simulated-with-cache", "load", d,
                      "partial", ("Permission denied",), "rank1_ascend_pt", failed=(1,), ref="L1",
                      check=_rank0_intact, patch=lambda mp, out=out: deny_list(mp, out),
                      kwargs={"cache": True}))
    d = two("denied-chmod")
    if not _root():
        os.chmod(d / "rank1_ascend_pt" / OUT, 0)
    cases.append(Case("cluster-rank1-permission-chmod", "load", d, "partial",
                      ("Permission denied",), "rank1_ascend_pt", failed=(1,), ref="L1",
                      check=_rank0_intact, skip=ROOT_SKIP if _root() else None))
    d = two("trunc-csv")
    _cut_mid_last_row(d / "rank1_ascend_pt" / OUT / "kernel_details.csv")
    cases.append(Case("cluster-rank1-csv-cut", "load", d, "repaired", ("ends mid-row",),
                      ref="L1", check=_rank0_intact))
    d = two("info-list")
    (d / "rank1_ascend_pt" / "profiler_info_1.json").write_text("[]")
    cases.append(Case("cluster-rank1-info-list", "load", d, "partial",
                      ("expected a JSON object",), "profiler_info_1.json", failed=(1,), ref="L1",
                      check=_rank0_intact))
    d = two("all-bad")
    for r in (0, 1):
        (d / f"rank{r}_ascend_pt" / OUT / "kernel_details.csv").write_bytes(GARBAGE)
    cases.append(Case("cluster-every-rank-bad", "load", d, "error", ("no rank could be loaded",),
                      "kernel_details.csv"))
    d = two("trace-trunc")
    shutil.copyfile(L1 / "rank1_ascend_pt" / OUT / "trace_view.json",
                    d / "rank1_ascend_pt" / OUT / "trace_view.json")
    tv = d / "rank1_ascend_pt" / OUT / "trace_view.json"
    tv.write_bytes(tv.read_bytes()[:1000])
    cases.append(Case("cluster-rank1-trace-view-truncated", "load", d, "partial", ("truncated",),
                      "trace_view.json", failed=(1,), ref="L1", check=_rank0_intact))
    # Kineto and DB clusters
    d = root / "cluster-kineto"
    S.writable_copy(KH, d, ignore=shutil.ignore_patterns("*.md"))
    f = d / "sampled_rank-1.json.gz"
    f.write_bytes(f.read_bytes()[:3000])
    cases.append(Case("cluster-kineto-rank1-truncated", "load", d, "partial", ("gzip",),
                      "sampled_rank-1.json.gz", failed=(1,)))
    d = root / "cluster-db"
    S.writable_copy(DB, d, ignore=shutil.ignore_patterns("*.md", "LICENSE*"))
    f = d / "rank1_ascend_pt" / OUT / "ascend_pytorch_profiler_1.db"
    f.write_bytes(f.read_bytes()[:100] + GARBAGE * 20)
    cases.append(Case("cluster-db-rank1-damaged", "load", d, "partial", ("damaged",),
                      "ascend_pytorch_profiler_1.db", failed=(1,)))
    # a torch_npu rank next to legacy MindSpore files: both kept
    d = root / "cluster-mixed"
    _copy_rank(R0, d / "rank0_ascend_pt")
    for f in LEG1.iterdir():
        shutil.copyfile(f, d / f.name)
    # ranks of two frameworks are two runs (issue 33 pt 5): refused with the list of runs,
    # never merged; load(path, run=...) reads one
    cases.append(Case("cluster-torch-npu-and-legacy-ranks", "load", d, "error",
                      ("2 separate runs found, not merged", "ascend mindspore, rank 1",
                       "ascend pytorch, rank 0", "run="), file="cluster-mixed"))
    return cases


def _rank0_intact(got: Any, ref: Any) -> None:
    pd.testing.assert_frame_equal(got[0].kernels, ref[0].kernels)
    pd.testing.assert_frame_equal(got[0].steps, ref[0].steps)
    assert got[0].meta.origin_ns == ref[0].meta.origin_ns



@shared_builder
def legacy(root: Path) -> list[Case]:
    """Legacy MindSpore / MindInsight files (two ranks of cluster_propose)."""
    cases: list[Case] = []

    def copy(tag: str) -> Path:
        d = root / f"legacy-{tag}"
        d.mkdir()
        for f in LEG.iterdir():
            if f.name.endswith(("_0.csv", "_0.json", "_1.csv", "_1.json", "_0_detail_time.csv",
                                "_1_detail_time.csv")):
                shutil.copyfile(f, d / f.name)
        return d

    d = copy("hccl-garbage")
    (d / "hccl_raw_1.csv").write_bytes(GARBAGE)
    cases.append(Case("legacy-rank1-hccl-garbage", "load", d, "partial", ("binary",),
                      "hccl_raw_1.csv", failed=(1,)))
    d = copy("hccl-cut")
    _cut_mid_last_row(d / "hccl_raw_1.csv")
    cases.append(Case("legacy-rank1-hccl-cut", "load", d, "repaired", ("ends mid-row",)))
    d = copy("hccl-cell-list")
    _edit_cell(d / "hccl_raw_0.csv", 0, "communication_operator_cost", "[1, 2, 3]")
    cases.append(Case("legacy-rank0-hccl-cell-wrong-type", "load", d, "partial",
                      ("expected a JSON object",), "hccl_raw_0.csv", failed=(0,)))
    d = copy("step-header")
    (d / "step_trace_raw_1_detail_time.csv").write_text("a,b\n1,2\n")
    cases.append(Case("legacy-rank1-step-trace-wrong-header", "load", d, "partial",
                      ("expected a header",), "step_trace_raw_1_detail_time.csv", failed=(1,)))
    d = copy("analyse-neg")
    f = next(d.glob("ascend_cluster_analyse_*_0.csv"))
    _edit_cell(f, 1, "computation_time", "-4")
    cases.append(Case("legacy-rank0-negative-computation", "load", d, "repaired", ("negative",)))
    # a header spelled another way was accepted by the check, then its column not read
    d = S.writable_copy(MI1, root / "legacy-step-trace-Total" / "profiler")
    f = d / "step_trace_raw_1_detail_time.csv"
    head, rest = f.read_bytes().split(b"\n", 1)
    f.write_bytes(head.replace(b"total", b"Total") + b"\n" + rest)
    cases.append(Case("legacy-step-trace-header-Total", "load", d, "ok", ref="MI1",
                      check=_tables("steps")))
    # re-saved by a spreadsheet: tick counts as 4.38069E+10 (100,000 ticks, 1 ms, rounded)
    d = S.writable_copy(MI1, root / "legacy-step-trace-scientific" / "profiler")
    f = d / "step_trace_raw_1_detail_time.csv"
    for row in range(3):
        for col in ("start_point", "end_point"):
            _edit_cell(f, row, col, f"{float(_cell(f, row, col)):.5E}")
    cases.append(Case("legacy-step-trace-ticks-in-scientific-notation", "load", d,
                      "repaired", ("start_point is written in scientific notation on line 2",
                                   "too coarse to place the step, so read as NA"),
                      ref="MI1", check=_first_steps_unplaced(3)))
    d = S.writable_copy(LEG1, root / "legacy-timeline-trunc" / "profiler")
    f = d / "ascend_timeline_display_1.json"
    f.write_bytes(f.read_bytes()[:2000])
    cases.append(Case("legacy-timeline-truncated", "load", d, "error", ("truncated",),
                      "ascend_timeline_display_1.json"))
    return cases


@builder
def cluster_output(root: Path) -> list[Case]:
    """msprof-analyze's cluster_analysis_output/."""
    cases: list[Case] = []
    for fname, tag, mutate, expect, words in (
            ("cluster_step_trace_time.csv", "cut", _cut_mid_last_row, "repaired", ("mid-row",)),
            ("cluster_step_trace_time.csv", "garbage", lambda f: f.write_bytes(GARBAGE), "error",
             ("binary",)),
            ("cluster_communication.json", "trunc",
             lambda f: f.write_bytes(f.read_bytes()[:500]), "error", ("truncated",)),
            ("cluster_communication.json", "types",
             lambda f: f.write_text(json.dumps({"(0, 1)": {"step1": {"op@g": {
                 "0": {"Communication Time Info": [], "Communication Bandwidth Info": 3}}}}})),
             "ok", ()),
            ("communication_group.json", "garbage", lambda f: f.write_bytes(GARBAGE), "error",
             ("binary",)),
            ("cluster_communication_matrix.json", "list", lambda f: f.write_text("[]"), "error",
             ("expected a JSON object",))):
        d = root / f"co-{fname.split('.')[0]}-{tag}" / "cluster_analysis_output"
        shutil.copytree(CO, d)
        mutate(d / fname)
        cases.append(Case(f"cluster_output-{fname.split('.')[0]}-{tag}", "load", d, expect,
                          words, fname if expect == "error" else None))
    return cases


@builder
def ir_dumps(root: Path) -> list[Case]:
    """MindSpore IR text dumps."""
    cases: list[Case] = []
    text = (BUNDLED_IR / "silu_mul.ir").read_bytes()
    multi = gzip.decompress((IR / "comm_dp2_rank0_type_inference.ir.gz").read_bytes())

    def dump(tag: str, data: bytes, name: str = "graph.ir") -> Path:
        f = root / f"ir-{tag}" / name
        f.parent.mkdir(parents=True)
        f.write_bytes(data)
        return f

    half = text[: len(text) // 2]
    cases.append(Case("ir-cut-mid-line", "load_ir", dump("cut", half), "error", ("truncated",),
                      "graph.ir"))
    cases.append(Case("ir-cut-at-line-inside-graph", "load_ir",
                      dump("cut-line", half[: half.rindex(b"\n") + 1]), "error",
                      ("truncated",), "graph.ir"))
    between = multi[: multi.index(b"\n}\n", len(multi) // 2) + 3]
    cases.append(Case("ir-cut-between-subgraphs", "load_ir", dump("between", between), "error",
                      ("truncated",), "graph.ir"))
    gz = (BUNDLED_IR / "silu_mul_reshape.ir.gz").read_bytes()
    cases.append(Case("ir-gz-truncated", "load_ir", dump("gz", gz[: len(gz) // 2], "g.ir.gz"),
                      "error", ("cannot read",), "g.ir.gz"))
    cases.append(Case("ir-gz-of-zeros", "load_ir",
                      dump("gz-zeros", gzip.compress(text[:2000] + bytes(50 << 20)), "g.ir.gz"),
                      "error", ("NUL",), "g.ir.gz", max_s=10))
    f = dump("zeropad", text)
    _zero_pad(f)
    cases.append(Case("ir-zero-padded", "load_ir", f, "error", ("zero-padded",), "graph.ir"))
    f = dump("sparse", text)
    _sparse(f, 2 << 30)
    cases.append(Case("ir-2GB-sparse", "load_ir", f, "error", ("hole",), "graph.ir", max_s=5))
    cases.append(Case("ir-garbage", "load_ir", dump("garbage", GARBAGE), "error", ("binary",),
                      "graph.ir"))
    cases.append(Case("ir-empty", "load_ir", dump("empty", b""), "error", ("empty",), "graph.ir"))
    cases.append(Case("ir-utf16", "load_ir", dump("utf16", text.decode().encode("utf-16")),
                      "error", ("UTF-16",), "graph.ir"))
    cases.append(Case("ir-not-utf8", "load_ir", dump("latin1", text.replace(b"Default", b"D\xe9f",
                                                                             1)),
                      "error", ("UTF-8",), "graph.ir"))
    cases.append(Case("ir-crlf", "load_ir", dump("crlf", text.replace(b"\n", b"\r\n")), "ok",
                      ref="IR", check=_ir_same))
    cases.append(Case("ir-bom", "load_ir", dump("bom", b"\xef\xbb\xbf" + text), "ok", ref="IR",
                      check=_ir_same))
    d = root / "ir-dir" / "graph.ir"
    d.mkdir(parents=True)
    cases.append(Case("ir-is-a-folder", "load_ir", d, "error", ("folder",), "graph.ir"))
    f = dump("denied", text)
    cases.append(Case("ir-permission-simulated", "load_ir", f, "error", ("Permission denied",),
                      "graph.ir", patch=lambda mp, f=f: deny_open(mp, f)))
    return cases


def _ir_same(got: Any, ref: Any) -> None:
    assert len(got.nodes) == len(ref.nodes) and len(got.parameters) == len(ref.parameters)
    assert list(got.nodes["op"]) == list(ref.nodes["op"])
    assert list(got.nodes["output_shapes"]) == list(ref.nodes["output_shapes"])
    assert got.entry == ref.entry


@builder
def logs(root: Path) -> list[Case]:
    """MindFormers training logs and MindSpore memory summaries."""
    cases: list[Case] = []
    train = (LOGS / "mf_new_trainer_pp.log").read_bytes()
    mem = (LOGS / "memory_ranks.log").read_bytes()

    def log(tag: str, data: bytes, name: str = "train.log") -> Path:
        f = root / f"log-{tag}" / name
        f.parent.mkdir(parents=True)
        f.write_bytes(data)
        return f

    cut = train[: train.index(b"11.755612") + 4]  # "11.7" of 11.755612
    cases.append(Case("log-cut-mid-number", "training_log", log("cut", cut), "repaired",
                      ("ends mid-line",), ref="TRAIN", check=_log_rows_before(cut)))
    mcut = mem[: mem.rindex(b"62432M") + 3]  # "624" of 62432M
    cases.append(Case("memory-log-cut-mid-number", "memory_log", log("mcut", mcut, "mem.log"),
                      "repaired", ("ends mid-line",), ref="MEM",
                      check=_memory_cut(mcut.count(b"\n") + 1)))
    f = log("zeropad", train)
    _zero_pad(f)
    cases.append(Case("log-zero-padded", "training_log", f, "repaired", ("NUL",), ref="TRAIN",
                      check=_frame_equal))
    f = log("sparse", train)
    _sparse(f, 2 << 30)
    cases.append(Case("log-2GB-sparse", "training_log", f, "repaired", ("NUL",), ref="TRAIN",
                      check=_frame_equal, max_s=5))
    cases.append(Case("log-garbage", "training_log", log("garbage", GARBAGE), "error",
                      ("binary",), "train.log"))
    cases.append(Case("log-empty", "training_log", log("empty", b""), "error",
                      ("no training step",), "train.log"))
    cases.append(Case("log-crlf", "training_log", log("crlf", train.replace(b"\n", b"\r\n")), "ok",
                      ref="TRAIN", check=_frame_equal))
    cases.append(Case("log-bom", "training_log", log("bom", b"\xef\xbb\xbf" + train), "ok",
                      ref="TRAIN", check=_frame_equal))
    cases.append(Case("log-utf16", "training_log", log("utf16", train.decode().encode("utf-16")),
                      "error", ("UTF-16",), "train.log"))
    bad = train.replace(b"loss:  11.755612", b"loss:  11.\xff755612", 1)
    cases.append(Case("log-not-utf8-on-step-line", "training_log", log("latin1", bad), "error",
                      ("UTF-8",), "train.log"))
    long = b"x" * (3 << 20) + b"\n" + train
    cases.append(Case("log-very-long-line", "training_log", log("long", long), "repaired",
                      ("longer than",), ref="TRAIN", check=_log_lines_shifted))
    huge = train.replace(b"step:[    2/   10]", b"step:[    2000000000000000000000/   10]", 1)
    cases.append(Case("log-step-number-absurd", "training_log", log("hugestep", huge), "error",
                      ("step",), "train.log"))
    mhuge = mem.replace(b"62432M", b"6243200000000000000000000000M", 1)
    cases.append(Case("memory-log-size-absurd", "memory_log", log("mhuge", mhuge, "mem.log"),
                      "error", ("too large",), "mem.log"))
    d = root / "log-dir" / "train.log"
    d.mkdir(parents=True)
    cases.append(Case("log-is-a-folder", "training_log", d, "error", ("folder",), "train.log"))
    f = log("denied", train)
    cases.append(Case("log-permission-simulated", "training_log", f, "error",
                      ("Permission denied",), "train.log", patch=lambda mp, f=f: deny_open(mp, f)))
    return cases


def _log_rows_before(cut: bytes) -> Callable[[Any, Any], None]:
    complete = cut[: cut.rindex(b"\n") + 1].count(b"step:[")

    def check(got: Any, ref: Any) -> None:
        assert len(got) == complete  # the cut line is not a row
        pd.testing.assert_frame_equal(got, ref.iloc[:complete], check_like=False)
    return check


def _memory_cut(cut_line: int) -> Callable[[Any, Any], None]:
    """The block whose first line was cut ("624" of 62432M) is not read; the others are."""
    def check(got: Any, ref: Any) -> None:
        assert not (got["device_memory_bytes"].dropna() < 2**20).any()
        expected = ref[ref["line"] < cut_line].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, expected)
    return check


def _log_lines_shifted(got: Any, ref: Any) -> None:
    cols = [c for c in got.columns if c != "line"]
    pd.testing.assert_frame_equal(got[cols], ref[cols])
    assert (got["line"] == ref["line"] + 1).all()


_HF = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
       "intermediate_size": 11008, "num_attention_heads": 32, "num_hidden_layers": 32,
       "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096,
       "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "float16"}
"""The published config.json of meta-llama/Llama-2-7b-hf (the fields perfkit reads)."""


@builder
def configs(root: Path) -> list[Case]:
    """MindFormers YAML and Hugging Face config.json."""
    cases: list[Case] = []
    yaml_text = (CFG / "llama2_13b_full.yaml").read_text(encoding="utf-8")

    def yml(tag: str, text: str | bytes) -> Path:
        f = root / f"cfg-{tag}" / "run.yaml"
        f.parent.mkdir(parents=True)
        f.write_bytes(text.encode() if isinstance(text, str) else text)
        return f

    def in_model(line: str) -> str:
        return yaml_text.replace("  model_config:\n", f"  model_config:\n    {line}\n", 1)

    for tag, line, expect, words, tied in (
            ("tie-false-text", 'tie_word_embeddings: "false"', "ok", (), False),
            ("tie-zero-text", 'tie_word_embeddings: "0"', "ok", (), False),
            ("tie-yes-text", 'tie_word_embeddings: "yes"', "ok", (), True),
            ("tie-maybe", 'tie_word_embeddings: "maybe"', "error", ("tie_word_embeddings",), None),
            ("layers-text", 'num_layers: "forty"', "error", ("num_layers",), None),
            ("layers-inf", "num_layers: .inf", "error", ("num_layers",), None),
            ("layers-1e400", "num_layers: 1e400", "error", ("num_layers",), None),
            ("hidden-fraction", "hidden_size: 5120.5", "error", ("hidden_size",), None),
            ("hidden-huge", "hidden_size: 99999999999999999999999", "error", ("hidden_size",),
             None)):
        text = in_model(line)
        if tag.startswith(("layers", "hidden")):
            key = line.split(":")[0]
            text = "\n".join(x for x in text.splitlines()
                             if not (x.strip().startswith(f"{key}:") and x.strip() != line))
        f = yml(tag, text)
        cases.append(Case(f"yaml-{tag}", "mf_config", f, expect, words, "run.yaml",
                          check=(lambda got, ref, tied=tied: _tied(got, tied)) if expect == "ok"
                          else None))
    for tag, old, new, expect, words in (
            ("seqpar-false-text", "use_seq_parallel: False", 'use_seq_parallel: "false"', "ok", ()),
            ("seqpar-maybe", "use_seq_parallel: False", 'use_seq_parallel: "maybe"', "error",
             ("use_seq_parallel",)),
            ("dp-huge", "data_parallel: 8", "data_parallel: 99999999999999999999999", "error",
             ("data_parallel",)),
            ("model-list", "  model_config:\n", "  model_config: [1, 2]\n  unused:\n", "error",
             ("model_config",))):
        assert old in yaml_text, old
        f = yml(tag, yaml_text.replace(old, new, 1))
        cases.append(Case(f"yaml-{tag}", "mf_config", f, expect, words, "run.yaml",
                          ref="YAML" if expect == "ok" else None,
                          check=_spec_equal if expect == "ok" else None))
    raw = yaml_text.encode()
    for tag, data, expect, words in (
            ("bom", b"\xef\xbb\xbf" + raw, "ok", ()),
            ("utf16", yaml_text.encode("utf-16"), "ok", ()),
            ("crlf", raw.replace(b"\n", b"\r\n"), "ok", ()),
            ("latin1", b"# caf\xe9 au lait\n" + raw, "error", ("UTF-8",)),
            ("truncated", raw[: len(raw) // 3], "error", ("run.yaml",)),
            ("garbage", GARBAGE, "error", ("binary",)),
            ("empty", b"", "error", ("mapping",))):
        f = yml(f"enc-{tag}", data)
        cases.append(Case(f"yaml-{tag}", "mf_config", f, expect, words, "run.yaml",
                          ref="YAML" if expect == "ok" else None,
                          check=_spec_equal if expect == "ok" else None))
    d = root / "cfg-dir" / "run.yaml"
    d.mkdir(parents=True)
    cases.append(Case("yaml-is-a-folder", "mf_config", d, "error", ("folder",), "run.yaml"))
    f = yml("denied", raw)
    cases.append(Case("yaml-permission-simulated", "mf_config", f, "error", ("Permission denied",),
                      "run.yaml", patch=lambda mp, f=f: deny_open(mp, f)))
    f = yml("gpt-ratio", "model:\n  model_config:\n    type: GPT2Config\n    num_layers: 2\n"
            "    hidden_size: 64\n    num_heads: 4\n    seq_length: 128\n    vocab_size: 100\n"
            "    expand_ratio: four\n")
    cases.append(Case("yaml-model-expand-ratio-text", "mf_model", f, "error", ("expand_ratio",),
                      "run.yaml"))

    # Hugging Face config.json
    def hf(tag: str, data: bytes | dict[str, Any]) -> Path:
        f = root / f"hf-{tag}" / "config.json"
        f.parent.mkdir(parents=True)
        f.write_bytes(json.dumps(data).encode() if isinstance(data, dict) else data)
        return f

    base = json.dumps(_HF).encode()
    for tag, change, expect, words, check in (
            ("tie-false-text", {"tie_word_embeddings": "false"}, "ok", (), "untied"),
            ("tie-true-text", {"tie_word_embeddings": "True"}, "ok", (), "tied"),
            ("tie-zero", {"tie_word_embeddings": 0}, "ok", (), "untied"),
            ("vocab-text-number", {"vocab_size": "32000"}, "ok", (), "same"),
            ("hidden-text", {"hidden_size": "big"}, "error", ("hidden_size",), None),
            ("layers-float", {"num_hidden_layers": 32.5}, "error", ("num_hidden_layers",), None),
            ("heads-huge", {"num_attention_heads": 10**30}, "error", ("num_attention_heads",),
             None),
            ("act-list", {"hidden_act": ["silu"]}, "ok", (), None),
            ("tie-list", {"tie_word_embeddings": [False]}, "error", ("tie_word_embeddings",),
             None)):
        f = hf(tag, {**_HF, **change})
        cases.append(Case(f"hf-{tag}", "hf_config", f, expect, words, "config.json",
                          ref="HF" if check == "same" else None,
                          check=_hf_check(check)))
    for tag, data, expect, words in (
            ("layers-1e400", base.replace(b'"num_hidden_layers": 32',
                                          b'"num_hidden_layers": 1e400'),
             "error", ("num_hidden_layers",)),
            ("nan", base.replace(b'"hidden_size": 4096', b'"hidden_size": NaN'), "error",
             ("hidden_size",)),
            ("bom", b"\xef\xbb\xbf" + base, "ok", ()),
            ("utf16", base.decode().encode("utf-16"), "ok", ()),
            ("latin1", base.replace(b"llama", b"ll\xe0ma"), "error", ("UTF-8",)),
            ("list", b"[1, 2]", "error", ("JSON object",)),
            ("truncated", base[: len(base) // 2], "error", ("JSON",)),
            ("huge-digits", base.replace(b'"vocab_size": 32000', b'"vocab_size": ' + b"9" * 5000),
             "error", ("config.json",))):
        f = hf(f"raw-{tag}", data)
        cases.append(Case(f"hf-{tag}", "hf_config", f, expect, words, "config.json",
                          ref="HF" if expect == "ok" else None,
                          check=_spec_equal if expect == "ok" else None))
    d = root / "hf-empty-dir"
    d.mkdir()
    cases.append(Case("hf-folder-without-config", "hf_config", d, "error", ("config.json",),
                      "config.json"))
    return cases


def _tied(got: Any, tied: bool) -> None:
    assert got[0].tied_embeddings is tied


def _hf_check(kind: str | None) -> Callable[[Any, Any], None] | None:
    if kind == "tied":
        return lambda got, ref: _tied((got,), True)
    if kind == "untied":
        return lambda got, ref: _tied((got,), False)
    if kind == "same":
        return _spec_equal
    return None


def _zip_of(root: Path, tag: str, members: dict[str, bytes]) -> Path:
    f = root / f"zip-{tag}" / "upload.zip"
    f.parent.mkdir(parents=True)
    with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return f


@shared_builder
def archives_of_a_rank(root: Path) -> list[Case]:
    """The zip extractor of the dashboard's upload, on a zipped real rank."""
    cases: list[Case] = []
    rank = {f"rank0_ascend_pt/{p.relative_to(R0)}": p.read_bytes()
            for p in R0.rglob("*") if p.is_file() and p.name not in _UNREAD}
    good = _zip_of(root, "good", rank)
    cases.append(Case("zip-good-rank", "zip", good, "ok", ref="R0", check=_tables("kernels",
                                                                                   "steps")))
    f = _zip_of(root, "trunc", rank)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    cases.append(Case("zip-truncated", "zip", f, "error", ("damaged",), "upload.zip"))
    damaged = dict(rank)
    damaged["rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"] = GARBAGE
    f = _zip_of(root, "damaged-rank", damaged)
    cases.append(Case("zip-holding-a-damaged-rank", "zip", f, "error", ("binary",),
                      "kernel_details.csv"))
    return cases


@builder
def archives(root: Path) -> list[Case]:
    """The zip extractor of the dashboard's upload, on damaged archives."""
    cases: list[Case] = []

    def zip_of(tag: str, members: dict[str, bytes]) -> Path:
        return _zip_of(root, tag, members)

    cases.append(Case("zip-name-too-long", "zip", zip_of("long", {"top/" + "a" * 300: b"x"}),
                      "error", ("too long",), "upload.zip"))
    cases.append(Case("zip-deep-name-too-long", "zip",
                      zip_of("deep", {"/".join(["d" * 200] * 30) + "/f.csv": b"x"}),
                      "error", ("too long",), "upload.zip"))
    cases.append(Case("zip-slip", "zip", zip_of("slip", {"../evil.csv": b"x"}), "error",
                      ("zip slip",), "upload.zip"))
    f = root / "zip-garbage" / "upload.zip"
    f.parent.mkdir()
    f.write_bytes(GARBAGE)
    cases.append(Case("zip-garbage", "zip", f, "error", ("not a zip",), "upload.zip"))
    f = root / "zip-empty" / "upload.zip"
    f.parent.mkdir()
    f.write_bytes(b"")
    cases.append(Case("zip-empty", "zip", f, "error", ("zip",), "upload.zip"))
    f = root / "zip-gz" / "upload.zip"
    f.parent.mkdir()
    f.write_bytes(gzip.compress(b"x" * 100))
    cases.append(Case("zip-is-gzip", "zip", f, "error", ("gzip",), "upload.zip"))
    f = root / "zip-zeros" / "upload.zip"
    f.parent.mkdir()
    f.write_bytes(b"PK\x03\x04" + bytes(1 << 20))
    cases.append(Case("zip-header-then-zeros", "zip", f, "error", ("damaged",), "upload.zip"))
    d = root / "zip-dir" / "upload.zip"
    d.mkdir(parents=True)
    cases.append(Case("zip-is-a-folder", "zip", d, "error", ("folder",), "upload.zip"))
    return cases


# ----------------------------------------------------------------------------- issue 31
# The kinds of damage that still gave silent results (issue 31): a CSV cut inside its last
# row or field, one damaged rank in a folder of many, ranks of two frameworks in one folder,
# a DB export without its string table, negative legacy step totals, and msprof-analyze
# cluster output with text where numbers or rank numbers belong.

MSA8 = S.sample("ascend/msprof-analyze-tests/cluster_analysis_output")
"""msprof-analyze's own test output: cluster_step_trace_time.csv of 8 ranks."""
_NO_MSA8 = None if MSA8.is_dir() else f"{MSA8} not found (shared/samples absent)"


def _writable_copy(src: Path, dst: Path, **kwargs: Any) -> Path:
    """copytree, then every copied file and folder writable (the samples are read-only)."""
    if src.is_dir():
        shutil.copytree(src, dst, **kwargs)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o700 if p.is_dir() else p.stat().st_mode | 0o600)
    return dst


def _cut_in_last_field(path: Path, keep: int = 3) -> None:
    """Cut the file inside the last field of its last row that is longer than ``keep``
    characters: ``…,17902.5\\n`` -> ``…,179`` (no newline): what is left reads as a number."""
    data = path.read_bytes().rstrip(b"\r\n")
    end = len(data)
    while True:
        start = data.rfind(b",", 0, end) + 1
        assert start > data.rfind(b"\n") + 1, "no field long enough to cut"
        if end - start > keep:
            path.write_bytes(data[:start + keep])
            return
        end = start - 1


def _csv_rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"))))


def _write_rows(path: Path, rows: list[list[str]]) -> None:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")


def _edit_json(path: Path, fn: Callable[[Any], None]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    fn(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def _first_op(data: dict[str, Any]) -> dict[str, Any]:
    """The first op entry of a rank's communication.json ({step: {kind: {op: {...}}}})."""
    step = next(iter(data.values()))
    return next(iter(step["collective"].values()))


# checks: the damaged input gives the intact sample's numbers except where the damage was

def _steps_rows_dropped(rank: int, n: int = 1) -> Callable[[Any, Any], None]:
    """Rank ``rank`` lost its last ``n`` step rows; every other rank is as intact."""
    def check(got: Any, ref: Any) -> None:
        assert got.ranks == ref.ranks, (got.ranks, ref.ranks)
        for r in ref.ranks:
            g, e = got[r].steps, ref[r].steps
            if r == rank:
                e = e.iloc[:len(e) - n].reset_index(drop=True)
                if not len(e):  # its only row: no steps table left
                    assert not len(g), g
                    continue
            pd.testing.assert_frame_equal(g.reset_index(drop=True), e, check_like=True)
    return check


def _same_steps(got: Any, ref: Any) -> None:
    assert got.ranks == ref.ranks
    for r in ref.ranks:
        pd.testing.assert_frame_equal(got[r].steps, ref[r].steps, check_like=True)


def _stage_row_dropped(got: Any, ref: Any) -> None:
    """The 8-rank file's last row is its only stage row: gone; the rank rows intact."""
    _same_steps(got, ref)
    assert len(ref.meta.extra["stage_steps"]) == 1 and got.meta.extra["stage_steps"] == []


def _ranks_left_out(*gone: int, steps_of: dict[int, int] | None = None
                    ) -> Callable[[Any, Any], None]:
    """Ranks ``gone`` are absent (their rows unreadable); the others' steps as intact, or
    with ``steps_of[rank]`` rows where a row of theirs was left out."""
    def check(got: Any, ref: Any) -> None:
        assert got.ranks == [r for r in ref.ranks if r not in gone], got.ranks
        for r in got.ranks:
            g, e = got[r].steps, ref[r].steps
            if steps_of and r in steps_of:
                assert len(g) == steps_of[r], (r, len(g))
                e = e[e["step"].isin(g["step"])].reset_index(drop=True)
            pd.testing.assert_frame_equal(g, e, check_like=True)
    return check


def _one_na(table: str, col: str, rank: int | None = None) -> Callable[[Any, Any], None]:
    """Exactly one value of ``col`` became NA (it was not); every other value as intact."""
    def check(got: Any, ref: Any) -> None:
        g = getattr(got if rank is None else got[rank], table)
        e = getattr(ref if rank is None else ref[rank], table)
        assert len(g) == len(e)
        gv, ev = g[col].to_numpy(np.float64), e[col].to_numpy(np.float64)
        na = np.isnan(gv) & ~np.isnan(ev)
        assert int(na.sum()) == 1, int(na.sum())
        np.testing.assert_array_equal(gv[~na], ev[~na])
    return check


def _legacy_total_na(rank: int, step: int) -> Callable[[Any, Any], None]:
    def check(got: Any, ref: Any) -> None:
        g, e = got[rank].steps, ref[rank].steps
        v = g.set_index("step")["total_us"]
        assert np.isnan(v.loc[step]) and not np.isnan(e.set_index("step")["total_us"].loc[step])
        keep = (g["step"] != step).to_numpy()
        np.testing.assert_array_equal(g["total_us"].to_numpy()[keep],
                                      e["total_us"].to_numpy()[keep])
        pd.testing.assert_frame_equal(got[1 - rank].steps, ref[1 - rank].steps)
    return check


def _names_partly_na(got: Any, ref: Any) -> None:
    """Kernels all kept; a name is NA only where its string is gone, else as intact."""
    g, e = got.kernels, ref.kernels
    assert len(g) == len(e)
    na = g["name"].isna().to_numpy()
    assert 0 < na.sum() < len(g)
    assert (g["name"][~na] == e["name"][~na]).all()
    np.testing.assert_array_equal(g["dur_us"].to_numpy(), e["dur_us"].to_numpy())


def _groups_equal(got: Any, ref: Any) -> None:
    assert got.meta.groups == ref.meta.groups and got.meta.groups
    _same_steps(got, ref)


def _group_members_unknown(got: Any, ref: Any) -> None:
    (gid,) = ref.meta.groups
    assert got.meta.groups[gid]["global_ranks"] == []  # unknown, not guessed
    _same_steps(got, ref)



def _drop_string_ids(db: Path, where: str | None = None) -> None:
    import sqlite3

    con = sqlite3.connect(db)
    try:
        con.execute("drop table STRING_IDS" if where is None
                    else f"delete from STRING_IDS where {where}")
        con.commit()
        con.execute("vacuum")
    finally:
        con.close()


@shared_builder
def csv_cut_inside_last_field(root: Path) -> list[Case]:
    """A CSV cut inside its last field: ``17902.5`` -> ``179`` would read as a valid number;
    the row is dropped, with a note naming the line (issue 31)."""
    cases: list[Case] = []
    for fname, table, source in (("kernel_details.csv", "kernels", None),
                                 ("step_trace_time.csv", "steps", None),
                                 ("memory_record.csv", "memory", "memory_record"),
                                 ("operator_memory.csv", "op_memory", None)):
        stem = fname.split(".")[0]
        d = _copy_rank(R0, root / f"cut31-{stem}" / "rank0_ascend_pt")
        f = d / OUT / fname
        lines = f.read_bytes().count(b"\n")
        _cut_in_last_field(f)
        cases.append(Case(f"{stem}-cut-inside-last-field", "load", d, "repaired",
                          ("ends mid-row", f"line {lines}"), ref="R0",
                          check=_rows(table, 1, source)))
    d = _writable_copy(CO, root / "cut31-co" / "cluster_analysis_output")
    _cut_in_last_field(d / "cluster_step_trace_time.csv")
    cases.append(Case("cluster_step_trace_time-cut-inside-last-field", "load", d, "repaired",
                      ("ends mid-row", "line 3"), ref="CO", check=_steps_rows_dropped(1)))
    d = root / "cut31-msa8" / "cluster_analysis_output"
    if MSA8.is_dir():
        _writable_copy(MSA8, d)
        _cut_in_last_field(d / "cluster_step_trace_time.csv")
    cases.append(Case("cluster_step_trace_time-8-ranks-cut-in-stage-row", "load", d, "repaired",
                      ("ends mid-row", "line 10"), ref="MSA8", check=_stage_row_dropped,
                      skip=_NO_MSA8))
    for tag, pattern, rank in (("analyse", "ascend_cluster_analyse_*_1.csv", 1),
                               ("step-trace", "step_trace_raw_1_detail_time.csv", 1)):
        d = _legacy_copy(root / f"cut31-legacy-{tag}")
        f = next(d.glob(pattern))
        _cut_in_last_field(f)
        check = _steps_rows_dropped(rank) if tag == "analyse" else _same_steps
        cases.append(Case(f"legacy-rank1-{tag}-cut-inside-last-field", "load", d, "repaired",
                          ("ends mid-row",), ref="LEG", check=check))
    d = _legacy_copy(root / "cut31-legacy-hccl-quote")
    f = d / "hccl_raw_1.csv"
    data = f.read_bytes().rstrip(b"\r\n")
    f.write_bytes(data[:data.rfind(b'""SDMA""')] + b"\n")  # cut in a quoted field, then \n
    cases.append(Case("legacy-rank1-hccl-cut-inside-quoted-field", "load", d, "repaired",
                      ("inside a quoted field",), ref="LEG", check=_same_steps))
    return cases


def _legacy_copy(d: Path) -> Path:
    d.mkdir(parents=True)
    for f in LEG.iterdir():
        if f.name.endswith(("_0.csv", "_0.json", "_1.csv", "_1.json", "_0_detail_time.csv",
                            "_1_detail_time.csv")):
            shutil.copyfile(f, d / f.name)
    return d


@shared_builder
def one_damaged_rank(root: Path) -> list[Case]:
    """In a folder of many ranks, one damaged rank fails (listed in ``failed``) or loads
    with its note; the other ranks load as intact (issue 31)."""
    cases: list[Case] = []

    def two(tag: str) -> tuple[Path, Path]:
        d = _writable_copy(L1, root / f"rank31-{tag}",
                           ignore=shutil.ignore_patterns(*_UNREAD, "*.md", "LICENSE*"))
        return d, d / "rank1_ascend_pt"

    d, r1 = two("meta-list")
    (r1 / "profiler_metadata.json").write_text("[1, 2]")
    cases.append(Case("cluster-rank1-metadata-not-an-object", "load", d, "repaired",
                      ("rank 1: profiler_metadata.json", "expected a JSON object"), ref="L1",
                      check=_rank0_intact))
    d, r1 = two("meta-ranks-text")
    (r1 / "profiler_metadata.json").write_text(json.dumps({"parallel_group_info": {
        "17522688603477080586": {"group_name": "dp", "global_ranks": ["0", "1"]}}}))
    cases.append(Case("cluster-rank1-metadata-group-ranks-text", "load", d, "repaired",
                      ("rank 1:", "global_ranks"), ref="L1", check=_rank0_intact))
    d, r1 = two("meta-trunc")
    f = r1 / "profiler_metadata.json"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    cases.append(Case("cluster-rank1-metadata-truncated", "load", d, "partial", ("truncated",),
                      "profiler_metadata.json", failed=(1,), ref="L1", check=_rank0_intact))
    d, r1 = two("comm-trunc")
    f = r1 / OUT / "communication.json"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    cases.append(Case("cluster-rank1-communication-truncated", "load", d, "partial",
                      ("truncated",), "communication.json", failed=(1,), ref="L1",
                      check=_rank0_intact))
    d, r1 = two("steps-cut")
    _cut_in_last_field(r1 / OUT / "step_trace_time.csv")
    cases.append(Case("cluster-rank1-step-trace-time-cut", "load", d, "repaired",
                      ("rank 1: step_trace_time.csv line 2", "ends mid-row"), ref="L1",
                      check=_steps_rows_dropped(1)))
    d, r1 = two("comm-text")
    _edit_json(r1 / OUT / "communication.json",
               lambda data: _first_op(data)["Communication Time Info"].update(
                   {"Elapse Time(ms)": "fast"}))
    cases.append(Case("cluster-rank1-communication-text-number", "load", d, "repaired",
                      ("rank 1: communication.json Elapse Time(ms)", "not a number"),
                      ref="L1", check=_one_na("comm_ops", "elapse_us", rank=1)))
    return cases


@shared_builder
def mixed_frameworks(root: Path) -> list[Case]:
    """A torch_npu rank beside a MindSpore rank: two runs, never one job (issue 31)."""
    d = root / "mixed31"
    _writable_copy(L1 / "rank0_ascend_pt", d / "rank0_ascend_pt",
                   ignore=shutil.ignore_patterns(*_UNREAD))
    _writable_copy(L1 / "rank1_ascend_pt", d / "rank1_ascend_ms",
                   ignore=shutil.ignore_patterns(*_UNREAD))
    return [Case("cluster-torch-npu-and-mindspore-ranks", "load", d, "error",
                 ("2 separate runs found, not merged", "ascend pytorch, rank 0",
                  "ascend mindspore, rank 1", "run="), file="mixed31")]


@shared_builder
def db_string_table(root: Path) -> list[Case]:
    """A DB export without (part of) its STRING_IDS table (issue 31)."""
    cases: list[Case] = []
    db = "ascend_pytorch_profiler_0.db"
    d = _writable_copy(DB0, root / "db31-no-strings" / "rank0_ascend_pt")
    _drop_string_ids(d / OUT / db)
    cases.append(Case("db-without-string-table", "load", d, "error", ("STRING_IDS",), db))
    d = _writable_copy(DB0, root / "db31-some-strings" / "rank0_ascend_pt")
    _drop_string_ids(d / OUT / db, "id % 3 = 0")
    cases.append(Case("db-string-table-incomplete", "load", d, "repaired",
                      ("COMPUTE_TASK_INFO.name", "not in STRING_IDS"), ref="DB0",
                      check=_names_partly_na))
    return cases


@shared_builder
def legacy_negative_totals(root: Path) -> list[Case]:
    """Legacy step traces whose total is negative or absurd (issue 31)."""
    cases: list[Case] = []
    for tag, value, word in (("negative", "-17818660", "negative total_us (step 2)"),
                             ("absurd", "1e25", "implausibly long total_us (step 2)")):
        d = _legacy_copy(root / f"legacy31-total-{tag}")
        _edit_cell(d / "step_trace_raw_0_detail_time.csv", 1, "total", value)
        cases.append(Case(f"legacy-rank0-step-trace-{tag}-total", "load", d, "repaired",
                          (word,), ref="LEG", check=_legacy_total_na(0, 2)))
    return cases


@shared_builder
def cluster_output_values(root: Path) -> list[Case]:
    """msprof-analyze cluster output with text where a number or a rank number belongs,
    group ids written as numbers (issue 31)."""
    cases: list[Case] = []

    def msa8(tag: str) -> tuple[Path, Path]:
        d = root / f"co31-{tag}" / "cluster_analysis_output"
        if MSA8.is_dir():
            _writable_copy(MSA8, d)
        return d, d / "cluster_step_trace_time.csv"

    def co(tag: str) -> Path:
        return _writable_copy(CO, root / f"co31-{tag}" / "cluster_analysis_output")

    d, f = msa8("index-text")
    if f.exists():
        _edit_cell(f, 3, "Index", "abc")
    cases.append(Case("cluster_output-8-ranks-index-text", "load", d, "repaired",
                      ("Index is not a rank number", "data row 4: 'abc'"), ref="MSA8",
                      check=_ranks_left_out(3), skip=_NO_MSA8))
    d, f = msa8("index-all-text")
    if f.exists():
        rows = _csv_rows(f)
        for row in rows[1:]:
            if row[1] == "rank":
                row[2] = f"rank{row[2]}"
        _write_rows(f, rows)
    cases.append(Case("cluster_output-8-ranks-every-index-text", "load", d, "error",
                      ("Index", "no rank row"), "cluster_step_trace_time.csv", skip=_NO_MSA8))
    d, f = msa8("type-text")
    if f.exists():
        _edit_cell(f, 2, "Type", "ranks")
    cases.append(Case("cluster_output-8-ranks-type-unknown", "load", d, "repaired",
                      ("neither rank nor stage", "data row 3: 'ranks'"), ref="MSA8",
                      check=_ranks_left_out(2), skip=_NO_MSA8))
    d, f = msa8("computing-text")
    if f.exists():
        _edit_cell(f, 5, "Computing", "n/a!")
    cases.append(Case("cluster_output-8-ranks-computing-text", "load", d, "repaired",
                      ("cluster_step_trace_time.csv Computing", "not readable"), ref="MSA8",
                      check=_one_na("steps", "computing_us", rank=5), skip=_NO_MSA8))
    d, f = msa8("two-steps")
    if f.exists():  # two steps (1, 2), then one rank row of step 2 loses its rank number
        rows = _csv_rows(f)
        rows = [rows[0]] + [[s, *r[1:]] for s in ("1", "2") for r in rows[1:]]
        rows[9 + 4][2] = "four"  # step 2, rank 3
        _write_rows(f, rows)
    cases.append(Case("cluster_output-8-ranks-two-steps-index-text", "load", d, "repaired",
                      ("Index is not a rank number", "data row 13: 'four'"), ref="MSA8",
                      check=_two_steps_one_left_out, skip=_NO_MSA8))
    d = co("elapse-text")
    _edit_json(d / "cluster_communication.json", lambda data: next(iter(next(iter(
        data["(0, 1)"].values())).values()))["0"]["Communication Time Info"].update(
            {"Elapse Time(ms)": "slow"}))
    cases.append(Case("cluster_output-communication-text-number", "load", d, "repaired",
                      ("cluster_communication.json Elapse Time(ms)", "not a number"),
                      ref="CO", check=_one_na("comm_ops", "elapse_us", rank=0)))

    def rank_key(data: dict[str, Any]) -> None:
        ops = next(iter(data["(0, 1)"].values()))
        op = ops[next(k for k in ops if not k.startswith("Total"))]
        op["rank1"] = op.pop("1")

    d = co("rank-key-text")
    _edit_json(d / "cluster_communication.json", rank_key)
    cases.append(Case("cluster_output-communication-rank-key-text", "load", d, "repaired",
                      ("not keyed by a rank number", "'rank1'"), ref="CO", check=_same_steps))
    d = co("group-id-int")
    _edit_json(d / "communication_group.json", lambda data: data["comm_group_parallel_info"][0]
               .update(group_name=int(data["comm_group_parallel_info"][0]["group_name"])))
    cases.append(Case("cluster_output-group-id-integer", "load", d, "ok", ref="CO",
                      check=_groups_equal))
    d = co("group-ranks-text")
    _edit_json(d / "communication_group.json", lambda data: data["comm_group_parallel_info"][0]
               .update(rank_set=["0", "1"]))
    cases.append(Case("cluster_output-group-ranks-text", "load", d, "repaired",
                      ("communication_group.json", "rank_set"), ref="CO",
                      check=_group_members_unknown))
    d = co("group-list")
    (d / "communication_group.json").write_text("[]")
    cases.append(Case("cluster_output-group-file-not-an-object", "load", d, "error",
                      ("expected a JSON object",), "communication_group.json"))

    def link_text(data: dict[str, Any]) -> None:
        ops = next(iter(data["(0, 1)"].values()))
        links = ops[next(k for k in ops if not k.startswith("Total"))]
        links["zero-one"] = links.pop(next(iter(links)))

    d = co("link-text")
    _edit_json(d / "cluster_communication_matrix.json", link_text)
    cases.append(Case("cluster_output-matrix-link-text", "load", d, "repaired",
                      ("not named src-dst", "'zero-one'"), ref="CO", check=_same_steps))
    d = _copy_rank(R0, root / "rank31-elapse-text" / "rank0_ascend_pt")
    _edit_json(d / OUT / "communication.json",
               lambda data: _first_op(data)["Communication Time Info"].update(
                   {"Elapse Time(ms)": True}))
    cases.append(Case("communication-elapse-true", "load", d, "repaired",
                      ("communication.json Elapse Time(ms)", "not a number"), ref="R0",
                      check=_one_na("comm_ops", "elapse_us")))
    return cases


def _two_steps_one_left_out(got: Any, ref: Any) -> None:
    """Every rank has steps 1 and 2 (the 8-rank file written twice), but rank 3 only step 1:
    its step-2 row (data row 13) lost its rank number."""
    assert got.ranks == ref.ranks
    for r in got.ranks:
        steps = sorted(got[r].steps["step"].astype(int))
        assert steps == ([1] if r == 3 else [1, 2]), (r, steps)
        one = got[r].steps.drop(columns="step").iloc[0]
        intact = ref[r].steps.drop(columns="step").iloc[0]
        pd.testing.assert_series_equal(one, intact, check_names=False)


def _issue31_refs(root: Path) -> dict[str, Path]:
    """Intact copies for the issue-31 cases."""
    refs = {"CO": _writable_copy(CO, root / "ref-CO" / "cluster_analysis_output"),
            "LEG": _legacy_copy(root / "ref-LEG"),
            "DB0": _writable_copy(DB0, root / "ref-DB0" / "rank0_ascend_pt")}
    if MSA8.is_dir():
        refs["MSA8"] = _writable_copy(MSA8, root / "ref-MSA8" / "cluster_analysis_output")
    return refs


# ----------------------------------------------------------------------------- issue 67

SIM2 = ROOT / "data" / "simulated" / "llama2-7b-tp2"  # made here by perfkit.simulate
MS_CPU = ROOT / "data" / "mindspore-cpu-tiny-llama" / "vm_25873_20261122094603391_ascend_ms"
MS_CPU_RECOMPUTE = (DATA / "mindspore_cpu_recompute" / "vm_7632_20261123014144018_ascend_ms")


def _groups_of_rank(rank: int, kept: bool) -> Callable[[Any, Any], None]:
    """Both ranks load; ``rank``'s groups are the intact ones (``kept``) or none; every
    table of the other rank equals the intact one's."""
    def check(got: Any, ref: Any) -> None:
        assert got.ranks == ref.ranks and not got.failed
        assert (got[rank].meta.groups == ref[rank].meta.groups) is kept
        other = next(r for r in got.ranks if r != rank)
        for t in ("kernels", "steps", "comm_ops"):
            pd.testing.assert_frame_equal(getattr(got[other], t), getattr(ref[other], t))
    return check


def _steps_per_rank(n: int) -> Callable[[Any, Any], None]:
    """Every rank of the intact copy, each with steps 1 .. n; step 1 equals the intact
    (single) step but for its number."""
    def check(got: Any, ref: Any) -> None:
        assert got.ranks == ref.ranks
        for r in got.ranks:
            assert sorted(got[r].steps["step"].astype(int)) == list(range(1, n + 1)), r
            pd.testing.assert_series_equal(
                got[r].steps.drop(columns="step").iloc[0],
                ref[r].steps.drop(columns="step").iloc[0], check_names=False)
    return check


def _one_cell_na(table: str, col: str, rank: int) -> Callable[[Any, Any], None]:
    """One value of ``col`` on ``rank`` NA, the rest equal to the intact copy's."""
    def check(got: Any, ref: Any) -> None:
        g = getattr(got[rank], table)[col].to_numpy(np.float64)
        r = getattr(ref[rank], table)[col].to_numpy(np.float64)
        assert len(g) == len(r) and int(np.isnan(g).sum()) == int(np.isnan(r).sum()) + 1
        keep = ~np.isnan(g)
        np.testing.assert_array_equal(g[keep], r[keep])
    return check


def _same_ops(got: Any, ref: Any) -> None:
    pd.testing.assert_frame_equal(got.ops, ref.ops)
    pd.testing.assert_frame_equal(got.steps, ref.steps)


@builder
def issue67_damaged_silently(root: Path) -> list[Case]:
    """Damage that loaded as if fine (issue 67 pt 4): a profiler_metadata.json field of
    the wrong type in one rank, a kernel without a duration, msprof-analyze steps named
    in words or a number written as a missing marker, a gzipped UTF-16 Kineto trace; and
    three MindSpore CPU runs in one folder (pt 5)."""
    cases: list[Case] = []

    def sim(tag: str) -> tuple[Path, Path]:
        d = S.writable_copy(SIM2, root / f"i67-{tag}")
        return d, sorted(d.glob("*_ascend_*"))[1]

    for tag, edit, words, kept in (
            ("group-name-number",
             lambda md: next(iter(md["parallel_group_info"].values())).update(group_name=7),
             ("rank 1: profiler_metadata.json parallel_group_info", "group_name 7",
              "not text"), False),
            ("group-rank-outside",
             lambda md: next(iter(md["parallel_group_info"].values())).update(group_rank=5),
             ("rank 1: profiler_metadata.json parallel_group_info", "group_rank 5"), False),
            ("env-list", lambda md: md.update(ENV_VARIABLES=["HCCL_BUFFSIZE=200"]),
             ("rank 1: profiler_metadata.json", "ENV_VARIABLES is a list"), True)):
        d, r1 = sim(f"meta-{tag}")
        f = r1 / "profiler_metadata.json"
        md = json.loads(f.read_text())
        edit(md)
        f.write_text(json.dumps(md))
        cases.append(Case(f"cluster-rank1-metadata-{tag}", "load", d, "repaired", words,
                          ref="SIM2", check=_groups_of_rank(1, kept)))
    d, r1 = sim("kernel-dur-empty")
    _edit_cell(r1 / OUT / "kernel_details.csv", 4, "Duration(us)", "")
    cases.append(Case("ascend-rank1-kernel-duration-empty", "load", d, "repaired",
                      ("rank 1: kernels", "kernel_details.csv", "1 missing dur_us"),
                      ref="SIM2", check=_one_cell_na("kernels", "dur_us", 1)))

    def co(tag: str) -> tuple[Path, Path]:
        d = S.writable_copy(CO, root / f"i67-co-{tag}" / "cluster_analysis_output")
        return d, d / "cluster_step_trace_time.csv"

    d, f = co("steps-in-words")
    rows = _csv_rows(f)
    rows = [rows[0]] + [[f"step{k}", *r[1:]] for k in (1, 2) for r in rows[1:]]
    _write_rows(f, rows)
    cases.append(Case("cluster_output-steps-named-in-words", "load", d, "repaired",
                      ("cluster_step_trace_time.csv Step", "'step1'", "read as the step "
                       "number"), ref="CO67", check=_steps_per_rank(2)))
    d, f = co("free-na-marker")
    _edit_cell(f, 1, "Free", "n/a")
    cases.append(Case("cluster_output-free-na-marker", "load", d, "repaired",
                      ("cluster_step_trace_time.csv Free", "data row 2", "without a number"),
                      ref="CO67", check=_one_cell_na("steps", "free_us", 1)))
    f = root / "i67-kineto-utf16-gz" / "rank0.pt.trace.json.gz"
    f.parent.mkdir(parents=True)
    f.write_bytes(gzip.compress(gzip.decompress((KL / "rank0.pt.trace.json.gz").read_bytes())
                                .decode().encode("utf-16"), 1))
    cases.append(Case("kineto-gzipped-utf16", "load", f, "repaired", ("UTF-16",), ref="KL",
                      check=_same_ops))
    f = root / "i67-kineto-utf16-no-bom" / "rank0.json"
    f.parent.mkdir(parents=True)
    f.write_bytes(gzip.decompress((KL / "rank0.pt.trace.json.gz").read_bytes()).decode()
                  .encode("utf-16-le"))
    cases.append(Case("kineto-utf16-without-bom", "load", f, "error",
                      ("UTF-16 text without a byte-order mark",), "rank0.json"))
    d = root / "i67-mindspore-cpu-three-runs"
    for k, (sub, src, stamp) in enumerate((
            ("graph", MS_CPU, "20261122094603391"), ("graph_legacy", MS_CPU_RECOMPUTE,
                                                     "20261122094606391"),
            ("pynative", MS_CPU, "20261122094611391"))):
        S.writable_copy(src, d / sub / f"vm_{k}_{stamp}_ascend_ms")
    cases.append(Case("mindspore-cpu-three-runs-not-merged", "load", d, "error",
                      ("3 separate runs found, not merged",), file="i67-mindspore-cpu"))
    return cases


@shared_builder
def issue67_text_and_db(root: Path) -> list[Case]:
    """One rank's recording exported as text and as a database, side by side (the text
    export's profiler_info is the DB's: one collection): one run, the text export read."""
    d = root / "i67-text-and-db"
    t = _copy_rank(R0, d / "text" / "rank0_ascend_pt", trace=True)
    shutil.copy(DB0 / "profiler_info_0.json", t / "profiler_info_0.json")
    _writable_copy(DB0, d / "db" / "rank0_ascend_pt")
    return [Case("ascend-text-and-db-exports-of-one-rank", "load", d, "repaired",
                 ("exported twice", "ascend_pytorch_profiler_0.db", "read once",
                  "text export"), ref="R0T", check=_rank0_of_one)]


def _rank0_of_one(got: Any, ref: Any) -> None:
    """One run of one rank, read from the text export: its tables are the text export's."""
    assert got.ranks == [0] and not got.failed
    for t in ("kernels", "steps", "comm_ops"):
        pd.testing.assert_frame_equal(getattr(got[0], t), getattr(ref, t))


@shared_builder
def walk36_special_files(root: Path) -> list[Case]:
    """A named pipe where a profile file should be: opening it blocked until a writer came,
    so the loader (and the dashboard) hung for ever; refused before it is opened, and in a
    cluster its rank alone fails."""
    cases: list[Case] = []
    if not hasattr(os, "mkfifo"):
        return cases
    d = _copy_rank(R0, root / "w36-fifo" / "rank0_ascend_pt")
    f = d / OUT / "step_trace_time.csv"
    f.unlink()
    os.mkfifo(f)
    cases.append(Case("step_trace_time-named-pipe", "load", d, "error",
                      ("named pipe (FIFO)", "not a file"), "step_trace_time.csv", max_s=10.0))
    d = S.writable_copy(L1, root / "cluster-w36-fifo",
                        ignore=shutil.ignore_patterns(*_UNREAD, "*.md", "LICENSE*"))
    f = d / "rank1_ascend_pt" / OUT / "kernel_details.csv"
    f.unlink()
    os.mkfifo(f)
    cases.append(Case("cluster-rank1-named-pipe", "load", d, "partial", ("named pipe",),
                      "kernel_details.csv", failed=(1,), ref="L1", check=_rank0_intact,
                      max_s=10.0))
    cases.append(_db_with_pending_log(root))
    cases.append(_ranks_of_other_steps(root))
    cases.extend(_named_in_words(root))
    cases.extend(_written_twice(root))
    cases.extend(_parts_missing(root))
    trace = json.loads(gzip.decompress((KH / "sampled_rank-0.json.gz").read_bytes()))
    for e in trace["traceEvents"]:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e:
            e["dur"] = 0
    f = root / "w36-kineto-zero-durations" / "rank0.json"
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps(trace))
    cases.append(Case("kineto-every-duration-zero", "load", f, "repaired",
                      ("device tasks lasts 0 µs", "not measured"), ref="KH",
                      check=lambda got, ref: _same_count(got.kernels, ref.kernels)))
    for tag, extra, words in (
            ("copied", None, ("step 50 given twice, the same row again", "dropped")),
            ("differs", "50,99999,101963.203,4028.675,105991.878,25744.05,136581.0,0,"
             "101963.203,17902.5", ("step 50 given more than once with different figures",
                                    "first row of each read"))):
        d = _copy_rank(R0, root / f"w36-step-twice-{tag}" / "rank0_ascend_pt")
        f = d / OUT / "step_trace_time.csv"
        lines = f.read_bytes().splitlines(keepends=True)
        assert len(lines) == 2 and lines[1].startswith(b"50,")
        f.write_bytes(b"".join(lines) + (lines[1] if extra is None else extra.encode() + b"\n"))
        cases.append(Case(f"step_trace_time-step-twice-{tag}", "load", d, "repaired", words,
                          ref="R0", check=_tables("steps")))
    d = S.writable_copy(L1, root / "cluster-w36-link-loop",
                        ignore=shutil.ignore_patterns(*_UNREAD, "*.md", "LICENSE*"))
    (d / "loop").symlink_to(".", target_is_directory=True)  # ln -s . loop
    cases.append(Case("cluster-link-back-to-itself", "load", d, "ok", ref="L1",
                      check=_tables("kernels", "steps", "comm_ops")))
    return cases


@shared_builder
def walk37_json_keys_twice(root: Path) -> list[Case]:
    """A JSON object holding one key twice, as a writer that appended a record again
    leaves it: JSON keeps one value per key (the decoder the last), and the other copy
    went without a word. The first operator of communication.json given a second, earlier
    copy with other times: the rank reads as the intact one, and a note says a key was
    given twice."""
    d = _copy_rank(R0, root / "w37-comm-key-twice" / "rank0_ascend_pt")
    f = d / OUT / "communication.json"
    text = f.read_text(encoding="utf-8")
    head = '"collective": {'
    at = text.index(head) + len(head)
    key_end = text.index('": {', at) + 1
    key = text[at:key_end].strip()
    assert key.startswith('"hcom_')
    copy = key + ': {"Communication Time Info": {"Start Timestamp(us)": 1.0, ' \
        '"Elapse Time(ms)": 999.0}, "Communication Bandwidth Info": {}}, '
    f.write_text(text[:at] + copy + text[at:].lstrip(), encoding="utf-8")
    return [Case("communication-json-key-twice", "load", d, "repaired",
                 # the copy: its operator's key and the four keys inside it
                 ("communication.json: an object holds a key twice (5 keys read over",
                  "the last copy of each was read"), ref="R0", check=_tables("comm_ops"))]


def _db_with_pending_log(root: Path) -> Case:
    """The DB export with rows of ``TASK`` still in its write-ahead log, as a profiler that
    did not close the database (or a copy taken while it ran) leaves it: SQLite in WAL mode
    with automatic checkpoints off, the database holding the first 100 tasks and the log the
    rest. Read from the file alone the rank had 83 of its 191 kernels, with no note."""
    import sqlite3

    d = _writable_copy(DB0, root / "db-w36-pending-log" / "rank0_ascend_pt")
    f = d / OUT / "ascend_pytorch_profiler_0.db"
    work = root / "db-w36-work"
    work.mkdir()
    live = work / f.name
    shutil.copyfile(f, live)
    con = sqlite3.connect(live)
    con.execute("create table HELD as select * from TASK")
    con.execute("delete from TASK where rowid > 100")
    con.commit()
    con.execute("pragma journal_mode=wal")
    con.execute("pragma wal_autocheckpoint=0")
    con.execute("insert into TASK select * from HELD where rowid > 100")
    con.commit()
    shutil.copyfile(live, f)  # the database as the open writer left it, and its log
    shutil.copyfile(f"{live}-wal", f"{f}-wal")
    con.close()
    shutil.rmtree(work)
    return Case("db-write-ahead-log-pending", "load", d, "repaired",
                ("write-ahead log", "private copy"), ref="DB0", check=_kernels_as_ref)


def _ranks_of_other_steps(root: Path) -> Case:
    """Two ranks whose step tables share no step (rank 1's step 50 renumbered 51 in its
    step table, kernels and communication): loaded, and said, since each step's figures
    across ranks would come from one rank without a word."""
    d = S.writable_copy(L1, root / "cluster-w36-steps-apart",
                        ignore=shutil.ignore_patterns(*_UNREAD, "*.md", "LICENSE*"))
    out = d / "rank1_ascend_pt" / OUT
    _edit_cell(out / "step_trace_time.csv", 0, "Step", "51")
    rows = _csv_rows(out / "kernel_details.csv")
    at = rows[0].index("Step Id")
    _write_rows(out / "kernel_details.csv",
                [rows[0]] + [[*r[:at], "51" if r[at] == "50" else r[at], *r[at + 1:]]
                             for r in rows[1:]])
    comm = json.loads((out / "communication.json").read_text())
    (out / "communication.json").write_text(json.dumps({"step51": comm.pop("step50"),
                                                        **comm}))

    def check(got: Any, ref: Any) -> None:
        assert got.ranks == [0, 1] and not got.failed
        assert sorted(got[1].steps["step"].tolist()) == [51]

    return Case("cluster-ranks-share-no-step", "load", d, "repaired",
                ("no step number is recorded by every rank", "rank 0: 50; rank 1: 51"),
                ref="L1", check=check)


def _parts_missing(root: Path) -> list[Case]:
    """A part of a rank's record missing that changed its figures without a word: the DB's
    STEP_TIME table (no task had a step), a step table with its header alone (steps
    derived), kernel_details.csv without its Accelerator Core column (176 of 191 tasks
    sorted as 'other')."""
    import sqlite3

    cases = []
    d = _writable_copy(DB0, root / "db-w36-no-step-time" / "rank0_ascend_pt")
    with sqlite3.connect(d / OUT / "ascend_pytorch_profiler_0.db") as con:
        con.execute("drop table STEP_TIME")
    cases.append(Case("db-step-time-table-dropped", "load", d, "repaired",
                      ("has no STEP_TIME table",), ref="DB0",
                      check=lambda got, ref: _same_count(got.kernels, ref.kernels)))
    d = _copy_rank(R0, root / "w36-steps-header-only" / "rank0_ascend_pt")
    f = d / OUT / "step_trace_time.csv"
    f.write_bytes(f.read_bytes().split(b"\n", 1)[0] + b"\n")
    cases.append(Case("step_trace_time-header-only", "load", d, "repaired",
                      ("header and no row", "derived from the device tasks"), ref="R0",
                      check=lambda got, ref: _same_count(got.kernels, ref.kernels)))
    d = _copy_rank(R0, root / "w36-steps-in-ms" / "rank0_ascend_pt")
    f = d / OUT / "step_trace_time.csv"
    rows = _csv_rows(f)
    _write_rows(f, [rows[0], [rows[1][0], *(repr(float(v) / 1000) for v in rows[1][1:])]])
    cases.append(Case("step_trace_time-in-ms", "load", d, "repaired",
                      ("cover more than the busy time", "another unit (ms for µs)"),
                      ref="R0", check=lambda got, ref: _same_count(got.kernels, ref.kernels)))
    d = _copy_rank(R0, root / "w36-no-core-column" / "rank0_ascend_pt")
    f = d / OUT / "kernel_details.csv"
    rows = _csv_rows(f)
    at = rows[0].index("Accelerator Core")
    _write_rows(f, [r[:at] + r[at + 1:] for r in rows])
    cases.append(Case("kernel_details-no-core-column", "load", d, "repaired",
                      ("has no Accelerator Core column", "as 'other'"), ref="R0",
                      check=lambda got, ref: _same_count(got.kernels, ref.kernels)))
    return cases


def _written_twice(root: Path) -> list[Case]:
    """Every event of a trace written twice, a DB's TASK table copied into itself: each
    device task (and host operator) counted twice, without a word."""
    import sqlite3

    trace = json.loads(gzip.decompress((KH / "sampled_rank-0.json.gz").read_bytes()))
    trace["traceEvents"] = trace["traceEvents"] * 2
    f = root / "w36-kineto-events-twice" / "rank0.json"
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps(trace))
    d = _writable_copy(DB0, root / "db-w36-task-twice" / "rank0_ascend_pt")
    with sqlite3.connect(d / OUT / "ascend_pytorch_profiler_0.db") as con:
        con.execute("insert into TASK select * from TASK")

    return [Case("kineto-every-event-twice", "load", f, "repaired",
                 ("written twice: the copies dropped before any table was built",),
                 ref="KH", check=_tables("kernels", "ops", "steps", "comm_ops", "memory")),
            Case("db-task-table-twice", "load", d, "repaired",
                 ("187 of 378 device tasks repeat an earlier one exactly",), ref="DB0",
                 check=_kernels_as_ref)]


@shared_builder
def walk38_wild_kineto(root: Path) -> list[Case]:
    """Damage a walk made to the wild Kineto traces: events written twice (the collectives,
    the operators' device time and the memory counted twice where the kernels' own check
    dropped the copies) and one kernel without a readable start (the steps around it lost
    their preparing time, the step holding it was said to be implausibly long)."""
    def edited(tag: str, src: Path, edit: Callable[[list[Any]], list[Any]]) -> Path:
        raw = src.read_bytes()
        data = json.loads(gzip.decompress(raw) if src.name.endswith(".gz") else raw)
        data["traceEvents"] = edit(data["traceEvents"])
        out = root / f"w38-{tag}" / "rank0.json"
        out.parent.mkdir(parents=True)
        out.write_text(json.dumps(data))
        return out

    def again(pick: Callable[[dict[str, Any]], bool]) -> Callable[[list[Any]], list[Any]]:
        return lambda ev: ev + [e for e in ev if pick(e)]

    def no_ts(ev: list[Any]) -> list[Any]:
        kernels = [e for e in ev if str(e.get("cat", "")).lower() == "kernel"]
        del kernels[len(kernels) // 3]["ts"]  # one kernel in a middle step
        return ev

    return [
        Case("kineto-deepep-every-event-twice", "load", edited("ds-twice", DS, again(bool)),
             "repaired", ("written twice: the copies dropped before any table was built",),
             ref="DS", check=_tables("kernels", "ops", "steps", "comm_ops")),
        Case("kineto-deepep-host-operators-twice", "load",
             edited("ds-ops-twice", DS, again(lambda e: e.get("cat") == "cpu_op")),
             "repaired", ("written twice",), ref="DS", check=_tables("ops", "kernels")),
        Case("kineto-deepep-runtime-calls-twice", "load",
             edited("ds-rt-twice", DS,
                    again(lambda e: e.get("cat") in ("cuda_runtime", "cuda_driver"))),
             "repaired", ("written twice",), ref="DS", check=_tables("ops", "kernels")),
        Case("kineto-1.9-every-event-twice", "load", edited("k19-twice", K19, again(bool)),
             "repaired", ("memory samples without running totals", "as the trace's events "
                          "with an id do: written twice"),
             ref="K19", check=_tables("kernels", "ops", "steps", "memory")),
        # only the sizes-only samples again: a copy cannot be told from a second allocation
        # of one size in the same microsecond; kept, and said
        Case("kineto-1.9-memory-samples-twice", "load",
             edited("k19-mem-twice", K19, again(lambda e: e.get("name") == "[memory]")),
             "repaired", ("kept, since two allocations of one size",), ref="K19",
             check=_tables("kernels", "ops", "steps")),
        Case("kineto-1.9-one-kernel-without-ts", "load", edited("k19-no-ts", K19, no_ts),
             "repaired", ("1 GPU kernel has no start",), ref="K19",
             check=_kineto_one_kernel_ts_na),
        Case("kineto-deepep-one-kernel-without-ts", "load", edited("ds-no-ts", DS, no_ts),
             "repaired", ("1 GPU kernel has no start",), ref="DS",
             check=_kineto_one_kernel_ts_na),
        # a lone kernel_details.csv saved by a spreadsheet: blank rows, or no row at all
        Case("kernel_details-spreadsheet-blank-rows", "load", _kd(root, "blank", 3), "repaired",
             ("3 rows with every cell empty",), ref="KD", check=_tables("kernels")),
        # its header in lower case: Start Time(us) was read as a float, 50 ns off
        Case("kernel_details-header-lower-case", "load", _kd(root, "lower", -1), "ok",
             ref="KD", check=_tables("kernels")),
        Case("kernel_details-header-only", "load", _kd(root, "header", 0), "repaired",
             ("a header and no row",), ref="KD", check=_fewer_kernels(591)),
        # raw CANN output: device tasks whose ts is null were left out without a word
        Case("cann-five-device-tasks-without-ts", "load", _cann_timeless(root, 5),
             "repaired", ("5 device tasks of the CANN timeline have no readable start",),
             ref="MIP", check=_fewer_kernels(5)),
        # five kernels that lost their kind: left out, as before, but now said
        Case("kineto-1.9-five-kernels-without-cat", "load",
             edited("k19-no-cat", K19, _without("cat", 5)), "repaired",
             ("5 complete events without a category (cat)",), ref="K19",
             check=_fewer_kernels(5)),
        Case("kineto-1.9-five-kernels-without-ph", "load",
             edited("k19-no-ph", K19, _without("ph", 5)), "repaired",
             ("5 events without a phase (ph)",), ref="K19", check=_fewer_kernels(5)),
    ]


def _kd(root: Path, tag: str, blank: int) -> Path:
    """The lone kernel_details.csv with ``blank`` rows of empty cells after it, (0) its
    header alone, or (-1) its header in lower case."""
    d = root / f"w38-kd-{tag}"
    d.mkdir()
    text = (KD / "kernel_details.csv").read_bytes()
    head, rest = text.split(b"\n", 1)
    out = text + (b"," * head.count(b",") + b"\n") * blank if blank > 0 else \
        head + b"\n" if blank == 0 else head.lower() + b"\n" + rest
    (d / "kernel_details.csv").write_bytes(out)
    return d


def _cann_timeless(root: Path, n: int) -> Path:
    """A copy of a raw CANN PROF_ folder whose first iteration's first ``n`` device tasks
    (process "Ascend Hardware") have ``ts: null`` (in the msprof_ file perfkit reads)."""
    d = S.writable_copy(MIP, root / "w38-cann-timeless" / MIP.name)
    for f in [d / "device_0" / "timeline" / "msprof_0_2_1.json"]:
        events = json.loads(f.read_text())
        hw = {e.get("pid") for e in events if e.get("ph") == "M"
              and e.get("name") == "process_name"
              and (e.get("args") or {}).get("name") == "Ascend Hardware"}
        tasks = [e for e in events if e.get("ph") == "X" and e.get("pid") in hw
                 and (e.get("args") or {}).get("Task Type") is not None]
        for e in tasks[:n]:
            e["ts"] = None
        f.write_text(json.dumps(events))
    return d


def _without(key: str, n: int) -> Callable[[list[Any]], list[Any]]:
    """The first ``n`` kernels of a trace's events without ``key``."""
    def edit(ev: list[Any]) -> list[Any]:
        for e in [e for e in ev if str(e.get("cat", "")).lower() == "kernel"][:n]:
            del e[key]
        return ev
    return edit


def _fewer_kernels(n: int) -> Callable[[Any, Any], None]:
    def check(got: Any, ref: Any) -> None:
        assert len(got.kernels) == len(ref.kernels) - n
    return check


def _named_in_words(root: Path) -> list[Case]:
    """Damage that gave Python's own words ("unexpected KeyError: 'Column Duration(us) does
    not exist in schema'", "unexpected TypeError: int() argument ... not 'NoneType'"), or
    refused a whole rank for a tenth of its rows."""
    import sqlite3

    cases = []
    d = _copy_rank(R0, root / "w36-header-twice" / "rank0_ascend_pt")
    f = d / OUT / "kernel_details.csv"
    lines = f.read_bytes().split(b"\n", 1)
    assert b",Wait Time(us)," in lines[0]
    f.write_bytes(lines[0].replace(b",Wait Time(us),", b",Duration(us),") + b"\n" + lines[1])
    cases.append(Case("kernel_details-column-named-twice", "load", d, "error",
                      ("names column 'Duration(us)' twice",), "kernel_details.csv"))
    db = "ascend_pytorch_profiler_0.db"
    d = _writable_copy(DB0, root / "db-w36-column-renamed" / "rank0_ascend_pt")
    with sqlite3.connect(d / OUT / db) as con:
        con.execute("alter table TASK rename column startNs to startedAt")
    cases.append(Case("db-task-column-renamed", "load", d, "error",
                      ("table TASK has no column startNs",), db))
    d = _writable_copy(DB0, root / "db-w36-start-in-words" / "rank0_ascend_pt")
    with sqlite3.connect(d / OUT / db) as con:
        con.execute("update TASK set startNs = 'soon' where rowid % 10 = 0")
        words = con.execute("select count(*) from TASK t join COMPUTE_TASK_INFO c on "
                            "c.globalTaskId = t.globalTaskId where t.rowid % 10 = 0"
                            ).fetchone()[0]

    def check(got: Any, ref: Any, lost: int = words) -> None:
        assert len(got.kernels) == len(ref.kernels) - lost and lost > 0

    cases.append(Case("db-task-start-in-words", "load", d, "repaired",
                      (f"{words} of", "not a whole number of nanoseconds", "left out"),
                      ref="DB0", check=check))
    return cases


def _same_count(got: pd.DataFrame, ref: pd.DataFrame) -> None:
    """The same rows as the intact table (nothing dropped)."""
    assert len(got) == len(ref) > 0


def _kernels_as_ref(got: Any, ref: Any) -> None:
    """Every kernel of the intact export (the log's rows read in)."""
    assert len(got.kernels) == len(ref.kernels) == 191
    pd.testing.assert_frame_equal(got.kernels, ref.kernels)


@builder
def walk36_log_restarted(root: Path) -> list[Case]:
    """A training log with a restarted run appended: its steps were read as more steps of
    one run, and the job's step time from the log (their median) mixed the two runs."""
    text = (LOGS / "mf_new_trainer_pp.log").read_bytes()
    f = root / "log-w36-restarted" / "train.log"
    f.parent.mkdir(parents=True)
    f.write_bytes(text + text)
    first = text.count(b"\n")

    def check(got: Any, ref: Any) -> None:
        """Every step line kept (both runs), the second run said from its first line."""
        assert len(got) == 2 * len(ref)
        assert got.attrs["repeated_from_line"] > first

    return [Case("log-run-restarted-and-appended", "training_log", f, "repaired",
                 ("steps already logged appear again", "cut the log at line"), "train.log",
                 ref="TRAIN", check=check)]


@builder
def walk36_yaml_twice(root: Path) -> list[Case]:
    """A MindFormers YAML that gives a key twice: the last is read (PyYAML and MindFormers
    keep it), and a note says so with both lines; a key repeated with its own value says
    nothing."""
    text = (CFG / "llama2_13b_full.yaml").read_text()
    assert text.count("num_layers: 40") == 1
    cases = []
    for tag, new, layers, said in (
            ("layers-twice", "num_layers: 40\n    num_layers: 80", 80, True),
            ("layers-twice-same", "num_layers: 40\n    num_layers: 40", 40, False)):
        f = root / f"cfg-w36-{tag}" / "run.yaml"
        f.parent.mkdir(parents=True)
        f.write_text(text.replace("num_layers: 40", new, 1))

        def check(got: Any, ref: Any, layers: int = layers, said: bool = said) -> None:
            model, _, extras = got
            assert model.num_layers == layers
            notes = (extras.get("notes") or {}).get("num_layers", [])
            assert bool(notes) == said, notes
            if said:
                line = text.splitlines().index("    num_layers: 40") + 1
                assert f"is given twice (lines {line} and {line + 1})" in notes[0], notes

        cases.append(Case(f"yaml-{tag}", "mf_config", f, "ok", (), "run.yaml", check=check))
    return cases


def build(root: Path, shared: bool = True) -> list[Case]:
    """Write every damaged input under ``root``; return the cases in a stable order.

    ``shared=False`` leaves out the builders of :func:`shared_builder` (for a checkout
    without ``shared/samples``); each case's ``shared`` says which kind made it.
    """
    root.mkdir(parents=True, exist_ok=True)
    cases: list[Case] = []
    for make, needs_shared in _BUILDERS:
        if needs_shared and not shared:
            continue
        made = make(root)
        for case in made:
            case.shared = needs_shared
        cases.extend(made)
    names = [c.name for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"duplicate case names: {dup}"
    return cases


def reference_inputs(root: Path, shared: bool = True) -> dict[str, Path]:
    """Intact copies the checks compare with (loaded the same way as the damaged ones);
    ``shared=False``: only those of the project's own files."""
    refs: dict[str, Path] = {}
    contents: dict[str, tuple[str, Callable[[], bytes]]] = {}
    if shared:
        refs["R0"] = _copy_rank(R0, root / "ref-R0" / "rank0_ascend_pt")
        refs["R0T"] = _copy_rank(R0, root / "ref-R0T" / "rank0_ascend_pt", trace=True)
        refs["MI1"] = S.writable_copy(MI1, root / "ref-MI1" / "profiler")
        refs["MIP"] = S.writable_copy(MIP, root / "ref-MIP" / MIP.name)
        refs["KD"] = S.writable_copy(KD, root / "ref-KD")
        refs["L1"] = S.writable_copy(L1, root / "ref-L1",
                                     ignore=shutil.ignore_patterns(*_UNREAD, "*.md", "LICENSE*"))
        contents["KH"] = ("rank0.json",
                          lambda: gzip.decompress((KH / "sampled_rank-0.json.gz").read_bytes()))
        contents["TV"] = ("trace_view.json", TV.read_bytes)
        contents["DS"] = ("rank0.json", DS.read_bytes)
        contents["K19"] = ("rank0.json", lambda: gzip.decompress(K19.read_bytes()))
        refs.update(_issue31_refs(root))
    refs["SIM2"] = S.writable_copy(SIM2, root / "ref-SIM2")
    refs["CO67"] = S.writable_copy(CO, root / "ref-CO67" / "cluster_analysis_output")
    contents |= {
        "KL": ("rank0.json", lambda: gzip.decompress((KL / "rank0.pt.trace.json.gz").read_bytes())),
        "IR": ("graph.ir", (BUNDLED_IR / "silu_mul.ir").read_bytes),
        "TRAIN": ("train.log", (LOGS / "mf_new_trainer_pp.log").read_bytes),
        "MEM": ("mem.log", (LOGS / "memory_ranks.log").read_bytes),
        "YAML": ("run.yaml", (CFG / "llama2_13b_full.yaml").read_bytes),
        "HF": ("config.json", lambda: json.dumps(_HF).encode()),
    }
    for key, (name, data) in contents.items():
        f = root / f"ref-{key}" / name
        f.parent.mkdir(parents=True)
        f.write_bytes(data())
        refs[key] = f
    return refs


if __name__ == "__main__":  # pragma: no cover - manual exploration
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/perfkit-corpus")
    built = build(out)
    print(f"{len(built)} cases under {out}")
