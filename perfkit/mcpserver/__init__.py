"""``perfkit mcp``: perfkit's answers as tools of a Model Context Protocol server (stdio,
offline), for an assistant to open profiles, read findings, compare runs and predict
layouts. :mod:`.tools` holds the tools, :mod:`.server` the SDK's wiring."""

from __future__ import annotations

from .tools import PathNotAllowedError, Tools

__all__ = ["PathNotAllowedError", "Tools"]
