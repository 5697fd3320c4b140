"""The job panel's boxes: one label width per group, so the boxes of a group line up
(``num_attention_heads`` sat further right than its neighbours at 1280 px), and a field
with no value badged "not read", not "profile" (the walk of session 32).

The bundled Kineto trace is a CPU-only run: it names no accelerator, so its hardware is
not read (``perfkit.infer_job``'s own reason, checked here), while its model is."""

from __future__ import annotations

from pathlib import Path

import perfkit as pk
from perfkit.widgets import job_panel
from perfkit.widgets.job import JOB_GROUPS

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_groups_boxes_line_up_and_a_field_not_read_says_so() -> None:
    job = pk.infer_job(pk.load(DATA / "kineto-tiny-llama", progress=False))
    assert job.hardware is None and job.model is not None
    panel = job_panel(job)
    for _title, fields in JOB_GROUPS:
        widths = {panel.controls[n].style.description_width for n in fields}
        assert len(widths) == 1, (fields, widths)
        longest = max(len(n) for n in fields)
        assert int(next(iter(widths)).removesuffix("px")) >= 8 * longest
    assert panel.controls["hardware"].value == ""
    assert ">not read<" in panel.sources["hardware"].value
    assert panel.controls["num_layers"].value == str(job.model.num_layers)
    assert f">{job.source('num_layers')}<" in panel.sources["num_layers"].value
