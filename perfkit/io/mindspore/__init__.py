"""MindSpore profiles that are not Ascend exports: CPU runs (:mod:`.cpu`) and the legacy
MindSpore / MindInsight profiler output of MindSpore 1.x - 2.3 (:mod:`.legacy`)."""
