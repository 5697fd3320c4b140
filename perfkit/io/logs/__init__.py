"""Text beside a profile: MindFormers training logs and memory summaries (:mod:`.log_files`)
and MindFormers training YAML (:mod:`.config`)."""
