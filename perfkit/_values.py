"""Values read from configuration files: booleans, whole numbers, numbers, and the text itself.

Config files are written by hand and by tools, so the same setting arrives in many
spellings: ``true``, ``"false"``, ``0``, ``"no"``. These helpers accept every unambiguous
spelling and refuse the rest with a :class:`~perfkit.errors.ConfigFileError` naming the file
and the key, never Python's own ``ValueError``/``OverflowError`` and never a silent guess
(``bool("false")`` is ``True``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import ConfigFileError

__all__ = ["TRUE_WORDS", "FALSE_WORDS", "MAX_CONFIG_BYTES", "MAX_WHOLE", "parse_bool",
           "parse_whole", "parse_number", "parse_whole_fields", "read_config_text"]

TRUE_WORDS = frozenset({"true", "yes", "on", "1", "y", "t"})
"""Text read as True (case-insensitive, surrounding spaces ignored)."""

FALSE_WORDS = frozenset({"false", "no", "off", "0", "n", "f"})
"""Text read as False."""

MAX_CONFIG_BYTES = 64 << 20
"""A configuration file larger than this (64 MiB) is refused unread."""

MAX_WHOLE = 2**63 - 1
"""Largest whole number accepted (int64); a larger one overflows every consumer."""


def parse_bool(value: Any, key: str, source: object) -> bool:
    """``value`` as a boolean: bools, 0/1, and the words of :data:`TRUE_WORDS` /
    :data:`FALSE_WORDS`.

    Raises
    ------
    ConfigFileError
        Any other value, naming ``source`` and ``key``.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise ConfigFileError(source, f"{key}: expected true or false, found {value!r}")


def parse_whole(value: Any, key: str, source: object) -> int:
    """``value`` as a whole number: an int, an integral finite float or such a number's text.

    Raises
    ------
    ConfigFileError
        A boolean, a fraction, text that is not a number, a non-finite number or one beyond
        :data:`MAX_WHOLE` (in absolute value), naming ``source`` and ``key``.
    """
    number = parse_number(value, key, source)
    if number != math.floor(number):
        raise ConfigFileError(source, f"{key}: expected a whole number, found {value!r}")
    whole = int(number) if isinstance(number, float) else number
    if abs(whole) > MAX_WHOLE:
        raise ConfigFileError(source, f"{key}: number too large, found {value!r}")
    return whole


def parse_number(value: Any, key: str, source: object) -> int | float:
    """``value`` as a finite number (int or float, or the text of one).

    Raises
    ------
    ConfigFileError
        A boolean, text that is not a number, NaN or infinity, naming ``source`` and ``key``.
    """
    number: Any = value
    if isinstance(value, str):
        text = value.strip()
        try:
            number = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        raise ConfigFileError(source, f"{key}: expected a number, found {value!r}")
    if isinstance(number, float) and not math.isfinite(number):
        raise ConfigFileError(source, f"{key}: expected a finite number, found {value!r}")
    if isinstance(number, int) and abs(number) > MAX_WHOLE:
        raise ConfigFileError(source, f"{key}: number too large, found {value!r}")
    return number


def parse_whole_fields(values: dict[str, Any], fields: Iterable[str], config: Mapping[str, Any],
                       source: object) -> None:
    """Parse the whole-number entries ``fields`` of ``values`` in place (``"4096"`` -> 4096).

    ``values`` maps parameter names to what was picked from ``config``; ``None`` and ints are
    left alone. A refused value is reported with the config key it came from (found in
    ``config`` by identity), e.g. ``num_hidden_layers (num_layers): expected a whole number``.

    Raises
    ------
    ConfigFileError
        See :func:`parse_whole`.
    """
    for name in fields:
        value = values.get(name)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            continue
        key = next((k for k, v in config.items() if v is value), name)
        values[name] = parse_whole(value, key if key == name else f"{key} ({name})", source)


def read_config_text(path: str | os.PathLike[str]) -> str:
    """The text of a configuration file, whatever its (Unicode) encoding.

    UTF-8 (with or without a byte-order mark) and UTF-16 with its BOM are decoded; CRLF
    line ends are left to the parsers (JSON and YAML both accept them).

    Raises
    ------
    ConfigFileError
        Missing, unreadable, a folder, larger than :data:`MAX_CONFIG_BYTES`, binary (NUL
        bytes) or not valid text in its encoding.
    """
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_CONFIG_BYTES:
                raise ConfigFileError(p, f"file is {size:,} bytes, larger than any "
                                      f"configuration ({MAX_CONFIG_BYTES >> 20} MiB limit)")
            data = fh.read()
    except IsADirectoryError:
        raise ConfigFileError(p, "is a folder; expected a configuration file") from None
    except OSError as exc:
        raise ConfigFileError(p, f"cannot read file ({exc.strerror or exc})") from None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
        nul = data.find(b"\x00")
        if nul >= 0:
            raise ConfigFileError(p, f"binary data (NUL byte at offset {nul:,}); expected a "
                                  "text configuration file")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise ConfigFileError(p, f"not {encoding.upper().removesuffix('-SIG')} text (bad "
                              f"byte at offset {exc.start:,}: {exc.reason})") from None
