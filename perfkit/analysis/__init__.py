"""Analyses over the canonical tables; each returns a pandas DataFrame."""

from .recompute import RecomputeCheck, match_pattern, recompute_check

__all__ = ["RecomputeCheck", "match_pattern", "recompute_check"]
