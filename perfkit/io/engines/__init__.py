"""Plumbing: how ranks are parsed — in local worker processes (:mod:`.local`, the hand-over
of :mod:`.handoff`), as Dask tasks (:mod:`.dask`, :mod:`.dask_cluster`, :mod:`.dask_parts`),
and ``perfkit.load`` with its background load (:mod:`.loading`)."""
