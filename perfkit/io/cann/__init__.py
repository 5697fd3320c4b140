"""Raw CANN profiler output: the ``PROF_*`` folders msprof and the Ascend profilers write.

The smallest reader, and the model for a new one: :mod:`.reader` is its whole contract with
the rest of perfkit (see :mod:`perfkit.io.readers` and docs/loading.md, "Adding a format")."""
