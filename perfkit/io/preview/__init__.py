"""Plumbing: the first answer — a profile's steps before its load (:mod:`.steps`, by format in
:mod:`.ranks`, :mod:`.kineto`, :mod:`.excerpt`), an Ascend rank's tables handed over before
its trace (:mod:`.tables_first`, :mod:`.tables`) and a cluster's lowest rank read ahead
(:mod:`.cluster`)."""
