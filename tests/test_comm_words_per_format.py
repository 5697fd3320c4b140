"""The Communication tab and the job's vpp speak of the files the profile's format has.

A PyTorch Kineto trace keeps its collectives in its NCCL (RCCL on AMD) kernels and never
has an Ascend ``communication.json``, so its Communication tab must not send the user
looking for one; an Ascend export may, and legacy MindSpore and raw CANN output name their
own files. What each trace records is read here from the raw files (gzip / json, csv), not
from perfkit.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from shared_samples import HTA, sample, shared_param, shared_sample
from widget_html import panel_words

import perfkit as pk
from perfkit.job.layout import read_vpp
from perfkit.profile import Profile, ProfileMeta
from perfkit.widgets import tab_panel
from perfkit.widgets.tabs.communication import empty_communication_note


def _sentence(text: str, start: str) -> str:
    """The sentence of ``text`` that begins with ``start`` (up to its closing ``).``)."""
    assert start in text, text[:2000]
    rest = text[text.index(start):]
    return rest[:rest.index(").") + 2] if ")." in rest else rest


def _raw_kernels(folder: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The device kernels of every trace file in ``folder`` and the GPUs' names, read
    straight from the JSON."""
    kernels: list[dict[str, Any]] = []
    gpus: list[str] = []
    for path in sorted(folder.glob("*.json*")):
        raw = path.read_bytes()
        trace = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
        kernels += [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
        gpus += [str(d.get("name")) for d in trace.get("deviceProperties") or []]
    return kernels, gpus


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize("name", [
    shared_param("wild/ds_train"), shared_param("wild/tl_b200_eager"), shared_param(HTA),
    shared_param("wild/tl_qwen_h100"), shared_param("wild/k_resnet50_nw0")])
def test_a_kineto_trace_is_never_sent_to_communication_json(name: str, grammar) -> None:
    folder = sample(name)
    kernels, _ = _raw_kernels(folder)
    grouped = [k for k in kernels if "Process Group Name" in (k.get("args") or {})]
    text = panel_words(tab_panel("Communication", str(folder)))
    assert "communication.json" not in text
    assert not grammar(text)
    if "No communication" in text:  # no collective at all: no NCCL kernel in the trace
        assert not [k for k in kernels if "nccl" in k["name"].lower()]
        return
    said = _sentence(text, "Not recorded in this profile:")
    # a Kineto trace never splits a collective's time; its group is an argument of the
    # NCCL kernels, said missing exactly when no kernel of the raw trace carries it
    assert "does not split a collective's time into transit, wait and idle" in said
    assert ("the collectives' group," in said) == (not grouped)
    assert ("“Process Group Name”" in said) == (not grouped)


@pytest.mark.shared_samples
def test_a_lone_kernel_details_is_pointed_at_its_communication_json() -> None:
    """msprof-analyze's lone kernel_details.csv: HCCL tasks and no communication.json
    beside them, which is what would give their groups and split."""
    folder = shared_sample("wild/msa_kernel_details")
    with (folder / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        assert [r for r in csv.DictReader(fh) if r["Accelerator Core"] == "HCCL"]
    assert not (folder / "communication.json").exists()
    said = _sentence(panel_words(tab_panel("Communication", str(folder))),
                     "Not recorded in this profile:")
    assert "export's communication.json, written from profiler level Level1 on, gives each " \
           "collective's group and its transit / wait / idle split" in said


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
@pytest.mark.shared_samples
def test_legacy_mindspore_and_raw_cann_name_their_own_files() -> None:
    legacy = shared_sample("wild/mi_run1")
    assert not list(legacy.rglob("hccl_raw_*.csv"))  # the wait is not there either
    said = _sentence(panel_words(tab_panel("Communication", str(legacy))),
                     "Not recorded in this profile:")
    assert "wait share" in said and "legacy MindSpore output records neither" in said
    # the example is the profile's own rank's file: its files end in _1 (rank 1)
    assert (legacy / "profiler" / "timeline_display_1.json").exists()
    assert "hccl_raw file (hccl_raw_1.csv for rank 1)" in said
    raw = shared_sample("wild/mi_prof")
    assert [p.name for p in raw.iterdir()] and all(p.name.startswith("PROF_")
                                                   for p in raw.iterdir())
    said = _sentence(panel_words(tab_panel("Communication", str(raw))),
                     "Not recorded in this profile:")
    assert "raw CANN output gives each collective's start and duration only" in said


@pytest.mark.parametrize(("name", "library"), [
    shared_param("wild/tl_qwen_h100", "NCCL"), shared_param("wild/tl_ddp_resnet18_mi300",
                                                            "RCCL")])
def test_an_empty_tab_of_a_gpu_run_names_its_collective_kernels(name: str, library: str,
                                                                grammar) -> None:
    """A trace with no collective kernel, read as one rank of a two-rank run: what would
    fill the tab is a trace with the collective kernels of its GPUs' library (the GPU
    vendor read from the raw trace's deviceProperties)."""
    folder = sample(name)
    kernels, gpus = _raw_kernels(folder)
    assert not [k for k in kernels if re.search("[nr]ccl", k["name"].lower())]
    assert gpus and all(g.startswith("AMD" if library == "RCCL" else "NVIDIA") for g in gpus)
    profile = pk.load(folder, progress=False)
    profile.meta.world_size = 2  # the trace does not record it: one rank of a DDP pair
    said = empty_communication_note(profile)
    assert said.startswith("No communication: no collective was recorded in the 1 loaded "
                           "rank of this 2-rank run")
    assert (f"a trace of every rank recorded with ProfilerActivity.CUDA (the {library} "
            "kernels in it are the run's collectives) would fill this tab") in said
    assert "communication.json" not in said and not grammar(said)


@pytest.mark.parametrize(("fmt", "framework", "named", "unnamed"), [
    ("ascend_text", "pytorch", "communication.json and communication_matrix.json that a "
                               "torch_npu export writes", "Kineto"),
    ("ascend_db", "mindspore", "MindSpore DB export writes in analysis.db (CommAnalyzerTime",
     "communication.json"),
    ("mindspore_legacy", "mindspore", "hccl_raw file", "communication.json"),
    ("cluster_analysis_output", None, "cluster_communication.json that msprof-analyze",
     " communication.json"),
])
def test_an_empty_tab_of_an_ascend_run_names_its_formats_files(
        fmt: str, framework: str | None, named: str, unnamed: str) -> None:
    said = empty_communication_note(Profile(ProfileMeta(fmt, framework=framework,
                                                        world_size=8), {}))
    assert named in said and unnamed not in said


@pytest.mark.parametrize(("fmt", "named"), [("kineto", "the trace's communication kernels"),
                                            ("ascend_text", "communication.json"),
                                            ("cluster_analysis_output",
                                             "cluster_communication.json")])
def test_vpp_is_read_from_the_formats_own_collectives(fmt: str, named: str) -> None:
    """Two stages, m = 4 micro-batches and 12 sends a step on the first stage: 12 =
    m·(2·vpp − 1) gives vpp = 2, read from where the format keeps its sends."""
    m, vpp = 4, 2
    sends = m * (2 * vpp - 1)
    ops = pd.DataFrame({"rank": [0] * sends + [1] * sends, "step": 1,
                        "name": ["send"] * (2 * sends)})
    profile = Profile(ProfileMeta(fmt, world_size=2), {"comm_ops": ops})
    put: dict[str, tuple[Any, str]] = {}
    read_vpp(profile, lambda f, v, why, *_: put.__setitem__(f, (v, why)), 2, m, {0: 0, 1: 1})
    value, why = put["vpp"]
    assert value == vpp
    assert why == (f"{named}: {sends} pipeline sends per step on the first stage = "
                   f"m·(2·vpp − 1) with m = {m}")
