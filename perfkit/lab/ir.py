"""Per-student MindSpore IR dumps, derived from the real dumps that ship in ``data/ir``.

perfkit has no IR writer: the three dumps of ``data/ir`` are real MindSpore 2.10 outputs
(``tools/make_ir_fixtures.py``). A student's dump is one of them, transformed in one
documented way that keeps its meaning:

**base** — which compile the dump comes from, and what the student's configuration says:

=================  ========================  ==============================================
base               dump                      configuration (``select_recompute``)
=================  ========================  ==============================================
``taken``          silu_mul_reshape.ir.gz    the compile's four patterns: Mul, SiLU cell,
                                             both Reshapes around the Mul
``reshape_gap``    silu_mul.ir               the compile's two patterns: Mul and SiLU cell
                                             (the guide's "a Reshape sits in between" case)
``not_applied``    control.ir.gz             two or four of those patterns, but the dump
                                             was compiled without any recompute: the
                                             configuration never reached the graph
=================  ========================  ==============================================

Every configuration also says ``recompute: [1]`` (the first layer fully recomputed), as
the first two compiles did.

**naming** — the feed-forward cells are renamed consistently everywhere in the text (cell
scopes such as ``feed_forward-FeedForward/w1-Linear`` and parameter names such as
``model.layers.0.feed_forward.w1.weight``), and the patterns with them:

=============  ================  ==========  ===========  ===========
naming         feed_forward      w1 (gate)   w3 (up)      w2 (down)
=============  ================  ==========  ===========  ===========
``mindformers``  feed_forward    w1          w3           w2
``hf``         mlp               gate_proj   up_proj      down_proj
``short``      ffn               gate        up           down
=============  ================  ==========  ===========  ===========

A rename changes names only, never the graph (nodes, edges, recompute flags, clones), so
what takes effect is the same in the renamed dump, under the renamed patterns
(``tests/lab/test_ir_variants.py`` checks it node by node).
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from ..errors import InvalidArgumentError
from ..resources import data_dir

__all__ = ["IRBase", "BASES", "NAMINGS", "IR_FILE", "CONFIG_FILE", "rename_text",
           "rename_pattern", "select_patterns", "write_variant", "dump_path"]

#: The student's dump and configuration, relative to their folder.
IR_FILE = "ir/recompute_validate.ir.gz"
CONFIG_FILE = "ir/recompute.yaml"

_MUL = r"feed_forward\.mul"
_SILU = r"feed_forward\.w1\.activation"
_RESHAPES = (r"feed_forward\.w1\.reshape", r"feed_forward\.w2\.reshape")


@dataclass(frozen=True)
class IRBase:
    """One real dump of ``data/ir`` and the patterns of the compile that wrote it."""

    dump: str
    compiled_with: tuple[str, ...]
    story: str


BASES = {
    "taken": IRBase("silu_mul_reshape.ir.gz", (_MUL, _SILU, *_RESHAPES),
                    "compiled with the four patterns: the Mul and the Reshapes are cloned"),
    "reshape_gap": IRBase("silu_mul.ir", (_MUL, _SILU),
                          "compiled with the Mul and SiLU patterns only: the Mul is marked "
                          "but, with the Reshapes around it kept, never cloned"),
    "not_applied": IRBase("control.ir.gz", (),
                          "compiled without any recompute: the configuration the student "
                          "holds never reached the graph"),
}

#: naming -> (feed-forward cell, w1, w3, w2)
NAMINGS = {
    "mindformers": ("feed_forward", "w1", "w3", "w2"),
    "hf": ("mlp", "gate_proj", "up_proj", "down_proj"),
    "short": ("ffn", "gate", "up", "down"),
}


def _check(naming: str) -> tuple[str, str, str, str]:
    if naming not in NAMINGS:
        raise InvalidArgumentError("naming", f"must be one of {', '.join(NAMINGS)}", naming)
    return NAMINGS[naming]


def rename_text(text: str, naming: str) -> str:
    """Rename the feed-forward cells of an IR dump's text (see the module docstring)."""
    ff, w1, w3, w2 = _check(naming)
    linear = {"w1": w1, "w2": w2, "w3": w3}
    text = re.sub(r"(?<=feed_forward-FeedForward/)(w[123])(?=-Linear)",
                  lambda m: linear[m.group(1)], text)
    text = re.sub(r"(?<=\.feed_forward\.)(w[123])(?=\.)", lambda m: linear[m.group(1)], text)
    return re.sub(r"(?<![A-Za-z0-9_])feed_forward(?=[-.])", ff, text)


def rename_pattern(pattern: str, naming: str) -> str:
    """A ``select_recompute`` pattern written for the MindFormers names, renamed."""
    ff, w1, w3, w2 = _check(naming)
    pieces = pattern.split(r"\.")
    table = {"feed_forward": ff, "w1": w1, "w2": w2, "w3": w3}
    return r"\.".join(table.get(p, p) for p in pieces)


def select_patterns(base: str, naming: str, rng: np.random.Generator) -> tuple[str, ...]:
    """The ``select_recompute`` patterns a student's configuration lists, in a drawn order."""
    if base not in BASES:
        raise InvalidArgumentError("base", f"must be one of {', '.join(BASES)}", base)
    patterns = BASES[base].compiled_with
    if not patterns:  # the configuration that did not reach the graph
        patterns = (_MUL, _SILU, *_RESHAPES) if rng.integers(2) else (_MUL, _SILU)
    order = rng.permutation(len(patterns))
    return tuple(rename_pattern(patterns[int(i)], naming) for i in order)


def dump_path(base: str) -> Path:
    """The bundled dump a base is made from."""
    return data_dir() / "ir" / BASES[base].dump


@cache
def _variant_bytes(base: str, naming: str) -> bytes:
    path = dump_path(base)
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    text = rename_text(raw.decode("utf-8"), naming)
    return gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)


def write_variant(base: str, naming: str, out: Path) -> Path:
    """Write the dump of ``base`` renamed with ``naming`` to ``out`` (gzip-compressed)."""
    if base not in BASES:
        raise InvalidArgumentError("base", f"must be one of {', '.join(BASES)}", base)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(_variant_bytes(base, naming))
    return out
