"""Loaders: profiler files, IR graphs, logs and configs -> canonical tables (see DESIGN.md)."""
