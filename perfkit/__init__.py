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

The names are resolved on first use (PEP 562 module ``__getattr__``): ``import perfkit``
loads none of pandas, numpy, Altair or ipywidgets, so the command line and a notebook's
first cell start at once; ``pk.load`` imports the loaders the first time it is named.
``dir(perfkit)``, ``from perfkit import X`` and ``from perfkit import *`` behave as if every
name had been imported eagerly. One slow import that Altair pulls in, ``rfc3987_syntax``
(1 s per notebook kernel), is deferred to its first use
(:func:`perfkit._deferred_imports.defer_rfc3987_syntax`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from ._deferred_imports import defer_rfc3987_syntax
from ._lazy import LazyPackage, lazy_attribute
from ._version import __version__ as __version__

#: Where each public name lives: the submodule (relative to this package) that defines it.
#: A name that is itself a submodule (``analysis``, ``calc``, ``plan``) maps to ``None``.
_HOME: dict[str, str | None] = {
    "analysis": None,
    "calc": None,
    "lab": None,
    "plan": None,
    "Finding": "advisor",
    "advise": "advisor",
    "advise_iter": "advisor",
    "Comparison": "compare",
    "compare": "compare",
    "samples": "bundled_samples",
    "ConfigFileError": "errors",
    "InvalidArgumentError": "errors",
    "ParallelConfigError": "errors",
    "PerfkitError": "errors",
    "PerfkitWarning": "errors",
    "ProfileError": "errors",
    "RunsFound": "errors",
    "export_trace": "export",
    "read_mindformers_config": "io.logs.config",
    "load": "io.engines.loading",
    "runs": "io.detect.paths",
    "IRGraph": "io.ir.graph",
    "load_ir": "io.ir.graph",
    "read_memory_log": "io.logs.log_files",
    "read_training_log": "io.logs.log_files",
    "Run": "io.detect.runs",
    "Job": "job",
    "infer_job": "job",
    "Journal": "journal",
    "Cluster": "profile",
    "Profile": "profile",
    "ProfileMeta": "profile",
    "DataLoadingStall": "simulate",
    "FullRecompute": "simulate",
    "HostBound": "simulate",
    "MemoryPressure": "simulate",
    "NoOverlap": "simulate",
    "SlowLink": "simulate",
    "SlowRank": "simulate",
    "UnbalancedStage": "simulate",
    "UnfusedOperators": "simulate",
    "simulate": "simulate",
    "Hardware": "specs",
    "ModelSpec": "specs",
    "ParallelConfig": "specs",
    # the calculators of perfkit.calc are part of the top-level API (tests check this list
    # against perfkit.calc.__all__)
    "ActivationBreakdown": "calc",
    "ActivationModel": "calc",
    "CommItem": "calc",
    "CommVolume": "calc",
    "MemoryBreakdown": "calc",
    "Rates": "calc",
    "StepEstimate": "calc",
    "activation_memory": "calc",
    "activation_per_layer": "calc",
    "bubble_fraction": "calc",
    "bubble_idle_share": "calc",
    "comm_volume": "calc",
    "estimate_step": "calc",
    "flops_per_token": "calc",
    "flops_table": "calc",
    "forward_flops": "calc",
    "hardware_flops": "calc",
    "hfu": "calc",
    "implied_peak_flops": "calc",
    "in_flight_micro_batches": "calc",
    "interleave_memory_penalty": "calc",
    "largest_layer_parameters": "calc",
    "layer_forward_flops": "calc",
    "linearity": "calc",
    "mfu": "calc",
    "model_flops": "calc",
    "parameters_per_device": "calc",
    "samples_per_second": "calc",
    "stage_parameters": "calc",
    "static_memory": "calc",
    "step_time_from_tokens_per_second": "calc",
    "tokens_per_second": "calc",
    "tokens_per_second_per_device": "calc",
    "tokens_per_second_per_p": "calc",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    """Import the public ``name`` on first use and keep it as a module attribute.

    A submodule not in ``__all__`` (``pk.journal``, ``pk.io``) is imported on first use too,
    as the eager package used to make every one of them an attribute.
    """
    return lazy_attribute(__name__, _HOME, globals(), name)


def __dir__() -> list[str]:
    """What tab completion offers: the public names, ``__version__`` and the submodules
    imported so far, not the module's own helpers (``sys``, ``Any``, ``LazyPackage``)."""
    modules = {n for n, v in globals().items() if not n.startswith("_")
               and getattr(v, "__name__", "").startswith(f"{__name__}.")
               and isinstance(v, type(sys))}
    return sorted(set(__all__) | modules | {"__version__"})


sys.modules[__name__].__class__ = LazyPackage
defer_rfc3987_syntax()  # before anything of perfkit imports Altair (jsonschema)

if TYPE_CHECKING:  # what the names are, for type checkers and editors
    from . import analysis, calc, lab, plan  # noqa: F401
    from .advisor import Finding, advise, advise_iter  # noqa: F401
    from .bundled_samples import samples  # noqa: F401
    from .calc import *  # noqa: F401, F403
    from .compare import Comparison, compare  # noqa: F401
    from .errors import (  # noqa: F401
        ConfigFileError,
        InvalidArgumentError,
        ParallelConfigError,
        PerfkitError,
        PerfkitWarning,
        ProfileError,
        RunsFound,
    )
    from .export import export_trace  # noqa: F401
    from .io.detect.paths import runs  # noqa: F401
    from .io.detect.runs import Run  # noqa: F401
    from .io.engines.loading import load  # noqa: F401
    from .io.ir.graph import IRGraph, load_ir  # noqa: F401
    from .io.logs.config import read_mindformers_config  # noqa: F401
    from .io.logs.log_files import read_memory_log, read_training_log  # noqa: F401
    from .job import Job, infer_job  # noqa: F401
    from .journal import Journal  # noqa: F401
    from .profile import Cluster, Profile, ProfileMeta  # noqa: F401
    from .simulate import (  # noqa: F401
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
    from .specs import Hardware, ModelSpec, ParallelConfig  # noqa: F401
