"""perfkit: a workbench for tuning the training performance of large language models.

``import perfkit as pk`` gives the public API of DESIGN.md: the specs (:class:`ModelSpec`,
:class:`ParallelConfig`, :class:`Hardware`), the job a profile recorded (:func:`infer_job`
-> :class:`Job`), the calculators of :mod:`perfkit.calc`, the
planner :mod:`perfkit.plan`, the profile loader (:func:`load` -> :class:`Profile` /
:class:`Cluster`), the separate runs of a folder (:func:`runs`, :class:`Run`,
:class:`RunsFound`), the simulator (:func:`simulate` and its faults), the IR / log / config
readers, the analyses of :mod:`perfkit.analysis`, the Chrome-trace export of one step
(:func:`export_trace`), the bundled samples (:func:`samples`; ``load("sample:NAME")``), the
teaching packs (:mod:`perfkit.lab`: ``lab.make``, ``lab.answer``, ``lab.grade``) and the
error types.
"""

from . import analysis, calc, lab, plan
from ._version import __version__ as __version__
from .advisor import Finding, advise
from .bundled_samples import samples
from .calc import *  # noqa: F403  (the calculators are part of the top-level API)
from .calc import __all__ as _calc_all
from .errors import (
    ConfigFileError,
    InvalidArgumentError,
    ParallelConfigError,
    PerfkitError,
    PerfkitWarning,
    ProfileError,
    RunsFound,
)
from .export import export_trace
from .io.config import read_mindformers_config
from .io.detect import load, runs
from .io.ir import IRGraph, load_ir
from .io.logs import read_memory_log, read_training_log
from .io.runs import Run
from .job import Job, infer_job
from .journal import Journal
from .profile import Cluster, Profile, ProfileMeta
from .simulate import (
    DataLoadingStall,
    FullRecompute,
    HostBound,
    MemoryPressure,
    NoOverlap,
    SlowLink,
    SlowRank,
    UnbalancedStage,
    UnfusedOperators,
    simulate,
)
from .specs import Hardware, ModelSpec, ParallelConfig

__all__ = [
    "Cluster",
    "ConfigFileError",
    "DataLoadingStall",
    "Finding",
    "FullRecompute",
    "Hardware",
    "HostBound",
    "IRGraph",
    "InvalidArgumentError",
    "Job",
    "Journal",
    "MemoryPressure",
    "ModelSpec",
    "NoOverlap",
    "ParallelConfig",
    "ParallelConfigError",
    "PerfkitError",
    "PerfkitWarning",
    "Profile",
    "ProfileError",
    "ProfileMeta",
    "Run",
    "RunsFound",
    "SlowLink",
    "SlowRank",
    "UnbalancedStage",
    "UnfusedOperators",
    "advise",
    "analysis",
    "calc",
    "export_trace",
    "infer_job",
    "lab",
    "load",
    "load_ir",
    "plan",
    "read_memory_log",
    "read_mindformers_config",
    "read_training_log",
    "runs",
    "samples",
    "simulate",
    *_calc_all,
]
