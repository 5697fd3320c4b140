"""Plumbing: the canonical tables — their columns and dtypes (:mod:`.schema`), which tasks are
communication, computing or memory (:mod:`.categories`), the times perfkit trusts
(:mod:`.validate`) and where each format records its collectives, in words
(:mod:`.comm_words`)."""
