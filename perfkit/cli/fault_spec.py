"""``perfkit simulate --fault``: a fault of :mod:`perfkit.simulate.faults` from its
command-line form (:func:`parse_fault`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import InvalidArgumentError
from ..format import counted

__all__ = ["FAULTS", "parse_fault"]

FAULTS: tuple[str, ...]  # served by the module's __getattr__ (below), on first use


def _fault_classes() -> dict[str, type]:
    from ..simulate import faults as F

    classes = [F.SlowRank, F.SlowLink, F.UnbalancedStage, F.DataLoadingStall,
               F.UnfusedOperators, F.HostBound, F.NoOverlap, F.MemoryPressure,
               F.FullRecompute]
    return {_kebab(cls.__name__): cls for cls in classes}


def _kebab(name: str) -> str:
    """``SlowRank``, ``slow_rank``, ``Slow-Rank`` -> ``slow-rank``."""
    name = "".join("-" + c if c.isupper() else c for c in name.strip()).lstrip("-")
    return "-".join(w for w in name.lower().replace("_", "-").split("-") if w)


def __getattr__(name: str) -> Any:
    """``FAULTS``: the ``--fault`` names, the class names of :mod:`perfkit.simulate.faults`
    in kebab case. Worked out on first use, so that building the command line's parser
    (``perfkit info``) does not import the simulator."""
    if name == "FAULTS":
        return tuple(_fault_classes())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
_FAULT_ALIASES = {"data-stall": "data-loading-stall"}


def _fault_value(cls_name: str, field: dataclasses.Field, text: str) -> Any:
    kind = str(field.type)
    text = text.strip()
    where = f"--fault {cls_name}: {field.name}"
    if "None" in kind and text.lower() in ("none", "all", ""):
        return None
    try:
        if "tuple[int" in kind:
            return tuple(int(x) for x in text.split("+"))
        if "tuple[str" in kind:
            return tuple(x.strip() for x in text.split("+") if x.strip())
        if kind.startswith("int"):
            return int(text)
        if kind.startswith("float"):
            return float(text)
    except ValueError:
        want = {"int": "a whole number", "float": "a number"}
        rule = ("must be whole numbers joined by '+', e.g. 0+3" if "tuple[int" in kind else
                f"must be {want.get(kind.split()[0], kind)}")
        raise InvalidArgumentError(where, rule, text) from None
    return text


def parse_fault(spec: str) -> Any:
    """A fault of :mod:`perfkit.simulate.faults` from its command-line form.

    Syntax: ``NAME`` or ``NAME:VALUE,...`` where each value is ``field=value`` or, like
    Python's positional arguments, a bare value for the next field in order. Names are the
    class names in kebab case (:data:`FAULTS`; ``data-stall`` also works); field names may
    use ``-`` for ``_``; list fields join their items with ``+``; ``ranks=all`` is None.

    Examples: ``slow-rank:rank=3,factor=1.5``, ``slow-rank:3``, ``slow-link:2,3,0.15``,
    ``data-loading-stall:stall_us=120000,every=2,ranks=0+1``,
    ``unfused-operators:ops=rms_norm+rotary``, ``no-overlap``.

    Raises
    ------
    InvalidArgumentError
        Unknown fault or field, a value of the wrong kind, a field given twice, or a value
        the fault rejects (each message names the fault and the field).
    """
    classes = _fault_classes()
    name, _, rest = str(spec).strip().partition(":")
    name = _kebab(name)
    name = _FAULT_ALIASES.get(name, name)
    if name not in classes:
        raise InvalidArgumentError("--fault", f"unknown fault {name!r}; known: "
                                   f"{', '.join(classes)}", spec)
    cls = classes[name]
    fields = [f for f in dataclasses.fields(cls) if f.init]
    by_name = {f.name: f for f in fields}
    kwargs: dict[str, Any] = {}
    positional = True
    items = [p for p in rest.split(",") if p.strip()]
    for i, item in enumerate(items):
        key, eq, text = item.partition("=")
        if eq:
            positional = False
            key = key.strip().lower().replace("-", "_")
            if key not in by_name:
                known = ", ".join(by_name) or "none"
                raise InvalidArgumentError(f"--fault {name}", f"unknown field {key!r}; its "
                                           f"fields are: {known}", spec)
            field = by_name[key]
        else:
            if not positional:
                raise InvalidArgumentError(f"--fault {name}", "a bare value cannot follow "
                                           "a field=value", spec)
            if i >= len(fields):
                rule = (f"takes at most {counted(len(fields), 'value')} ({', '.join(by_name)})"
                        if fields else "takes no values")
                raise InvalidArgumentError(f"--fault {name}", rule, spec)
            field, text = fields[i], key
        if field.name in kwargs:
            raise InvalidArgumentError(f"--fault {name}", f"{field.name} given twice", spec)
        kwargs[field.name] = _fault_value(name, field, text)
    try:
        return cls(**kwargs)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"--fault {name}: {exc.parameter}", exc.rule,
                                   exc.value) from None
    except TypeError:  # a required field is missing
        missing = [f.name for f in fields if f.name not in kwargs
                   and f.default is dataclasses.MISSING]
        raise InvalidArgumentError(f"--fault {name}", f"needs {', '.join(missing)}, e.g. "
                                   f"{name}:{missing[0]}=...", spec) from None
