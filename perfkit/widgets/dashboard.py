"""The Voila dashboard: a profile picker and one tab per step of the tuning cycle.

``dashboard(profile)`` returns an ipywidgets panel with

* a **profile picker**: the bundled samples, a path on the machine that runs the kernel,
  or an upload of a zipped profile (size limit, extracted safely into a temporary folder
  by :func:`perfkit.io._common.archive.extract_profile_archive`);
* **The job** (:class:`~perfkit.widgets.job.JobPanel`): the model, layout, hardware and
  batch read from the profile by :func:`perfkit.infer_job`, each value with its source;
  folded to one line (the job and the sources of its values) that unfolds to edit any
  field or load a config. Every figure that mixes theory with
  measurement (MFU, the memory theory, the recompute trade-off, the planner, the advice)
  is about that job; a tab whose job lacks something says what instead of computing with a
  default, and a figure that cannot be right carries the guard's warning
  (:mod:`perfkit.guards`). Opening another profile starts a new job: nothing of the
  previous profile survives;
* the tabs **Overview, Timeline, Operators, Communication, Memory, Recompute, Planner,
  Advice, History** (:mod:`perfkit.widgets.tabs`, one module each), each drawn from
  :mod:`perfkit.analysis`, :mod:`perfkit.plan`, :func:`perfkit.advise`, the tuning journal
  and the chart builders of :mod:`perfkit.charts`, rendered in the browser offline
  (:mod:`perfkit.widgets.render`); a tab is computed when it is first shown (a spinner
  meanwhile), so the first chart appears as soon as the overview is ready.

A large profile (``background_bytes``, 64 MiB of files by default) opens progressively:
its steps are read first (:func:`perfkit.io.preview.steps.preview`: ``step_trace_time.csv``,
the ``ProfilerStep`` spans, msprof-analyze's step CSV) and the Overview shows its step time
and split at once, while :func:`perfkit.load` reads the rest on a background thread; every
other tab shows a progress bar and what it waits for (:mod:`perfkit.widgets.opening`), and
all redraw when the load ends. Opening another profile meanwhile drops the first one's
result.

Every failure (a wrong path, a damaged file, an unexpected bug) becomes a message in the
page; the panel keeps working and keeps the last profile that opened. Nothing is
computed here: this module wires controls to package functions and formats their frames.
Its siblings hold the other jobs: :mod:`.dashboard_open` opens a profile by name or path,
:mod:`.dashboard_tabs` lists the tabs and draws one on its own (:func:`tab_panel`); their
names are importable from here as before.
"""

from __future__ import annotations

import html
import os
import shutil
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

import ipywidgets as W

from ..bundled_samples import sample_named
from ..errors import InvalidArgumentError, ProfileError, RunsFound
from ..format import counted
from ..io._common.archive import DEFAULT_MAX_UPLOAD_BYTES, extract_profile_archive
from ..io._common.progress import progress_in
from ..io.detect.sources import format_words
from ..job import Job
from .background import BackgroundOpening
from .dashboard_open import apart_warning, open_profile
from .dashboard_tabs import JOB_TABS, TAB_TITLES, new_tab, tab_panel
from .job import JobPanel
from .markup import STYLE, describe_error, error, frame_html, note
from .opening import BACKGROUND_BYTES, Opening
from .overview import bundled_profiles
from .render import enable_offline
from .tabs import Context, Tab
from .tabs.base import OPEN_ONE

__all__ = ["TAB_TITLES", "JOB_TABS", "DEFAULT_PROFILE", "Dashboard", "dashboard",
           "tab_panel", "open_profile", "describe_error", "frame_html"]

#: The bundled sample opened when no profile is given.
DEFAULT_PROFILE = "simulated/llama2-13b-baseline-dp16"
#: The picker's entry for a profile opened by path or upload.
_OTHER = "__opened__"
#: The run picker's first entry, the prompt (run ids are 0, 1, ...).
_CHOOSE_RUN = -1

_STYLE = STYLE + (
    "<style>"
    ".pk-dashboard .widget-tab > .widget-tab-contents{overflow-x:auto}"
    ".pk-dashboard .lm-TabBar-tab{min-width:110px;flex:0 0 auto}"
    ".pk-dashboard .jupyter-widgets.widget-label{overflow:visible}"
    "</style>")


# --------------------------------------------------------------------------------------
# the dashboard
# --------------------------------------------------------------------------------------

class Dashboard(BackgroundOpening, W.VBox):
    """The panel returned by :func:`dashboard`.

    Attributes
    ----------
    profile : Profile, Cluster or None
        The profile shown (the last one that opened).
    source : str or None
        Where it came from (bundled name, path, or uploaded file name).
    error : str or None
        The message of the last failure, if the last attempt failed.
    samples : ipywidgets.Dropdown
        Bundled samples; choosing one opens it. It always shows what is open: the sample's
        name, or the path or upload when the profile came from one.
    path : ipywidgets.Text
        A path on the kernel's machine; Enter or the *Open* button opens it.
    upload : ipywidgets.FileUpload
        A zipped profile (at most ``upload_limit_bytes``).
    status : ipywidgets.HTML
        What is open, or the error message.
    job : JobPanel
        "The job": what the profile says was trained, folded to one line, editable; every
        job tab follows it.
    tabs : ipywidgets.Tab
        One child per :data:`TAB_TITLES`; ``panels`` maps the title to the tab.
    opening : perfkit.widgets.opening.Opening or None
        The profile being read in the background, if any (:meth:`wait` waits for it).
    background_bytes : int or None
        Profiles of at least this many bytes open progressively (None: never).
    """

    def __init__(self, upload_limit_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
                 background_bytes: int | None = BACKGROUND_BYTES) -> None:
        enable_offline()
        self.background_bytes = background_bytes
        self.opening: Opening | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.RLock()
        self._hold_job = False
        self.profile: Any = None
        self.source: str | None = None
        self.error: str | None = None
        self.upload_limit_bytes = int(upload_limit_bytes)
        self._upload_dir: Path | None = None
        self._quiet = False
        label = {"description_width": "120px"}
        # as wide as the page allows (up to 960 px): the entry of an opened path, "PATH
        # (opened by path)", is not cut at 1280 or 1440 px
        wide = W.Layout(width="calc(100% - 120px)", max_width="960px", min_width="520px")
        self.samples = W.Dropdown(options=self._sample_options(None), value=_OTHER,
                                  description="bundled sample", style=label, layout=wide)
        self.path = W.Text(placeholder="/path/to/your/profile (folder or file)",
                           description="or a path", layout=W.Layout(
                               width="calc(100% - 120px)", max_width="960px",
                               min_width="520px"),
                           style=label, continuous_update=False)
        self.open_button = W.Button(description="Open", button_style="primary",
                                    layout=W.Layout(width="80px"))
        self.upload = W.FileUpload(accept=".zip", multiple=False,
                                   description="Upload .zip",
                                   layout=W.Layout(width="auto"))
        self.status = W.HTML()
        #: Progress of the profile being opened (perfkit.io's bars, one row each); empty,
        #: hence invisible, once it is open.
        self.progress = W.VBox()
        self.progress.add_class("pk-open-progress")
        #: Shown when a folder holds several separate runs (:class:`perfkit.RunsFound`):
        #: a prompt, then one entry per run (its label); choosing one opens it.
        self.runs = W.Dropdown(options=[], value=None, description="run",
                               style=label, layout=W.Layout(width="520px", display="none"))
        self._runs_source: str | None = None
        self.job = JobPanel(unknowns="line")  # the Overview shows them, once
        self.context = Context(self.job, open_tab=self.select, tabs=TAB_TITLES)
        self.panels: dict[str, Tab] = {t: new_tab(t, self.context) for t in TAB_TITLES}
        self.tabs = W.Tab(children=[self.panels[t] for t in TAB_TITLES], titles=TAB_TITLES)
        limit = f"{self.upload_limit_bytes / 2**20:,.0f} MiB"
        picker = W.VBox([
            W.HBox([self.samples]),
            W.HBox([self.path, self.open_button]),
            W.HBox([self.runs]),
            W.HBox([self.upload, W.HTML(f"<span class='pk-note'>or a zipped profile folder, "
                                        f"at most {limit}</span>")],
                   layout=W.Layout(align_items="center")),
        ])
        super().__init__([W.HTML(_STYLE), picker, self.progress, self.status, self.job,
                          self.tabs])
        self.add_class("pk-dashboard")
        self.samples.observe(self._on_sample, names="value")
        self.path.observe(self._on_path, names="value")
        self.open_button.on_click(lambda _button: self.load_profile(self.path.value))
        self.runs.observe(self._on_run, names="value")
        self.upload.observe(self._on_upload, names="value")
        self.tabs.observe(lambda _change: self._refresh_selected(), names="selected_index")
        self.job.observe_job(self._on_job_change)
        self._refresh_selected()

    # ---- opening -----------------------------------------------------------------------
    @staticmethod
    def _sample_options(opened: str | None) -> list[tuple[str, str]]:
        first = (f"{opened} (opened by path or upload)" if opened
                 else "— none open: choose a sample —")
        return [(first, _OTHER)] + [(n, n) for n in bundled_profiles()]

    def _show_source(self) -> None:
        """Make the sample picker show the profile on show (never another one)."""
        self._quiet = True
        try:
            source = self.source
            name = sample_named(source) if source else None
            if name is not None:
                self.samples.options = self._sample_options(None)
                self.samples.value = name
            else:
                self.samples.options = self._sample_options(source)
                self.samples.value = _OTHER
        finally:
            self._quiet = False

    def load_profile(self, source: str | os.PathLike[str], label: str | None = None,
                     run: Any = None) -> bool:
        """Open a bundled sample or a path and redraw the tabs.

        Parameters
        ----------
        source : str or path
            As for :func:`open_profile`.
        label : str, optional
            How to name it in the page (default: ``source``).
        run : int or str, optional
            One of the separate runs of a folder (see :func:`open_profile`). A folder of
            several runs opened without it shows the run picker (:attr:`runs`) with its
            runs, and the message says to choose one.

        Returns
        -------
        bool
            True when it opened, or when a large profile is opening in the background
            (its steps on show, :attr:`opening` set; :meth:`wait` waits for the rest;
            asking again for the profile being opened so keeps that opening);
            False when it failed (the message is in the page, the previous profile stays
            on show and the picker says which).
        """
        if not str(source).strip():
            self._fail("No path typed: type the folder (or file) of a profile in the box, "
                       "then press Open")
            return False
        if self._opening_already(source, run):
            return True  # the same profile, still being read: one opening, not two
        shown = label or sample_named(source) or str(source)
        self.status.value = STYLE + note(f"Opening {shown} …")
        with self._lock:
            self._drop_opening()
        try:
            early = self._early(source, run)
            if early is not None:
                self._open_in_background(early, source, shown, run)
                return True
            with progress_in(self.progress):  # not above the panel, gone when done
                profile = open_profile(source, run=run)
        except RunsFound as exc:
            self._offer_runs(str(source), exc.runs)
            self._fail(f"{shown} holds {counted(len(exc.runs), 'separate run')}, not "
                       "merged: choose one in the run picker above.")
            return False
        except Exception as exc:  # noqa: BLE001 - shown in the page, never a traceback
            self._fail(describe_error(exc, f"opening {shown}", subject=shown))
            return False
        self._opened(profile, shown, run)
        self.job.set_profile(profile)  # a new job: nothing of the previous one survives
        return True

    def _opened(self, profile: Any, shown: str, run: Any) -> None:
        """Put ``profile`` on show in every tab (its job is set by the caller)."""
        if run is None:  # a folder of one run: no picker
            self._offer_runs(None, [])
        else:  # the picker stays, to switch to another run
            shown = f"{shown} (run {run})"
        self.profile, self.source, self.error = profile, shown, None
        self._show_source()
        ranks = getattr(profile, "ranks", None) or [profile.meta.rank]
        kind = format_words(profile.meta.source_format, profile.meta.device_type)
        self.status.value = _STYLE + (
            f"<div class='pk-ok'>Opened <code>{html.escape(shown)}</code>: "
            f"{html.escape(kind)}, "
            f"{counted(len(ranks), 'rank')}.</div>") + apart_warning(profile)
        for panel in self.panels.values():
            panel.show(profile)

    def _load(self, source: Any, run: Any, progress: bool | None) -> Any:
        return open_profile(source, run=run, progress=progress)

    def _offer_runs(self, source: str | None, runs: list[Any]) -> None:
        """Fill the run picker with ``runs`` of ``source`` (none: hide it).

        Its first entry is a prompt, on show until a run is chosen (a dropdown whose value
        is None would be blank); while no profile is open, every tab says to choose there.
        """
        self._runs_source = source
        prompt = f"— choose one of the {len(runs)} runs —"
        self._quiet = True
        try:
            self.runs.options = ([(prompt, _CHOOSE_RUN)] if runs else []) + [
                (r.label, r.id) for r in runs]
            self.runs.value = _CHOOSE_RUN if runs else None
        finally:
            self._quiet = False
        self.runs.layout.display = "flex" if runs else "none"
        none_open = (f"Choose one of the {len(runs)} runs in the run picker above."
                     if runs else OPEN_ONE)
        if none_open != self.context.none_open:
            self.context.none_open = none_open
            for panel in self.panels.values():
                if panel.profile is None and panel.opening is None:
                    panel.stale = True  # its note changes

    def _on_run(self, change: dict[str, Any]) -> None:
        if self._quiet or change["new"] in (None, _CHOOSE_RUN) or self._runs_source is None:
            return
        self.load_profile(self._runs_source, run=change["new"])

    def _fail(self, message: str) -> None:
        """Show ``message`` and say which profile stays on show."""
        self.error = message
        message = message.rstrip()
        if message and message[-1] not in ".!?)":
            message += "."
        kept = f" Still showing {self.source}." if self.profile is not None else ""
        self.status.value = error(message + kept)
        self._show_source()
        self._refresh_selected()  # a dropped opening put the last profile back

    def _on_path(self, change: dict[str, Any]) -> None:
        if change["new"].strip():
            self.load_profile(change["new"])

    def _on_job_change(self, _job: Job | None) -> None:
        for title in JOB_TABS:
            if title in self.panels:
                self.panels[title].stale = True
        if self.opening is None and not self._hold_job:  # while opening, the tabs wait
            self._refresh_selected()

    def _on_sample(self, change: dict[str, Any]) -> None:
        if self._quiet or not change["new"] or change["new"] == _OTHER:
            return
        self.load_profile(change["new"])

    def _on_upload(self, change: dict[str, Any]) -> None:
        files = change["new"]
        if not files:
            return
        item = files[0]
        name = str(item.get("name", "upload.zip"))
        try:
            size = int(item.get("size") or len(item["content"]))
            if size > self.upload_limit_bytes:
                raise ProfileError(name, f"is {size / 2**20:,.1f} MiB, above the upload "
                                         f"limit of {self.upload_limit_bytes / 2**20:,.0f} "
                                         "MiB; copy it to the server and open its path")
            folder = Path(tempfile.mkdtemp(prefix="perfkit-upload-"))
            try:
                root = extract_profile_archive(bytes(item["content"]), folder / "profile",
                                               name=name,
                                               max_compressed_bytes=self.upload_limit_bytes)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
        except Exception as exc:  # noqa: BLE001 - shown in the page
            self._fail(describe_error(exc, f"reading the upload {name}"))
            return
        finally:
            self.upload.value = ()
        if self.load_profile(root, label=name):
            _remove_folder(self._upload_dir)
            self._upload_dir = folder
            weakref.finalize(self, _remove_folder, folder)
        else:
            _remove_folder(folder)

    # ---- static fallback ---------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        """Add a static snapshot (status, job and overview with its chart as SVG) for
        frontends without widgets."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        overview = self.panels["Overview"]
        parts = [self.status.value, self.job.summary.value, self.job.warnings.value,
                 overview.static_html()]
        bundle["text/html"] = _STYLE + "".join(parts)
        return bundle

    # ---- tabs --------------------------------------------------------------------------
    def _refresh_selected(self) -> None:
        with self._lock:  # the background opening may be handing the profile to the tabs
            panel = self.panels[TAB_TITLES[self.tabs.selected_index or 0]]
        panel.refresh_if_stale()

    def select(self, title: str) -> Tab:
        """Show the tab ``title`` (computing it if needed) and return it."""
        if title not in TAB_TITLES:
            raise InvalidArgumentError("title", "must be one of " + ", ".join(TAB_TITLES),
                                       title)
        self.tabs.selected_index = TAB_TITLES.index(title)
        self._refresh_selected()
        return self.panels[title]


def _remove_folder(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def dashboard(profile: str | os.PathLike[str] | None = None, *, run: int | str | None = None,
              upload_limit_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
              background_bytes: int | None = BACKGROUND_BYTES) -> Dashboard:
    """The dashboard panel: profile picker, the job and the tabs.

    Parameters
    ----------
    profile : str or path, optional
        What to open first: a bundled sample's name (:func:`bundled_profiles`) or a path.
        None opens :data:`DEFAULT_PROFILE` when the bundled data is there.
    run : int or str, optional
        Which of the separate runs a folder holds to open (an id or a name, as
        :func:`perfkit.runs` lists them); without it such a folder shows the run picker.
    upload_limit_bytes : int
        Largest zipped profile accepted by the upload button (compressed size); larger
        profiles are opened by path.
    background_bytes : int or None
        Profiles whose files add up to at least this many bytes open progressively: the
        steps first, the rest in the background (None: always wait for the whole load).

    Returns
    -------
    Dashboard
        An ``ipywidgets.VBox``. A profile that cannot be opened shows its message in the
        page instead of raising.
    """
    board = Dashboard(upload_limit_bytes=upload_limit_bytes,
                      background_bytes=background_bytes)
    if profile is None and DEFAULT_PROFILE in bundled_profiles():
        profile = DEFAULT_PROFILE
    if profile is not None:
        board.load_profile(profile, run=run)
    return board
