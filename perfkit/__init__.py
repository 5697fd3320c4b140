"""perfkit: a workbench for tuning the training performance of large language models.

``import perfkit as pk`` gives the public API of DESIGN.md: the specs
(:class:`ModelSpec`, :class:`ParallelConfig`, :class:`Hardware`), the calculators of
:mod:`perfkit.calc`, the planner :mod:`perfkit.plan` and the error types.
"""

from . import calc, plan
from .calc import *  # noqa: F403  (the calculators are part of the top-level API)
from .calc import __all__ as _calc_all
from .errors import (
    ConfigFileError,
    InvalidArgumentError,
    ParallelConfigError,
    PerfkitError,
    ProfileError,
)
from .specs import Hardware, ModelSpec, ParallelConfig

__version__ = "0.1.0"

__all__ = [
    "ConfigFileError",
    "Hardware",
    "InvalidArgumentError",
    "ModelSpec",
    "ParallelConfig",
    "ParallelConfigError",
    "PerfkitError",
    "ProfileError",
    "calc",
    "plan",
    *_calc_all,
]
