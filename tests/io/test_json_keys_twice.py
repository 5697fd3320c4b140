"""A JSON object that holds a key twice: the decoder keeps the last copy, and what the
earlier copies held was read over without a word. :func:`keys_read_over` counts those keys;
checked here against counts made by hand, and against Python's own parser (its
``object_pairs_hook`` sees every copy) on every JSON file of the real samples that perfkit
reads whole (communication, matrix, profiler info and metadata files): none holds a key
twice, and none is said to."""

from __future__ import annotations

import json

import msgspec
import pytest
from shared_samples import shared_root

from perfkit.io._common.json_files import keys_read_over


@pytest.mark.parametrize(("doc", "lost"), [
    (b'{"a": 1, "a": 2}', 1),                      # one key, its earlier value
    (b'{"a": {"x": 1, "y": 2}, "a": 3}', 3),        # the key and the two inside its copy
    (b'{"a": 1, "b": [{"c": 1}, {"c": 2}]}', 0),    # the same key in two objects is fine
    (b'{"k": {"s": "a\\"b:", "s": 3}}', 1),         # a quote and colon inside a string
    (b'{"s": "x\\":y"}', 0),                        # ... which is no key
    (b'{"a" : 1, "a"  :2}', 1),                     # white space before the colon
    (b'{"a": "\\u0022:", "a": 1}', 1),              # a quote written as \\u0022
    (b'[]', 0), (b'{}', 0), (b'"text"', 0),
])
def test_keys_read_over_by_hand(doc: bytes, lost: int) -> None:
    assert keys_read_over(doc, msgspec.json.decode(doc)) == lost


def _pairs_twice(text: str) -> int:
    """Objects holding a key twice, as Python's parser sees them."""
    found = 0

    def hook(pairs: list[tuple[str, object]]) -> dict:
        nonlocal found
        keys = [k for k, _ in pairs]
        found += len(keys) - len(set(keys))
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    return found


@pytest.mark.shared_samples
def test_no_real_sample_is_said_to_hold_a_key_twice() -> None:
    names = ("communication.json", "communication_matrix.json", "cluster_communication.json",
             "cluster_communication_matrix.json", "communication_group.json",
             "profiler_metadata.json")
    files = [p for p in shared_root().rglob("*.json")
             if p.name in names or p.name.startswith("profiler_info")]
    assert len(files) >= 8
    for path in files:
        data = path.read_bytes()
        text = data.decode("utf-8-sig")
        assert _pairs_twice(text) == 0, path
        assert keys_read_over(data, msgspec.json.decode(data)) == 0, path
