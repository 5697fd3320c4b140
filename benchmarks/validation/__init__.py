"""Validation of perfkit's step model on published runs (see PROTOCOL.md)."""

__all__: list[str] = []
