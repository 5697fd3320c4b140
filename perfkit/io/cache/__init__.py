"""Plumbing: the Parquet cache of parsed profiles, kept outside the user's folders
(:mod:`.store`), its text columns (:mod:`.parquet_text`) and the in-memory store of rank
tables (:mod:`.rank_tables`)."""
