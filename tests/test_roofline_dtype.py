"""The roofline uses the peak of each operator's own dtype, or says it has none; its axes
read without long decimals; the Operators tab shows the "problem" its note points at.

``ascend/msinsight-pt-level1`` runs its convolutions and matmuls in fp32 (``FLOAT``
operands in the raw ``kernel_details.csv``) on a 910B, for which Huawei publishes no fp32
peak (the ``ascend-910b`` preset lists bf16, fp16 and int8 only). Before, those operators
were measured against the fp16 peak.
"""

from __future__ import annotations

import csv
import re

import pandas as pd
import pytest
from shared_samples import PT_LEVEL1, sample
from widget_html import panel_html

import perfkit as pk
from perfkit.analysis import operator_efficiency
from perfkit.charts import roofline_chart
from perfkit.widgets import dashboard

MATRIX_TYPES = re.compile(r"^(Conv2D\w*|MatMulV\d)$")


@pytest.mark.shared_samples
def test_fp32_matrix_operators_on_a_910b_have_no_roofline() -> None:
    with (sample(PT_LEVEL1) / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
          ).open(newline="", encoding="utf-8") as fh:
        types = {r["Type"] for r in csv.DictReader(fh)
                 if MATRIX_TYPES.match(r["Type"]) and "FLOAT" in r["Input Data Types"]}
    assert {"Conv2D", "MatMulV2"} <= types
    assert "fp32" not in pk.Hardware.preset("ascend-910b").peak_flops

    eff = operator_efficiency(pk.load(sample(PT_LEVEL1), progress=False))
    rows = eff[eff["key"].isin(types)]
    assert len(rows) >= len(types)
    assert rows["peak_tflops"].isna().all() and rows["efficiency"].isna().all()
    assert rows["peak_dtype"].isna().all()  # not "fp16"
    assert any("no roofline" in n and "fp32" in n for n in eff.attrs["notes"])


def test_roofline_axes_label_small_rates_with_a_prefix_not_decimals() -> None:
    frame = pd.DataFrame({"key": ["a", "b"], "kind": ["gemm", "elementwise"],
                          "intensity": [100.0, 0.0005], "achieved_tflops": [300.0, 1e-7],
                          "total_us": [10.0, 1.0]})
    spec = roofline_chart(frame).to_dict()
    y = spec["encoding"]["y"]["axis"]
    x = spec["encoding"]["x"]["axis"]
    assert "format" not in y and "' G'" in y["labelExpr"] and "' k'" in y["labelExpr"]
    assert "'1/'" in x["labelExpr"]
    # the same tick rules, in Python, on the ticks a log axis draws for these points
    for value, label in ((100.0, "100 T"), (0.01, "10 G"), (1e-7, "100 k")):
        for limit, scale, prefix in ((1, 1, "T"), (1e-3, 1e3, "G"), (1e-6, 1e6, "M"),
                                     (0, 1e9, "k")):
            if value >= limit:
                assert f"{round(value * scale):,} {prefix}" == label
                break


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_the_operators_tab_shows_the_problem_its_note_names() -> None:
    board = dashboard(str(sample(PT_LEVEL1)), background_bytes=None)
    board.select("Operators")
    html = panel_html(board.panels["Operators"])
    assert "Operators measured above their roofline, and why" in html
    assert "the column problem says why" not in html
    assert "the table below says why" in html


def test_a_rate_above_the_roofline_is_written_as_the_page_writes_numbers() -> None:
    """The problem states the measured rate in its roofline's unit, with thousands
    separators (not "1439 GB/s" beside "909.6 GB/s"); the V100's 900 GB/s is its
    datasheet's HBM2 bandwidth."""
    from perfkit import Hardware
    from perfkit.analysis.efficiency.table import _above_roofline

    rows = pd.DataFrame({"efficiency": [1.6, 0.5, 1.2], "flops": [0.0, 0.0, 1e12],
                         "bound": ["memory", "memory", "compute"],
                         "achieved_gbps": [1439.4, 450.0, 10.0],
                         "achieved_tflops": [0.0, 0.0, 18.84], "peak_dtype": ["", "", "fp32"],
                         "peak_tflops": [None, None, 15.7]})
    said = _above_roofline(rows, Hardware.preset("v100"))
    assert said.iloc[0].startswith("1,439 GB/s measured, above the memory bandwidth of v100 "
                                   "(900 GB/s): ")
    assert pd.isna(said.iloc[1])  # under its roofline: no problem
    assert said.iloc[2].startswith("18.8 TFLOP/s measured, above the fp32 peak of v100 "
                                   "(15.7 TFLOP/s): ")
