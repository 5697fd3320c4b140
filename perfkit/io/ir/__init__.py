"""MindSpore IR graph dumps (``MS_DEV_SAVE_GRAPHS``): :func:`.graph.load_ir`."""
