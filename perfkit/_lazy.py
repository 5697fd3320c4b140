"""Packages whose public names are imported on first use (PEP 562).

``perfkit`` and ``perfkit.widgets`` list where each public name lives (``_HOME``: name ->
submodule) and resolve a name the first time it is read, so importing the package loads
none of pandas, numpy, Altair or ipywidgets. :class:`LazyPackage` keeps a public function
over the submodule of the same name (``perfkit.simulate``, ``perfkit.widgets.dashboard``),
as an eager ``from .simulate import simulate`` did.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Mapping
from typing import Any

__all__ = ["LazyPackage", "resolve", "lazy_attribute"]


def resolve(package: str, homes: Mapping[str, str | None], namespace: dict[str, Any],
            name: str) -> Any:
    """The public ``name`` of ``package``, imported from its home and kept in ``namespace``.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    homes : mapping of str to str or None
        Public name -> submodule (relative to ``package``) that defines it; ``None`` where
        the name is itself a submodule.
    namespace : dict
        The package's ``globals()``: the value is stored there, so the next read is a plain
        attribute lookup.
    name : str
        The name read.

    Raises
    ------
    AttributeError
        ``name`` is not a public name of ``package``.
    """
    if name not in homes:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    home = homes[name]
    if home is None:
        value = importlib.import_module(f".{name}", package)
    else:
        value = getattr(importlib.import_module(f".{home}", package), name)
    namespace[name] = value
    return value


def lazy_attribute(package: str, homes: Mapping[str, str | None], namespace: dict[str, Any],
                   name: str) -> Any:
    """A lazy package's ``__getattr__``: a public name from its home (:func:`resolve`), else
    a submodule of ``package`` imported on first use, else AttributeError."""
    if name in homes or name.startswith("_"):
        return resolve(package, homes, namespace, name)
    try:
        return importlib.import_module(f".{name}", package)
    except ModuleNotFoundError as exc:
        if exc.name != f"{package}.{name}":
            raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}") from None


class LazyPackage(types.ModuleType):
    """A package module that keeps a public name over the submodule of the same name.

    The import system binds each submodule it loads onto its package (``perfkit.simulate``
    the package, once anything imports ``perfkit.simulate.faults``). Where the public name
    of that spelling is a function of the submodule (``_HOME[name] == name``), the binding
    is skipped and the package's ``__getattr__`` serves the function.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        homes = self.__dict__.get("_HOME", {})
        if isinstance(value, types.ModuleType) and homes.get(name) == name:
            return
        super().__setattr__(name, value)
