"""Numbers and tables for people: perfkit.format and perfkit.tables."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfkit.errors import PerfkitError
from perfkit.format import (
    bytes_text,
    count_text,
    number_text,
    ranks_text,
    ratio_text,
    share_text,
    sig,
    time_text,
    time_unit,
)
from perfkit.tables import over_ranks, shorten, table, with_values

SCI = re.compile(r"\d[eE][+-]?\d")


# ----------------------------------------------------------------------------- format

def test_the_issues_examples() -> None:
    assert time_text(1_878_748.726) == "1.88 s"          # µs in the unit that fits
    assert share_text(0.8887) == "88.9 %"
    assert bytes_text(10_822_982_041.6) == "10.1 GiB"      # 10,822,982,041.6 / 2**30 = 10.08
    assert sig(1.878749e06) == "1,878,749"                 # never 1.878749e+06


@pytest.mark.parametrize(("us", "text"), [
    (0.5, "500 ns"), (4.5, "4.50 µs"), (999.4, "999 µs"), (1_000.0, "1.00 ms"),
    (206_898.212, "207 ms"), (22_390_090_000.0, "6.22 h"), (59_000_000.0, "59.0 s"),
    (61_000_000.0, "1.02 min"),
])
def test_time_text_picks_the_unit_that_fits(us: float, text: str) -> None:
    assert time_text(us) == text


def test_time_text_in_a_given_unit_keeps_integer_digits() -> None:
    assert time_text(1_399_381.0, "ms") == "1,399 ms"   # 3 significant digits at least
    assert time_text(309.0, "ms") == "0.309 ms"
    assert time_text(float("nan")) == "–" and time_text(None) == "–"
    with pytest.raises(ValueError, match="unit"):
        time_text(1.0, "fortnight")


def test_sig_rounds_to_three_significant_digits() -> None:
    assert sig(0.000123456) == "0.000123"
    assert sig(9.996) == "10.0" and sig(99.96) == "100" and sig(0.09996) == "0.100"
    assert sig(-1234.5) == "-1,234" and sig(0) == "0" and sig(float("inf")) == "∞"
    assert count_text(10432) == "10,432" and number_text(249.23, unit="TFLOP/s") == \
        "249 TFLOP/s"


def test_a_tie_rounds_the_same_in_every_unit() -> None:
    """529.5 µs is 0.5295 ms: a tie at the third significant digit in both units. Half to
    even on the written digits: 529|.5 -> 530 (9 is odd, up to the even 0), 0.529|5 ->
    0.530; and 528.5 -> 528 (8 is even, stays), 0.5285 -> 0.528. The float 0.5295 is
    0.52949999999999997..., which a rounding of the float itself took down to 0.529."""
    assert f"{0.5295:.20f}".startswith("0.52949999") and f"{1.225:.20f}".startswith("1.2250000")
    assert time_text(529.5) == "530 µs" and time_text(529.5, "ms") == "0.530 ms"
    assert time_text(528.5) == "528 µs" and time_text(528.5, "ms") == "0.528 ms"
    assert sig(529.5 / 1000) == "0.530" and sig(528.5 / 1000) == "0.528"
    # in seconds and ms: 1.235 -> 1.24 (3 is odd: up to 4); 1.225 -> 1.22 (2 is even),
    # though the float 1.225 is 1.22500000000000008..., just above the tie
    assert time_text(1_235_000.0, "s") == "1.24 s" and time_text(1_225_000.0, "s") == "1.22 s"
    assert time_text(1_235.0, "ms") == "1.24 ms" and time_text(1_225.0, "ms") == "1.22 ms"


def test_time_unit_follows_the_median_of_a_column() -> None:
    assert time_unit([300.0, 55_218.0, 1_399_381.0]) == ("ms", 1e3)
    assert time_unit([1e6, 2e6, 3e6]) == ("s", 1e6)
    assert time_unit([np.nan, 0.0]) == ("µs", 1.0)


def test_bytes_in_binary_units() -> None:
    assert bytes_text(512) == "512 B"
    assert bytes_text(5_097_772) == "4.86 MiB"            # 5,097,772 / 2**20 = 4.862
    assert bytes_text(2**40 * 1.5) == "1.50 TiB"
    assert bytes_text(7.46 * 2**30, "MiB") == "7,639 MiB"


@given(st.floats(min_value=-1e15, max_value=1e15, allow_nan=False, allow_infinity=False))
def test_no_number_is_written_in_scientific_notation(x: float) -> None:
    for text in (sig(x), time_text(abs(x)), bytes_text(abs(x)), share_text(x / 1e12)):
        assert not SCI.search(text), text


@given(st.floats(min_value=1e-6, max_value=1e12, allow_nan=False))
def test_sig_keeps_three_significant_digits(x: float) -> None:
    shown = float(sig(x).replace(",", ""))
    assert shown == pytest.approx(x, rel=5e-3)


# ----------------------------------------------------------------------------- tables

def test_a_header_has_one_bracket() -> None:
    """A header's own bracket and its unit's were two groups: "free (device idle) (%)"."""
    frame = pd.DataFrame({"free_share": [0.25], "wait_us": [1500.0], "idle_us": [2.0]})
    tab = table(frame, headers={"free_share": "free (device idle)",
                                "wait_us": "before the first device task (data, launch)",
                                "idle_us": "idle (no kernel)"})
    assert list(tab.text.columns) == ["free, device idle (%)",
                                      "before the first device task: data, launch (ms)",
                                      "idle, no kernel (µs)"]
    assert tab.text.iloc[0].tolist() == ["25.0", "1.50", "2.00"]  # 0.25, 1500 µs, 2 µs
    # a header without a unit keeps its words as given
    plain = table(pd.DataFrame({"rank": [3]}), headers={"rank": "rank (global)"})
    assert list(plain.text.columns) == ["rank (global)"]


def test_table_writes_one_unit_per_column_in_the_header() -> None:
    frame = pd.DataFrame({"op": ["MatMulV3", "Add"], "total_us": [22_390_090.0, 410_000.0],
                          "share": [0.8378, 0.0153], "peak_bytes": [7.46 * 2**30, 2**29],
                          "count": [10432, 3584], "bandwidth_gbps": [15.62, 20.0]})
    tab = table(frame, scope={"total_us": "summed over ranks"})
    assert list(tab.text.columns) == ["op", "total (s, summed over ranks)", "share (%)",
                                      "peak (GiB)", "count", "bandwidth (GB/s)"]
    assert tab.text["total (s, summed over ranks)"].tolist() == ["22.4", "0.410"]
    assert tab.text["share (%)"].tolist() == ["83.8", "1.5"]
    assert tab.text["peak (GiB)"].tolist() == ["7.46", "0.500"]
    assert tab.text["count"].tolist() == ["10,432", "3,584"]
    html = tab.html()
    assert "e+" not in html and "<th" in html


def test_table_shortens_long_names_and_keeps_them_in_a_tooltip() -> None:
    name = "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3" \
           "_nn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nn_align8" \
           "::Params)"
    tab = table(pd.DataFrame({"name": [name, "Add"], "dur_us": [10.0, 2.0]}),
                shorten_text=40)
    cell = tab.text["name"].iloc[0]
    assert len(cell) == 40 and "…" in cell and cell.startswith("void cutlass")
    html = tab.html()
    assert f"title='{name.replace('<', '&lt;').replace('>', '&gt;')}'" in html
    assert shorten("short") == "short"


def test_table_spread_columns_share_the_unit_of_their_median() -> None:
    frame = pd.DataFrame({"step_median_us": [900.0], "step_min_us": [800.0],
                          "step_max_us": [1500.0]})
    tab = table(frame)
    assert list(tab.text.columns) == ["step median (µs)", "step min (µs)", "step max (µs)"]
    assert tab.text.iloc[0].tolist() == ["900", "800", "1,500"]


def test_table_says_how_many_rows_were_left_out_and_handles_empty() -> None:
    frame = pd.DataFrame({"a": range(30)})
    html = table(frame, max_rows=5).html()
    assert html.count("<tr") == 6 and "25 more rows" in html
    assert "nothing in this profile" in table(frame.head(0), caption="x").html()


def test_over_ranks_is_median_min_max_and_the_worst_rank() -> None:
    frame = pd.DataFrame({"rank": [0, 1, 2, 3, 0, 1, 2, 3],
                          "step": [1, 1, 1, 1, 2, 2, 2, 2],
                          "step_us": [10.0, 30.0, 20.0, 15.0, 11.0, 12.0, 40.0, 13.0],
                          "note": list("abcdefgh")})
    out = over_ranks(frame, ["step"], ["step_us"], keep={"note": "first"}, sort=False)
    assert out["step"].tolist() == [1, 2]
    # step 1: 10, 15, 20, 30 -> median 17.5; step 2: 11, 12, 13, 40 -> median 12.5
    assert out["step_median_us"].tolist() == [17.5, 12.5]
    assert out["step_min_us"].tolist() == [10.0, 11.0]
    assert out["step_max_us"].tolist() == [30.0, 40.0]
    assert out["worst_rank"].tolist() == [1, 2] and out["ranks"].tolist() == [4, 4]
    assert out["note"].tolist() == ["a", "e"]
    # sorted by the median, worst first; a bandwidth's worst is the smallest
    assert over_ranks(frame, ["step"], ["step_us"])["step"].tolist() == [1, 2]
    low = over_ranks(frame, ["step"], ["step_us"], worst="min", sort=False)
    assert low["worst_rank"].tolist() == [0, 0]


def test_over_ranks_sums_several_rows_of_a_rank_and_works_without_keys() -> None:
    frame = pd.DataFrame({"rank": [0, 0, 1], "op": ["A", "A", "A"],
                          "total_us": [1.0, 2.0, 5.0]})
    out = over_ranks(frame, ["op"], ["total_us"])
    assert out[["total_median_us", "total_min_us", "total_max_us"]].iloc[0].tolist() == \
        [4.0, 3.0, 5.0]
    whole = over_ranks(frame, [], ["total_us"])
    assert len(whole) == 1 and whole["worst_rank"].iloc[0] == 1


def test_format_and_tables_sit_above_every_layer() -> None:
    # numbers for people are used by the CLI, the charts, the widgets and the notebooks:
    # they import nothing of perfkit but each other and the errors
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "perfkit"
    files = [root / "format.py", *sorted((root / "tables").glob("*.py"))]
    assert len(files) > 2, "perfkit.tables is a package of modules"
    for path in files:
        here = path.parent.relative_to(root.parent).parts
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {".".join([*here[:len(here) - n.level + 1], *([n.module] if n.module else [])])
                    for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level}
        bad = {m for m in imported
               if m not in ("perfkit.errors", "perfkit.format")
               and not m.startswith("perfkit.tables")}
        assert not bad, (path.name, bad)


@pytest.mark.parametrize("ratio, text", [(2.345, "2.3×"), (0.0171, "0.017×"),
                                         (1 / 510_204, "1/510,000 of"),
                                         (0.005, "1/200 of"), (150.0, "150×")])
def test_a_ratio_reads_without_an_exponent(ratio: float, text: str) -> None:
    assert ratio_text(ratio) == text



def test_with_values_leaves_out_the_columns_no_row_fills() -> None:
    frame = pd.DataFrame({"op": ["allreduce", "send"], "group": [None, None],
                          "wait_share": [np.nan, 0.0], "idle_share": pd.array([pd.NA, pd.NA],
                                                                               dtype="Float64")})
    assert with_values(frame) == ["op", "wait_share"]  # a 0 is a value; NaN and NA are not
    assert with_values(frame, ["idle_share", "op"]) == ["op"]  # in the order asked for
    assert with_values(frame.iloc[:0]) == list(frame.columns)  # no row: nothing to judge



def test_ranks_are_counted_before_they_are_listed() -> None:
    # never a bare "0", which reads as no rank at all
    assert ranks_text([0]) == "1 (0)"
    assert ranks_text([0, 1, 2, 3, 7]) == "5 (0-3, 7)"
    assert ranks_text(None, 3) == "1 (rank 3)" and ranks_text([], 0) == "1 (rank 0)"
    assert ranks_text(None, None) == "1" and ranks_text(None, pd.NA) == "1"



def test_whole_counts_per_step_have_no_decimals() -> None:
    # the Operators tab wrote calls per step "4.00", "64.0", "65.0", "3.00"; a mean that is
    # really fractional keeps 3 significant digits
    frame = pd.DataFrame({"calls_per_step": [4.0, 64.0, 2.5, 1 / 3, 1234.0],
                          "kernels_per_rank": [3.0, 1.0, 2.0, 0.5, 7.0],
                          "ms_per_step": [4.0, 64.0, 2.5, 1 / 3, 1234.0]})
    text = table(frame).text
    assert text.iloc[:, 0].tolist() == ["4", "64", "2.50", "0.333", "1,234"]
    assert text.iloc[:, 1].tolist() == ["3", "1", "2", "0.500", "7"]
    # a time per step is not a count: its decimals stay
    assert text.iloc[:, 2].tolist()[:2] == ["4.00", "64.0"]


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
@pytest.mark.shared_samples
def test_the_real_calls_per_step_are_whole_numbers() -> None:
    # k_resnet50_nw0: 90 launches of one convolution kernel over 6 profiler steps, read
    # from the raw trace with gzip and json: 15 calls per step, written "15"
    import gzip
    import json

    from shared_samples import sample

    import perfkit as pk
    from perfkit import analysis as A

    path = sample("wild/k_resnet50_nw0")
    (trace,) = path.glob("*.pt.trace.json.gz")
    with gzip.open(trace, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    name = next(e["name"] for e in events if e.get("cat") == "Kernel"
                and e["name"].startswith("void implicit_convolve_sgemm<float, float, 1024,"))
    calls = sum(e.get("cat") == "Kernel" and e["name"] == name for e in events)
    steps = sum(re.fullmatch(r"ProfilerStep#\d+", str(e.get("name", ""))) is not None
                for e in events)
    assert (calls, steps) == (90, 6)
    top = A.top_operators(pk.load(path, progress=False), by="name", n=None)
    tab = table(top, ["name", "calls_per_step"])
    row = top.index[top["name"] == name][0]
    assert tab.text.iloc[top.index.get_loc(row), 1] == f"{calls // steps}"


def test_a_signed_share_never_reads_minus_zero() -> None:
    from perfkit.format import signed_share_text

    # a prediction 0.04 % under the measured step rounds to nothing: no sign at all
    assert signed_share_text(1.0004 / 1.0008 - 1) == "0.0 %"
    assert signed_share_text(-0.0004) == "0.0 %"
    assert signed_share_text(0.0321) == "+3.2 %"
    assert signed_share_text(-0.0321) == "−3.2 %"  # U+2212, as the other figures
    assert signed_share_text(float("nan")) == "–"


def test_a_time_under_a_microsecond_reads_in_ns() -> None:
    from perfkit.format import time_text

    # a median gap of one nanosecond (Kineto's clock resolution)
    assert time_text(0.001) == "1.00 ns"
    assert time_text(0.25) == "250 ns"
    assert time_text(1.0) == "1.00 µs"
    assert time_text(0.001, unit="µs") == "0.00100 µs"  # a column's forced unit stays


def test_a_list_in_a_text_column_is_written_not_taken_for_missing() -> None:
    # the journal's recompute layers: none where the whole model recomputes, one count
    # per pipeline stage where the tuned run recomputes [1, 0] layers
    frame = pd.DataFrame({"label": ["baseline", "tuned", "numpy"],
                          "recompute_layers": [None, [1, 0], np.array([2, 3])]})
    text = table(frame).text
    assert text["recompute layers"].tolist() == ["–", "[1, 0]", "[2, 3]"]


def test_table_keeps_the_rows_after_max_rows_folded_and_says_what_is_beyond() -> None:
    """A truncated table had no way to see its rest: the next rows come in the same table
    (same columns), in a ``tbody`` shown by a label that ticks a checkbox (no script), and
    the rows beyond are still counted."""
    frame = pd.DataFrame({"a": range(30)})
    html = table(frame, max_rows=5, folded_rows=10).html()
    shown, folded = html.split("<tbody class='pk-folded'>", 1)
    assert shown.count("<tr") == 6  # header + the first 5 rows
    folded, after = folded.split("</tbody>", 1)
    assert folded.count("<tr") == 10 and ">5<" in folded and ">14<" in folded
    assert ">15<" not in html
    box = re.search(r"<input type='checkbox' class='pk-unfold' id='([\w-]+)'>", html)
    assert box and f"<label class='pk-more' for='{box[1]}'>" in after
    assert "show 10 more rows" in after and "15 more rows not shown" in after
    everything = table(frame, max_rows=5, folded_rows=100).html()
    assert "show 25 more rows" in everything and "not shown" not in everything
    assert everything.count("<tr") == 1 + 30
    other = re.search(r"id='([\w-]+)'", everything)[1]
    assert other != box[1]  # two tables on one page unfold apart
    assert "pk-unfold" not in table(frame, max_rows=30, folded_rows=100).html()
    with pytest.raises(PerfkitError, match="folded_rows"):
        table(frame, folded_rows=-1)
