"""Ascend profiler exports (torch_npu ``*_ascend_pt``, MindSpore ``*_ascend_ms``): the text
export of a rank (:mod:`.text`, its CSV, HCCL, memory and trace files), the DB export
(:mod:`.db`) and msprof-analyze's ``cluster_analysis_output`` (:mod:`.cluster_output`)."""
