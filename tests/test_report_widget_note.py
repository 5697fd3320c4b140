"""A static report says where the notebook shows a live control, instead of nothing.

The guided notebooks' prose asks the reader to slide a step time or click a rank; in
``perfkit report``'s static page the widget cannot run, and was left out without a word.
Outputs are written here as Jupyter stores them (nbformat 4: a widget's view and its
plain-text form).
"""

from __future__ import annotations

from perfkit.report.page import _output_html

WIDGET = "application/vnd.jupyter.widget-view+json"


def _widget(plain: str) -> dict:
    return {"output_type": "display_data",
            "data": {"text/plain": plain, WIDGET: {"model_id": "abc", "version_major": 2,
                                                     "version_minor": 0}},
            "metadata": {}}


def test_a_control_is_named_and_where_to_use_it_said() -> None:
    out = _output_html(_widget("StepTimeExplorer(children=(FloatSlider(value=1.2, ...),))"))
    assert "interactive control (StepTimeExplorer)" in out
    assert "perfkit serve PROFILE" in out and "perfkit notebooks DEST" in out


def test_a_progress_bar_and_plain_outputs_are_as_before() -> None:
    assert _output_html(_widget("FloatProgress(value=1.0, max=1.0)")) == ""
    text = {"output_type": "execute_result", "data": {"text/plain": "'139.6 %'"},
            "metadata": {}, "execution_count": 1}
    assert "139.6 %" in _output_html(text) and "interactive control" not in _output_html(text)
