"""Notebook 05 holds the fullest rank against the theory, its rows in words.

A new user's walk found section 3 of notebook 05 listing the nine items of
``memory_vs_theory`` once per rank (144 rows on the 16-rank sample) under snake_case
names. :func:`perfkit.widgets.memory_view.theory_at_fullest_rank` keeps the rank with the
largest measured peak, as the Memory tab does, and says which in the table's caption.
"""

from __future__ import annotations

import pandas as pd

from perfkit.widgets.memory_view import THEORY_ITEMS, theory_at_fullest_rank

GIB = 2.0**30


def _frame(measured: dict[int, float]) -> pd.DataFrame:
    rows = []
    for rank, peak in measured.items():
        for item in THEORY_ITEMS:
            value = peak if item == "measured_allocated" else 1.0 * GIB
            rows.append({"rank": rank, "item": item, "bytes": value, "gib": value / GIB,
                         "share": value / peak, "explanation": f"why {item}"})
    out = pd.DataFrame(rows)
    out.attrs["warnings"] = ["the theory is far from the peak"]
    return out


def test_the_rank_with_the_largest_measured_peak_is_kept_with_its_items_in_words() -> None:
    frame = _frame({0: 2.0 * GIB, 1: 3.5 * GIB, 2: 2.5 * GIB})
    out = theory_at_fullest_rank(frame)
    assert list(out["rank"]) == [1] * 9
    assert list(out["item"]) == list(THEORY_ITEMS.values())
    assert all("_" not in item for item in out["item"])
    assert out.loc[out["item"] == "measured: peak allocated", "gib"].item() == 3.5
    assert out.attrs["caption"] == ("Rank 1, the fullest of 3 ranks (their measured peaks "
                                    "2.00 GiB to 3.50 GiB)")
    assert out.attrs["warnings"] == ["the theory is far from the peak"]
    assert list(frame["item"].unique()) == list(THEORY_ITEMS)  # the input is left as it was


def test_one_rank_is_named_without_a_range_and_an_empty_frame_is_returned_as_it_is() -> None:
    out = theory_at_fullest_rank(_frame({7: 1.5 * GIB}))
    assert out.attrs["caption"] == "Rank 7" and len(out) == 9
    empty = pd.DataFrame(columns=["rank", "item", "bytes"])
    assert theory_at_fullest_rank(empty) is empty


def test_folded_tables_keep_the_reason_they_are_empty() -> None:
    """Folding a per-rank frame over the ranks kept its rows but dropped its notes, so the
    page said "nothing in this profile" where the analysis had said why."""
    from perfkit.tables import over_ranks, table
    from perfkit.widgets.memory_view import peaks_by_component

    allocations = pd.DataFrame({"rank": pd.Series([], dtype="Int64"),
                                "name": pd.Series([], dtype=object),
                                "total_bytes": pd.Series([], dtype="float64")})
    allocations.attrs["notes"] = ["no per-allocation records (op_memory)"]
    folded = over_ranks(allocations, ["name"], ["total_bytes"])
    assert folded.empty and "no per-allocation records (op_memory)" in table(folded).html()
    peaks = pd.DataFrame(columns=["rank", "component", "peak_allocated_bytes"])
    peaks.attrs["notes"] = ["no memory samples"]
    assert "no memory samples" in table(peaks_by_component(peaks)).html()
    warned = pd.DataFrame({"rank": [0, 1], "name": ["a", "a"], "total_bytes": [1.0, 2.0]})
    warned.attrs["warnings"] = ["cannot be right"]
    assert over_ranks(warned, ["name"], ["total_bytes"]).attrs["warnings"] == ["cannot be right"]
