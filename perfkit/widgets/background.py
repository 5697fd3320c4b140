"""How the dashboard opens a large profile: its steps at once, the rest in the background.

:class:`BackgroundOpening` is the part of :class:`perfkit.widgets.Dashboard` that does it
(a mixin: it uses the dashboard's panels, job panel, status line and lock):

1. :func:`perfkit.io.preview.steps.preview` finds the ranks and the size of their files; a
   profile of at least ``background_bytes`` has its steps read (small files, or the
   ``ProfilerStep`` events of a trace) and the Overview draws them at once; on large
   Kineto traces a thread then cuts a few whole steps from them
   (:func:`perfkit.io.preview.excerpt.first_steps`), and the Overview adds their split,
   throughput and MFU (:mod:`perfkit.widgets.first_answer`), about a second later; on a
   large Ascend rank, the load hands its tables over before its ``trace_view.json``
   (:mod:`perfkit.io.preview.tables`), and the Overview adds the throughput and MFU of
   the job read from them while the trace is still being decoded;
2. every tab waits for an :class:`~perfkit.widgets.opening.Opening` (a progress bar and
   what it waits for) while a thread runs :func:`perfkit.load`, then
   :func:`perfkit.infer_job` (kept in perfkit's cache, :mod:`perfkit.job.stored`, so that
   opening the same files again gets it at once); once the files are read, the Overview
   draws the steps of the whole profile (the device's step and its split) while the job
   is worked out;
3. when they end, every tab gets the profile and the job, as after a plain open, and the
   tab on show redraws. The job panel gets the job *before* the tabs get the profile (and
   the tabs let go of a profile before its job goes): the kernel's thread may draw a tab
   at any moment of the swap (the dashboard redraws outside its lock), and a tab drawn then
   shows either what it waits for or the whole page, never the profile without its job
   (a "throughput –" and a Planner that say nothing of why). A failure puts the message
   in the page and the last profile that opened (and its job) back on show; opening
   another profile meanwhile does the same, and the first thread's result is dropped when
   it comes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import RunsFound
from ..io.preview import tables_first
from ..io.preview.cluster import cluster_tables_first, cluster_tables_wanted
from ..io.preview.excerpt import excerpt_wanted, first_steps
from ..io.preview.steps import Preview, describe, preview
from ..io.preview.tables import tables_first_of, tables_wanted
from ..job.stored import stored_infer_job
from .first_answer import first_answer
from .markup import STYLE, describe_error, note
from .opening import Opening
from .overview import bundled_profiles

__all__ = ["BackgroundOpening"]


class BackgroundOpening:
    """The dashboard's background opening (see the module docstring).

    The class using it has ``panels``, ``job`` (a JobPanel), ``status``, ``profile``,
    ``background_bytes``, ``opening``, ``_thread``, ``_lock``, ``_hold_job``, and the
    methods ``_load(source, run, progress)``, ``_opened(profile, shown, run)``,
    ``_fail(message)`` and ``_refresh_selected()``.
    """

    panels: dict[str, Any]
    job: Any
    status: Any
    profile: Any
    background_bytes: int | None
    opening: Opening | None
    _thread: threading.Thread | None
    _lock: threading.RLock
    _hold_job: bool

    def _load(self, source: Any, run: Any, progress: bool | None) -> Any:
        raise NotImplementedError  # pragma: no cover - the dashboard's

    def _opened(self, profile: Any, shown: str, run: Any) -> None:
        raise NotImplementedError  # pragma: no cover - the dashboard's

    def _fail(self, message: str) -> None:
        raise NotImplementedError  # pragma: no cover - the dashboard's

    def _refresh_selected(self) -> None:
        raise NotImplementedError  # pragma: no cover - the dashboard's

    def _early(self, source: str | os.PathLike[str], run: Any) -> Preview | None:
        """The preview of a large profile to open in the background; None to open it at
        once (a bundled sample, a small profile, a path that does not exist)."""
        text = str(source).strip()
        if self.background_bytes is None or not text or text in bundled_profiles() or \
                text.startswith("sample:") or not Path(text).expanduser().exists():
            return None
        try:
            size = preview(text, run=run, read_steps=False)
            if size.input_bytes < self.background_bytes:
                return None
            return preview(text, run=run)
        except RunsFound:
            raise
        except Exception:  # noqa: BLE001 - the full load says what is wrong, as always
            return None

    def _opening_already(self, source: Any, run: Any) -> bool:
        """Whether ``source`` (and ``run``) is the profile being opened in the background.

        A path typed in the box and then *Open* clicked asks twice: the box sends its
        value when it loses the focus to the button (which opens it), then the click
        comes. Starting again would drop the first opening while its thread, which
        cannot be stopped, reads on: two loads of the same files at once, each about
        half as fast (a 1.1 GB Kineto pair in the served page: 17 s instead of 12.5 s).
        The second request is the first one: it waits for that opening.
        """
        opening = self.opening
        return opening is not None and not opening.ended and \
            opening.request == (str(source).strip(), run)

    def _open_in_background(self, early: Preview, source: Any, shown: str, run: Any) -> None:
        """Show the steps of ``early`` and read the rest on a thread."""
        opening = Opening(shown + ("" if run is None else f" (run {run})"), early)
        opening.request = (str(source).strip(), run)
        with self._lock:  # the tabs let go of the profile before the job goes (step 3 above)
            opening.kept_job = self.job.job  # type: ignore[attr-defined]
            self.opening = opening
            for panel in self.panels.values():
                panel.wait(opening)
            self._set_job(None)
            self.job.pending(f"read from the profile once {shown} is loaded …")
        self.status.value = STYLE + note(
            f"Opening {shown}: {describe(early)}; the rest is being read in the "
            "background, and every tab follows when it is.")
        opening.start()
        self._refresh_selected()
        self._thread = threading.Thread(target=self._read_rest, name="perfkit-open",
                                        args=(opening, source, shown, run), daemon=True)
        self._thread.start()

    def _read_rest(self, opening: Opening, source: Any, shown: str, run: Any) -> None:
        """The background thread: a few steps first (on large Kineto traces), then load,
        work out the job, redraw (unless superseded)."""
        self._read_first_steps(opening)
        if self.opening is not opening:
            return  # another profile was opened meanwhile: its files are not read at all
        try:
            with self._tables_first(opening):
                profile = self._load(source, run, False)
            opening.files_read()
            self._show_steps_read(opening, profile)
            try:  # kept in the cache: a second open of the same files gets it at once
                job: Any = stored_infer_job(profile, source, run)
            except Exception as exc:  # noqa: BLE001 - the job panel says why
                job = exc
        except Exception as exc:  # noqa: BLE001 - shown in the page, never a traceback
            with self._lock:
                if not self._drop_opening("failed", only=opening):
                    return  # another profile was opened meanwhile
            self._fail(describe_error(exc, f"opening {shown}"))
            return
        with self._lock:  # the swap only: the tab on show redraws after, unlocked
            if self.opening is not opening:
                return  # another profile was opened meanwhile
            opening.end()
            self.opening = None
            self._hold_job = True
            try:
                self.job.set_profile(profile, inferred=job)
            finally:
                self._hold_job = False
            self._opened(profile, shown, run)
        self._refresh_selected()

    def _read_first_steps(self, opening: Opening) -> None:
        """Cut a few whole steps from large Kineto traces, or read one rank's tables of a
        large Ascend cluster, and show their figures in the Overview (step 1 above);
        nothing where that does not apply or fails (the full load follows anyway), or when
        another profile was opened meanwhile."""
        cluster = cluster_tables_wanted(opening.preview)
        if not cluster and not excerpt_wanted(opening.preview):
            return
        try:
            first: Any = cluster_tables_first(opening.preview) if cluster else \
                first_steps(opening.preview)
            answer = None if first is None else first_answer(first)
        except Exception:  # noqa: BLE001 - the full load says what is wrong, as always
            return
        if answer is not None:
            self._show_first(opening, answer)

    def _tables_first(self, opening: Opening) -> Any:
        """Around the load of a large Ascend rank: the Overview gets the throughput and
        MFU of the job read from its tables, handed over before its trace (step 1 above);
        elsewhere nothing."""
        if not tables_wanted(opening.preview):
            return contextlib.nullcontext()
        began = time.perf_counter()

        def handed_over(meta: Any, tables: dict[str, Any]) -> None:
            if self.opening is not opening or opening.whole_profile:
                return
            first = tables_first_of(opening.preview, meta, tables,
                                    time.perf_counter() - began)
            self._show_first(opening, first_answer(first))
        return tables_first.listen(handed_over)

    def _show_first(self, opening: Opening, answer: Any) -> None:
        """The Overview shows ``answer`` (:mod:`perfkit.widgets.first_answer`) until the
        whole profile's figures come, and the job line says where its job comes from
        (it said the job comes with the load); nothing when another profile was opened
        meanwhile or the whole profile is there already."""
        with self._lock:
            if self.opening is not opening or opening.whole_profile:
                return
            opening.first = answer
            if getattr(answer, "job", None) is not None:  # the job line says the same
                self.job.pending(f"read first from {answer.first.which()}; the whole "
                                 "profile's follows …")
            overview = self.panels.get("Overview")
            if overview is not None:
                overview.stale = True
        self._refresh_selected()

    def _show_steps_read(self, opening: Opening, profile: Any) -> None:
        """The files are read and the job is being worked out (step 2 above): the Overview
        draws the step figures of the whole profile meanwhile (the device's step and its
        split, where the preview had only the host's spans or no split), as the full page
        will. Throughput and MFU still wait for the job. Nothing is redrawn when another
        profile was opened meanwhile or the Overview is not on show (it draws them when
        opened)."""
        with self._lock:
            if self.opening is not opening:
                return
            opening.preview = dataclasses.replace(
                opening.preview, profile=profile, host_spans=False, device_lane=False,
                steps_final=True, steps_from="the whole profile")
            opening.whole_profile = True
            overview = self.panels.get("Overview")
            if overview is not None:
                overview.stale = True
        self._refresh_selected()

    def _drop_opening(self, stage: str = "superseded", only: Opening | None = None) -> bool:
        """End the opening in progress, if any (``only``: if it is that one), and put the
        last profile that opened (and its job) back in every tab (the tab on show redraws
        at the next refresh); the opening's thread result is dropped when it comes. True
        if one was ended."""
        opening = self.opening
        if opening is None or (only is not None and opening is not only):
            return False
        opening.end(stage)
        self.opening = None
        self._set_job(getattr(opening, "kept_job", None))
        for panel in self.panels.values():
            panel.show(self.profile)
        return True

    def _set_job(self, job: Any) -> None:
        """Set the job panel's job without redrawing the tab on show."""
        self._hold_job = True
        try:
            self.job.set_job(job)
        finally:
            self._hold_job = False

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the profile opening in the background, if any, and its redraw.

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait at most (default: until it ends).

        Returns
        -------
        bool
            True when nothing is being opened any more.
        """
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True
