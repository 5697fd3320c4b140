"""Teaching packs (see docs/teaching.md)."""
