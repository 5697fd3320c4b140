"""Defer the slowest import that perfkit's charts pull in, without changing what it does.

Altair imports ``jsonschema``, whose format checkers import ``rfc3987_syntax`` where it is
installed (``jupyter_events`` asks for it, so every environment with Jupyter has it). That
module builds an Earley parser of the IRI grammar as it is imported: 0.95 s of the 3.4 s
that ``import perfkit.charts`` took on the project's 2-core VM (``python -X importtime``,
2026-11-24), paid again by every notebook kernel and by the dashboard's kernel, although the
parser only serves to check a string that a JSON schema declares of format ``iri``, which
Altair's schemas never do.

:func:`defer_rfc3987_syntax` puts a stand-in module in its place before Altair is imported:
its ``is_valid_syntax`` and ``parse`` import the real module (and build the parser) on their
first call and hand it on, and any other name is read from the real module. So a check
gives the same answer as before, only the parser is built when one is first made.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

__all__ = ["defer_rfc3987_syntax"]

_NAME = "rfc3987_syntax"
_lock = threading.Lock()
_failed: list[ImportError] = []  # the real module's import error, once it failed


class _Deferred(types.ModuleType):
    """Stands for ``rfc3987_syntax`` until a name of it is used, then for the real module."""

    def __init__(self, spec: Any) -> None:
        super().__init__(_NAME, "rfc3987_syntax, imported on first use (perfkit)")
        self.__spec__ = spec
        self.__path__ = list(spec.submodule_search_locations or [])
        self.__file__ = spec.origin

    def __getattr__(self, name: str) -> Any:
        if name == "__all__":  # ``from rfc3987_syntax import *``: the real module's names
            real = _real(self)
            return list(getattr(real, "__all__", [n for n in vars(real) if n[:1] != "_"]))
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_real(self), name)

    @staticmethod
    def is_valid_syntax(term: str, value: str) -> bool:
        """``rfc3987_syntax.is_valid_syntax``, the real module imported on the first call."""
        real = _real(None)
        return True if real is None else real.is_valid_syntax(term, value)

    @staticmethod
    def parse(term: str, value: str) -> Any:
        """``rfc3987_syntax.parse``, the real module imported on the first call."""
        real = _real(None)
        if real is None:
            raise ImportError(f"{_NAME} could not be imported")
        return real.parse(term=term, value=value)


def _real(stand_in: _Deferred | None) -> types.ModuleType | None:
    """The real module, imported once (None when it cannot be: ``jsonschema`` would then
    have left the ``iri`` format unchecked, which ``is_valid_syntax`` returning True is)."""
    with _lock:
        current = sys.modules.get(_NAME)
        if current is not None and not isinstance(current, _Deferred):
            return current
        if not _failed:
            sys.modules.pop(_NAME, None)
            try:
                return importlib.import_module(_NAME)
            except ImportError as exc:  # not tried again on every check
                _failed.append(exc)
        if stand_in is not None:
            raise _failed[0]
        return None


def defer_rfc3987_syntax() -> bool:
    """Put the stand-in for ``rfc3987_syntax`` in place, where it is installed and not yet
    imported; returns whether it did. Call it before ``altair`` (``jsonschema``) is imported.
    """
    with _lock:
        if _NAME in sys.modules or "jsonschema" in sys.modules:
            return False
        try:
            spec = importlib.util.find_spec(_NAME)
        except (ImportError, ValueError):
            return False
        if spec is None:
            return False
        sys.modules[_NAME] = _Deferred(spec)
        return True
