"""The report's "Read with notes" says the loader's notes in the dashboard's words.

A new user's walk found the report listing notes such as "src_rank/dst_rank left NA
(src_local/dst_local kept)" and "negative dur_us": column names where the dashboard's
Overview, for the same notes, says what they mean.
"""

from __future__ import annotations

from perfkit.report.page import notebook_html

NOTES = [
    "comm_matrix: link ranks are local to their communication group and "
    "profiler_metadata.json has no parallel_group_info for 3 of 10 links; src_rank/dst_rank "
    "left NA (src_local/dst_local kept)",
    "rank 0: kernels: 3 rows with negative dur_us dropped",
]


def test_the_notes_of_reading_are_said_without_column_names() -> None:
    import nbformat

    page = notebook_html(nbformat.v4.new_notebook(), "t", reading_notes=NOTES)
    listed = page[page.index("<ul>"):page.index("</ul>")]  # the notes, not the intro
    assert listed.count("<li>") == 2
    for name in ("src_rank", "dst_rank", "src_local", "dur_us", "comm_matrix", " NA"):
        assert name not in listed, name
    assert "the links&#x27; ranks in the job are unknown" in listed
    assert "their ranks within the group are kept" in listed
    assert "Rank 0, device tasks: 3 rows with negative duration dropped." in listed
