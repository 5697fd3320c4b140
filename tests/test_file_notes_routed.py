"""A loader's note led by a file's name is said on the tab of the table that file fed.

``ascend/msinsight-pt-gpt3-old``'s rank 1 ``memory_record.csv`` writes its times as
``1.69512E+15`` (six significant digits, a spreadsheet's save): its note, led by the file's
name, explains why rank 1's memory over time cannot be drawn, and belongs on the Memory tab;
rank 0's ``kernel_details.csv`` has a short row, and msprof-analyze's ``compute_advice_v2``
``kernel_details.csv`` ends without a newline: those notes belong on the Operators tab. The
files are read here with ``csv`` and plain text, not through perfkit.
"""

from __future__ import annotations

import csv
import re
from decimal import Decimal
from pathlib import Path

import pytest
from shared_samples import PT_GPT3_OLD, shared_sample
from widget_html import panel_words

import perfkit as pk
from perfkit.widgets import tab_panel
from perfkit.widgets.load_notes import notes_about
from perfkit.widgets.tabs.communication import COMMUNICATION_TABLES
from perfkit.widgets.tabs.memory import MEMORY_TABLES
from perfkit.widgets.tabs.operators import OPERATOR_TABLES

pytestmark = pytest.mark.shared_samples

#: msprof-analyze's unit-test kernel_details.csv, whose last row has no newline.
COMPUTE_ADVICE_V2 = "ascend/msprof-analyze-tests/compute_advice_v2"


def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def test_rank_1s_coarse_memory_times_are_said_on_the_memory_tab(grammar) -> None:
    out = shared_sample(PT_GPT3_OLD) / "test_rank_1" / "ASCEND_PROFILER_OUTPUT"
    header, *rows = _rows(out / "memory_record.csv")
    col = [c.strip() for c in header].index("Timestamp(us)")
    times = [r[col].strip() for r in rows if r[col].strip()]
    sci = [t for t in times if re.fullmatch(r"\d\.\d+[eE][+]?\d+", t)]
    assert sci and len(sci) == len(times)  # every time of the file, as 1.69512E+15
    mantissa, exp = sci[0].upper().split("E")
    digits = len(mantissa.replace(".", ""))
    step_h = 10 ** (int(exp) - len(mantissa.split(".")[1])) / 3.6e9  # µs -> hours
    said = (f"Rank 1, memory over time: memory_record.csv Timestamp(us): {len(sci)} of "
            f"{len(times)} values are written in scientific notation with {digits} "
            f"significant digits ({sci[0]}), which rounds each time to the nearest "
            f"{step_h:.2f} h")
    assert Decimal(sci[0]) > Decimal("1e15") and 2 < step_h < 3
    memory = panel_words(tab_panel("Memory", str(out.parents[1])))
    assert said in memory, memory[-3000:]
    sentence = memory[memory.index(said):].split("). ")[0]
    assert not grammar(sentence)
    operators = panel_words(tab_panel("Operators", str(out.parents[1])))
    assert "memory_record.csv" not in operators


def test_a_short_row_of_kernel_details_is_said_on_the_operators_tab() -> None:
    root = shared_sample(PT_GPT3_OLD)
    header, *rows = _rows(root / "test_rank_0" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    short = [r for r in rows if len(r) < len(header)]
    assert short
    row = "row has" if len(short) == 1 else "rows have"
    said = (f"Rank 0, device tasks: kernel_details.csv: {len(short)} {row} fewer fields than "
            "the header: the missing cells are read as NA.")
    operators = panel_words(tab_panel("Operators", str(root)))
    assert said in operators, operators[-3000:]
    assert "kernel_details.csv: " not in panel_words(tab_panel("Memory", str(root)))


def test_a_kernel_details_without_its_last_newline_is_said_on_the_operators_tab() -> None:
    folder = shared_sample(COMPUTE_ADVICE_V2)
    raw = (folder / "kernel_details.csv").read_bytes()
    assert not raw.endswith(b"\n")
    lines = raw.decode("utf-8").splitlines()
    header, last = (next(csv.reader([line])) for line in (lines[0], lines[-1]))
    assert len(last) == len(header)  # a whole row: kept, only its last cell is doubtful
    said = (f"Device tasks: kernel_details.csv line {len(lines)}: the file ends without a "
            f"newline after its last row; the row is kept, as all its {len(header)} fields "
            f"are there, but its last cell ({header[-1]}) may be cut short and is read as "
            f"missing ('{lines[-1][:20]}")
    operators = panel_words(tab_panel("Operators", str(folder)))
    assert said in operators, operators[-3000:]


def test_each_table_keeps_the_files_it_was_read_from() -> None:
    """The link the notes are routed by: gpt3-old's tables name the files of its ranks, and a
    note led by one of them goes to the tab of that file's table, whichever the file."""
    root = shared_sample(PT_GPT3_OLD)
    cluster = pk.load(str(root))
    files = cluster.meta.extra["table_files"]
    on_disk = {p.relative_to(d).as_posix() for d in root.glob("test_rank_*")
               for p in (d / "ASCEND_PROFILER_OUTPUT").glob("*")}
    for table in ("kernels", "comm_ops", "comm_matrix", "memory"):
        assert files[table] and set(files[table]) <= on_disk, (table, files)
    tabs = {"Memory": MEMORY_TABLES, "Operators": OPERATOR_TABLES,
            "Communication": COMMUNICATION_TABLES}
    for table, name in (("kernels", "Operators"), ("comm_ops", "Communication"),
                        ("comm_matrix", "Communication"), ("memory", "Memory")):
        file = Path(files[table][0]).name
        cluster.meta.notes.append(f"rank 1: {file}: a fact about {file}")
        for tab, tables in tabs.items():
            said = [n for n in notes_about(cluster, tables) if f"a fact about {file}" in n]
            if tab != name:
                assert not said, (tab, file, said)
                continue
            # the file may feed more tables of the tab (communication.json: collectives and
            # bandwidth): their words lead the sentence
            assert len(said) == 1 and said[0].startswith("Rank 1, "), (tab, file, said)
            head, body = said[0].split(": ", 1)
            assert tables[table] in head and body == f"{file}: a fact about {file}."
        cluster.meta.notes.pop()
