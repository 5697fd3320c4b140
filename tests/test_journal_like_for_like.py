"""The journal warns when two runs are not like for like, and History refuses to compare a
run with itself.

The two runs are real profiles of other projects: a torch_npu CNN trained in fp32 on an
Ascend 910B (``ascend/msinsight-pt-level1``: ``FLOAT`` operands in its raw
``kernel_details.csv``) and TraceLens's Qwen1.5-0.5B inference trace on an H100 in bf16
(``wild/tl_qwen_h100``: no autograd operator among its host events, ``c10::BFloat16``
operands). Before, their comparison read "step −77 %" with no word that it compares two
different kinds of job.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from shared_samples import KINETO_TRACES, PT_LEVEL1, sample

from perfkit.journal import Journal
from perfkit.widgets.history import history_panel

pytestmark = pytest.mark.shared_samples


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Journal:
    j = Journal(tmp_path_factory.mktemp("journal") / "j.sqlite")
    j.add(sample(PT_LEVEL1), label="cnn-910b")
    j.add(sample(KINETO_TRACES["tl_qwen_h100"]), label="qwen-h100")
    return j


def test_different_hardware_precision_and_workload_are_said(journal: Journal) -> None:
    with gzip.open(sample(KINETO_TRACES["tl_qwen_h100"]), "rt", encoding="utf-8") as fh:
        ops = [e for e in json.load(fh)["traceEvents"] if e.get("cat") == "cpu_op"]
    assert not any("Backward" in e["name"] or "autograd::" in e["name"] for e in ops)
    types = {t for e in ops for t in e.get("args", {}).get("Input type", [])
             if isinstance(t, str)}
    assert "c10::BFloat16" in types

    cmp = journal.compare("cnn-910b", "qwen-h100")
    said = cmp.mismatches
    assert any(s.startswith("hardware ascend-910b→h100") for s in said), said
    assert any(s.startswith("precision fp32→bf16") for s in said), said
    assert "the new run is an inference step, the base run is not" in said
    sentence = cmp.sentence()
    assert sentence.startswith("⚠ not like for like (hardware ascend-910b→h100")
    assert "step " in sentence  # the figures are still given, after the warning


@pytest.mark.slow  # loads a third profile: about 2 s or more on a busy 2-core machine
def test_a_change_the_warning_names_is_not_said_again(journal: Journal) -> None:
    # a ResNet on a V100 against the CNN on a 910B: few job changes, the hardware among them
    journal.add(sample(KINETO_TRACES["k_resnet50_nw4"]), label="resnet-v100",
                if_exists="return")
    sentence = journal.compare("resnet-v100", "cnn-910b").sentence()
    assert sentence.startswith("⚠ not like for like (hardware v100→ascend-910b")
    assert sentence.count("hardware v100→ascend-910b") == 1, sentence
    assert "data parallel 1→8" in sentence  # the other changes are still said


def test_history_refuses_a_run_compared_with_itself(journal: Journal) -> None:
    panel = history_panel(journal)
    panel.select("qwen-h100", "qwen-h100")
    assert panel.comparison is None
    assert "a run compared with itself shows no change" in panel.config_diff.value
    assert panel.time_chart.value == "" and panel.time_diff.value == ""
    panel.select("cnn-910b", "qwen-h100")
    assert panel.comparison is not None and "not like for like" in panel.config_diff.value


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_like_runs_carry_no_warning(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite")
    j.add(sample(KINETO_TRACES["k_resnet50_nw0"]), label="nw0")
    j.add(sample(KINETO_TRACES["k_resnet50_nw4"]), label="nw4")
    cmp = j.compare("nw0", "nw4")
    assert cmp.mismatches == [] and "not like for like" not in cmp.sentence()
