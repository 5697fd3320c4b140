"""Notebook 02 as a new user's walk read it: its bubble what-ifs as tables, not dicts; its
section 4 says which job it plans; its assumptions panel has a static form for reports.
"""

from __future__ import annotations

import re

import pytest

import perfkit as pk
from perfkit.tables import table
from perfkit.widgets.bubble_table import bubble_table
from perfkit.widgets.planner_words import planned_job_sentence


def test_the_bubble_table_is_pp_minus_one_over_vpp_m() -> None:
    frame = bubble_table(4, 32, vpp=(1, 2, 4))
    assert list(frame["vpp"]) == [1, 2, 4]
    assert list(frame["bubble_share"]) == pytest.approx([3 / 32, 3 / 64, 3 / 128])
    # written in %, not a Python dict of strings
    text = repr(table(bubble_table(2, (8, 32, 128))))
    assert "12.5" in text and "{" not in text


def test_the_planned_job_is_named_and_told_apart_from_the_profiled_one() -> None:
    model = pk.ModelSpec.preset("llama2-13b")
    job = pk.infer_job(pk.load("sample:llama2-13b-baseline-dp16", progress=False))
    said = planned_job_sentence(model, 16, 1024, job)
    assert said.startswith(f"Planned: llama2-13b ({model.num_layers} layers, hidden "
                           f"{model.hidden_size}, sequence {model.seq_length:,}) on 16 "
                           "devices, 1,024 sequences per step: not the profiled job "
                           f"({job.model.num_layers} layers, "
                           f"{job.global_batch_size} sequences per step")
    profiled = planned_job_sentence(job.model, job.parallel.world_size,
                                    job.global_batch_size, job)
    assert profiled.endswith("the profiled job's model, devices and batch.")


def test_the_assumptions_panel_has_a_static_form_with_its_table() -> None:
    from perfkit.widgets.planner_assumed import assumed_panel
    from perfkit.widgets.prediction import fit_job

    profile = pk.load("sample:llama2-13b-baseline-dp16", progress=False)
    job = pk.infer_job(profile)
    panel = assumed_panel(job, fit_job(profile, job).calibration)
    bundle = panel._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle  # live: the widget
    static = bundle["text/html"]
    assert "What the model assumes" in static and "Predicted step of the profiled layout" in static
    # every assumption's row, its source whole (the table wraps it rather than cut it)
    names = set(panel.assumed.table["name"])
    assert all(f">{n}<" in static for n in names)
    assert not re.search(r"tra…ng server", static)
