"""The "The job" panel: what the profile says was trained, each value with its source.

One panel holds the :class:`~perfkit.job.Job` every view of the dashboard uses: the value
of each field (model, layout, run), where it came from (``profile``, ``config``, ``user``,
``default``) and what was read; the user edits any field, or loads a MindFormers YAML, a
Hugging Face ``config.json`` or a training log, and every view follows. Opening another
profile starts again from that profile (nothing of the previous one survives). Where the
job disagrees with its profile the panel says so (:meth:`perfkit.job.Job.problems`).
Nothing is computed here: :func:`perfkit.infer_job` and :meth:`~perfkit.job.Job.
with_overrides` do the work.
"""

from __future__ import annotations

import html
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as W

from ..errors import PerfkitError
from ..format import bytes_text, listed, plural, time_text
from ..job import MODEL_FIELDS, PARALLEL_FIELDS, RUN_FIELDS, Job, infer_job
from ..job.unknowns import PANEL_TITLE, UNKNOWNS_WHERE, how_to_set, unknown_labels, unknown_line
from .metrics import _TABLE_STYLE

__all__ = ["JobPanel", "job_panel", "evidence_html", "JOB_GROUPS", "JobNote", "missing_note",
           "skip_note",
           "unknowns_html", "unknown_line", "UNKNOWNS_WHERE"]

#: The panel's three groups of fields, as (title, fields).
JOB_GROUPS = (("Model", MODEL_FIELDS), ("Parallel layout", PARALLEL_FIELDS),
              ("Run", RUN_FIELDS))

#: The badge of a field with no value: nothing was read for it (not "profile", which
#: reads as a value the profile gave).
NOT_READ = "not read"
_SOURCE_COLORS = {"profile": "#2d572c", "config": "#31708f", "user": "#8a6d3b",
                  "default": "#777", NOT_READ: "#a94442"}
_STYLE = _TABLE_STYLE + (
    "<style>"
    ".pk-job-src{font-size:11px;padding:0 4px;border-radius:3px;color:#fff}"
    ".pk-job-warn{color:#8a6d3b;background:#fcf8e3;border:1px solid #faebcc;padding:6px;"
    "border-radius:4px;margin:4px 0}"
    ".pk-job-line{font-size:13px;padding:4px 8px 4px 0}"
    ".pk-unknowns{border:1px solid #faebcc;background:#fffdf5;border-radius:4px;"
    "padding:6px 10px;margin:8px 0}"
    ".pk-unknowns table{border-collapse:collapse;font-size:12px}"
    ".pk-unknowns td,.pk-unknowns th{text-align:left;vertical-align:top;padding:3px 8px;"
    "border-bottom:1px solid #f0e6c8;white-space:normal}"
    ".pk-unknowns .pk-h{margin-top:0}"
    "</style>")



def unknowns_html(job: Job | None, place: str = "dashboard") -> str:
    """The "What perfkit could not read" panel: each missing field, why, what waits for
    it, and how to set it (:func:`perfkit.job.unknowns.unknowns`); "" for a complete job.

    Parameters
    ----------
    job : perfkit.Job or None
    place : {"dashboard", "python", "cli"}
        Whom the "how to set it" column speaks to (:func:`perfkit.job.how_to_set`).
    """
    items = [] if job is None else job.unknowns()
    if not items:
        return ""
    rows = "".join(
        f"<tr><td><b>{html.escape(u.label)}</b></td><td>{html.escape(u.why)}</td>"
        f"<td>{html.escape(u.needed_for)}</td>"
        f"<td>{html.escape(how_to_set(u, place))}</td></tr>" for u in items)
    return (f"<div class='pk-unknowns'><div class='pk-h'>{html.escape(PANEL_TITLE)}</div>"
            "<table><thead><tr><th>field</th><th>why</th><th>needed for</th>"
            f"<th>how to set it</th></tr></thead><tbody>{rows}</tbody></table></div>")


def _source_tag(source: str) -> str:
    color = _SOURCE_COLORS.get(source, "#777")
    return (f"<span class='pk-job-src' style='background:{color}'>"
            f"{html.escape(source)}</span>")


def evidence_html(job: Job) -> str:
    """The evidence table of ``job`` as HTML: field, value, source, what was read.

    Parameters
    ----------
    job : perfkit.Job

    Returns
    -------
    str
        A ``<table>`` (text escaped), one row per field.
    """
    rows = "".join(
        f"<tr><td>{html.escape(str(r.field))}</td>"
        f"<td class='pk-value'>{html.escape(_shown(job, str(r.field), r.value))}</td>"
        f"<td>{_source_tag(str(r.source))}</td>"
        f"<td class='pk-note'>{html.escape(str(r.detail))}</td></tr>"
        for r in job.evidence.itertuples(index=False))
    return ("<div class='pk-metrics'><table><thead><tr><th>field</th><th>value</th>"
            f"<th>source</th><th>what was read</th></tr></thead><tbody>{rows}</tbody>"
            "</table></div>")


def _shown(job: Job, name: str, text: Any) -> str:
    """A value of the evidence table for people: the peak memory in GiB, the step time in
    the unit that fits (the job keeps them as numbers; its table as ``%.4g`` text)."""
    if text is None:
        return "–"
    if name == "peak_memory_bytes" and job.peak_memory_bytes:
        return bytes_text(job.peak_memory_bytes)
    if name == "step_time_s" and job.step_time_s:
        return time_text(job.step_time_s * 1e6)
    return str(text)


def _text(job: Job, name: str) -> str:
    """The text of a field's box: what the job holds, numbers without an exponent."""
    value = job.evidence.set_index("field").loc[name, "value"]
    if value is None:
        return ""
    if name == "peak_memory_bytes" and job.peak_memory_bytes:
        return f"{job.peak_memory_bytes:.0f}"
    return str(value)


def _same(a: str, b: str) -> bool:
    """Two box texts that mean the same value (``8005000000`` and ``8.005e+09``)."""
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


class JobPanel(W.VBox):
    """The panel returned by :func:`job_panel`.

    Attributes
    ----------
    job : perfkit.Job or None
        The job every view uses (None until a profile is set).
    controls : dict of str to ipywidgets.Text
        One text box per field of :data:`perfkit.job.JOB_FIELDS`; typing a value sets it
        (source ``user``), emptying the box gives the field back to the config or the
        profile.
    sources : dict of str to ipywidgets.HTML
        The source tag shown next to each box.
    config_path : ipywidgets.Text
        A config or log on the machine that runs the kernel; *Load* reads it.
    config_upload : ipywidgets.FileUpload
        The same, uploaded (``.yaml``, ``.yml``, ``.json``, ``.log``, ``.txt``).
    message : ipywidgets.HTML
        The last error (an invalid value, an unreadable config), else empty.
    summary, warnings, table : ipywidgets.HTML
        One line describing the job (with how many values come from each source), where it
        disagrees with its profile (always shown), and the evidence table.
    toggle : ipywidgets.ToggleButton
        Unfolds :attr:`editor` (the fields, the config loader and the evidence table),
        folded at first so that the tabs stay near the top of the page.
    """

    def __init__(self, unknowns: str = "panel") -> None:
        if unknowns not in ("panel", "line"):
            raise ValueError(f"unknowns must be 'panel' or 'line', not {unknowns!r}")
        #: "panel": the unknowns' table under the job line (notebooks); "line": one line
        #: that refers to the Overview's panel (the dashboard)
        self.unknowns = unknowns
        self.job: Job | None = None
        self._listeners: list[Callable[[Job | None], None]] = []
        self._quiet = False
        self.controls: dict[str, W.Text] = {}
        self.sources: dict[str, W.HTML] = {}
        groups = []
        for title, fields in JOB_GROUPS:
            rows = [W.HTML(f"<b>{html.escape(title)}</b>")]
            # one label width per group, its longest field name (num_attention_heads) whole
            # at 8 px a letter: the boxes of a group line up under one another
            label = max(140, 8 * max(len(n) for n in fields) + 8)
            for name in fields:
                box = W.Text(value="", placeholder="unknown", description=name,
                             continuous_update=False,
                             style={"description_width": f"{label}px"},
                             layout=W.Layout(width=f"{label + 160}px"))
                box.observe(lambda change, name=name: self._on_edit(name, change),
                            names="value")
                tag = W.HTML()
                self.controls[name] = box
                self.sources[name] = tag
                rows.append(W.HBox([box, tag]))
            groups.append(W.VBox(rows))
        self.config_path = W.Text(placeholder="MindFormers .yaml, HF config.json or a "
                                              "training log", description="config",
                                  layout=W.Layout(width="460px"))
        self.load_button = W.Button(description="Load", layout=W.Layout(width="80px"))
        self.load_button.on_click(lambda _b: self.load_config(self.config_path.value))
        self.config_upload = W.FileUpload(accept=".yaml,.yml,.json,.log,.txt",
                                          multiple=False, description="Upload config")
        self.config_upload.observe(self._on_upload, names="value")
        self.reset_button = W.Button(description="Back to the profile's values",
                                     layout=W.Layout(width="auto", min_width="230px",
                                                     flex="0 0 auto"))
        self.reset_button.on_click(lambda _b: self.reset())
        self.message = W.HTML()
        self.summary = W.HTML()
        self.warnings = W.HTML()
        self.table = W.HTML()
        details = W.Accordion(children=[self.table], titles=("Where each value comes from",))
        details.selected_index = None
        self.toggle = W.ToggleButton(value=False, description="Edit the job",
                                     icon="pencil", tooltip="Show every field of the job, "
                                     "edit it, or load a config",
                                     layout=W.Layout(width="auto", min_width="130px"))
        self.editor = W.VBox([
            W.HTML(_STYLE + "<p class='pk-note'>Read from the profile; every view uses it. "
                            "Edit any value or load a config; an empty box gives the value "
                            "back to the profile.</p>"),
            W.HBox([self.config_path, self.load_button, self.config_upload,
                    self.reset_button], layout=W.Layout(flex_flow="row wrap")),
            W.HBox(groups, layout=W.Layout(flex_flow="row wrap")), details],
            layout=W.Layout(display="none"))
        self.toggle.observe(self._on_toggle, names="value")
        super().__init__([
            W.HBox([self.summary, self.toggle], layout=W.Layout(align_items="center")),
            self.warnings, self.message, self.editor])
        self.add_class("pk-job-panel")
        self._show()

    def _on_toggle(self, change: dict[str, Any]) -> None:
        self.editor.layout.display = "flex" if change["new"] else "none"
        self.toggle.description = "Fold the job" if change["new"] else "Edit the job"

    def unfold(self, show: bool = True) -> None:
        """Show (or hide) every field of the job, the config loader and the evidence."""
        self.toggle.value = bool(show)

    # ---- state ---------------------------------------------------------------------
    def observe_job(self, callback: Callable[[Job | None], None]) -> None:
        """Call ``callback(job)`` whenever the job changes (a new profile, an edit)."""
        self._listeners.append(callback)

    def set_profile(self, profile: Any, inferred: Any = None) -> None:
        """Infer the job of ``profile`` (None: no job); every earlier value is dropped.

        ``inferred``: :func:`perfkit.infer_job` of ``profile``, or the error it raised,
        when already worked out (the dashboard does it on its background thread).
        """
        self.message.value = ""
        if profile is None:
            self.set_job(None)
            return
        try:
            if isinstance(inferred, Exception):
                raise inferred
            job = inferred if inferred is not None else infer_job(profile)
        except PerfkitError as exc:
            self.job = None
            self._error(f"The job could not be read from this profile: {exc}")
            self._show()
            self._notify()
            return
        self.set_job(job)

    def pending(self, text: str) -> None:
        """Say on the job line why there is no job yet (the profile is still being read)."""
        self.summary.value = (_STYLE + "<div class='pk-job-line'><b>The job</b>: "
                              f"<span class='pk-note'>{html.escape(text)}</span></div>")

    def set_job(self, job: Job | None) -> None:
        """Show ``job`` and tell the listeners."""
        self.job = job
        self._show()
        self._notify()

    def set(self, **values: Any) -> bool:
        """Set field values as the user (``panel.set(num_layers=40)``); False on an error
        (the message says why and the job stays as it was)."""
        if self.job is None:
            self._error("Open a profile first: the job is read from it.")
            return False
        try:
            job = self.job.with_overrides(**values)
        except PerfkitError as exc:
            self._error(f"Not applied: {exc}")
            return False
        self.message.value = ""
        self.set_job(job)
        return True

    def load_config(self, path: str | os.PathLike[str]) -> bool:
        """Let a config file (YAML, config.json, training log) win over the profile."""
        if self.job is None:
            self._error("Open a profile first: the config completes the job read from it.")
            return False
        text = str(path).strip()
        if not text:
            self._error("Type the path of a MindFormers YAML, a config.json or a training log.")
            return False
        try:
            job = self.job.with_config(Path(text).expanduser())
        except PerfkitError as exc:
            self._error(f"The config was not loaded: {exc}")
            return False
        self.message.value = ""
        self.set_job(job)
        return True

    def reset(self) -> None:
        """Back to what the profile alone shows (configs and edits dropped)."""
        if self.job is not None:
            self.message.value = ""
            self.set_job(self.job.reset())

    # ---- events --------------------------------------------------------------------
    def _on_edit(self, name: str, change: dict[str, Any]) -> None:
        if self._quiet or self.job is None:
            return
        new = str(change["new"]).strip()
        if _same(new, _text(self.job, name)):  # back to the job's value: nothing to apply
            self.message.value = ""
            return
        self.set(**{name: new or None})

    def _on_upload(self, change: dict[str, Any]) -> None:
        files = change["new"]
        if not files:
            return
        item = files[0]
        name = Path(str(item.get("name", "config"))).name
        folder = Path(tempfile.mkdtemp(prefix="perfkit-config-"))
        try:
            path = folder / name
            path.write_bytes(bytes(item["content"]))
            self.load_config(path)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            self.config_upload.value = ()

    def _notify(self) -> None:
        for callback in self._listeners:
            callback(self.job)

    def _error(self, text: str) -> None:
        self.message.value = (_STYLE + "<div class='pk-error'>" + html.escape(text)
                              + "</div>")

    # ---- display -------------------------------------------------------------------
    def _show(self) -> None:
        self._quiet = True
        try:
            job = self.job
            for name, box in self.controls.items():
                box.value = "" if job is None else _text(job, name)
                self.sources[name].value = "" if job is None else _source_tag(
                    NOT_READ if box.value == "" else job.source(name))
        finally:
            self._quiet = False
        if job is None:
            self.summary.value = (_STYLE + "<div class='pk-job-line'><b>The job</b>: "
                                  "<span class='pk-note'>none: open a profile.</span></div>")
            self.warnings.value = ""
            self.table.value = ""
            return
        counts = job.evidence["source"].value_counts()
        sources = ", ".join(f"{html.escape(str(k))} {int(v)}" for k, v in counts.items())
        self.summary.value = (_STYLE + "<div class='pk-job-line'><b>The job</b>: "
                              f"{html.escape(job.describe())} "
                              f"<span class='pk-note'>(values from: {sources})</span></div>")
        notes = [f"The job disagrees with its profile: {p}." for p in job.problems()]
        labels = unknown_labels(job)
        unknown = ""
        if labels and self.unknowns == "line":
            notes.append(f"Not read from the profile: {listed(labels)} (“{PANEL_TITLE}” on "
                         "the Overview says why and how to set "
                         f"{plural(len(labels), 'it', 'them')}).")
        elif labels:
            unknown = unknowns_html(job, "python")
        self.warnings.value = (_STYLE + "".join(f"<div class='pk-job-warn'>"
                                                f"{html.escape(n)}</div>" for n in notes)
                               + unknown)
        self.table.value = _STYLE + evidence_html(job)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        """Add a static snapshot (summary, warnings, evidence) for frontends without
        widgets (nbconvert, ``perfkit report``)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        bundle["text/html"] = (_STYLE + self.summary.value
                               + self.warnings.value + self.message.value + self.table.value)
        return bundle


class JobNote(W.HTML):
    """A note shown instead of a figure the job cannot give (also in static outputs)."""

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        bundle["text/html"] = self.value
        return bundle


def missing_note(job: Job | None, what: str) -> JobNote:
    """Why ``what`` is not shown for ``job``: a view without a job says so.

    Parameters
    ----------
    job : perfkit.Job or None
    what : str
        The figures left out (``"MFU"``, ``"the memory theory"``).

    Returns
    -------
    JobNote
        An ``ipywidgets.HTML``: one line naming the missing pieces
        (:func:`unknown_line`); the job panel's "What perfkit could not read" says why
        and how to give them.
    """
    text = unknown_line(job, what, place="python")
    return JobNote(_STYLE + f"<p class='pk-note'>{html.escape(text)}</p>")


def skip_note(job: Job | None, what: str, *fields: str) -> JobNote | None:
    """The note that stands for a notebook section whose job lacks one of ``fields``,
    or None when the job has them all (the section runs).

    A section of a guided notebook that needs a field the profile did not give is
    skipped with one line instead of raising: ``skip_note(job, "memory theory",
    "model", "hardware") or C.svg(...)`` shows either the line or the chart.

    Parameters
    ----------
    job : perfkit.Job or None
    what : str
        The section (``"memory theory"``: the line reads "No memory theory: ...").
    *fields : str
        What it needs: ``"model"``, ``"hardware"``, ``"step_time_s"``,
        ``"global_batch_size"``, ``"seq_length"``, ``"peak_memory_bytes"``.

    Returns
    -------
    JobNote or None
    """
    if job is not None and all(getattr(job, f, None) is not None for f in fields):
        return None
    text = unknown_line(job, what, fields, place="python")
    return JobNote(_STYLE + f"<p class='pk-note'>{html.escape(text)} This section is "
                   "skipped.</p>")


def job_panel(profile_or_job: Any = None) -> JobPanel:
    """The "The job" panel for a profile (its job is inferred) or a given job.

    Parameters
    ----------
    profile_or_job : Profile, Cluster, perfkit.Job or None
        What to show; None gives an empty panel (``set_profile`` fills it).

    Returns
    -------
    JobPanel
    """
    panel = JobPanel()
    if isinstance(profile_or_job, Job):
        panel.set_job(profile_or_job)
    elif profile_or_job is not None:
        panel.set_profile(profile_or_job)
    return panel
