"""What every dashboard tab shares: the :class:`Context` of one dashboard, the
:class:`Tab` base (controls, a message line, a body built on demand, a waiting view while
the profile is still being read), :class:`JobTab`, and the small helpers the tabs use to
lay out notes, headings and rank pickers."""

from __future__ import annotations

import html
import threading
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as W

from ...advisor import SEVERITY_ORDER, advise, advise_iter
from ...advisor.registry import registered
from ...job import PARALLEL_FIELDS, Job
from ..job import JobPanel, unknown_line
from ..markup import STYLE, describe_error, error, note, warning_html
from ..render import chart_widget, close_widgets, spinner_html, widget_ids

__all__ = ["Context", "Tab", "JobTab", "ALL_RANKS", "READY_CLASS", "WAITING_CLASS",
           "OPEN_ONE", "html_widget", "heading", "warning_widgets", "no_job_note", "ranks_of",
           "rank_picker", "set_ranks", "shows_all", "all_ranks_value", "ranked"]

#: The value of a rank picker that shows every rank (aggregated).
ALL_RANKS = -1
#: CSS class of a tab once its body is drawn (the browser tests and the screenshots wait
#: for it).
READY_CLASS = "pk-ready"
#: CSS class of a tab that shows what it waits for (the profile is still being read).
WAITING_CLASS = "pk-waiting"
#: What a tab says when no profile is open (:attr:`Context.none_open`, by default).
OPEN_ONE = "Open a profile above."


def html_widget(markup: str) -> W.HTML:
    """An HTML widget of ``markup`` with the dashboard's style sheet."""
    return W.HTML(STYLE + markup)


def ranks_of(profile: Any) -> list[int]:
    """The ranks of a Cluster, or the one rank of a Profile (0 when it has none); none
    without a profile."""
    if profile is None:
        return []
    ranks = getattr(profile, "ranks", None)
    if ranks:
        return [int(r) for r in ranks]
    return [int(profile.meta.rank)] if profile.meta.rank is not None else [0]


def rank_picker(description: str = "ranks", statistic: str = "median") -> W.Dropdown:
    """A picker of one rank or all of them (:data:`ALL_RANKS`); :func:`set_ranks` fills it.
    ``statistic`` is what the tab shows over all the ranks beside their min and max."""
    return W.Dropdown(options=[(f"all ranks ({statistic}, min, max)", ALL_RANKS)],
                      value=ALL_RANKS, description=description,
                      style={"description_width": "initial"}, layout=W.Layout(width="300px"))


def set_ranks(picker: W.Dropdown, ranks: Sequence[int], statistic: str = "median",
              everything: str | None = None) -> None:
    """Offer ``ranks`` in ``picker``, showing all of them (``statistic`` as in
    :func:`rank_picker`; ``everything``, when given, is the words of that choice instead).

    A profile of one rank has nothing to aggregate: the picker then offers that rank alone
    (not "all ranks (median, min, max)" of one value), and shows it; :func:`shows_all`
    tells a tab that its picker shows every rank either way.
    """
    if len(ranks) == 1:
        picker.options = [(f"rank {int(ranks[0])}", int(ranks[0]))]
        picker.value = int(ranks[0])
        return
    picker.options = [(everything or f"all ranks ({statistic}, min, max)", ALL_RANKS)] + [
        (f"rank {r}", r) for r in ranks]
    picker.value = ALL_RANKS


def shows_all(picker: W.Dropdown) -> bool:
    """Whether ``picker`` (filled by :func:`set_ranks`) shows every rank: its choice of all
    the ranks, or the one rank of a profile that has only one."""
    return picker.value == ALL_RANKS or len(picker.options) == 1


def all_ranks_value(picker: W.Dropdown) -> int:
    """The value of ``picker`` that shows every rank: :data:`ALL_RANKS`, or the one rank
    of a profile that has only one (the only choice :func:`set_ranks` offers then)."""
    values = [v for _label, v in picker.options]
    return ALL_RANKS if ALL_RANKS in values or not values else int(values[0])


def ranked(findings: Sequence[Any]) -> list[Any]:
    """Findings in :func:`perfkit.advise`'s order: measured first, most time at stake first,
    then by severity, then in the rules' order (the order they came among one rule's).

    This ranks what :func:`perfkit.advise_iter` has yielded so far, and, once it ends, all
    its findings as :func:`perfkit.advise` would return them.
    """
    position = {r.name: i for i, r in enumerate(registered())}
    severity = {s: i for i, s in enumerate(SEVERITY_ORDER)}
    order = sorted(range(len(findings)), key=lambda i: (
        not findings[i].measured, -findings[i].score, severity.get(findings[i].severity, 9),
        position.get(findings[i].rule, len(position)), i))
    return [findings[i] for i in order]


class Context:
    """What the tabs of one dashboard share: the job panel, the way to open a tab, and the
    advisor's findings for the profile and job on show (computed once for both the
    Overview and the Advice tab).

    Attributes
    ----------
    job : JobPanel
    open_tab : callable or None
        ``open_tab(title)`` shows that tab (None outside a dashboard).
    tabs : tuple of str
        The titles of the dashboard's tabs.
    none_open : str
        What a tab says while no profile is open: :data:`OPEN_ONE`, or where to choose
        one (the dashboard's run picker, when the folder opened holds several runs).
    closing : str
        How the Planner's model is calibrated on the profile (:func:`perfkit.plan.
        calibrate`'s ``closing``, ``"one"`` or ``"kernels"``): one choice for every tab that
        predicts with it (the Planner and the Recompute tab), set by :meth:`set_closing`.
    """

    def __init__(self, job: JobPanel, open_tab: Callable[[str], Any] | None = None,
                 tabs: tuple[str, ...] = ()) -> None:
        self.job = job
        self.open_tab = open_tab
        self.tabs = tabs
        self.none_open = OPEN_ONE
        self.closing = "one"
        self._closing_followers: list[Callable[[str], Any]] = []
        self._findings: tuple[Any, Any, list[Any], str] | None = None
        self._fits: dict[tuple[int, int, str], Any] = {}
        self._fit_lock = threading.Lock()

    def planner_fit(self, profile: Any, job: Job) -> Any:
        """The Planner's model of ``profile`` and ``job`` at :attr:`closing`
        (:func:`~perfkit.widgets.prediction.fit_job`), computed once for the Recompute tab
        and the advisor, which price a change of recompute with it (one figure on both
        tabs). Raises what ``fit_job`` raises."""
        from ..prediction_fit import fit_job

        key = (id(profile), id(job), self.closing)
        with self._fit_lock:
            if key not in self._fits:
                self._fits = {key: fit_job(profile, job, self.closing)}
            return self._fits[key]

    def _planner(self, profile: Any, job: Job | None) -> Callable[[], Any] | None:
        """What ``advise(..., planner=)`` is given: the calibration of :meth:`planner_fit`
        (None where the job is incomplete or the fit fails)."""
        if job is None or job.model is None or job.hardware is None or job.parallel is None:
            return None

        def calibration() -> Any:
            try:
                return self.planner_fit(profile, job).calibration
            except Exception:  # noqa: BLE001 - no fit: the finding keeps its own estimate
                return None
        return calibration

    def set_closing(self, closing: str) -> None:
        """Set :attr:`closing` and tell every tab that follows it (:meth:`follow_closing`)."""
        if closing == self.closing:
            return
        self.closing = closing
        for follower in list(self._closing_followers):
            follower(closing)

    def follow_closing(self, follower: Callable[[str], Any]) -> None:
        """Call ``follower(closing)`` whenever :attr:`closing` changes."""
        self._closing_followers.append(follower)

    def findings(self, profile: Any) -> list[Any]:
        """:func:`perfkit.advise` for ``profile`` and the job on show (cached)."""
        job = self.job.job
        if self._findings is not None and self._findings[0] is profile and \
                self._findings[1] is job and self._findings[3] == self.closing:
            return self._findings[2]
        if job is not None:
            found = advise(profile, model=job.model, parallel=job.parallel,
                           hardware=job.hardware, assumed=assumed_fields(job),
                           planner=self._planner(profile, job))
        else:
            found = advise(profile)
        self._findings = (profile, job, found, self.closing)
        return found

    def known_findings(self, profile: Any) -> list[Any] | None:
        """The findings for ``profile`` and the job on show when already computed, else None."""
        if self._findings is not None and self._findings[0] is profile and \
                self._findings[1] is self.job.job and self._findings[3] == self.closing:
            return self._findings[2]
        return None

    def stream_findings(self, profile: Any,
                        show: Callable[[list[Any], bool], None]) -> list[Any]:
        """The findings as they come (:func:`perfkit.advise_iter`), then all of them.

        ``show(findings, done)`` is called with what has come so far, ranked among itself
        (:func:`ranked`), after each finding (``done`` False), and once with the final
        ranked list (``done`` True), which is kept as :meth:`findings` (one advisor run
        for the Overview and the Advice tab). Returns the final list.
        """
        known = self.known_findings(profile)
        if known is not None:
            show(known, True)
            return known
        job = self.job.job
        so_far: list[Any] = []
        found = advise_iter(profile, model=job.model, parallel=job.parallel,
                            hardware=job.hardware, assumed=assumed_fields(job),
                            planner=self._planner(profile, job)) \
            if job is not None else advise_iter(profile)
        try:
            for finding in found:
                so_far.append(finding)
                show(ranked(so_far), False)
        finally:
            found.close()  # when ``show`` raised: no further rule starts
        final = ranked(so_far)
        self._findings = (profile, job, final, self.closing)
        show(final, True)
        return final


class Tab(W.VBox):
    """One tab: optional controls, a message line (spinner, error) and a body rebuilt by
    :meth:`build`.

    Attributes
    ----------
    charts : list of altair.JupyterChart
        The chart widgets of the last build (tests and the static snapshot read them).
    """

    title = ""
    #: What the tab needs of a profile being opened (its waiting view says so).
    waits_for = "the profile's tables"

    def __init__(self, ctx: Context, controls: Sequence[W.Widget] = ()) -> None:
        self.ctx = ctx
        self.profile: Any = None
        #: the :class:`~perfkit.widgets.opening.Opening` the tab waits for, if any
        self.opening: Any = None
        self.stale = True
        self.charts: list[Any] = []
        #: one build at a time (the dashboard's background opening may refresh a tab while
        #: the kernel's thread handles a click)
        self.building = threading.RLock()
        #: guards the profile, the opening and ``stale`` together: :meth:`show` and
        #: :meth:`wait` (the background opening's thread) change them while a build on the
        #: kernel's thread reads them, and a build must see one state, not half of each
        self._state = threading.Lock()
        #: counts the builds: work that outlives its build (:meth:`finish`) stops once a
        #: newer one began
        self.generation = 0
        #: ids of widgets shown in the body that outlive a redraw (never closed)
        self.keep: set[int] = set()
        self.message = W.HTML()
        self.body = W.VBox()
        parts = [W.HBox(list(controls), layout=W.Layout(flex_flow="row wrap"))] \
            if controls else []
        super().__init__([*parts, self.message, self.body])
        self.add_class("pk-tab")

    def show(self, profile: Any) -> None:
        """Set the profile; the body is rebuilt by the next :meth:`refresh`."""
        with self._state:
            self.profile, self.opening, self.stale = profile, None, True
        self.remove_class(READY_CLASS)

    def wait(self, opening: Any) -> None:
        """Wait for a profile being opened (:class:`~perfkit.widgets.opening.Opening`): the
        next :meth:`refresh` draws :meth:`waiting` until :meth:`show` gives the profile."""
        with self._state:
            self.profile, self.opening, self.stale = None, opening, True
        self.remove_class(READY_CLASS)

    def waiting(self, opening: Any) -> list[W.Widget]:
        """The body while the profile is being read: a progress bar and what this tab
        waits for (:attr:`waits_for`)."""
        return opening.widgets(self.waits_for)

    def refresh(self) -> None:
        """Rebuild the body, with a spinner meanwhile; a failure shows its message instead
        (the tab stays usable). The tab carries :data:`READY_CLASS` once drawn."""
        self._refresh(only_if_stale=False)

    def refresh_if_stale(self) -> None:
        """:meth:`refresh` unless the body is up to date (checked once the tab is free)."""
        self._refresh(only_if_stale=True)

    def _refresh(self, only_if_stale: bool) -> None:
        """Build under :attr:`building`; :meth:`finish` after, outside it, so that a newer
        build never waits for it (a finish whose build was replaced stops, see
        :attr:`generation`)."""
        with self.building:
            if only_if_stale and not self.stale:
                return
            self.generation += 1
            generation = self.generation
            if not self._build_body():
                return
        try:
            self.finish()
        except Exception as exc:  # noqa: BLE001 - the page must show a message
            if generation == self.generation:
                self.message.value = error(describe_error(exc, f"the {self.title} tab"))
        if generation == self.generation:
            self.add_class(READY_CLASS)

    def _build_body(self) -> bool:
        """Draw the body; True when :meth:`finish` is to run (the tab was built)."""
        with self._state:  # one state: a show() or wait() meanwhile makes it stale again
            self.stale = False
            profile, opening = self.profile, self.opening
        self.remove_class(READY_CLASS)
        self.charts = []
        if profile is None and opening is not None:
            # the page on show stays until the waiting one is built (the Overview's works
            # out the whole profile's steps): swapped at once, never a blank tab between
            old = self.body.children
            self.message.value = ""
            try:
                new = tuple(self.waiting(opening))
            except Exception as exc:  # noqa: BLE001 - a message, not a traceback
                new = ()
                self.message.value = error(describe_error(exc, f"the {self.title} tab"))
            self.body.children = new
            close_widgets(old, self.keep | widget_ids(new))
            self.add_class(WAITING_CLASS)
            return False
        close_widgets(self.body.children, self.keep)
        self.body.children = ()
        self.remove_class(WAITING_CLASS)
        if profile is None:
            self.message.value = STYLE + note(self.ctx.none_open)
            self.add_class(READY_CLASS)
            return False
        self.message.value = spinner_html(f"Computing the {self.title} tab …")
        try:
            children = self.build(profile)
        except Exception as exc:  # noqa: BLE001 - the page must show a message, not a traceback
            self.message.value = error(describe_error(exc, f"the {self.title} tab"))
            self.add_class(READY_CLASS)
            return False
        self.message.value = ""
        self.body.children = tuple(children)
        return True

    def finish(self) -> None:
        """Work done once the body is on show (the Overview's findings, as they come);
        the tab is marked ready after it."""

    def chart(self, chart: Any, on_select: Callable[[list[dict[str, Any]]], None] | None
              = None, renderer: str = "svg") -> Any:
        """A chart widget of this tab (:func:`.render.chart_widget`)."""
        widget = chart_widget(chart, on_select, renderer=renderer)
        self.charts.append(widget)
        return widget

    def build(self, profile: Any) -> list[W.Widget]:  # pragma: no cover - abstract
        raise NotImplementedError

    def static_html(self) -> str:
        """The tab's HTML parts (for frontends without widgets)."""
        return self.message.value + "".join(
            c.value for c in self.body.children if isinstance(c, W.HTML))


class JobTab(Tab):
    """A tab whose figures depend on the job of :class:`~perfkit.widgets.job.JobPanel`."""

    @property
    def current(self) -> Job | None:
        """The job the tab draws (the panel's)."""
        return self.ctx.job.job


def assumed_fields(job: Job) -> list[str]:
    """The layout's fields ``job`` took as defaults, not read from the profile, a config
    or the user: :func:`perfkit.advise` says so in the findings that rest on them."""
    return [f for f in PARALLEL_FIELDS if job.source(f) == "default"]


def no_job_note(job: Job | None, what: str, fields: tuple[str, ...] = (),
                in_dashboard: bool = True) -> W.HTML:
    """The one line a view shows instead of computing with a default: what it lacks, and
    where the "What perfkit could not read" panel says why (the Overview in the
    dashboard, the job panel elsewhere), never the reason again."""
    return html_widget(note(unknown_line(job, what, fields,
                                         "dashboard" if in_dashboard else "python")))


def warning_widgets(text: str | None) -> list[W.HTML]:
    """A guard's warning as a widget, or none when there is no warning."""
    return [] if not text else [html_widget(warning_html(text))]


def heading(text: str) -> W.HTML:
    """A section heading inside a tab."""
    return html_widget(f"<div class='pk-h'>{html.escape(text)}</div>")
