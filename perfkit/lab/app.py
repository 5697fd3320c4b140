"""The student's lab, as widgets: the brief, the evidence, the questions with a Check button.

``lab.ipynb`` in a student's folder is only wiring::

    sheet = Sheet(STUDENT_DIR)
    sheet.show("job_steps")       # a view of their data (perfkit.lab.evidence)
    sheet.ask("throughput")       # a question: input, Check, feedback

The Check button calls :func:`perfkit.lab.answer` (``source="notebook"``): the answer is
checked against the student's check data and recorded in their ``answers.sqlite``; a
wrong answer gets the question's hint, a right one its explanation. The same notebook runs
as a Voila app (``perfkit serve --lab DIR/student-3``), where the student sees the views
and the questions but no code. Every view shows an error as a message and the page keeps
working.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as W

from .. import charts as C
from ..format import counted, share_text, sig
from ..widgets.headline import split_parts, with_exposed_comm
from ..widgets.markup import STYLE, describe_error, frame_html, note
from .answers import AnswerBook, answer
from .evidence import PLANNER_WORDS, STEP_COLUMNS, VIEWS, Evidence
from .key import LAB_ENV, LabError, read_sheet

__all__ = ["Sheet", "QuestionBox", "LAB_ENV", "step_chart"]

_OK = "<span style='color:#1a7f37;font-weight:600'>&#10004; Right.</span> "
_NO = "<span style='color:#cf222e;font-weight:600'>&#10008; Not yet.</span> "
_CSS = ("<style>.pk-lab-q{border-left:4px solid #2e86c1;padding:4px 12px;margin:6px 0;"
        "background:#f7fbfe}.pk-lab-q p{margin:4px 0}.pk-lab-brief td,.pk-lab-brief th"
        "{padding:2px 10px;text-align:left;font-size:13px;vertical-align:top}"
        ".pk-lab-brief h4{margin:10px 0 2px 0}</style>")


class QuestionBox(W.VBox):
    """One question: its prompt, an answer widget, a Check button and the feedback.

    Attributes
    ----------
    question : dict
        The question as ``lab.json`` holds it (id, title, kind, prompt, options, unit).
    input : ipywidgets.Widget
        A text box (numbers), radio buttons or a dropdown (one choice), checkboxes
        (several choices).
    button : ipywidgets.Button
        "Check".
    feedback : ipywidgets.HTML
    verdict : perfkit.lab.Verdict or None
        The last check.
    """

    def __init__(self, folder: Path, question: dict[str, Any], number: int,
                 previous: list[Any] | None = None) -> None:
        self.folder = folder
        self.question = question
        self.verdict: Any = None
        kind = question["kind"]
        options = question.get("options") or []
        width = W.Layout(width="auto")
        if kind == "number":
            unit = question.get("unit") or ""
            self.input = W.Text(placeholder=f"a number{', in ' + unit if unit else ''}",
                                layout=W.Layout(width="260px"))
        elif kind == "choice" and len(options) <= 6:
            self.input = W.RadioButtons(options=options, value=None, layout=width)
        elif kind == "choice":
            self.input = W.Dropdown(options=options, value=None, layout=W.Layout(width="60%"))
        else:
            self._boxes = [W.Checkbox(value=False, description=o, indent=False, layout=width)
                           for o in options]
            self.input = W.VBox(self._boxes)
        self.button = W.Button(description="Check", button_style="primary",
                               tooltip="check and record your answer")
        self.button.on_click(lambda _b: self.check())
        self.feedback = W.HTML("")
        unit = f" <i>({html.escape(question['unit'])})</i>" if question.get("unit") else ""
        head = W.HTML(f"{_CSS}<div class='pk-lab-q'><p><b>Q{number}. "
                      f"{html.escape(question['title'])}</b>{unit}</p>"
                      f"<p>{html.escape(question['prompt'])}</p></div>")
        if previous:
            self.feedback.value = note(f"{counted(len(previous), 'answer')} recorded; the last: "
                                       f"{_shown(previous[-1])}")
        super().__init__([head, self.input, W.HBox([self.button]), self.feedback])

    @property
    def value(self) -> Any:
        """The answer in the widget: text (numbers), a choice, or a list of choices."""
        if self.question["kind"] == "choices":
            return [b.description for b in self._boxes if b.value]
        return self.input.value

    @value.setter
    def value(self, value: Any) -> None:
        if self.question["kind"] == "choices":
            chosen = {str(v) for v in ([value] if isinstance(value, str) else value)}
            for b in self._boxes:
                b.value = b.description in chosen
        elif self.question["kind"] == "number":
            self.input.value = "" if value is None else str(value)
        else:
            self.input.value = value

    def check(self) -> Any:
        """Check and record the answer in the widget; show the hint or the explanation."""
        value = self.value
        if value is None or value == "" or value == []:
            self.feedback.value = note("Give an answer first.")
            return None
        try:
            self.verdict = answer(self.folder, self.question["id"], value, source="notebook")
        except LabError as exc:
            self.feedback.value = f"{STYLE}<div class='pk-error'>{html.escape(str(exc))}</div>"
            return None
        v = self.verdict
        if not v.counted:  # not a number, or not an option: refused, no attempt spent
            self.feedback.value = note(v.message)
            return v
        self.feedback.value = ((_OK if v.correct else _NO) + html.escape(v.message)
                               + f" <span class='pk-note'>(attempt {v.attempt})</span>")
        return v


def _in_ms(frame: Any, caption: str) -> str:
    """A table whose caption says "(ms)": every time column in ms, as it says (not each
    column in the unit that fits its own values: s, ms and µs under one "(ms)")."""
    return frame_html(frame, caption=caption,
                      units={c: "ms" for c in frame.columns if str(c).endswith("_ms")})


def step_chart(breakdown: Any, title: str) -> Any:
    """The step per rank, split as the dashboard's Overview splits it.

    Parameters
    ----------
    breakdown : pandas.DataFrame
        :func:`perfkit.analysis.step_breakdown` of a profile.
    title : str
        The chart's title.

    Returns
    -------
    altair.LayerChart
        :func:`perfkit.charts.step_breakdown_chart` of the parts of the Overview's split
        (:data:`perfkit.widgets.headline.SPLIT_PARTS`): computing, exposed communication
        (not overlapped less the bubble), the pipeline bubble, free and the wait before
        the first device task (Preparing); the bubble and the wait only where some rank
        has them. Each bar is the step time of the Overview and the step table's
        ``step_ms``.
    """
    frame = with_exposed_comm(breakdown)
    return C.step_breakdown_chart(frame, parts=split_parts(frame), title=title)


def _shown(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


class Sheet:
    """A student's lab: :meth:`show` a view of their data, :meth:`ask` a question.

    Parameters
    ----------
    student_dir : path
        The student's folder (``"."`` in their notebook; ``perfkit serve --lab`` passes
        it in :data:`LAB_ENV`).

    Raises
    ------
    LabError
        The folder is not a student folder of a lab pack.
    """

    def __init__(self, student_dir: str | os.PathLike[str] = ".") -> None:
        self.folder = Path(student_dir).expanduser().resolve()
        self.sheet = read_sheet(self.folder)
        self.brief = self.sheet["brief"]
        self.questions = {q["id"]: q for q in self.sheet["questions"]}
        self.evidence = Evidence(self.folder, self.sheet)
        self.boxes: dict[str, QuestionBox] = {}
        #: Served as the student's app (``perfkit serve --lab`` sets :data:`LAB_ENV`): no
        #: Python is shown, as the notebook's code cells are not.
        self.app = bool(os.environ.get(LAB_ENV))

    # ---- questions ---------------------------------------------------------------------
    def ask(self, question_id: str) -> QuestionBox:
        """The widget of one question (the same one when asked again)."""
        if question_id not in self.questions:
            raise LabError(f"{self.folder}: no question {question_id!r}; the questions are "
                           f"{', '.join(self.questions)}")
        if question_id not in self.boxes:
            number = list(self.questions).index(question_id) + 1
            book = AnswerBook(self.folder, readonly=True).attempts()
            previous = book.loc[book["question"] == question_id, "value"].tolist()
            self.boxes[question_id] = QuestionBox(self.folder, self.questions[question_id],
                                                  number, previous)
        return self.boxes[question_id]

    def progress(self) -> W.VBox:
        """A table of the questions with the latest verdict of each, and a Refresh button."""
        out = W.HTML()

        def refresh(_b: Any = None) -> None:
            book = AnswerBook(self.folder, readonly=True).attempts()
            rows = []
            for i, (qid, q) in enumerate(self.questions.items(), start=1):
                mine = book[book["question"] == qid]
                status = "not answered" if mine.empty else \
                    "right" if mine["correct"].iloc[-1] else "not yet"
                rows.append(f"<tr><td>Q{i}</td><td>{html.escape(q['title'])}</td>"
                            f"<td>{status}</td><td>{len(mine)}</td></tr>")
            right = sum("<td>right</td>" in r for r in rows)
            out.value = (f"{_CSS}<table class='pk-lab-brief'><tr><th></th><th>question</th>"
                         "<th>latest check</th><th>attempts</th></tr>" + "".join(rows)
                         + f"</table><p><b>{right} of {len(rows)}</b> right so far.</p>")

        button = W.Button(description="Refresh", tooltip="read your answers again")
        button.on_click(refresh)
        refresh()
        return W.VBox([out, button])

    # ---- views -------------------------------------------------------------------------
    def show(self, view: str) -> W.Widget:
        """A view of the student's data (:data:`perfkit.lab.evidence.VIEWS`)."""
        if view not in VIEWS:
            raise LabError(f"no view {view!r}; the views are {', '.join(VIEWS)}")
        if view == "calculator":
            return self._guarded(view, self._calculator)
        if view == "planner":
            return self._guarded(view, self._planner)
        return self._guarded(view, lambda: W.HTML(getattr(self, f"_{view}")()))

    def _guarded(self, view: str, build: Callable[[], W.Widget]) -> W.Widget:
        try:
            return build()
        except Exception as exc:  # the page keeps working; the message says what failed
            return W.HTML(f"{STYLE}<div class='pk-error'>"
                          f"{html.escape(describe_error(exc, 'showing ' + VIEWS[view]))}"
                          "</div>")

    def _title(self, view: str) -> str:
        return f"{STYLE}{_CSS}<h3>{html.escape(VIEWS[view])}</h3>"

    def _brief(self) -> str:
        b = self.brief
        hw, job, m = b["hardware"], b["job"], b["job"]["model"]
        lay, plan, pipe, rc = b["layout"], b["planner"], b["pipeline"], b["recompute"]
        cm = b["cluster"]["model"]

        def rows(items: list[tuple[str, str]]) -> str:
            return "<table class='pk-lab-brief'>" + "".join(
                f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                for k, v in items) + "</table>"

        patterns = ", ".join(rc["config"]["select_recompute"])
        return self._title("brief") + "".join([
            "<h4>Your device</h4>", rows([
                ("device", hw["name"]),
                ("peak", f"{sig(hw['peak_tflops'], 4)} TFLOP/s (fp16 and bf16)"),
                ("memory", f"{sig(hw['memory_gib'], 4)} GiB, {sig(hw['usable_memory_gib'], 4)} GiB "
                           "usable (10 % kept free)"),
                ("memory bandwidth", f"{sig(hw['memory_bandwidth_tbps'], 4)} TB/s"),
                ("ridge point", f"{sig(hw['ridge_flop_per_byte'], 4)} FLOP/byte")]),
            f"<h4>Your job ({html.escape(job['path'])})</h4>", rows([
                ("model", f"{m['name']}: {m['layers']} layers of {job['cut_from']} "
                          f"(hidden {m['hidden_size']}, {m['attention_heads']} heads, "
                          f"{m['kv_heads']} key/value heads, FFN {m['ffn_hidden_size']}, "
                          f"vocabulary {m['vocab_size']})"),
                ("parameters", f"{sig(m['parameters'] / 1e9, 4)} billion"),
                ("model FLOPs per token", f"{sig(m['flops_per_token'] / 1e9, 4)} GFLOP "
                                          "(forward + backward, every matrix product, "
                                          "attention scores non-causal, no recompute)"),
                ("layout", f"dp {job['dp']} × tp {job['tp']} × pp {job['pp']} = "
                           f"{job['devices']} devices; optimizer shard "
                           f"{job['optimizer_shard']}; recompute configured: "
                           f"{job['recompute']}"),
                ("batch", f"{job['num_micro_batches']} micro-batches of "
                          f"{counted(job['micro_batch_size'], 'sequence')} × "
                          f"{m['seq_length']} tokens "
                          f"per data-parallel rank: global batch "
                          f"{job['global_batch_size']} sequences"),
                ("matrix efficiency", "the matrix kernels reach "
                                      f"{share_text(job['efficiency'], 0)} of peak "
                                      "(measured by your team)")]),
            "<h4>The cluster (profiles/cluster)</h4>", rows([
                ("run", f"{b['cluster']['devices']} devices, data parallel "
                        f"{b['cluster']['dp']}, {cm['name']}")]),
            "<h4>A pipeline to price</h4>", rows([
                ("pipeline", f"{pipe['pp']} stages, {pipe['num_micro_batches']} "
                             f"micro-batches, {counted(pipe['vpp'], 'virtual stage')} "
                             "per device")]),
            "<h4>A layout to fit</h4>", rows([
                ("model", f"{lay['preset']} ({lay['layers']} layers, sequence "
                          f"{lay['seq_length']})"),
                ("layout", f"dp {lay['dp']} × tp {lay['tp']} × pp {lay['pp']}, "
                           f"micro-batch {lay['micro_batch_size']}, "
                           f"{lay['num_micro_batches']} micro-batches, optimizer shard "
                           f"{lay['optimizer_shard']}, recompute {lay['recompute']}, "
                           f"sequence parallel {'on' if lay['sequence_parallel'] else 'off'}")]),
            "<h4>The next run to plan</h4>", rows([
                ("job", f"{plan['preset']} on {plan['num_devices']} {plan['hardware']} "
                        f"devices, global batch {plan['global_batch_size']} sequences"),
                # the served app shows no code (docs/teaching.md); the notebook may
                *([] if self.app else [
                    ("in Python", f"perfkit.plan.search(ModelSpec.preset('{plan['preset']}'), "
                                  f"Hardware.preset('{plan['hardware']}'), "
                                  f"{plan['num_devices']}, {plan['global_batch_size']}, "
                                  f"space=SearchSpace(**{plan['space']}), "
                                  "efficiency=<your matrix efficiency>, "
                                  "comm_efficiency=0.8)")])]),
            "<h4>The recompute case</h4>", rows([
                ("IR dump", rc["ir"]), ("configuration", rc["config_file"]),
                ("recompute", f"{rc['config']['recompute']} (first layer fully recomputed)"),
                ("select_recompute", patterns)]),
        ])

    def _chart(self, frame: Any, title: str) -> str:
        try:
            return C.chart_to_svg(step_chart(frame, title))
        except Exception as exc:  # a chart that cannot be drawn leaves the table
            return note(f"(chart not drawn: {exc})")

    def _job_steps(self) -> str:
        ev = self.evidence
        return (self._title("job_steps")
                + self._chart(ev.job_breakdown(), "Step time per rank")
                + _in_ms(ev.job_steps(), "step_trace_time per rank and step"
                         + STEP_COLUMNS))

    def _job_operators(self) -> str:
        ev = self.evidence
        return (self._title("job_operators")
                + frame_html(ev.job_operators(), caption="Operators (kernel and input "
                             "shapes), summed over every call and rank", wrap=("operator",))
                + frame_html(ev.operator_counts(), caption="Per operator type"))

    def _job_memory(self) -> str:
        return (self._title("job_memory")
                + frame_html(self.evidence.job_memory(), caption="Peak memory per rank and "
                             "component (memory_record.csv)"))

    def _cluster_steps(self) -> str:
        ev = self.evidence
        return (self._title("cluster_steps")
                + self._chart(ev.cluster_breakdown(), "Cluster: step time per rank")
                + _in_ms(ev.cluster_steps(), "step_trace_time per rank" + STEP_COLUMNS))

    def _cluster_comm(self) -> str:
        ev = self.evidence
        return (self._title("cluster_comm")
                + frame_html(ev.cluster_collectives(), caption="Collectives, all ranks "
                             "together")
                + frame_html(ev.cluster_per_rank(), caption="Per rank")
                + frame_html(ev.cluster_links(), caption="Links (communication matrix)",
                             max_rows=40))

    def _ir(self) -> str:
        pats, layers = self.evidence.recompute_patterns()
        return (self._title("ir")
                + frame_html(pats, caption="Per configured pattern: forward nodes it "
                             "selects (matched), marked recompute: Bool(1), with a clone in "
                             "the backward graph (duplicated)", wrap=("pattern",))
                + frame_html(layers, caption="Per decoder layer"))

    def _calculator(self) -> W.Widget:
        from ..widgets.metrics import metrics_panel

        lay = self.brief["layout"]
        panel = metrics_panel(model=lay["preset"], hardware=self.brief["hardware"]["name"])
        return W.VBox([W.HTML(self._title("calculator") + note(
            "Set the model and the layout; the table gives throughput, MFU, memory and the "
            "bubble of that layout (perfkit's calculators)."))] + [panel])

    def _planner(self) -> W.Widget:
        efficiency = W.BoundedFloatText(value=0.5, min=0.05, max=1.0, step=0.01,
                                        description="matrix efficiency",
                                        style={"description_width": "140px"})
        run = W.Button(description="Run the planner", button_style="info")
        out = W.HTML(note("Set the matrix efficiency and run."))

        def search(_b: Any = None) -> None:
            try:
                table = self.evidence.planner(float(efficiency.value))
                out.value = frame_html(table, caption=f"The fastest layouts that fit, by the "
                                       f"step model at {share_text(efficiency.value, 0)} matrix "
                                       "efficiency, links at 80 %")
            except Exception as exc:
                out.value = f"{STYLE}<div class='pk-error'>" \
                            f"{html.escape(describe_error(exc, 'running the planner'))}</div>"

        run.on_click(search)
        plan = self.brief["planner"]
        head = W.HTML(self._title("planner") + note(
            f"{plan['preset']} on {plan['num_devices']} devices, global batch "
            f"{plan['global_batch_size']}: tensor, pipeline and data parallelism, one "
            "sequence per micro-batch, optimizer sharded over data parallelism, selective "
            "or full recompute. " + PLANNER_WORDS))
        return W.VBox([head, W.HBox([efficiency, run]), out])
