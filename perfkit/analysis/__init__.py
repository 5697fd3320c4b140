"""Analyses over the canonical tables; each returns a pandas DataFrame."""
