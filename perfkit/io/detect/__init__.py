"""Plumbing: what a path holds — its rank sources (:mod:`.paths`), the folders of a nested
tree (:mod:`.nested`), the runs they belong to (:mod:`.runs`, :mod:`.run_facts`,
:mod:`.group_runs`, :mod:`.run_groups`) and the pure function that parses one rank
(:mod:`.sources`), which dispatches through the reader registry (:mod:`perfkit.io.readers`)."""
