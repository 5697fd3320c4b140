"""``import perfkit`` is lazy: no heavy library at import, the same public API on first use.

The speed target (import ≤ 0.3 s, issue 32) is measured by benchmarks/bench_first_answer.py;
these tests check the behaviour that gives it: which modules a fresh interpreter holds after
``import perfkit``, and that every public name still resolves to the object it names.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "numpy", "pyarrow", "altair", "ipywidgets", "msgspec", "scipy")


def _fresh(code: str) -> str:
    """Run ``code`` in a fresh interpreter on this tree; its stdout."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, check=True)
    return done.stdout


def test_import_perfkit_loads_no_heavy_library() -> None:
    out = _fresh("import json, sys, perfkit\n"
                 f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    assert json.loads(out) == []


def test_a_name_imports_only_what_it_needs() -> None:
    # The error types and the specs are usable without the loaders or the charts.
    out = _fresh("import json, sys, perfkit as pk\n"
                 "pk.PerfkitError, pk.ModelSpec\n"
                 "print(json.dumps([m for m in ('altair', 'ipywidgets', 'perfkit.io.engines.local',"
                 " 'perfkit.widgets') if m in sys.modules]))")
    assert json.loads(out) == []


def test_every_public_name_is_the_object_of_its_home_module() -> None:
    import perfkit as pk
    homes = pk._HOME
    for name in pk.__all__:
        value = getattr(pk, name)
        home = homes[name]
        if home is None:
            assert value is importlib.import_module(f"perfkit.{name}"), name
        else:
            assert value is getattr(importlib.import_module(f"perfkit.{home}"), name), name


def test_the_calculators_listed_are_those_of_perfkit_calc() -> None:
    import perfkit as pk
    import perfkit.calc
    listed = {n for n, home in pk._HOME.items() if home == "calc"}
    assert listed == set(perfkit.calc.__all__)


def test_dir_and_star_import_list_the_public_api() -> None:
    import perfkit as pk
    assert {"load", "advise", "PerfkitError", "plan", "simulate", "model_flops"} <= set(pk.__all__)
    assert set(pk.__all__) <= set(dir(pk))
    # a walk: tab completion offered sys, Any, LazyPackage, defer_rfc3987_syntax ...
    assert not {"sys", "Any", "TYPE_CHECKING", "LazyPackage", "annotations",
                "defer_rfc3987_syntax", "lazy_attribute"} & set(dir(pk))
    pk.analysis  # noqa: B018 - a submodule, once imported, is offered too
    assert "analysis" in dir(pk) and "__version__" in dir(pk)
    namespace: dict[str, object] = {}
    exec("from perfkit import *", namespace)
    assert set(pk.__all__) <= set(namespace)


def test_unknown_name_is_an_attribute_error() -> None:
    import perfkit as pk
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        pk.not_a_name  # noqa: B018
    assert not hasattr(pk, "not_a_name")


def test_a_submodule_is_an_attribute_on_first_use() -> None:
    out = _fresh("import perfkit as pk\n"
                 "print(pk.journal.__name__, pk.io.__name__,"
                 " callable(pk.journal.bundled_journals))")
    assert out.split() == ["perfkit.journal", "perfkit.io", "True"]


def test_simulate_stays_the_function_after_its_package_is_imported() -> None:
    # ``perfkit.simulate`` is both a package and the public function; importing the
    # package (as ``perfkit simulate`` does) must not replace the function.
    out = _fresh("import types, perfkit.simulate.faults, perfkit as pk\n"
                 "from perfkit import simulate\n"
                 "print(isinstance(pk.simulate, types.FunctionType), pk.simulate is simulate,"
                 " pk.simulate.__name__)")
    assert out.split() == ["True", "True", "simulate"]


def test_widget_helpers_load_neither_ipywidgets_nor_altair() -> None:
    # `perfkit info` reads the job's figures through perfkit.widgets.summary / .headline.
    out = _fresh("import json, sys\n"
                 "import perfkit.widgets.summary, perfkit.widgets.headline\n"
                 "print(json.dumps([m for m in ('altair', 'ipywidgets') if m in sys.modules]))")
    assert json.loads(out) == []


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_widgets_names_resolve_and_dashboard_stays_the_function() -> None:
    out = _fresh("import types, perfkit.widgets.dashboard, perfkit.widgets as W\n"
                 "from perfkit.widgets import dashboard\n"
                 "print(isinstance(W.dashboard, types.FunctionType), W.dashboard is dashboard,"
                 " all(hasattr(W, n) for n in W.__all__), set(W.__all__) <= set(dir(W)))")
    assert out.split() == ["True"] * 4
